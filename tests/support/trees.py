"""A small tree of files written from a mapping (relative path -> text), for the checks that
are shown failing on a planted violation (tests/test_layers.py, test_import_cycles.py,
test_test_layout.py)."""

from __future__ import annotations

from pathlib import Path


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """`files` written under `root`, their folders made; `root` back."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
