"""The post-build step as its users meet it: `bundle build` writes postbuild.cmd and
postbuild.event.xml; Wine's cmd and xcopy run the script into a folder whose path has blanks,
parentheses, &, non-ASCII letters and the trailing backslash $(OutDir) has.

How Wine 8 runs batch files, measured, and what the harness does about it:
- Wine builds cmd's command line from argv the MSVCRT way (a backslash before a closing quote
  is doubled), so arguments reach the script through a one-line ASCII caller that expands them
  from the environment: the script sees "...\\" exactly as Visual Studio passes "$(OutDir)".
- A caller that CALLs another batch file gets 1 for every non-zero exit code (Windows passes the
  code on); the caller therefore hands over without CALL, which keeps the code exact.
- Wine's cmd reads a batch file in the OEM code page whatever chcp says (programs/cmd/batch.c,
  get_current_code_page() returns GetOEMCP()). A script with non-ASCII names is UTF-8 and
  switches Windows' cmd with chcp 65001; under Wine it runs with a Unicode-only locale
  (hi_IN.UTF-8, built by localedef), whose OEM code page is UTF-8, so the real cmd still reads
  its bytes and escaping. That chcp 65001 switches Windows' cmd is not tested here.
- Running as root, neither a read-only folder (chmod 0o555) nor a read-only file stops Wine's
  xcopy; a file in place of the target folder, or a folder in place of a DLL, does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from bundler.closure.lock import Lock, LockedFile
from bundler.closure.lockfile import read_lock
from bundler.errors import ConfigError
from bundler.render.engine import Templates
from bundler.render.escaping import cmd_call_quoted, cmd_quoted, cmd_text
from bundler.render.postbuild import (
    EVENT_NAME,
    PLACEHOLDER,
    POSTBUILD_NAME,
    postbuild_values,
    write_postbuild,
)
from bundler.render.render_settings import PostbuildSettings
from tests.support.batch import Cmd, files_under, sha256, target_arg, windows
from tests.support.paths import CPU, hello_app
from tests.support.runs import bundle_from_cache, hello_cpu
from tests.support.skips import require
from tests.support.wine import Wine

TEMPLATES = Templates(None)  # renders without keeping anything between runs

GOLDEN = Path(__file__).parent / "golden"
# A target as hard as a real $(OutDir) can be: blanks, parentheses, &, non-ASCII.
HARD_TARGET = "target dir (x86) & co/ünï"
UTF8_LOCALE = "hi_IN.UTF-8"  # no legacy code page: Wine's ANSI and OEM code pages are UTF-8


def stamps(root: Path) -> dict[str, tuple[int, int]]:
    """Modification and change times: xcopy keeps the source's mtime on a copy, but writing
    a file again changes its ctime."""
    return {
        p.relative_to(root).as_posix(): (p.stat().st_mtime_ns, p.stat().st_ctime_ns)
        for p in root.rglob("*")
    }


# --- escaping filters ---------------------------------------------------------------------------


def test_quoted_values_double_only_the_percent_sign() -> None:
    # Inside "..." cmd takes ^ & | < > ( ) literally; only %NAME% expansion still applies.
    assert cmd_quoted("100% a^b & (c)|<d>;'e'!.dll") == "100%% a^b & (c)|<d>;'e'!.dll"


def test_unquoted_text_escapes_every_operator_with_a_caret() -> None:
    assert cmd_text("a^b&c|d<e>f(g)h%i;j'k") == "a^^b^&c^|d^<e^>f^(g^)h%%i;j'k"


@pytest.mark.parametrize("value", ['a"b.dll', "two\nlines", "tab\there", "nul\x00"], ids=repr)
def test_what_no_batch_line_can_hold_is_refused(value: str) -> None:
    for escape in (cmd_quoted, cmd_text, cmd_call_quoted):
        with pytest.raises(ConfigError):
            escape(value)


@pytest.mark.parametrize("value", ["100%", "a^b"])
def test_what_call_would_change_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="CALL"):
        cmd_call_quoted(value)


def test_call_arguments_keep_what_quotes_protect() -> None:
    assert cmd_call_quoted("..\\bündel & co (x64);'1'") == "..\\bündel & co (x64);'1'"


# --- what the script says -------------------------------------------------------------------------


def locked(name: str, kind: str = "bundled") -> LockedFile:
    return LockedFile(name, kind, "0" * 64, 1)


def sample_lock(*files: LockedFile, app: str = "hello.exe") -> Lock:
    return Lock("ort-1.19.2-cpu", "x64", "installer", files, app=app)


def test_the_script_copies_exactly_the_bundled_dlls_and_licences() -> None:
    lock = sample_lock(
        locked("onnxruntime.dll"),
        locked("hello.exe", "app"),
        locked("vc_redist.x64.exe", "installer"),
        locked("licenses/onnxruntime/LICENSE", "license"),
        locked("cudnn64_9.dll"),
        locked("ep/webgpu/onnxruntime_providers_webgpu.dll", "ep"),
    )
    values = postbuild_values(lock)
    assert values["dlls"] == [
        {"name": "cudnn64_9.dll", "folder": ""},
        {
            "name": "ep\\webgpu\\onnxruntime_providers_webgpu.dll",
            "folder": "ep\\webgpu\\",
        },  # an execution-provider pack's files go to its own folder (docs/ep-packs.md)
        {"name": "onnxruntime.dll", "folder": ""},
    ]
    assert values["licenses"] == [
        {"name": "licenses\\onnxruntime\\LICENSE", "folder": "licenses\\onnxruntime\\"}
    ]


def test_utf8_only_when_a_name_is_not_ascii() -> None:
    assert not postbuild_values(sample_lock(locked("a.dll")))["utf8"]
    assert postbuild_values(sample_lock(locked("ä.dll")))["utf8"]
    assert postbuild_values(sample_lock(locked("a.dll"), app="ünï.exe"))["utf8"]


@pytest.mark.parametrize("name", ["a?.dll", "c:d.dll", "a|b.dll", 'a"b.dll'])
def test_names_windows_cannot_hold_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="not a valid Windows file name"):
        postbuild_values(sample_lock(locked(name)))


# --- the written files ----------------------------------------------------------------------------

ESCAPING_DLLS = (
    "onnxruntime.dll",
    "100% (x86) & co.dll",  # % doubled; & ( ) protected by the quotes
    "a^b;c.dll",  # ^ and ; mean nothing inside quotes
    "it's ünï!,=[~1].dll",  # non-ASCII; ! is plain text without delayed expansion
    "%PATH%x.dll",  # a variable's name: must not be expanded
    "%~dp0 %1.dll",  # parameter syntax: must not be expanded either
)
ESCAPING_LICENCES = (
    "licenses/onnxruntime/ThirdPartyNotices.txt",
    "licenses/ünï (x64) & co/LICENSE 100%.txt",
)
ESCAPING_APP = "my ^app & (x) 100%.exe"  # echo text: every operator needs a caret


def escaping_lock() -> Lock:
    """DLL, licence and app names with everything that means something to cmd; the installer
    and the app are in the lock but are not the post-build step's to copy."""
    files = [locked(name) for name in ESCAPING_DLLS]
    files += [locked(name, "license") for name in ESCAPING_LICENCES]
    files.append(locked("vc_redist.x64.exe", "installer"))
    return sample_lock(*files, app=ESCAPING_APP)


def escaping_bundle(root: Path) -> Path:
    """A bundle folder holding every file of escaping_lock(), each with its own bytes."""
    bundle = root / "bündel & co (x64)"
    for item in [*escaping_lock().files, locked(ESCAPING_APP, "app")]:
        path = bundle / item.name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"the bytes of {item.name}\n", encoding="utf-8")
    return bundle


def test_escaping_golden(tmp_path: Path) -> None:
    """tests/golden/postbuild-escaping.cmd was checked line by line against cmd's rules (the
    next test spells out the trickiest lines), and test_escaping_golden_runs_in_wines_cmd runs
    the same script on files with these names."""
    write_postbuild(TEMPLATES, escaping_lock(), tmp_path, tmp_path, PostbuildSettings())
    expected = (GOLDEN / "postbuild-escaping.cmd").read_bytes()
    assert (tmp_path / POSTBUILD_NAME).read_bytes() == expected


def test_golden_lines_follow_cmds_rules() -> None:
    """The rules the golden was checked against, spelled out for its trickiest lines."""
    lines = (GOLDEN / "postbuild-escaping.cmd").read_text(encoding="utf-8").splitlines()
    # a name is literal on the line that uses it, % doubled, in quotes
    assert 'xcopy /Y /I /D /R "%SOURCE%%%PATH%%x.dll" "%TARGET%\\"' in lines
    assert 'xcopy /Y /I /D /R "%SOURCE%%%~dp0 %%1.dll" "%TARGET%\\"' in lines
    assert 'xcopy /Y /I /D /R "%SOURCE%a^b;c.dll" "%TARGET%\\"' in lines
    # a licence goes to its own folder under the target, ending in \ (never a file prompt)
    assert (
        'xcopy /Y /I /D /R "%SOURCE%licenses\\ünï (x64) & co\\LICENSE 100%%.txt" '
        '"%TARGET%\\licenses\\ünï (x64) & co\\"'
    ) in lines
    # echo text: carets before ^ & ( ), % doubled
    assert any("of my ^^app ^& ^(x^) 100%%.exe are up to date" in line for line in lines)
    # chcp comes before the first line holding a non-ASCII character
    first_non_ascii = next(i for i, line in enumerate(lines) if not line.isascii())
    assert lines.index("chcp 65001 >nul 2>&1") < first_non_ascii
    assert "setlocal EnableExtensions DisableDelayedExpansion" in lines


def test_written_script_is_deterministic_crlf_without_bom(tmp_path: Path) -> None:
    first = tmp_path / "a"
    rendered = []
    for _ in range(2):
        write_postbuild(
            TEMPLATES, escaping_lock(), tmp_path, first, PostbuildSettings(tmp_path / "proj")
        )
        rendered.append(
            {name: (first / name).read_bytes() for name in (POSTBUILD_NAME, EVENT_NAME)}
        )
    assert rendered[0] == rendered[1]
    for name in (POSTBUILD_NAME, EVENT_NAME):
        data = (first / name).read_bytes()
        assert not data.startswith(b"\xef\xbb\xbf")  # cmd would run the BOM as a command
        assert b"\n" not in data.replace(b"\r\n", b"")
        data.decode("utf-8")
    assert (first / POSTBUILD_NAME).read_bytes().isascii() is False
    ascii_lock = sample_lock(locked("onnxruntime.dll"))
    write_postbuild(TEMPLATES, ascii_lock, tmp_path, first, PostbuildSettings())
    plain = (first / POSTBUILD_NAME).read_bytes()
    assert plain.isascii()
    assert b"chcp" not in plain  # an ASCII script leaves the caller's code page alone


def unescape_msbuild(text: str) -> str:
    """What MSBuild does to %XX in a project's text before a task sees it."""
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


def event_command(event: Path) -> str:
    root = ET.parse(event).getroot()
    assert root.tag == "PostBuildEvent"
    command = root.findtext("Command")
    assert command is not None
    return unescape_msbuild(command)


def test_event_names_the_script_relative_to_the_project(tmp_path: Path) -> None:
    bundle = tmp_path / "out" / "bündel & co; it's $(x) @1"
    bundle.mkdir(parents=True)
    project = tmp_path / "src" / "app"
    result = write_postbuild(TEMPLATES, escaping_lock(), bundle, bundle, PostbuildSettings(project))
    assert result.project_relative
    command = event_command(result.event)
    assert command == (
        'call "$(ProjectDir)..\\..\\out\\bündel & co; it\'s $(x) @1\\postbuild.cmd" "$(OutDir)"'
    )
    raw = result.event.read_text(encoding="utf-8")
    assert "%3B" in raw and "%24(x)" in raw and "%40" in raw and "%27" in raw
    assert "&amp;" in raw
    message = ET.parse(result.event).getroot().findtext("Message")
    assert message is not None
    assert (
        unescape_msbuild(message)
        == f"Copying the DLLs of the bundle of {ESCAPING_APP} into $(OutDir)"
    )


def test_event_without_the_project_holds_a_placeholder(tmp_path: Path) -> None:
    result = write_postbuild(TEMPLATES, escaping_lock(), tmp_path, tmp_path, PostbuildSettings())
    assert not result.project_relative
    assert (
        event_command(result.event) == f'call "$(ProjectDir){PLACEHOLDER}postbuild.cmd" "$(OutDir)"'
    )
    assert f"replace {PLACEHOLDER}" in result.event.read_text(encoding="utf-8")


def test_event_refuses_a_folder_call_cannot_pass(tmp_path: Path) -> None:
    bundle = tmp_path / "100% done"
    bundle.mkdir()
    with pytest.raises(ConfigError, match="CALL"):
        write_postbuild(TEMPLATES, escaping_lock(), bundle, bundle, PostbuildSettings(tmp_path))


def test_script_elsewhere_reaches_the_bundle_from_its_own_folder(tmp_path: Path) -> None:
    bundle, out = tmp_path / "dist", tmp_path / "tools" / "post build"
    bundle.mkdir()
    write_postbuild(TEMPLATES, sample_lock(locked("a.dll")), bundle, out, PostbuildSettings())
    lines = (out / POSTBUILD_NAME).read_text(encoding="utf-8").splitlines()
    assert 'set "SOURCE=%~dp0..\\..\\dist\\"' in lines


# --- run by Wine's cmd ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def utf8_locale(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A Unix locale under which Wine's OEM code page is UTF-8 (see the module docstring)."""
    definition = Path("/usr/share/i18n/locales") / UTF8_LOCALE.split(".")[0]
    require(
        shutil.which("localedef") is not None and definition.is_file(),
        f"no {definition} to build the {UTF8_LOCALE} locale (apt-get install locales)",
    )
    root = tmp_path_factory.mktemp("locale")
    subprocess.run(
        ["localedef", "-i", definition.name, "-f", "UTF-8", str(root / UTF8_LOCALE)],
        capture_output=True,
        check=False,  # warnings give exit code 1; the locale is written all the same
    )
    assert (root / UTF8_LOCALE).is_dir(), f"localedef did not write {root / UTF8_LOCALE}"
    return {"LOCPATH": str(root), "LANG": UTF8_LOCALE, "LC_ALL": UTF8_LOCALE}


@pytest.fixture()
def cmd(wine: Wine, tmp_path: Path) -> Cmd:
    return Cmd(wine, tmp_path)


@pytest.fixture()
def utf8_cmd(wine: Wine, tmp_path: Path, utf8_locale: dict[str, str]) -> Cmd:
    return Cmd(wine, tmp_path, utf8_locale)


def test_escaping_golden_runs_in_wines_cmd(utf8_cmd: Cmd, tmp_path: Path) -> None:
    bundle = escaping_bundle(tmp_path)
    write_postbuild(TEMPLATES, escaping_lock(), bundle, bundle, PostbuildSettings())
    target = tmp_path / HARD_TARGET
    run = utf8_cmd.run(bundle / POSTBUILD_NAME, target_arg(target))
    assert run.returncode == 0, run.stdout + run.stderr
    dlls = {name: sha256(bundle / name) for name in ESCAPING_DLLS}
    assert files_under(target) == dlls
    assert f"the 6 DLLs of {ESCAPING_APP} are up to date" in run.stdout  # cmd_text, echoed

    run = utf8_cmd.run(bundle / POSTBUILD_NAME, target_arg(target, "/LICENSES"))
    assert run.returncode == 0, run.stdout + run.stderr
    licences = {name: sha256(bundle / name) for name in ESCAPING_LICENCES}
    assert files_under(target) == dlls | licences  # neither the app nor vc_redist


def test_event_command_runs_in_wines_cmd(utf8_cmd: Cmd, tmp_path: Path) -> None:
    """The event's command as MSBuild's Exec task runs it: unescaped, $(ProjectDir) and
    $(OutDir) filled in, written into a batch file (UTF-8: its code page here)."""
    bundle = escaping_bundle(tmp_path / "out")
    project = tmp_path / "src" / "app (x64)"
    project.mkdir(parents=True)
    result = write_postbuild(TEMPLATES, escaping_lock(), bundle, bundle, PostbuildSettings(project))
    target = tmp_path / "x64" / "Release ünï"
    command = event_command(result.event)
    command = command.replace("$(ProjectDir)", windows(project) + "\\")
    command = command.replace("$(OutDir)", windows(target) + "\\")
    exec_batch = tmp_path / "exec.cmd"
    exec_batch.write_bytes(f"@echo off\r\n{command}\r\n".encode())
    run = utf8_cmd.run(exec_batch, caller=exec_batch)
    assert run.returncode == 0, run.stdout + run.stderr
    assert set(files_under(target)) == set(ESCAPING_DLLS)


# --- on a real CPU bundle ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def cpu_bundle(cpu_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """`bundle build` of examples/hello/hello.exe for the CPU profile, once for this module."""
    out = tmp_path_factory.mktemp("postbuild") / "dist (bundle)"
    result = bundle_from_cache("build", *hello_cpu(out, cpu_cache))
    assert result.returncode == 0, result.stderr
    assert f"post-build step: {out / POSTBUILD_NAME}" in result.stdout
    yield out


def bundled(bundle: Path, kind: str) -> dict[str, str]:
    lock = read_lock(bundle / "bundle.lock.json")
    assert lock is not None
    return {item.name: item.sha256 for item in lock.files if item.kind == kind}


@pytest.mark.realdata
def test_build_writes_both_files_and_render_gives_the_same_bytes(cpu_bundle: Path) -> None:
    built = {name: (cpu_bundle / name).read_bytes() for name in (POSTBUILD_NAME, EVENT_NAME)}
    for name in built:
        (cpu_bundle / name).unlink()
    lock = str(cpu_bundle / "bundle.lock.json")
    result = bundle_from_cache("render", "postbuild", "--lock", lock)
    assert result.returncode == 0, result.stderr
    assert "replace BUNDLE_FOLDER" in result.stdout  # no project folder given
    assert {name: (cpu_bundle / name).read_bytes() for name in built} == built

    elsewhere = cpu_bundle.parent / "tools"
    result = bundle_from_cache("render", "postbuild", "--lock", lock, "--out", str(elsewhere))
    assert result.returncode == 0, result.stderr
    script = (elsewhere / POSTBUILD_NAME).read_bytes()
    relative = b'set "SOURCE=%~dp0..\\dist (bundle)\\"'
    assert script == built[POSTBUILD_NAME].replace(b'set "SOURCE=%~dp0"', relative)


@pytest.mark.realdata
def test_the_target_gets_exactly_the_bundles_dlls_and_a_rebuild_copies_nothing(
    cmd: Cmd, cpu_bundle: Path, tmp_path: Path
) -> None:
    target = tmp_path / HARD_TARGET
    dlls = bundled(cpu_bundle, "bundled")
    assert "onnxruntime.dll" in dlls
    run = cmd.run(cpu_bundle / POSTBUILD_NAME, target_arg(target))
    assert run.returncode == 0, run.stdout + run.stderr
    assert files_under(target) == dlls  # same names, same SHA-256, nothing else
    before = stamps(target)

    again = cmd.run(cpu_bundle / POSTBUILD_NAME, target_arg(target))
    assert again.returncode == 0, again.stdout + again.stderr
    assert stamps(target) == before
    assert "1 file(s) copied" not in again.stdout


@pytest.mark.realdata
def test_only_a_newer_dll_is_copied_again(cmd: Cmd, cpu_bundle: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(cpu_bundle, bundle)
    target = tmp_path / "target"
    assert cmd.run(bundle / POSTBUILD_NAME, target_arg(target)).returncode == 0
    stale = target / "onnxruntime.dll"
    os.utime(stale, ns=(stale.stat().st_atime_ns, stale.stat().st_mtime_ns - 10**10))
    before = stamps(target)
    run = cmd.run(bundle / POSTBUILD_NAME, target_arg(target))
    assert run.returncode == 0, run.stdout + run.stderr
    changed = {name for name, stamp in stamps(target).items() if before[name] != stamp}
    assert changed == {"onnxruntime.dll"}


@pytest.mark.realdata
def test_licenses_switch_copies_the_licence_tree(
    cmd: Cmd, cpu_bundle: Path, tmp_path: Path
) -> None:
    target = tmp_path / HARD_TARGET
    run = cmd.run(cpu_bundle / POSTBUILD_NAME, target_arg(target, "/LICENSES"))
    assert run.returncode == 0, run.stdout + run.stderr
    licences = bundled(cpu_bundle, "license")
    assert licences and all(name.startswith("licenses/") for name in licences)
    assert files_under(target) == bundled(cpu_bundle, "bundled") | licences


@pytest.mark.parametrize("args", ["", '"" /LICENSES', "/LICENSES", '"C:\\x\\" /BOGUS'])
def test_a_wrong_command_line_gets_the_usage_and_exit_2(
    cmd: Cmd, tmp_path: Path, args: str
) -> None:
    write_postbuild(
        TEMPLATES, sample_lock(locked("a.dll")), tmp_path, tmp_path, PostbuildSettings()
    )
    run = cmd.run(tmp_path / POSTBUILD_NAME, args)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.splitlines() == [
        "usage: postbuild.cmd TARGET_DIR [/LICENSES]",
        "copies the 1 DLLs of hello.exe (with /LICENSES also their licence files) into TARGET_DIR",
    ]


@pytest.mark.realdata
def test_a_file_where_the_target_folder_should_be_fails_with_a_message(
    cmd: Cmd, cpu_bundle: Path, tmp_path: Path
) -> None:
    target = tmp_path / "not a folder (x86)"
    target.write_text("a file")
    run = cmd.run(cpu_bundle / POSTBUILD_NAME, target_arg(target))
    assert run.returncode != 0
    first = sorted(bundled(cpu_bundle, "bundled"))[0]
    assert f'postbuild: error: cannot copy "{first}" into "{windows(target)}\\"' in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


@pytest.mark.realdata
def test_a_dll_that_cannot_be_written_fails_with_xcopys_code_and_its_name(
    cmd: Cmd, cpu_bundle: Path, tmp_path: Path
) -> None:
    target = tmp_path / "target"
    (target / "onnxruntime.dll").mkdir(parents=True)  # a folder where the DLL must go
    run = cmd.run(cpu_bundle / POSTBUILD_NAME, target_arg(target))
    assert run.returncode == 5, run.stdout + run.stderr  # xcopy: write error
    assert 'cannot copy "onnxruntime.dll"' in run.stderr
    assert "xcopy exit code 5" in run.stderr


@pytest.mark.realdata
def test_a_dll_missing_from_the_bundle_fails_with_its_name(
    cmd: Cmd, cpu_bundle: Path, tmp_path: Path
) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(cpu_bundle, bundle)
    (bundle / "onnxruntime.dll").unlink()
    run = cmd.run(bundle / POSTBUILD_NAME, target_arg(tmp_path / "target"))
    assert run.returncode == 4, run.stdout + run.stderr
    assert f'"{windows(bundle)}\\onnxruntime.dll" is missing' in run.stderr


@pytest.mark.realdata
def test_no_postbuild_and_bundle_toml_turn_it_off(cpu_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "dist"
    flag = bundle_from_cache(
        "build",
        *hello_cpu(out, cpu_cache),
        "--no-postbuild",
    )
    assert flag.returncode == 0, flag.stderr
    assert not (out / POSTBUILD_NAME).exists() and not (out / EVENT_NAME).exists()
    app = hello_app(
        tmp_path / "app",
        f'[build]\nexe = "hello.exe"\nprofile = "{CPU}"\nout = "dist"\n'
        "[render]\npostbuild = false\n",
    )
    toml = bundle_from_cache("build", "--cache-dir", str(cpu_cache), cwd=app)
    assert toml.returncode == 0, toml.stderr
    assert not (app / "dist" / POSTBUILD_NAME).exists()
    assert (app / "dist" / "setup.iss").exists()


@pytest.mark.realdata
def test_bundle_toml_project_dir_makes_the_event_ready(cpu_cache: Path, tmp_path: Path) -> None:
    app = hello_app(
        tmp_path / "app",
        f'[build]\nexe = "hello.exe"\nprofile = "{CPU}"\nout = "../dist"\n'
        '[render]\nproject_dir = "."\n',
    )
    result = bundle_from_cache("build", "--cache-dir", str(cpu_cache), cwd=app)
    assert result.returncode == 0, result.stderr
    command = event_command(tmp_path / "dist" / EVENT_NAME)
    assert command == 'call "$(ProjectDir)..\\dist\\postbuild.cmd" "$(OutDir)"'


@pytest.fixture
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    """An empty folder on a read-only tmpfs: unwritable even for root, which CI runs as (a
    chmod 0o555 folder stops nobody there, and Wine's xcopy ignores it)."""
    folder = tmp_path / "read only (x64)"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    require(mounted.returncode == 0, f"cannot mount a read-only tmpfs: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.realdata
def test_a_read_only_target_folder_fails_with_a_message(
    cmd: Cmd, cpu_bundle: Path, read_only_folder: Path
) -> None:
    run = cmd.run(cpu_bundle / POSTBUILD_NAME, target_arg(read_only_folder))
    assert run.returncode != 0, run.stdout + run.stderr
    first = sorted(bundled(cpu_bundle, "bundled"))[0]
    assert f'postbuild: error: cannot copy "{first}"' in run.stderr
    assert not any(read_only_folder.iterdir())
