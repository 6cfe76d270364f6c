"""The help texts (issue 29): nothing in brackets is lost to rich's markup, a repeatable
argument reads `FILE...`, defaults are shown, --dry-run says what it downloads, and
docs/usage.md (tools/docs/usage.py) fits 80 columns."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bundler.errors import ExitCode
from bundler.target.profiles import DEFAULT_PROFILE
from tests.support.paths import CPU, HELLO, REPO
from tests.support.runs import run_bundle

WIDTH = 80


def raw_helps() -> dict[str, list[str]]:
    """command path -> the help strings as written in the source (before any escaping)."""
    import typer.main

    from bundler.cli.commands import app

    found: dict[str, list[str]] = {}

    def walk(node: Any, path: tuple[str, ...]) -> None:
        texts = [node.help or "", *(param.help or "" for param in node.params)]
        found[" ".join(path)] = [text for text in texts if text]
        for name, sub in getattr(node, "commands", {}).items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return found


def rich_help(*words: str) -> str:
    """`bundle ... --help` as a terminal shows it (rich), so wide that no line wraps."""
    env = {**os.environ, "COLUMNS": "1000", "TERM": "xterm", "TYPER_USE_RICH": "1"}
    env.pop("NO_COLOR", None)
    result = subprocess.run(
        [sys.executable, "-m", "bundler", *words, "--help"],
        capture_output=True,
        encoding="utf-8",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    return " ".join(result.stdout.split())


@pytest.fixture(scope="module")
def usage_page() -> str:
    result = subprocess.run(
        [sys.executable, "-m", "tools.docs.usage"], cwd=REPO, capture_output=True, encoding="utf-8"
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def section(page: str, command: str) -> str:
    start = page.index(f"## `{command}`\n")
    end = page.find("\n## `", start + 1)
    return page[start : end if end != -1 else None]


def test_no_help_text_loses_what_is_in_brackets() -> None:
    """rich takes `[models]` in `ort-bundle[models]` for a style unless it is escaped."""
    checked = 0
    for path, texts in raw_helps().items():
        brackets = [b for text in texts for b in re.findall(r"\[[^\]\n]*\]", text)]
        if not brackets:
            continue
        shown = rich_help(*path.split())
        for bracket in brackets:
            assert " ".join(bracket.split()) in shown, (path, bracket)
            checked += 1
    assert checked >= 2  # at least `ort-bundle[models]` and `[build]`
    assert "needs ort-bundle[models])" in rich_help("build")


def test_a_repeatable_argument_reads_file_dots_and_no_usage_has_braces(usage_page: str) -> None:
    assert "Usage: bundle deps [OPTIONS] FILE...\n" in usage_page
    assert "Usage: bundle profiles show [OPTIONS] NAME\n" in usage_page
    usages = [line for line in usage_page.splitlines() if line.startswith("Usage: ")]
    assert usages and not [line for line in usages if "{" in line]
    assert "Usage: python -m bundler deps [OPTIONS] FILE... " in rich_help("deps")


def test_defaults_are_shown(usage_page: str) -> None:
    build = " ".join(section(usage_page, "bundle build").split())
    assert f"(default: bundle.toml's [build] profile, else {DEFAULT_PROFILE})" in build
    assert "(default: bundle.toml's [build] link, else --copy)" in build
    assert "(default: bundle.toml's [build] sbom, else --no-sbom)" in build
    msbuild = " ".join(section(usage_page, "bundle msbuild").split())
    assert "[default: copy]" in msbuild
    assert f"(default: {DEFAULT_PROFILE})" in " ".join(section(usage_page, "bundle scan").split())


def test_dry_run_says_it_downloads_and_what_offline_does(usage_page: str) -> None:
    build = " ".join(section(usage_page, "bundle build").split())
    assert "It still downloads and verifies the profile's artifacts into the cache" in build
    assert "with --offline it works from the cache (and --mirror folders) only" in build


def test_usage_page_fits_80_columns(usage_page: str) -> None:
    written = (REPO / "docs" / "usage.md").read_text(encoding="utf-8")
    for page in (usage_page, written):
        wide = [line for line in page.splitlines() if len(line) > WIDTH]
        assert not wide, wide


def test_an_offline_dry_run_works_from_the_cache_and_names_what_is_missing(
    tmp_path: Path,
) -> None:
    out, cache = tmp_path / "out", tmp_path / "cache"
    result = run_bundle(
        "build", str(HELLO), "--profile", CPU, "--out", str(out), "--cache-dir", str(cache),
        "--offline", "--dry-run",
    )  # fmt: skip
    assert result.returncode == ExitCode.FETCH, result.stdout + result.stderr
    message = result.stderr
    assert f"--offline: 2 of the 2 artifacts of {CPU} are not in the cache {cache}" in message
    assert "onnxruntime 1.19.2 (onnxruntime-win-x64-1.19.2.zip or " in message
    assert "msvc-runtime 14.44.35112 (msvc_runtime-14.44.35112-cp311" in message
    assert "bundle fetch --profile ort-1.19.2-cpu" in message
    assert not out.exists()
