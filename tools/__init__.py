"""The repository's own scripts, one package per kind; each runs as `python -m tools.KIND.NAME`."""
