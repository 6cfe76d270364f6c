"""Two more views of an audit: `--junit FILE` (JUnit XML for CI test reports) and
`--explain DLL` (the error-126 explainer).

The JUnit file is checked twice: by structure with ElementTree (testsuites/testsuite/testcase/
failure@message, the shape GitLab, Jenkins and Azure read) and by a real consumer, junitparser.
The explainer runs on synthetic bundles and on hard-linked copies of the real GPU bundle with
a DLL removed, as a user runs it: `bundle audit PATH --explain DLL`.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bundler.audit.loadproof import FINDING_CODES
from bundler.binary.signatures import FINDING_CODES as SIGNATURE_CODES
from bundler.findings import CATALOGUE
from tests.support.builds import broken_copy
from tests.support.paths import GPU
from tests.support.pefactory import PESpec
from tests.support.runs import run_bundle
from tests.support.skips import require_module
from tests.support.synthetic_gpu import PROVIDER, synthetic_gpu

CUDNN_PIP = "pip nvidia-cudnn-cu12==9.1.0.70 (nvidia_cudnn_cu12-9.1.0.70-py3-none-win_amd64.whl"

# Without --run the load proof's codes (BA5xx) did not run, nor without --signatures the
# signatures' (BA6xx): they are no test case.
CHECKED = [code for code in CATALOGUE if code not in (*FINDING_CODES, *SIGNATURE_CODES)]


def junit(folder: Path, report: Path, *args: str) -> tuple[ET.Element, int]:
    """`bundle audit FOLDER --junit REPORT`: the parsed report and the exit code."""
    result = run_bundle("audit", str(folder), "--profile", GPU, "--junit", str(report), *args)
    assert report.is_file(), result.stderr
    return ET.parse(report).getroot(), result.returncode


def cases(root: ET.Element) -> dict[str, ET.Element]:
    """Test cases by finding code (the first word of their name)."""
    return {case.attrib["name"].split()[0]: case for case in root.iter("testcase")}


def explain(folder: Path, dll: str, *args: str) -> tuple[str, int]:
    result = run_bundle("audit", str(folder), "--profile", GPU, "--explain", dll, *args)
    return result.stdout + result.stderr, result.returncode


# --- --junit -------------------------------------------------------------------------------------


def test_junit_has_a_case_per_code_and_fails_the_error_codes(tmp_path: Path) -> None:
    folder = synthetic_gpu(tmp_path / "app", without=("cudnn64_9.dll",))
    root, code = junit(folder, tmp_path / "reports" / "audit.xml")
    assert code == 17
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    assert suite.attrib["name"] == "bundle audit"
    by_code = cases(suite)
    assert list(by_code) == CHECKED  # every code, a passing check is a passed case
    failed = {name for name, case in by_code.items() if case.find("failure") is not None}
    assert failed == {"BA101", "BA103"}
    for element in (root, suite):
        assert element.attrib["tests"] == str(len(CHECKED))
        assert element.attrib["failures"] == "2" and element.attrib["errors"] == "0"
    failure = by_code["BA101"].find("failure")
    assert failure is not None
    assert failure.attrib["message"].startswith("cudnn64_9.dll is missing")
    assert "onnxruntime_providers_cuda.dll -import-> cudnn64_9.dll" in (failure.text or "")
    info = by_code["BA305"].find("system-out")
    assert info is not None and "onnxruntime.dll" in (info.text or "")
    assert by_code["BA305"].find("failure") is None


def test_junit_is_read_by_a_real_consumer(tmp_path: Path) -> None:
    folder = synthetic_gpu(tmp_path / "app", without=("cudnn64_9.dll",))
    junit(folder, tmp_path / "audit.xml")
    # a test extra, imported here: the Windows unit tier runs this module without it
    junitparser = require_module("junitparser", 'junitparser is missing: pip install -e ".[test]"')
    report = junitparser.JUnitXml.fromfile(str(tmp_path / "audit.xml"))
    (suite,) = list(report)
    assert suite.name == "bundle audit"
    assert (suite.tests, suite.failures, suite.errors) == (len(CHECKED), 2, 0)
    failures = {
        case.name.split()[0]: result.message
        for case in suite
        for result in case.result
        if isinstance(result, junitparser.Failure)
    }
    assert set(failures) == {"BA101", "BA103"}
    assert "error 126" in failures["BA103"]
    assert sum(1 for case in suite if case.is_passed) == len(CHECKED) - 2


def test_junit_warnings_fail_only_with_strict(tmp_path: Path) -> None:
    trt = PESpec(imports=("nvinfer_10.dll", "cudnn64_9.dll"))
    folder = synthetic_gpu(tmp_path / "app", (), **{"onnxruntime_providers_tensorrt.dll": trt})
    root, code = junit(folder, tmp_path / "audit.xml")
    assert code == 0 and root.attrib["failures"] == "0"
    assert cases(root)["BA303"].find("system-out") is not None
    root, code = junit(folder, tmp_path / "audit.xml", "--strict")
    assert code == 18 and root.attrib["failures"] == "1"
    failure = cases(root)["BA303"].find("failure")
    assert failure is not None and "onnxruntime_providers_tensorrt.dll" in failure.attrib["message"]


def test_junit_is_deterministic_and_written_whole(tmp_path: Path) -> None:
    folder = synthetic_gpu(tmp_path / "app", without=("cudnn64_9.dll",))
    junit(folder, tmp_path / "one.xml")
    junit(folder, tmp_path / "two.xml")
    first = (tmp_path / "one.xml").read_bytes()
    assert first == (tmp_path / "two.xml").read_bytes()
    assert b"timestamp" not in first and first.startswith(b'<?xml version="1.0" encoding="UTF-8"?>')
    assert sorted(path.name for path in tmp_path.iterdir()) == ["app", "one.xml", "two.xml"]


def test_junit_to_an_unwritable_place_is_an_output_error(tmp_path: Path) -> None:
    folder = synthetic_gpu(tmp_path / "app")
    (tmp_path / "file").write_text("not a folder")
    result = run_bundle("audit", str(folder), "--junit", str(tmp_path / "file" / "audit.xml"))
    assert result.returncode == 15, result.stderr
    assert "cannot write" in result.stderr and "Traceback" not in result.stderr


# --- --explain: synthetic bundles ---------------------------------------------------------------


def test_explain_a_missing_static_import(tmp_path: Path) -> None:
    text, code = explain(synthetic_gpu(tmp_path, without=("cudnn64_9.dll",)), PROVIDER)
    assert code == 17
    assert f"{PROVIDER} would fail to load from {tmp_path} (error 126): cudnn64_9.dll" in text
    assert f"chain: {PROVIDER} -import-> cudnn64_9.dll" in text
    assert "artifact cudnn 9.1.0.70" in text and CUDNN_PIP in text


def test_explain_static_imports_come_before_runtime_loads(tmp_path: Path) -> None:
    """cudnn_graph64_9 (a runtime load of cudnn64_9) and cufft64_11 (a static import) are both
    gone: the static one is what makes LoadLibrary fail, so it is the first missing link."""
    folder = synthetic_gpu(tmp_path, without=("cudnn_graph64_9.dll", "cufft64_11.dll"))
    text, code = explain(folder, PROVIDER)
    assert code == 17
    assert "(error 126): cufft64_11.dll is missing" in text
    assert "also missing in its closure: cudnn_graph64_9.dll" in text


def test_explain_a_runtime_load(tmp_path: Path) -> None:
    text, code = explain(synthetic_gpu(tmp_path, without=("cudnn_graph64_9.dll",)), PROVIDER)
    assert code == 17
    assert "the first operation that loads cudnn_graph64_9.dll fails" in text
    assert f"{PROVIDER} -import-> cudnn64_9.dll -runtime-> cudnn_graph64_9.dll" in text


def test_explain_a_complete_closure_loads(tmp_path: Path) -> None:
    text, code = explain(synthetic_gpu(tmp_path), PROVIDER)
    assert code == 0
    assert f"{PROVIDER} would load from {tmp_path}" in text
    assert "the GPU driver must provide: nvcuda.dll" in text


def test_explain_a_dll_that_is_itself_missing_or_unusable(tmp_path: Path) -> None:
    x86 = PESpec(machine="x86")
    folder = synthetic_gpu(tmp_path, (), **{"cudnn64_9.dll": x86})
    data, code = explain(folder, "cudnn64_9.dll", "--json")
    assert code == 17
    document = json.loads(data)
    assert document["loads"] is False and document["missing"] == "cudnn64_9.dll"
    assert document["chain"].endswith("-import-> cudnn64_9.dll")
    assert document["note"] and document["supplier"]["artifact"] == "cudnn"


def test_explain_a_dll_no_artifact_supplies(tmp_path: Path) -> None:
    plugin = PESpec(imports=("mylib.dll",))
    folder = synthetic_gpu(
        tmp_path,
        (),
        **{"hello.exe": PESpec(dll=False, imports=("plugin.dll",)), "plugin.dll": plugin},
    )
    text, code = explain(folder, "plugin.dll")
    assert code == 17
    assert f"no artifact of {GPU} provides mylib.dll" in text


def test_explain_an_unknown_dll_is_a_usage_error(tmp_path: Path) -> None:
    text, code = explain(synthetic_gpu(tmp_path), "nothere.dll")
    assert code == 2
    # the error box folds a long path anywhere (Windows' are longer): compare without it
    unboxed = "".join(text.replace("│", "").split())
    assert "nothere.dll" in text and "".join(str(tmp_path).split()) in unboxed


# --- --explain and --junit on the real GPU bundle ------------------------------------------------


@pytest.mark.realdata
def test_real_bundle_without_cudnn64_9(gpu_bundle: Path, tmp_path: Path) -> None:
    folder = broken_copy(gpu_bundle, tmp_path / "b", "cudnn64_9.dll")
    text, code = explain(folder, PROVIDER)
    assert code == 17, text
    verdict = "(error 126): cudnn64_9.dll is missing"
    assert f"{verdict}\n  chain: {PROVIDER} -import-> cudnn64_9.dll" in text
    assert "supplied by: artifact cudnn 9.1.0.70" in text and CUDNN_PIP in text
    root, code = junit(folder, tmp_path / "audit.xml")
    # BA101, BA103, and BA402: the folder's lock file lists it too
    assert code == 17 and root.attrib["failures"] == "3"
    assert cases(root)["BA402"].find("failure") is not None
    failure = cases(root)["BA103"].find("failure")
    assert failure is not None
    assert failure.attrib["message"] == (
        f"{PROVIDER} will fail with error 126 and ORT falls back to CPU: "
        f"missing cudnn64_9.dll ← {PROVIDER}"
    )


@pytest.mark.realdata
def test_real_bundle_without_cudnn_graph64_9(gpu_bundle: Path, tmp_path: Path) -> None:
    folder = broken_copy(gpu_bundle, tmp_path / "b", "cudnn_graph64_9.dll")
    text, code = explain(folder, PROVIDER)
    assert code == 17, text
    assert "the first operation that loads cudnn_graph64_9.dll fails" in text
    assert f"{PROVIDER} -import-> cudnn64_9.dll -runtime-> cudnn_graph64_9.dll" in text
    assert "artifact cudnn 9.1.0.70" in text


@pytest.mark.realdata
def test_real_intact_bundle_loads(gpu_bundle: Path, tmp_path: Path) -> None:
    text, code = explain(gpu_bundle, PROVIDER)
    assert code == 0, text
    assert "would load" in text and "the GPU driver must provide: nvcuda.dll" in text
    assert "KERNEL32.dll" in text
    root, code = junit(gpu_bundle, tmp_path / "audit.xml", "--strict")
    assert code == 0 and root.attrib["failures"] == "0"
