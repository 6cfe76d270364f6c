"""Authenticode: `bundle audit --signatures` on the real DLLs, and what a changed byte does.

Which real DLLs are signed was measured on the pinned wheels and is recorded per artifact in
the profiles (`signed = true`): ONNX Runtime and the VC++ runtime (Microsoft) and cuDNN
(NVIDIA); the CUDA runtime, cuBLAS, cuFFT and NVRTC DLLs of the wheels are not. The tests
flip one byte of a real signed DLL (a copy, never the cache's inode) and strip a real signature.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pefile
import pytest

from bundler.binary.signatures import SignatureState, check_signature
from bundler.errors import ConfigError
from bundler.target.profiles import load_profile
from tests.support.audits import audit_cli, found
from tests.support.builds import broken_copy, build, patched_copy
from tests.support.gpu_closure import CUDNN, VC_RUNTIME
from tests.support.paths import CPU, GPU, HELLO
from tests.support.pefactory import PESpec, write_pe
from tests.support.real_dlls import RealDlls
from tests.support.runs import hello_cpu
from tests.support.skips import require


@pytest.fixture(autouse=True)
def _lief_installed() -> None:
    """Skip locally without the signatures extra; under CI a missing LIEF is a failure."""
    require(importlib.util.find_spec("lief") is not None, 'pip install -e ".[signatures]"')


SIGNED = (
    {"onnxruntime.dll", "onnxruntime_providers_shared.dll", "onnxruntime_providers_cuda.dll"}
    | CUDNN
    | VC_RUNTIME
)


def test_a_synthetic_dll_is_unsigned(tmp_path: Path) -> None:
    dll = write_pe(tmp_path / "plain.dll", PESpec())
    assert check_signature(dll).state is SignatureState.UNSIGNED


def test_without_lief_the_message_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "lief", None)  # `import lief` now raises ImportError
    with pytest.raises(ConfigError, match=r'pip install "ort-bundle\[signatures\]"'):
        check_signature(write_pe(tmp_path / "plain.dll", PESpec()))


def test_the_profile_records_which_vendors_sign() -> None:
    gpu = load_profile(GPU)
    assert all(gpu.signed_by_vendor(name) for name in SIGNED)
    assert not gpu.signed_by_vendor("cudart64_12.dll")
    assert not gpu.signed_by_vendor("nvrtc-builtins64_124.dll")


@pytest.mark.realdata
def test_the_real_bundle_is_signed_where_the_vendors_sign(gpu_bundle: Path) -> None:
    states = {
        path.name: check_signature(path).state
        for path in sorted(gpu_bundle.glob("*.dll"))
        if path.stat().st_size < 300_000_000  # the 607 MB provider: checked by the audit below
    }
    signed = {name for name, state in states.items() if state is SignatureState.VALID}
    assert signed == SIGNED - {
        "onnxruntime_providers_cuda.dll",
        "cudnn_engines_precompiled64_9.dll",
    }
    assert SignatureState.INVALID not in states.values()


@pytest.mark.realdata
def test_the_built_bundle_audits_clean_with_signatures(gpu_bundle: Path) -> None:
    data, code = audit_cli(str(gpu_bundle), "--signatures", "--strict")
    assert code == 0, data["findings"]
    assert data["signatures_checked"] is True
    assert not {"BA601", "BA602"} & set(found(data))


@pytest.mark.realdata
def test_one_flipped_byte_breaks_a_real_signature(gpu_bundle: Path, tmp_path: Path) -> None:
    folder = broken_copy(gpu_bundle, tmp_path / "flipped")
    name = "onnxruntime_providers_shared.dll"
    dll = patched_copy(gpu_bundle / name, folder / name)
    data = bytearray(dll.read_bytes())
    data[0x1400] ^= 0x01  # inside .text, covered by the Authenticode hash
    dll.write_bytes(bytes(data))
    assert check_signature(dll).state is SignatureState.INVALID
    audited, code = audit_cli(str(folder), "--signatures")
    assert code == 17
    assert [f["files"] for f in found(audited)["BA601"]] == [[name]]
    plain, plain_code = audit_cli(str(folder))  # without --signatures: not looked at
    assert plain_code == 0 and "BA601" not in found(plain)


@pytest.mark.realdata
def test_a_stripped_signature_is_an_unsigned_vendor_dll(gpu_bundle: Path, tmp_path: Path) -> None:
    folder = broken_copy(gpu_bundle, tmp_path / "stripped")
    name = "cudnn_graph64_9.dll"
    dll = patched_copy(gpu_bundle / name, folder / name)
    image = pefile.PE(str(dll), fast_load=True)
    security = image.OPTIONAL_HEADER.DATA_DIRECTORY[4]  # IMAGE_DIRECTORY_ENTRY_SECURITY
    assert security.Size > 0
    start = security.VirtualAddress  # a file offset for this directory
    security.VirtualAddress, security.Size = 0, 0
    stripped = image.write()[:start]
    image.close()
    dll.write_bytes(bytes(stripped))
    assert check_signature(dll).state is SignatureState.UNSIGNED
    (folder / "bundle.lock.json").unlink()  # the lock would also see the size change (BA401)
    audited, code = audit_cli(str(folder), "--signatures", "--strict")
    assert code == 18  # a warning: fails only with --strict
    assert [f["files"] for f in found(audited)["BA602"]] == [[name]]


@pytest.mark.realdata
def test_an_unreadable_dll_is_reported_and_the_rest_still_checked(
    gpu_bundle: Path, tmp_path: Path
) -> None:
    """--signatures adds to the audit; a file the audit cannot read (BA001) does not stop it."""
    folder = broken_copy(gpu_bundle, tmp_path / "junk")
    (folder / "junk.dll").write_bytes(b"not a PE file")
    name = "onnxruntime_providers_shared.dll"
    dll = patched_copy(gpu_bundle / name, folder / name)
    data = bytearray(dll.read_bytes())
    data[0x1400] ^= 0x01
    dll.write_bytes(bytes(data))
    audited, code = audit_cli(str(folder), "--signatures")
    assert code == 17
    codes = found(audited)
    assert [f["files"] for f in codes["BA001"]] == [["junk.dll"]]
    assert [f["files"] for f in codes["BA601"]] == [[name]]


# --- bundle build with signatures = "verify" ----------------------------------------------------


def verifying_cpu_profile(target: Path) -> Path:
    """The CPU profile with `signatures = "verify"` (same pins, so the same cache serves)."""
    text = load_profile(CPU).path.read_text()
    target.write_text(text.replace('vc_runtime = "app-local"\n', VERIFY, 1))
    assert VERIFY in target.read_text()
    return target


VERIFY = 'vc_runtime = "app-local"\nsignatures = "verify"\n'


@pytest.mark.realdata
def test_a_verifying_build_ships_the_signed_pins(cpu_cache: Path, tmp_path: Path) -> None:
    profile = verifying_cpu_profile(tmp_path / "cpu.toml")
    out = tmp_path / "out"
    result = build(
        str(HELLO),
        "--profile",
        str(profile),
        "--out",
        str(out),
        "--cache-dir",
        str(cpu_cache),
        "--link",
    )
    assert result.returncode == 0, result.stderr
    assert (out / "onnxruntime.dll").is_file()


@pytest.mark.realdata
def test_a_verifying_build_refuses_a_changed_signed_dll(
    cpu_cache: Path, real_dlls: RealDlls, tmp_path: Path
) -> None:
    profile = verifying_cpu_profile(tmp_path / "cpu.toml")
    mine = tmp_path / "mine"
    mine.mkdir()
    dll = patched_copy(real_dlls["onnxruntime"] / "onnxruntime.dll", mine / "onnxruntime.dll")
    data = bytearray(dll.read_bytes())
    data[0x1400] ^= 0x01
    dll.write_bytes(bytes(data))
    out = tmp_path / "out"
    args = ["--profile", str(profile), "--out", str(out), "--cache-dir", str(cpu_cache)]
    result = build(str(HELLO), *args, "--search", str(mine))
    assert result.returncode == 9, result.stderr
    assert f"{dll}: onnxruntime.dll has a signature that does not verify" in result.stderr
    assert not out.exists()  # nothing half-written
    plain = build(
        *hello_cpu(out, cpu_cache),
        "--search",
        str(mine),
    )
    assert plain.returncode == 0, plain.stderr  # without verify the same build ships it


def test_without_lief_the_hint_names_the_distribution(tmp_path: Path) -> None:
    """`bundle` on PyPI is another project: the hint must say ort-bundle[signatures]."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "lief.py").write_text("raise ImportError('no LIEF here')\n")
    folder = tmp_path / "app"
    folder.mkdir()
    write_pe(folder / "a.dll", PESpec(signed=True))
    result = subprocess.run(
        [sys.executable, "-m", "bundler", "audit", str(folder), "--signatures"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(shadow), "BUNDLE_DEBUG": ""},
    )
    assert result.returncode == 14, result.stdout + result.stderr
    assert 'pip install "ort-bundle[signatures]"' in result.stderr
    assert "Traceback" not in result.stderr
