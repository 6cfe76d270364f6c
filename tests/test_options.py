"""One options resolver (bundler.options): flag > bundle.toml > profile > default, applied in
one place, and `bundle build --dry-run --json` says where each setting came from."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bundler.options import Options
from tests.conftest import HELLO
from tests.test_build import build


def test_the_first_that_has_a_value_wins_and_is_named() -> None:
    picked = Options()
    assert picked.pick("out", Path("a"), Path("b"), Path("c"), Path("d")) == Path("a")
    assert picked.pick("link", None, True, False, False) is True
    assert picked.pick("vc_runtime", None, None, "installer", "app-local") == "installer"
    assert picked.pick("sbom", None, None, None, False) is False
    assert picked.pick("iss", False, True) is False  # a flag's False is a value, not "unset"
    assert picked.origins == {
        "out": "flag",
        "link": "bundle.toml",
        "vc_runtime": "profile",
        "sbom": "default",
        "iss": "flag",
    }
    assert picked.report()["out"] == {"value": "a", "from": "flag"}


def test_a_costly_default_is_found_only_when_needed() -> None:
    calls: list[int] = []

    def costly() -> str:
        calls.append(1)
        return "found"

    picked = Options()
    assert picked.pick("cache_dir", "given", default_factory=costly) == "given"
    assert calls == []
    assert picked.pick("other", None, default_factory=costly) == "found" and calls == [1]


@pytest.mark.realdata
def test_build_dry_run_json_says_where_each_setting_came_from(
    gpu_cache: Path, tmp_path: Path
) -> None:
    app = tmp_path / "app"
    app.mkdir()
    shutil.copy(HELLO, app / "hello.exe")
    (app / "bundle.toml").write_text('[build]\nexe = "hello.exe"\nout = "dist"\nlink = true\n')
    result = build(
        "--config", str(app / "bundle.toml"), "--profile", "ort-1.19.2-gpu-cuda12",
        "--cache-dir", str(gpu_cache), "--dry-run", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    settings = json.loads(result.stdout)["settings"]
    assert settings["profile"] == {"value": "ort-1.19.2-gpu-cuda12", "from": "flag"}
    assert settings["out"]["from"] == "bundle.toml" and settings["out"]["value"].endswith("dist")
    assert settings["link"] == {"value": True, "from": "bundle.toml"}
    assert settings["vc_runtime"] == {"value": "app-local", "from": "profile"}
    assert settings["sbom"] == {"value": False, "from": "default"}
    assert not (app / "dist").exists()  # --dry-run wrote nothing
