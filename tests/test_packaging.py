"""The built wheel carries manifests/ and templates/ and works without the source tree."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import bundler
from tests.support.paths import REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "-w", str(out), str(REPO)],
        check=True,
    )  # fmt: skip
    (built,) = out.glob("ort_bundle-*.whl")  # the distribution name (pyproject.toml)
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed into a folder of its own (pip --target), for PYTHONPATH."""
    site = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
         str(site), str(wheel)],
        check=True,
    )  # fmt: skip
    return site


def test_wheel_contains_package_data(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for profile in (REPO / "manifests" / "profiles").glob("*.toml"):
        assert f"bundler/_data/manifests/profiles/{profile.name}" in names
    assert "bundler/_data/manifests/windows/system.toml" in names
    assert "bundler/_data/templates/README.md" in names
    assert "bundler/_data/manifests/cuda/gpu_code.toml" in names
    # bundle-doctor.exe ships prebuilt, as pip ships its launchers: users need no compiler
    with zipfile.ZipFile(wheel) as archive:
        shipped = archive.read("bundler/data/bundle-doctor.exe")
    assert shipped == (REPO / "bundler" / "data" / "bundle-doctor.exe").read_bytes()


def test_installed_wheel_runs_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(installed)}
    code = (
        "import bundler.target.resources as r, bundler; "
        "print(bundler.__file__); print(r.manifests_dir())"
    )
    where = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    package_file, manifests = where.stdout.split()
    assert package_file.startswith(str(installed))
    assert manifests == str(installed / "bundler" / "_data" / "manifests")
    listing = subprocess.run(
        [sys.executable, "-m", "bundler", "profiles"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert listing.returncode == 0, listing.stderr
    assert "ort-1.19.2-gpu-cuda12" in listing.stdout


def test_wheel_contains_the_msbuild_templates(wheel: Path, installed: Path, tmp_path: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for template in ("ort-bundle.props.j2", "ort-bundle.targets.j2"):
        assert f"bundler/_data/templates/{template}" in names
    code = (
        "from pathlib import Path; from bundler.closure.lock import Lock; "
        "from bundler.render.engine import Templates; "
        "from bundler.render.msbuild_props import write_msbuild_files; "
        "templates, lock = Templates(Path('cache')), Lock('p', 'x64', 'app-local', ()); "
        "print(len(write_msbuild_files(templates, lock, Path('out')).paths))"
    )
    rendered = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(installed)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert rendered.returncode == 0, rendered.stderr
    assert rendered.stdout.strip() == "2"
    assert (tmp_path / "out" / "ort-bundle.props").read_bytes().startswith(b"\xef\xbb\xbf<?xml")


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed as a user installs it. The
    dependencies come from the test environment's own site-packages (a .pth after the
    venv's own folder), so no index is needed; `bundler` itself only from the wheel."""
    root = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    python = root / ("Scripts" if os.name == "nt" else "bin") / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "zz-test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True,
    )
    return root


def venv_run(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    folder = venv / ("Scripts" if os.name == "nt" else "bin")
    return subprocess.run(
        [str(folder / args[0]), *args[1:]], capture_output=True, text=True, cwd=cwd
    )


def test_the_wheel_installs_as_ort_bundle_with_the_bundle_command(
    venv: Path, tmp_path: Path
) -> None:
    shown = venv_run(venv, "python", "-m", "pip", "show", "ort-bundle", cwd=tmp_path)
    assert shown.returncode == 0 and "Name: ort-bundle" in shown.stdout
    version = venv_run(venv, "bundle", "--version", cwd=tmp_path)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"bundle {bundler.__version__}"
    listing = venv_run(venv, "bundle", "profiles", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert "ort-1.19.2-gpu-cuda12" in listing.stdout
    where = venv_run(venv, "python", "-c", "import bundler; print(bundler.__file__)", cwd=tmp_path)
    assert where.stdout.startswith(str(venv))  # ours, from the wheel: not the checkout


def test_a_foreign_bundler_package_is_a_clear_error(venv: Path, tmp_path: Path) -> None:
    """What `pip install bundler` (another project) does to us: its __init__.py replaces ours."""
    where = venv_run(venv, "python", "-c", "import bundler; print(bundler.__file__)", cwd=tmp_path)
    init = Path(where.stdout.strip())
    original = init.read_text()
    try:
        init.write_text('"""Someone else\'s bundler."""\n__version__ = "9.9"\n')
        for command in (["bundle", "profiles"], ["python", "-m", "bundler", "profiles"]):
            result = venv_run(venv, *command, cwd=tmp_path)
            assert result.returncode == 14, result.stderr
            assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
            assert f"'bundler' in {init} is not ort-bundle's" in result.stderr
            assert "pip uninstall bundler" in result.stderr
    finally:
        init.write_text(original)
    assert venv_run(venv, "bundle", "profiles", cwd=tmp_path).returncode == 0
