"""Talk layer: the `bundle` command's entry point: first make sure the `bundler` package is ours.

`bundler` is also the import name of an unrelated project on PyPI. Installed into the same
environment, its files land in the same folder as ours and its `__init__.py` replaces ours;
our modules would then fail in confusing ways. Our `__init__.py` carries a marker
(bundler.DISTRIBUTION); without it, this stops with one line saying what happened and what to
do. Nothing else is imported before the check.
"""

from __future__ import annotations

import sys

DISTRIBUTION = "ort-bundle"
EXIT_FOREIGN_PACKAGE = 14  # ExitCode.CONFIG: the environment is set up wrongly (README)


def main() -> None:
    import bundler

    if getattr(bundler, "DISTRIBUTION", None) != DISTRIBUTION:
        sys.stderr.write(foreign_package_message(bundler) + "\n")
        sys.exit(EXIT_FOREIGN_PACKAGE)
    from bundler.cli.commands import main as run

    run()


def foreign_package_message(package: object) -> str:
    from importlib.metadata import packages_distributions

    where = getattr(package, "__file__", None) or ", ".join(getattr(package, "__path__", []))
    owners = ", ".join(sorted(set(packages_distributions().get("bundler", [])))) or "unknown"
    return (
        f"error: the Python package 'bundler' in {where} is not {DISTRIBUTION}'s (installed "
        f"by: {owners}); another project uses the same name. Uninstall it (pip uninstall "
        f"bundler) and reinstall {DISTRIBUTION}, or use a fresh virtual environment."
    )
