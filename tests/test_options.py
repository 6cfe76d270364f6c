"""One options resolver (bundler.config.options): flag > bundle.toml > profile > default, applied in
one place, and `bundle build --dry-run --json` says where each setting came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bundler.config.options import Options
from bundler.errors import ConfigError
from bundler.ship.appconfig import load_config
from tests.support.builds import build
from tests.support.paths import HELLO, hello_app


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
    app = hello_app(tmp_path / "app", '[build]\nexe = "hello.exe"\nout = "dist"\nlink = true\n')
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


def test_bundle_toml_is_read_as_utf_8_on_every_system(tmp_path: Path) -> None:
    """TOML is UTF-8; on Windows, a read without an encoding would use the ANSI code page
    (cp1252): "Café" became "CafÃ©" in the installer, and some bytes stopped the run."""
    config = tmp_path / "bundle.toml"
    config.write_bytes(
        '[build]\nexe = "hello.exe"\nout = "dist-é"\n\n'
        '[render]\napp_name = "Café 発行"\npublisher = "Zoë Ltd"\n'.encode()
    )
    loaded = load_config(config)
    assert (loaded.installer.app_name, loaded.installer.publisher) == ("Café 発行", "Zoë Ltd")
    assert loaded.out == tmp_path / "dist-é"


def test_a_bundle_toml_that_is_not_utf_8_is_named_with_the_fix(tmp_path: Path) -> None:
    config = tmp_path / "bundle.toml"
    config.write_bytes('[render]\napp_name = "Café"\n'.encode("cp1252"))
    with pytest.raises(ConfigError, match="not UTF-8") as caught:
        load_config(config)
    assert str(config) in str(caught.value) and "save it as UTF-8" in str(caught.value)


def test_an_environment_variable_comes_after_the_flag_and_before_the_file() -> None:
    picked = Options()
    variable = ("BUNDLE_CACHE_DIR", Path("from-env"))
    assert picked.pick("cache_dir", None, Path("toml"), env=variable) == Path("from-env")
    assert picked.origins["cache_dir"] == "$BUNDLE_CACHE_DIR"
    assert picked.pick("cache_dir", Path("flag"), env=variable) == Path("flag")
    assert picked.origins["cache_dir"] == "flag"
    assert picked.pick("cache_dir", None, env=("BUNDLE_CACHE_DIR", None), default=Path("d"))
    assert picked.origins["cache_dir"] == "default"


@pytest.mark.realdata
@pytest.mark.parametrize("given", ["flag", "$BUNDLE_CACHE_DIR", "default"])
def test_build_says_where_its_cache_folder_came_from(
    given: str, gpu_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30: $BUNDLE_CACHE_DIR was reported as coming from "default". The user cache is
    made the test's cache through $XDG_CACHE_HOME (platformdirs: $XDG_CACHE_HOME/bundle)."""
    xdg = tmp_path / "xdg"
    xdg.mkdir()
    (xdg / "bundle").symlink_to(gpu_cache, target_is_directory=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    monkeypatch.delenv("BUNDLE_CACHE_DIR", raising=False)
    args = [str(HELLO), "--profile", "ort-1.19.2-gpu-cuda12", "--out", str(tmp_path / "dist")]
    expected = str(gpu_cache)
    if given == "flag":
        args += ["--cache-dir", str(gpu_cache)]
    elif given == "$BUNDLE_CACHE_DIR":
        monkeypatch.setenv("BUNDLE_CACHE_DIR", str(gpu_cache))
    else:
        expected = str(xdg / "bundle")
    result = build(*args, "--dry-run", "--json", "--offline")
    assert result.returncode == 0, result.stderr
    setting = json.loads(result.stdout)["settings"]["cache_dir"]
    assert setting == {"value": expected, "from": given}
