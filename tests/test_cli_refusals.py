"""Refuse contradictions, with errors people can act on (issue 29): one table of command lines
the CLI must refuse (or, since the fix, accept), each run as a user runs it, in its own process,
with its exit code and the fragments its one-line message must carry; then unit tests of the
validation step (bundler.config.validate) and of the profile-name suggestions
(bundler.target.profile_names).

Nothing here downloads: every refusal comes before any work, and the rows that get further
stop at --offline with an empty cache."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from bundler.closure.lock import Lock, LockedFile
from bundler.closure.lockfile import write_lock
from bundler.config.options import CONFIG, FLAG, Options
from bundler.config.validate import CHOICES, COMPRESSIONS, Target, check, check_choice, origin_of
from bundler.errors import ConfigError, ExitCode
from bundler.target.profile_names import Shipped, no_gpu_profile, unknown_profile
from bundler.target.profiles import available_profiles, latest_gpu_release, load_profile
from tests.support.paths import CPU, DIRECTML, GPU, HELLO, hello_app
from tests.support.runs import bundle_from_cache as bundle

NEWEST_GPU = "ort-1.31.1-gpu-cuda13"  # what `latest` means while 1.31.1 is the newest GPU profile


def cpu_lock(folder: Path) -> Path:
    """A CPU bundle's lock file (as `bundle build` writes it) in `folder`, with its app."""
    hello_app(folder)
    lock = Lock(
        profile=CPU,
        architecture="x64",
        vc_runtime="app-local",
        files=(LockedFile("onnxruntime.dll", "bundled", "0" * 64, 10),),
        app="hello.exe",
        app_file_version="1.0.0.0",
        min_windows="10.0.10240",
        vc_runtime_min="14.40",
    )
    write_lock(folder / "bundle.lock.json", lock)
    return folder / "bundle.lock.json"


def source_beside_dist(tmp: Path) -> None:
    """examples/hello as it is after a build: the app's source folder, the bundle in dist/."""
    hello_app(tmp / "app")
    cpu_lock(tmp / "app" / "dist")


@dataclass(frozen=True)
class Row:
    """A command line ({tmp}: the test's folder, {hello}: the example app), an optional
    bundle.toml written to {tmp}/bundle.toml, what else the folder needs, the exit code and
    the fragments of the message (stderr on a refusal, else stdout)."""

    argv: str
    code: int
    fragments: tuple[str, ...]
    toml: str | None = None
    prepare: Callable[[Path], object] | None = None


BUILD = "build {hello} --dry-run --offline --cache-dir {tmp}/cache"
ROWS: dict[str, Row] = {
    # --- 1. contradictions, refused by the one validation step --------------------------------
    "profile-and-ort": Row(
        f"{BUILD} --profile ort-1.31.1-cpu --ort 1.30.0",
        ExitCode.CONFIG,
        ("--profile ort-1.31.1-cpu and --ort 1.30.0 contradict each other", "give one"),
    ),
    "measure-profile-and-ort": Row(
        "measure {tmp}/m.onnx --out {tmp}/e.json --profile ort-1.31.1-cpu --ort 1.30.0",
        ExitCode.CONFIG,
        ("--profile ort-1.31.1-cpu and --ort 1.30.0 contradict each other",),
    ),
    "ort-is-a-release": Row(
        f"{BUILD} --ort ort-1.31.1-cpu",
        ExitCode.CONFIG,
        ("--ort ort-1.31.1-cpu: not an ORT release", "or latest", "goes to --profile"),
    ),
    "vc-runtime-flag": Row(
        f"{BUILD} --profile {CPU} --vc-runtime static",
        ExitCode.CONFIG,
        ("--vc-runtime static: not a VC++ runtime mode", "use one of: app-local, installer."),
    ),
    "vc-runtime-in-bundle-toml": Row(
        f"{BUILD} --profile {CPU} --config {{tmp}}/bundle.toml",
        ExitCode.CONFIG,
        ('{tmp}/bundle.toml [build] vc_runtime = "static": not a VC++ runtime mode', "app-local"),
        toml='[build]\nvc_runtime = "static"\n',
    ),
    "compression-flag": Row(
        f"{BUILD} --profile {CPU} --iss-compression lzma3",
        ExitCode.CONFIG,
        ("--iss-compression lzma3: not an Inno Setup compression", "(did you mean lzma?)"),
    ),
    "install-scope-in-bundle-toml": Row(
        f"{BUILD} --profile {CPU} --config {{tmp}}/bundle.toml",
        ExitCode.CONFIG,
        ('[render] install_scope = "everyone": not an install scope', "machine, user, ask"),
        toml='[render]\ninstall_scope = "everyone"\n',
    ),
    "sign-tool-in-bundle-toml": Row(
        "render iss --config {tmp}/bundle.toml --lock {tmp}/dist/bundle.lock.json",
        ExitCode.CONFIG,
        ('{tmp}/bundle.toml [sign] tool = "signtoll": not a sign tool', "(did you mean signtool?)"),
        toml='[sign]\ntool = "signtoll"\ncertificate = "c.pfx"\n',
        prepare=lambda tmp: cpu_lock(tmp / "dist"),
    ),
    "source-fetch": Row(
        "fetch --source pipp --offline --cache-dir {tmp}/cache",
        ExitCode.CONFIG,
        ("--source pipp: not an artifact source", "auto, url, pip, dir", "(did you mean pip?)"),
    ),
    "source-msbuild": Row(
        "msbuild --source URL --offline --cache-dir {tmp}/cache --out {tmp}/o",
        ExitCode.CONFIG,
        ("--source URL: not an artifact source", "(did you mean url?)"),
    ),
    "iss-and-no-iss": Row(
        f"{BUILD} --profile {CPU} --iss {{tmp}}/s.iss --no-iss",
        ExitCode.CONFIG,
        ("--iss {tmp}/s.iss and --no-iss contradict each other",),
    ),
    "require-gpu-cpu": Row(
        f"{BUILD} --profile {CPU} --require-gpu",
        ExitCode.CONFIG,
        (f"--require-gpu: profile {CPU} has no GPU driver check", "choose a GPU profile"),
    ),
    "require-gpu-directml": Row(
        f"{BUILD} --profile {DIRECTML} --require-gpu",
        ExitCode.CONFIG,
        (f"--require-gpu: profile {DIRECTML} has no GPU driver check",),
    ),
    "require-gpu-in-bundle-toml": Row(
        f"{BUILD} --profile {CPU} --config {{tmp}}/bundle.toml",
        ExitCode.CONFIG,
        (f"{{tmp}}/bundle.toml [render] require_gpu = true: profile {CPU} has no GPU",),
        toml="[render]\nrequire_gpu = true\n",
    ),
    "require-gpu-render-iss": Row(
        "render iss --lock {tmp}/dist/bundle.lock.json --require-gpu",
        ExitCode.CONFIG,
        (f"--require-gpu: profile {CPU} has no GPU driver check",),
        prepare=lambda tmp: cpu_lock(tmp / "dist"),
    ),
    "evidence-without-model": Row(
        f"{BUILD} --profile {CPU} --evidence {{tmp}}/e.json",
        ExitCode.CONFIG,
        ("--evidence needs the app's models", "add --model M.onnx"),
    ),
    "valid-options-pass": Row(
        f"{BUILD} --profile {GPU} --require-gpu --vc-runtime app-local --iss-compression zip/1",
        ExitCode.FETCH,  # past the validation step: stops at the empty cache (--offline)
        ("--offline:", GPU),
    ),
    # --- 2. errors people can act on --------------------------------------------------------------
    "profile-typo": Row(
        f"{BUILD} --profile ort-1.31.1-gpu",
        ExitCode.PROFILE,
        (f"did you mean {NEWEST_GPU}?", "ort-1.31.1-cpu", "bundle profiles lists all"),
    ),
    "profile-typo-show": Row(
        "profiles show ort-1.31.1-cuda13",
        ExitCode.PROFILE,
        (f"did you mean {NEWEST_GPU}?",),
    ),
    "ort-without-gpu-profile": Row(
        f"{BUILD} --ort 1.32.0",
        ExitCode.PROFILE,
        ("no shipped GPU profile for ORT 1.32.0", "ort-1.32.0-cpu", "If onnxruntime-gpu 1.32.0"),
    ),
    "ort-not-shipped": Row(
        f"{BUILD} --ort 1.31.0",
        ExitCode.PROFILE,
        ("no shipped GPU profile for ORT 1.31.0", "closest releases with a GPU profile: 1.31.1"),
    ),
    "ort-latest": Row(f"{BUILD} --ort latest", ExitCode.FETCH, (f"artifacts of {NEWEST_GPU}",)),
    "profile-latest": Row(
        "deps {hello} --profile latest --json", ExitCode.MISSING, (f'"profile": "{NEWEST_GPU}"',)
    ),
    # --- 3. the wrong folder ----------------------------------------------------------------------
    "audit-source-folder": Row(
        "audit {tmp}/app",
        ExitCode.INPUT,
        ("no bundle.lock.json in {tmp}/app; did you mean {tmp}/app/dist?", "--profile NAME"),
        prepare=source_beside_dist,
    ),
    # --- 4. config sections are independent -------------------------------------------------------
    "render-only-toml-renders": Row(
        "render iss --config {tmp}/bundle.toml --lock {tmp}/dist/bundle.lock.json",
        ExitCode.OK,
        ("setup.iss",),
        toml='[render]\napp_name = "Hello"\n',
        prepare=lambda tmp: cpu_lock(tmp / "dist"),
    ),
    "render-only-toml-has-no-lock-place": Row(
        "render iss --config {tmp}/bundle.toml",
        ExitCode.CONFIG,
        ("no lock file ({tmp}/bundle.toml has no [build] out or exe to find it by)",),
        toml='[render]\napp_name = "Hello"\n',
    ),
    "render-only-toml-build-needs-exe": Row(
        "build --config {tmp}/bundle.toml",
        ExitCode.CONFIG,
        ("no EXE given, and {tmp}/bundle.toml has no [build] exe", 'add exe = "APP.exe"'),
        toml='[render]\napp_name = "Hello"\n',
    ),
}


_TMP_PATH = re.compile(r"\{tmp\}((?:/[\w.\-]+)*)")


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_the_cli_refuses_with_one_actionable_line(tmp_path: Path, row: Row) -> None:
    def filled(text: str) -> str:
        return text.replace("{tmp}", str(tmp_path)).replace("{hello}", str(HELLO))

    def shown_paths(text: str) -> str:
        """A fragment as bundle prints it: {tmp}/a/b as the path tmp_path / a / b (with the
        system's separator: `\\` on Windows)."""
        text = _TMP_PATH.sub(lambda m: str(tmp_path.joinpath(*m[1].split("/")[1:])), text)
        return filled(text)

    if row.toml is not None:
        (tmp_path / "bundle.toml").write_text(row.toml, encoding="utf-8")
    if row.prepare is not None:
        row.prepare(tmp_path)
    result = bundle(*filled(row.argv).split(), cwd=tmp_path)
    assert result.returncode == row.code, result.stderr
    shown = result.stdout if row.code in (ExitCode.OK, ExitCode.MISSING) else result.stderr
    for fragment in row.fragments:
        assert shown_paths(fragment) in shown, shown
    if row.code in (ExitCode.CONFIG, ExitCode.PROFILE, ExitCode.INPUT):  # the refusals
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
        # one line, not a listing (~900 for a typo was); measured without the test's folder
        # and the checkout's, whose lengths depend on where and how the suite runs
        line = result.stderr.replace(str(tmp_path), "{tmp}").replace(str(HELLO), "{hello}")
        assert len(line) < 600, "one line, not a listing"
    assert not (tmp_path / "dist" / "setup.iss").exists() or row.code == ExitCode.OK


# --- the validation step (bundler.config.validate) ------------------------------------------------


@pytest.mark.parametrize("name", sorted(CHOICES))
def test_every_choice_accepts_its_values_and_names_where_a_wrong_one_came_from(name: str) -> None:
    choice = CHOICES[name]
    for value in choice.allowed:
        check_choice(name, value, "anywhere")
    origins = [o for o in (choice.flag, origin_of(name, CONFIG, Path("b.toml"))) if o]
    for origin in origins:
        with pytest.raises(ConfigError) as caught:
            check_choice(name, "bogus", origin)
        assert str(caught.value).startswith(f"{origin} ") and choice.listed() in str(caught.value)
    if choice.key:
        assert origin_of(name, CONFIG, Path("b.toml")) == f"b.toml {choice.key} ="
    if choice.flag:
        assert origin_of(name, FLAG, None) == choice.flag


def test_the_compressions_are_inno_setups() -> None:
    """The list the check uses is the grammar Inno Setup documents, and nothing else."""
    grammar = re.compile(
        r"none|zip(/[1-9])?|bzip(/[1-9])?|lzma2?(/(fast|normal|max|ultra|ultra64))?"
    )
    assert all(grammar.fullmatch(value) for value in COMPRESSIONS)
    assert len(COMPRESSIONS) == len(set(COMPRESSIONS)) == 1 + 2 * 10 + 2 * 6
    assert "lzma2/normal" in COMPRESSIONS and "zip/10" not in COMPRESSIONS


def test_rivals_are_named_before_the_profile_is_looked_up() -> None:
    looked_up: list[int] = []

    def target() -> Target:
        looked_up.append(1)
        return Target(CPU, gpu=False)

    given = {"--profile": "x", "--ort": "1.30.0"}
    with pytest.raises(ConfigError, match=r"--profile x and --ort 1\.30\.0 contradict"):
        check(Options(), given, None, target)
    assert looked_up == []
    check(Options(), {"--iss": None, "--no-iss": True, "--ort": "latest"}, None, target)
    assert looked_up == [1]  # a flag at None or False was not given: no contradiction


def test_require_gpu_is_refused_only_where_it_would_mislead() -> None:
    picked = Options()
    picked.pick("require_gpu", None, True)
    with pytest.raises(ConfigError, match=r"^my\.toml \[render\] require_gpu = true: profile"):
        check(picked, {}, Path("my.toml"), lambda: Target(CPU, gpu=False))
    check(picked, {}, Path("my.toml"), lambda: Target(GPU, gpu=True))
    allowed = Options()
    allowed.pick("require_gpu", False)  # --allow-cpu on a CPU profile says nothing false
    check(allowed, {}, None, lambda: Target(CPU, gpu=False))


def test_a_bad_value_in_bundle_toml_is_refused_on_load_naming_file_and_key(
    tmp_path: Path,
) -> None:
    from bundler.ship.appconfig import load_config

    config = tmp_path / "bundle.toml"
    config.write_text('[render]\ncompression = "zip/0"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r'\[render\] compression = "zip/0": not an Inno'):
        load_config(config)
    config.write_text('[render]\napp_name = "Hello"\n', encoding="utf-8")
    loaded = load_config(config)  # [build] is optional
    assert loaded.exe is None and loaded.installer.app_name == "Hello" and loaded.found


# --- profile names (bundler.target.profile_names) -------------------------------------------------


SHIPPED = Shipped(tuple(available_profiles()))


@pytest.mark.parametrize(
    ("typed", "guess"),
    [
        ("ort-1.31.1-gpu", NEWEST_GPU),
        ("ort-1.31.0-gpu-cuda13", NEWEST_GPU),  # the nearest release of the flavour
        ("ort-1.19.2-cuda12", GPU),
        ("gpu-cuda13", NEWEST_GPU),  # a flavour alone: its newest profile
        ("ort-1.31.1", NEWEST_GPU),  # a release alone: its GPU profile
        ("1.31", "1.31.1"),  # a release cut short
    ],
)
def test_a_typo_gets_one_guess_and_a_handful_of_names(typed: str, guess: str) -> None:
    message = unknown_profile(typed, SHIPPED)
    assert f"did you mean {guess}?" in message
    assert "bundle profiles lists all" in message
    assert sum(name in message for name in SHIPPED.names) <= 5  # not all 34


def test_a_release_without_a_gpu_profile_names_what_is_shipped_first() -> None:
    message = no_gpu_profile("1.32.0", SHIPPED)
    assert message.index("ort-1.32.0-cpu") < message.index("bundle profiles new")
    assert "If onnxruntime-gpu 1.32.0 is on PyPI" in message  # a condition, not a promise
    old = no_gpu_profile("1.10.0", SHIPPED)
    assert "profiles new" not in old and "start at ORT 1.19.2" in old


def test_latest_is_the_newest_shipped_gpu_profile() -> None:
    assert load_profile("latest").name == SHIPPED.latest_gpu() == NEWEST_GPU
    assert latest_gpu_release() == "1.31.1"
    newer = replace(SHIPPED, names=(*SHIPPED.names, "ort-1.40.0-cpu", "ort-1.39.0-gpu-cuda14"))
    assert newer.latest_gpu() == "ort-1.39.0-gpu-cuda14"  # a newer CPU-only release: not it
