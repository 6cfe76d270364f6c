"""Read layer: the one place that knows where package data lives.

In a built wheel, `manifests/` and `templates/` are copied into `bundler/_data/` (see
pyproject.toml). In a source checkout or an editable install they sit at the top of the
repository, next to the package. Search order: the wheel location first, then the checkout.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent  # bundler/


def _data_dir(name: str) -> Path:
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"bundle's {name}/ folder is missing from the installation (looked in "
        f"{_PACKAGE / '_data' / name} and {_PACKAGE.parent / name}); reinstall bundle."
    )


def manifests_dir() -> Path:
    return _data_dir("manifests")


def templates_dir() -> Path:
    return _data_dir("templates")


def profiles_dir() -> Path:
    return manifests_dir() / "profiles"


def eps_dir() -> Path:
    """The execution-provider packs (bundler.eps.plugins)."""
    return manifests_dir() / "eps"


def system_policy_file() -> Path:
    return manifests_dir() / "windows" / "system.toml"


def doctor_exe() -> Path:
    """bundle-doctor.exe, prebuilt from doctor/ (doctor/build.sh; CI rebuilds it and requires
    the same bytes). It ships inside the package, as pip ships its launcher exes."""
    return _PACKAGE / "data" / "bundle-doctor.exe"
