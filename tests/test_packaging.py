"""The built wheel carries manifests/ and templates/ and works without the source tree."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "-w", str(out), str(REPO)],
        check=True,
    )  # fmt: skip
    (built,) = out.glob("bundle-*.whl")
    return built


def test_wheel_contains_package_data(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for profile in (REPO / "manifests" / "profiles").glob("*.toml"):
        assert f"bundler/_data/manifests/profiles/{profile.name}" in names
    assert "bundler/_data/manifests/windows/system.toml" in names
    assert "bundler/_data/templates/README.md" in names


def test_installed_wheel_runs_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
         str(target), str(wheel)],
        check=True,
    )  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(target)}
    code = (
        "import bundler.resources as r, bundler; print(bundler.__file__); print(r.manifests_dir())"
    )
    where = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    package_file, manifests = where.stdout.split()
    assert package_file.startswith(str(target))
    assert manifests == str(target / "bundler" / "_data" / "manifests")
    listing = subprocess.run(
        [sys.executable, "-m", "bundler", "profiles"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert listing.returncode == 0, listing.stderr
    assert "ort-1.19.2-gpu-cuda12" in listing.stdout


def test_wheel_contains_the_msbuild_templates(wheel: Path, tmp_path: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for template in ("ort-bundle.props.j2", "ort-bundle.targets.j2"):
        assert f"bundler/_data/templates/{template}" in names
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
         str(target), str(wheel)],
        check=True,
    )  # fmt: skip
    code = (
        "from pathlib import Path; from bundler.lock import Lock; "
        "from bundler.render_msbuild import write_msbuild_files; "
        "print(len(write_msbuild_files(Lock('p', 'x64', 'app-local', ()), Path('out')).paths))"
    )
    rendered = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(target)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert rendered.returncode == 0, rendered.stderr
    assert rendered.stdout.strip() == "2"
    assert (tmp_path / "out" / "ort-bundle.props").read_bytes().startswith(b"\xef\xbb\xbf<?xml")
