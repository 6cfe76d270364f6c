"""The MkDocs site (mkdocs.yml, docs/) as the tests build it: `built_site` runs
`mkdocs build --strict` into a folder of the test's and returns the site."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO
from tests.support.skips import require


def built_site(tmp_path: Path) -> Path:
    """The docs site, built with `mkdocs build --strict` into tmp_path/site."""
    require(
        importlib.util.find_spec("mkdocs") is not None
        and importlib.util.find_spec("material") is not None,
        "mkdocs-material is not installed (pip install -e '.[test]')",
    )
    site = tmp_path / "site"
    config = REPO / "mkdocs.yml"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return site
