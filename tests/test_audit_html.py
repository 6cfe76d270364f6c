"""`bundle audit --html FILE`: the audit as one self-contained page.

Two tiers. Synthetic bundles (tests/support/synthetic_gpu.py's images of the real GPU set) pin
down what the page says: a graph node per file with its status, edges styled by how they load,
findings by severity, suppressed ones apart, bytes per component, escaping, the same bytes
twice. Then a real browser, headless Chromium with no network (tests/support/chromium.py), opens
the pages made from the real GPU bundle and a copy missing cudnn64_9.dll: no console message, no
request, a screenshot that shows the status colours, and a DOM holding the closure
docs/field-notes.md#import-graph lists. The browser's own checks are first shown to catch a
broken page, so their silence means something."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass, replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, cast

import pytest

from bundler.audit.html import audit_html, write_html
from bundler.audit.judge import audit
from bundler.audit.palette import STATUS_FILL
from bundler.audit.report import AuditReport
from bundler.closure.plan import Status
from bundler.errors import OutputError
from bundler.findings import Severity
from bundler.render.engine import Templates
from tests.support.builds import broken_copy
from tests.support.chromium import CHROMIUM, WINDOW, Image, PageLoad, load_page, read_png, rgb
from tests.support.gpu_closure import GPU_BUNDLE
from tests.support.paths import DIRECTML, GPU, REPO
from tests.support.pefactory import PESpec, write_pe
from tests.support.scratch import scratch
from tests.support.skips import require
from tests.support.synthetic_gpu import MSVC, PROVIDER, SYNTHETIC_GPU, synthetic_gpu

TEMPLATES = Templates(None)  # renders without keeping anything between runs

ORT_VERSION = (1, 19, 24, 903)
CUDNN_VERSION = (9, 1, 0, 70)
HOSTILE = "<img src=x onerror=alert(1)>.dll"  # a legal Linux file name, and HTML if unescaped

# The GPU bundle of examples/hello as docs/field-notes.md#import-graph to #vc-runtime describe it
# (lower case): the app, ORT and its two providers, the CUDA 12.4 runtime libraries, every cuDNN 9.1
# sub-library, NVRTC with its builtins for 12.4, the four VC++ runtime DLLs ORT imports; nvcuda.dll
# is the driver's.
GPU_CLOSURE = {"hello.exe"} | GPU_BUNDLE
DRIVER = "nvcuda.dll"
WINDOWS = "windows"  # the one node for every system DLL and API set


# --- reading a page ------------------------------------------------------------------------------


class Tags(HTMLParser):
    """Every start tag with its attributes, in document order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {name: value or "" for name, value in attrs}))


def tags(page: str) -> list[tuple[str, dict[str, str]]]:
    parser = Tags()
    parser.feed(page)
    return parser.tags


def classed(page: str, tag: str, css: str) -> list[dict[str, str]]:
    return [a for t, a in tags(page) if t == tag and css in a.get("class", "").split()]


def nodes(page: str) -> dict[str, dict[str, str]]:
    """The graph's nodes by data-key."""
    return {attrs["data-key"]: attrs for attrs in classed(page, "g", "node")}


def edges(page: str) -> dict[tuple[str, str], dict[str, str]]:
    return {(a["data-from"], a["data-to"]): a for a in classed(page, "path", "edge")}


def node_title(page: str, key: str) -> str:
    match = re.search(rf'data-key="{re.escape(key)}"[^>]*>\s*<title>([^<]*)</title>', page)
    assert match, key
    return match[1]


def external_references(page: str) -> list[str]:
    """What a browser could fetch: any attribute holding a URL with a scheme or a network path
    (src, href, xlink:href, srcset, style, ...), resource tags, CSS url() and @import. A URL
    written as text is not a resource and is allowed."""
    found = [
        f"{tag} {name}={value}"
        for tag, attrs in tags(page)
        for name, value in attrs.items()
        if re.search(r"[a-z][a-z0-9+.-]*://|^\s*//", value, re.IGNORECASE)
        and not value.startswith("data:")
    ]
    found += [
        tag
        for tag, _ in tags(page)
        if tag in {"link", "img", "iframe", "object", "embed", "audio", "video", "source", "base"}
    ]
    styles = " ".join(re.findall(r"<style[^>]*>(.*?)</style>", page, re.DOTALL))
    found += re.findall(r"url\([^)]*\)|@import[^;]*", styles)
    return found


def findings_order(page: str, section: str) -> list[str]:
    """Codes of the findings in one section, in page order."""
    part = page.split(f'<section id="{section}"', 1)[1].split("</section>", 1)[0]
    return [attrs["data-code"] for attrs in classed(part, "article", "finding")]


# --- synthetic bundles ---------------------------------------------------------------------------


def with_files(folder: Path, *names: str) -> Path:
    """`folder` plus a DLL of each name that nothing imports (a BA303 warning)."""
    for name in names:
        write_pe(folder / name, PESpec())
    return folder


def directml_bundle(folder: Path) -> Path:
    """ORT's DirectML build delay-imports DirectML.dll and the Direct3D DLLs
    (docs/field-notes.md#import-graph)."""
    specs = {
        "hello.exe": SYNTHETIC_GPU["hello.exe"],
        "onnxruntime.dll": PESpec(
            imports=(*MSVC, "MSVCP140_1.dll", "ADVAPI32.dll"),
            delay_imports=("DirectML.dll", "d3d12.dll", "dxgi.dll", "dxcore.dll"),
            file_version=ORT_VERSION,
        ),
        "onnxruntime_providers_shared.dll": SYNTHETIC_GPU["onnxruntime_providers_shared.dll"],
        "DirectML.dll": PESpec(padding=20_000),
    }
    for name in ("msvcp140.dll", "msvcp140_1.dll", "vcruntime140.dll", "vcruntime140_1.dll"):
        specs[name] = SYNTHETIC_GPU[name]
    for name, spec in specs.items():
        write_pe(folder / name, spec)
    return folder


# An audit of a synthetic bundle takes a second or two (pefile), so the pages share three.


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> AuditReport:
    """The synthetic GPU bundle, complete: one info finding (BA305)."""
    return audit(synthetic_gpu(tmp_path_factory.mktemp("whole")), GPU)


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> AuditReport:
    """Without cudnn64_9.dll (errors BA101, BA103) and with a DLL nothing uses, whose name is
    HTML (warning BA303)."""
    folder = synthetic_gpu(tmp_path_factory.mktemp("broken"), without=("cudnn64_9.dll",))
    return audit(with_files(folder, HOSTILE), GPU)


@pytest.fixture(scope="module")
def directml(tmp_path_factory: pytest.TempPathFactory) -> AuditReport:
    return audit(directml_bundle(tmp_path_factory.mktemp("directml")), DIRECTML)


def test_a_node_per_file_and_one_for_windows(whole: AuditReport) -> None:
    page = audit_html(TEMPLATES, whole)
    graph = nodes(page)
    bundled = {name.lower() for name in SYNTHETIC_GPU} - {"hello.exe"}
    assert set(graph) == bundled | {"hello.exe", DRIVER, WINDOWS}
    assert {key: graph[key]["data-status"] for key in ("hello.exe", DRIVER, WINDOWS)} == {
        "hello.exe": "app",
        DRIVER: "driver",
        WINDOWS: "system",
    }
    assert {graph[key]["data-status"] for key in bundled} == {"bundled"}
    title = node_title(page, "cudnn64_9.dll")
    assert "cudnn64_9.dll" in title and "status: bundled" in title
    assert "version: 9.1.0.70" in title and "size: " in title
    assert "KERNEL32.dll" in node_title(page, WINDOWS)


def test_edges_are_styled_by_how_the_dll_loads(whole: AuditReport, directml: AuditReport) -> None:
    gpu = edges(audit_html(TEMPLATES, whole))
    runtime = gpu[("onnxruntime.dll", PROVIDER)]
    imported = gpu[(PROVIDER, "cudnn64_9.dll")]
    assert runtime["data-kind"] == "runtime" and runtime.get("stroke-dasharray")
    assert gpu[("cudart64_12.dll", DRIVER)]["data-kind"] == "runtime"
    assert imported["data-kind"] == "import" and "stroke-dasharray" not in imported
    dml = edges(audit_html(TEMPLATES, directml))
    delayed = dml[("onnxruntime.dll", "directml.dll")]
    assert delayed["data-kind"] == "delay-import"
    assert delayed.get("stroke-dasharray") not in (None, runtime["stroke-dasharray"])
    assert not any(key[1] in {"d3d12.dll", WINDOWS} for key in dml)  # Windows: no edges


def test_a_missing_dll_is_a_red_marked_node(broken: AuditReport) -> None:
    page = audit_html(TEMPLATES, broken)
    graph = nodes(page)
    missing = graph["cudnn64_9.dll"]
    assert missing["data-status"] == "missing"
    assert set(missing["data-findings"].split()) == {"BA101", "BA103"}
    assert missing["data-severity"] == "error"
    assert graph[PROVIDER]["data-findings"] == "BA103"
    assert "data-findings" not in graph["cudart64_12.dll"]
    to_missing = edges(page)[(PROVIDER, "cudnn64_9.dll")]
    assert to_missing["stroke"] != edges(page)[(PROVIDER, "cudart64_12.dll")]["stroke"]


def test_findings_by_severity_then_the_suppressed_ones(broken: AuditReport) -> None:
    assert {item.severity for item in broken.findings} == set(Severity)
    stray = tuple(item for item in broken.findings if item.code == "BA303")
    kept = tuple(item for item in broken.findings if item.code != "BA303")
    page = audit_html(TEMPLATES, replace(broken, findings=kept, suppressed=stray))
    shown = findings_order(page, "findings")
    assert shown == [item.code for item in kept] == ["BA101", "BA103", "BA305"]
    assert findings_order(page, "suppressed") == ["BA303"]
    assert '<section id="suppressed" class="muted">' in page
    ba101 = classed(page, "article", "finding")[shown.index("BA101")]
    assert ba101["data-nodes"] == "cudnn64_9.dll"
    assert "-import-&gt; cudnn64_9.dll" in page  # a detail line: the chain that needs it
    text = page.split('id="suppressed"')[1]
    assert "is not needed by the app" in text and "fix: remove &lt;img" in text


@pytest.mark.parametrize(
    ("folder", "exit_code", "says"),
    [
        ("whole", "0", "The audit passes: exit code 0"),
        ("warned", "0", "--strict exits 18"),
        ("broken", "17", "The audit fails: exit code 17"),
    ],
)
def test_the_verdict_states_the_exit_code(
    request: pytest.FixtureRequest, folder: str, exit_code: str, says: str
) -> None:
    report: AuditReport = request.getfixturevalue("broken" if folder == "warned" else folder)
    if folder == "warned":  # warnings only: the errors set aside, as --ignore would
        errors = [item for item in report.findings if item.severity is Severity.ERROR]
        rest = tuple(item for item in report.findings if item not in errors)
        report = replace(report, findings=rest, suppressed=tuple(errors))
    page = audit_html(TEMPLATES, report)
    (verdict,) = [attrs for tag, attrs in tags(page) if attrs.get("id") == "verdict"]
    assert verdict["data-exit-code"] == exit_code
    assert says in page


def test_bytes_by_component(tmp_path: Path) -> None:
    folder = synthetic_gpu(tmp_path)
    write_pe(folder / "hello.exe", PESpec(dll=False, imports=("onnxruntime.dll", "zlib1.dll")))
    write_pe(folder / "zlib1.dll", PESpec(padding=3000))  # nothing says whose: Other
    write_pe(folder / "cudnn64_9.dll", PESpec(padding=50_000, file_version=CUDNN_VERSION))
    page = audit_html(TEMPLATES, audit(folder, GPU))
    parts = {a["data-component"]: int(a["data-bytes"]) for a in classed(page, "g", "component")}

    def size(*patterns: str) -> int:
        return sum(p.stat().st_size for pattern in patterns for p in folder.glob(pattern))

    assert parts == {
        "ONNX Runtime": size("onnxruntime*.dll"),
        "CUDA": size("cu*64_1*.dll", "nvrtc*.dll"),
        "cuDNN": size("cudnn*.dll"),
        "VC++ runtime": size("msvcp140*.dll", "vcruntime140*.dll"),
        "App": size("hello.exe"),
        "Other": size("zlib1.dll"),
    }
    total = sum(parts.values())
    assert total == size("*")  # every file of the folder ships
    assert f"{total:,} bytes" in page
    assert "cudnn 9.1.0.70" in page  # the profile artifact that provides cuDNN


def test_directml_is_its_own_component(directml: AuditReport) -> None:
    page = audit_html(TEMPLATES, directml)
    parts = {a["data-component"]: int(a["data-bytes"]) for a in classed(page, "g", "component")}
    assert parts["DirectML"] == (directml.folder / "DirectML.dll").stat().st_size
    assert set(parts) == {"ONNX Runtime", "DirectML", "VC++ runtime", "App"}


def test_file_names_are_escaped(broken: AuditReport) -> None:
    page = audit_html(TEMPLATES, broken)
    assert "BA303" in findings_order(page, "findings")  # the name is in the page...
    assert "&lt;img src=x onerror=alert(1)&gt;.dll" in page
    assert "<img" not in page  # ...as text only


def test_same_bytes_in_another_process(broken: AuditReport, tmp_path: Path) -> None:
    """Sets iterate in another order under another hash seed: the page must not care."""
    ours, theirs = tmp_path / "ours.html", tmp_path / "theirs.html"
    write_html(TEMPLATES, broken, ours)
    script = (
        "import sys; from pathlib import Path; from bundler.audit.judge import audit; "
        "from bundler.audit.html import write_html; from bundler.render.engine import Templates; "
        "write_html(Templates(None), audit(Path(sys.argv[1]), sys.argv[2]), Path(sys.argv[3]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    args = [sys.executable, "-c", script, str(broken.folder), GPU, str(theirs)]
    subprocess.run(args, check=True, env=env, cwd=REPO)
    assert ours.read_bytes() == theirs.read_bytes()
    assert external_references(ours.read_text(encoding="utf-8")) == []
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ours.html", "theirs.html"]


CSP = "Content-Security-Policy"


def test_the_policy_allows_only_the_page_script(whole: AuditReport) -> None:
    page = audit_html(TEMPLATES, whole)
    (policy,) = [a["content"] for _, a in tags(page) if a.get("http-equiv") == CSP]
    (script,) = re.findall(r"<script>(.*?)</script>", page, re.DOTALL)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert "default-src 'none'" in policy
    assert f"script-src 'sha256-{digest}'" in policy


@dataclass(frozen=True)
class FakeProof:
    """Stands in for bundler.audit.loadproof's result: the page renders any to_dict()
    generically."""

    def to_dict(self) -> dict[str, Any]:
        return {"loader": "wine 8.0", "exit_code": 0, "loaded": ["onnxruntime.dll", "<b>.dll"]}


def test_load_proof_is_shown_when_there_is_one(whole: AuditReport) -> None:
    assert 'id="load-proof"' not in audit_html(TEMPLATES, whole)
    page = audit_html(TEMPLATES, replace(whole, load_proof=cast(Any, FakeProof())))
    proof = page.split('id="load-proof"', 1)[1].split("</section>", 1)[0]
    assert "wine 8.0" in proof and "onnxruntime.dll" in proof and "&lt;b&gt;.dll" in proof


def test_an_unwritable_target_is_an_output_error_naming_it(
    whole: AuditReport, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(OutputError, match=r"audit\.html"):
        write_html(TEMPLATES, whole, tmp_path / "file" / "audit.html")


# --- a real browser ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> str:
    require(CHROMIUM is not None, "chromium is not installed (apt-get install -y chromium)")
    assert CHROMIUM is not None
    return CHROMIUM


def test_the_browser_checks_catch_a_broken_page(browser: str, tmp_path: Path) -> None:
    """A page that logs, throws and fetches: each check must see it, or its silence below
    proves nothing."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><head>"
        '<link rel="stylesheet" href="https://cdn.example.com/site.css"></head><body>'
        '<img src="http://example.com/logo.png"><p>plain</p>'
        '<script>console.error("deliberate"); undefinedFunction();</script></body></html>'
    )
    loaded = load_page(page, tmp_path / "run")
    assert any("deliberate" in text for text in loaded.console)
    assert any("undefinedFunction" in text for text in loaded.console)
    assert {"cdn.example.com", "example.com"} <= set(loaded.requests)
    assert len(external_references(loaded.dom)) >= 2
    image = read_png(loaded.screenshot)
    assert not any(shows(image, colour) for colour in STATUS_FILL.values())


def test_a_synthetic_page_in_the_browser(browser: str, broken: AuditReport, tmp_path: Path) -> None:
    write_html(TEMPLATES, broken, tmp_path / "audit.html")
    anchor = finding_anchor(broken, "BA103")
    loaded = load_page(tmp_path / "audit.html", tmp_path / "run", fragment=anchor)
    assert loaded.console == [] and loaded.requests == []
    assert "<img" not in loaded.dom  # the hostile name stayed text in the browser too
    highlighted = {key for key, a in nodes(loaded.dom).items() if "highlight" in a["class"]}
    assert highlighted == {PROVIDER, "cudnn64_9.dll"}  # the page's script ran, under its CSP


def shows(image: Image, colour: str) -> bool:
    """At least a node box's worth of pixels (a box is ~110 x 38) in `colour`: a few stray
    anti-aliased pixels of it are no box."""
    return image.colours[rgb(colour)] > 1000


def finding_anchor(report: AuditReport, code: str) -> str:
    number = [item.code for item in report.findings].index(code) + 1
    return f"finding-{number}"


# --- real data: the GPU bundle of examples/hello, whole and without cudnn64_9.dll ----------------


@pytest.fixture(scope="module")
def real_pages(
    browser: str, gpu_bundle: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[str, PageLoad]]:
    """Each page as written and as the browser loaded it (one launch per page)."""
    with scratch(tmp_path_factory, "audit-html") as work:
        folders = {
            "whole": gpu_bundle,
            "broken": broken_copy(gpu_bundle, work / "broken", "cudnn64_9.dll"),
        }
        pages = {}
        for name, folder in folders.items():
            path = work / f"{name}.html"
            write_html(TEMPLATES, audit(folder), path)
            pages[name] = (path.read_text(encoding="utf-8"), load_page(path, work / f"run-{name}"))
        return pages


@pytest.mark.realdata
def test_real_pages_load_offline_without_console_messages(
    real_pages: dict[str, tuple[str, PageLoad]],
) -> None:
    for name, (page, loaded) in real_pages.items():
        assert loaded.console == [], name
        assert loaded.requests == [], name
        assert external_references(page) == [] and external_references(loaded.dom) == [], name


@pytest.mark.realdata
def test_real_screenshots_show_the_graph(real_pages: dict[str, tuple[str, PageLoad]]) -> None:
    images = {name: read_png(loaded.screenshot) for name, (_, loaded) in real_pages.items()}
    for image in images.values():
        assert (image.width, image.height) == WINDOW
        assert len(image.colours) > 50  # text, lines and boxes, not a blank page
        for status in (Status.APP, Status.BUNDLED, Status.DRIVER, Status.SYSTEM):
            assert shows(image, STATUS_FILL[status]), status
    assert not shows(images["whole"], STATUS_FILL[Status.MISSING])
    assert shows(images["broken"], STATUS_FILL[Status.MISSING])


@pytest.mark.realdata
def test_real_graph_holds_the_gpu_closure(real_pages: dict[str, tuple[str, PageLoad]]) -> None:
    whole = nodes(real_pages["whole"][1].dom)
    # bundle-doctor.exe ships with the bundle: an exe of the folder, it imports Windows only
    assert set(whole) == GPU_CLOSURE | {DRIVER, WINDOWS, "bundle-doctor.exe"}
    statuses = {key: attrs["data-status"] for key, attrs in whole.items()}
    assert statuses.pop("hello.exe") == "app"
    assert statuses.pop("bundle-doctor.exe") == "app"
    assert statuses.pop(DRIVER) == "driver"
    assert statuses.pop(WINDOWS) == "system"
    assert set(statuses.values()) == {"bundled"}
    broken = nodes(real_pages["broken"][1].dom)
    assert set(broken) == set(whole)
    assert broken["cudnn64_9.dll"]["data-status"] == "missing"
    assert "BA101" in broken["cudnn64_9.dll"]["data-findings"].split()
    assert "BA103" in broken[PROVIDER]["data-findings"].split()


@pytest.mark.realdata
def test_real_runtime_edges_are_dashed(real_pages: dict[str, tuple[str, PageLoad]]) -> None:
    drawn = edges(real_pages["whole"][1].dom)
    runtime = [
        ("onnxruntime.dll", PROVIDER),
        ("onnxruntime.dll", "onnxruntime_providers_shared.dll"),
        ("cudnn64_9.dll", "cudnn_graph64_9.dll"),
        ("cudart64_12.dll", DRIVER),
        ("nvrtc64_120_0.dll", "nvrtc-builtins64_124.dll"),
    ]
    for pair in runtime:
        assert drawn[pair]["data-kind"] == "runtime", pair
        assert drawn[pair].get("stroke-dasharray"), pair
    for pair in [("hello.exe", "onnxruntime.dll"), (PROVIDER, "cublas64_12.dll")]:
        assert drawn[pair]["data-kind"] == "import", pair
        assert "stroke-dasharray" not in drawn[pair], pair
