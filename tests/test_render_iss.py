"""The Inno Setup script as text: escaping, what it lists, determinism, settings and errors.

What the text *does* is proved by the real compiler and a real silent install in
tests/test_installer.py; these tests pin the rules each line follows, with expected values
worked out by hand from Inno Setup's documented syntax (quoted parameters double `"`, places
that expand constants double `{`, Pascal strings double `'`).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from bundler.closure.lock import LOCK_NAME, Lock, runtime_pack
from bundler.closure.lockfile import write_lock
from bundler.errors import ConfigError
from bundler.render.engine import Templates
from bundler.render.escaping import (
    inno_const,
    inno_directive,
    inno_literal,
    inno_source,
    pascal_string,
    windows_path,
)
from bundler.render.iss import SPAN_ABOVE, app_id_for, iss_values, write_iss
from bundler.render.render_settings import IssSettings
from tests.support.locks import locked, sample_lock
from tests.support.paths import hello_app
from tests.support.runs import bundle_from_cache as bundle
from tests.support.runs import cli, hello_cpu

TEMPLATES = Templates(None)  # renders without keeping anything between runs

GOLDEN = Path(__file__).parent / "golden"


# --- escaping filters ---------------------------------------------------------------------------


def test_literal_values_double_only_the_double_quote() -> None:
    assert inno_literal('a "b" {c}.dll') == 'a ""b"" {c}.dll'


@pytest.mark.parametrize("name", ['a"b.dll', "a?.dll", "c:d.dll", "a|b.dll", "x*.dll"])
def test_source_names_windows_cannot_hold_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="not a valid Windows file name"):
        inno_source(name)


def test_source_names_keep_everything_windows_allows() -> None:
    assert inno_source("{x} & 'y' 100% (ü) [2] #1.dll") == "{x} & 'y' 100% (ü) [2] #1.dll"


def test_constant_values_double_the_opening_brace_and_the_quote() -> None:
    assert inno_const('{app} "x" }') == '{{app} ""x"" }'


def test_directive_values_double_the_brace_and_keep_quotes() -> None:
    assert inno_directive('My {App} "1"') == 'My {{App} "1"'


def test_pascal_strings_double_the_single_quote() -> None:
    assert pascal_string("Bob's {100%}") == "'Bob''s {100%}'"


def test_windows_paths_use_backslashes() -> None:
    assert windows_path("licenses/cudnn/LICENSE") == "licenses\\cudnn\\LICENSE"


@pytest.mark.parametrize(
    "value", ["two\nlines", "tab\there", "nul\x00", "pre<#processor"], ids=repr
)
def test_values_an_inno_line_cannot_hold_are_refused(value: str) -> None:
    for escape in (inno_literal, inno_const, inno_directive, pascal_string):
        with pytest.raises(ConfigError):
            escape(value)


def test_directive_values_with_outer_blanks_are_refused() -> None:
    with pytest.raises(ConfigError, match="blank"):
        inno_directive(" padded ")


# --- what the script says -------------------------------------------------------------------------


def test_the_files_are_exactly_the_lock_payload_sorted() -> None:
    values = iss_values(sample_lock(), IssSettings(), 100)
    sources = [entry["source"] for entry in values["files"]]
    assert sources == [
        "bundle.lock.json",
        "cudnn64_9.dll",
        "hello.exe",
        "licenses/onnxruntime/LICENSE",
        "onnxruntime.dll",
    ]
    licence = values["files"][3]
    assert (licence["dest_root"], licence["dest_sub"]) == ("{app}", "/licenses/onnxruntime")


def test_an_exe_built_with_out_is_listed_once() -> None:
    lock = sample_lock(files=(locked("hello.exe", "app"), locked("onnxruntime.dll")))
    sources = [entry["source"] for entry in iss_values(lock, IssSettings(), 1)["files"]]
    assert sources.count("hello.exe") == 1


def test_sources_are_relative_to_the_script_folder() -> None:
    values = iss_values(sample_lock(), IssSettings(), 1, source_prefix="../dist")
    assert values["files"][0]["source"] == "../dist/bundle.lock.json"


def test_vc_redist_goes_to_tmp_and_runs_only_when_needed() -> None:
    lock = sample_lock(vc_runtime="installer", files=(locked("vc_redist.x64.exe", "installer"),))
    values = iss_values(lock, IssSettings(), 1)
    entry = next(e for e in values["files"] if e["source"] == "vc_redist.x64.exe")
    assert entry["dest_root"] == "{tmp}"
    assert entry["check"] == "VCRuntimeNeeded"
    assert "deleteafterinstall" in entry["flags"]
    assert (values["vc_redist"], values["vc_major"], values["vc_minor"]) == (
        "vc_redist.x64.exe",
        14,
        40,
    )


def test_no_vc_redist_without_installer_mode() -> None:
    assert iss_values(sample_lock(), IssSettings(), 1)["vc_redist"] is None


def test_disk_spanning_only_above_the_single_file_limit() -> None:
    assert not iss_values(sample_lock(), IssSettings(), SPAN_ABOVE)["disk_spanning"]
    assert iss_values(sample_lock(), IssSettings(), SPAN_ABOVE + 1)["disk_spanning"]


def test_app_id_is_stable_per_app_name_and_case_insensitive() -> None:
    assert app_id_for("Hello") == app_id_for("hello")
    assert app_id_for("hello") != app_id_for("hello2")
    assert iss_values(sample_lock(), IssSettings(), 1)["app_id"] == app_id_for("hello")
    custom = IssSettings(app_id="{{11111111-2222-3333-4444-555555555555}")
    assert iss_values(sample_lock(), custom, 1)["app_id"] == custom.app_id


def test_name_from_the_exe_product_name_unless_given() -> None:
    named = sample_lock(app_product_name="Hello Demo")
    assert iss_values(named, IssSettings(), 1)["app_name"] == "Hello Demo"
    assert iss_values(named, IssSettings(app_name="Given"), 1)["app_name"] == "Given"
    assert iss_values(sample_lock(), IssSettings(), 1)["app_name"] == "hello"  # the exe's stem


def test_version_from_the_exe_unless_given() -> None:
    assert iss_values(sample_lock(), IssSettings(), 1)["app_version"] == "1.0.0.0"
    given = iss_values(sample_lock(), IssSettings(app_version="2.1-rc1"), 1)
    assert (given["app_version"], given["version_info"]) == ("2.1-rc1", "2.1")
    none = iss_values(sample_lock(app_file_version=None), IssSettings(), 1)
    assert none["app_version"] is None
    assert none["output_base"] == "hello-setup"


def test_gpu_preflight_numbers_come_from_the_profile() -> None:
    gpu = iss_values(sample_lock(), IssSettings(), 1)["gpu"]
    assert (gpu["min_number"], gpu["cuda_major"], gpu["dll"]) == (52741, 12, "nvcuda.dll")
    assert gpu["require"] is False
    assert iss_values(sample_lock(), IssSettings(require_gpu=True), 1)["gpu"]["require"]
    assert iss_values(sample_lock(gpu_driver=None), IssSettings(), 1)["gpu"] is None


@pytest.mark.parametrize("compression", ["lzma2", "lzma2/fast", "zip", "zip/1", "bzip/9", "none"])
def test_inno_compressions_are_accepted(compression: str) -> None:
    IssSettings(compression=compression).checked()


@pytest.mark.parametrize("compression", ["gzip", "zip/0", "lzma2/turbo", ""])
def test_unknown_compressions_are_refused(compression: str) -> None:
    with pytest.raises(ConfigError, match="compression"):
        IssSettings(compression=compression).checked()


# --- the written file ---------------------------------------------------------------------------


def escaping_lock() -> Lock:
    """File and app names with every character that means something to Inno Setup."""
    return sample_lock(
        files=(
            locked("{braces} & 'quotes' 100%.dll"),
            locked("licenses/ünïcödé (x64)/LICENSE [2] #1.txt", "license"),
            locked("vc_redist.x64.exe", "installer"),
        ),
        app="my {app} 'v2' 100% ü.exe",
        vc_runtime="installer",
    )


ESCAPING_SETTINGS = IssSettings(
    app_name='My {App}\'s 100% "Ünïcode"', publisher="A & B {C}", shortcut=True
)


def test_escaping_golden(tmp_path: Path) -> None:
    """The golden file was checked line by line against Inno Setup's syntax rules, and
    tests/test_installer.py compiles and installs the same script with the real tools."""
    script = tmp_path / "setup.iss"
    write_iss(TEMPLATES, escaping_lock(), tmp_path, script, ESCAPING_SETTINGS)
    expected = (GOLDEN / "escaping.iss").read_bytes().replace(b"\r\n", b"\n")
    assert script.read_bytes().replace(b"\r\n", b"\n") == expected


def test_written_script_is_utf8_with_bom_and_crlf_and_deterministic(tmp_path: Path) -> None:
    first, second = tmp_path / "a.iss", tmp_path / "b.iss"
    write_iss(TEMPLATES, escaping_lock(), tmp_path, first, ESCAPING_SETTINGS)
    write_iss(TEMPLATES, escaping_lock(), tmp_path, second, ESCAPING_SETTINGS)
    data = first.read_bytes()
    assert data == second.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    assert b"\r\n" in data
    assert b"\n" not in data.replace(b"\r\n", b"")
    data.decode("utf-8")


def test_a_lock_without_the_app_name_asks_for_a_rebuild(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="bundle build again"):
        write_iss(TEMPLATES, sample_lock(app=None), tmp_path, tmp_path / "setup.iss", IssSettings())


# --- through the command line, on a real CPU bundle -----------------------------------------------


def build_cpu(cpu_cache: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return bundle(
        "build",
        *hello_cpu(out, cpu_cache),
        *args,
    )


def setup_lines(script: Path) -> list[str]:
    return script.read_text(encoding="utf-8-sig").splitlines()


def sources(script: Path) -> list[str]:
    return [line.split('"')[1] for line in setup_lines(script) if line.startswith("Source: ")]


@pytest.mark.realdata
def test_build_writes_the_script_with_the_exe_version(cpu_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "dist"
    result = build_cpu(cpu_cache, out)
    assert result.returncode == 0, result.stderr
    lines = setup_lines(out / "setup.iss")
    assert "AppVersion=1.0.0.0" in lines  # hello.rc's FILEVERSION, read from the built exe
    assert "AppName=hello" in lines
    assert "MinVersion=10.0.10240" in lines
    assert "Compression=lzma2/normal" in lines  # the measured default (benchmarks, P9)
    assert {"SolidCompression=yes", "LZMADictionarySize=16384"} <= set(lines)
    assert not any(line.startswith("DiskSpanning") for line in lines)
    lock = json.loads((out / "bundle.lock.json").read_text())
    # every locked file, the lock itself and the doctor's data file (a view of the lock)
    views = ["bundle.lock.json", "bundle-doctor.dat"]
    expected = sorted([item["name"] for item in lock["files"]] + views)
    assert sources(out / "setup.iss") == [windows_path(name) for name in expected]
    # CPU profile, app-local runtime: no preflight, only the doctor's run after the copy
    assert "[Code]" in lines and "function InitializeSetup: Boolean;" not in lines
    assert "procedure CurStepChanged(CurStep: TSetupStep);" in lines


@pytest.mark.realdata
def test_render_again_from_the_lock_gives_the_same_bytes(cpu_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "dist"
    assert build_cpu(cpu_cache, out).returncode == 0
    built = (out / "setup.iss").read_bytes()
    (out / "setup.iss").unlink()
    result = bundle("render", "iss", "--lock", str(out / "bundle.lock.json"))
    assert result.returncode == 0, result.stderr
    assert (out / "setup.iss").read_bytes() == built


@pytest.mark.realdata
def test_script_elsewhere_points_back_at_the_bundle(cpu_cache: Path, tmp_path: Path) -> None:
    out, script = tmp_path / "dist", tmp_path / "installer" / "app.iss"
    result = build_cpu(cpu_cache, out, "--iss", str(script), "--app-version", "3.1.4")
    assert result.returncode == 0, result.stderr
    assert not (out / "setup.iss").exists()
    assert "AppVersion=3.1.4" in setup_lines(script)
    for source in sources(script):
        assert (script.parent / source.replace("\\", "/")).is_file(), source


@pytest.mark.realdata
def test_no_iss_writes_no_script(cpu_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "dist"
    assert build_cpu(cpu_cache, out, "--no-iss").returncode == 0
    assert not (out / "setup.iss").exists()


@pytest.mark.realdata
def test_bundle_toml_render_settings_apply_and_flags_win(cpu_cache: Path, tmp_path: Path) -> None:
    app = hello_app(
        tmp_path / "app",
        '[build]\nexe = "hello.exe"\nprofile = "ort-1.19.2-cpu"\nout = "dist"\n'
        '[render]\napp_name = "Hello Demo"\npublisher = "Example Ltd"\n'
        'compression = "zip/1"\nshortcut = true\n',
    )
    result = bundle("build", "--cache-dir", str(cpu_cache), "--publisher", "Flag Ltd", cwd=app)
    assert result.returncode == 0, result.stderr
    lines = setup_lines(app / "dist" / "setup.iss")
    assert "AppName=Hello Demo" in lines
    assert "AppPublisher=Flag Ltd" in lines
    assert "Compression=zip/1" in lines
    assert "[Icons]" in lines
    # and render reads the same bundle.toml to find the lock and the settings
    (app / "dist" / "setup.iss").unlink()
    again = bundle("render", "iss", "--publisher", "Flag Ltd", cwd=app)
    assert again.returncode == 0, again.stderr
    assert setup_lines(app / "dist" / "setup.iss") == lines


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--iss-compression", "gzip"), "--iss-compression gzip: not an Inno Setup compression"),
        (("--app-name", "two\nlines"), "control character"),
        (("--archive", "bundle.tar"), "name the archive PATH.zip or PATH.7z"),
    ],
)
def test_bad_installer_settings_fail_before_anything_is_written(
    cpu_cache: Path, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    out = tmp_path / "dist"
    result = build_cpu(cpu_cache, out, *args)
    assert result.returncode == 14, result.stderr
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_render_without_a_lock_says_what_to_do(tmp_path: Path) -> None:
    result = bundle("render", "iss", "--lock", str(tmp_path / "bundle.lock.json"))
    assert result.returncode == 14
    assert "run bundle build first" in result.stderr


# --- reproducible scripts (docs/reproducible.md) --------------------------------------------------


def test_the_scripts_name_no_folder_of_the_machine_and_the_date_is_the_source_date(
    tmp_path: Path,
) -> None:
    """Rendered for two machines (other folders, other caches, one with $SOURCE_DATE_EPOCH):
    the runtime pack's script is the same bytes and has the fixed date; the app's scripts
    differ only by the date; the pack cache's folder is only in bundle-pack-cache.txt."""
    scripts: dict[str, dict[str, bytes]] = {}
    for name, env in (
        ("one", {"SOURCE_DATE_EPOCH": ""}),
        ("two", {"SOURCE_DATE_EPOCH": "1700000000"}),
    ):
        folder = tmp_path / name / "deeper" / "dist"
        folder.mkdir(parents=True)
        lock = sample_lock()
        write_lock(folder / LOCK_NAME, replace(lock, runtime_pack=runtime_pack(lock.files)))
        args = ("render", "iss", str(folder), "--runtime-pack", "--pack-url", "https://x.test/p")
        done = cli((*args, "--cache-dir", str(tmp_path / name / "cache")), env=env)
        assert done.returncode == 0, done.stderr
        scripts[name] = {
            script: (folder / script).read_bytes()
            for script in ("setup.iss", "setup-web.iss", "bundle-pack.iss", "bundlepack.cmd")
        }
        for text in scripts[name].values():
            assert str(tmp_path).encode() not in text and b"Z:\\" not in text
        cache = (folder / "bundle-pack-cache.txt").read_text(encoding="utf-8")
        assert "runtime-packs" in cache and name in cache
    one, two = scripts["one"], scripts["two"]
    assert one["bundle-pack.iss"] == two["bundle-pack.iss"]
    assert b"TouchDate=1980-01-01\r\nTouchTime=00:00:00\r\n" in one["bundle-pack.iss"]
    assert b"TouchDate=1980-01-01\r\nTouchTime=00:00:00\r\n" in one["setup.iss"]
    assert b"TouchDate=2023-11-14\r\nTouchTime=22:13:20\r\n" in two["setup.iss"]  # 1700000000
    for script in ("setup.iss", "setup-web.iss"):
        moved = two[script].replace(b"2023-11-14", b"1980-01-01").replace(b"22:13:20", b"00:00:00")
        assert moved == one[script], script


def test_every_file_of_a_setup_gets_the_date_not_its_own_time() -> None:
    values = iss_values(sample_lock(), IssSettings(source_date=0), 0)
    assert (values["touch_date"], values["touch_time"]) == ("1970-01-01", "00:00:00")
    text = TEMPLATES.render("setup.iss.j2", **values)
    files = [line for line in text.splitlines() if line.startswith("Source: ")]
    assert files and all("touch" in line.split("Flags: ")[1] for line in files)
    assert "TimeStampsInUTC=yes" in text.splitlines()
