"""Read layer: where a command's cache folder is: its --cache-dir, else $BUNDLE_CACHE_DIR, else
the platform's per-user cache folder. Each command resolves it once and passes it down (the
download cache, the templates' kept renderings, the audit's Wine prefix); nothing remembers it
elsewhere."""

from __future__ import annotations

from pathlib import Path

from bundler.config.environment import variable
from bundler.config.variables import CACHE_DIR

CACHE_ENV = CACHE_DIR.name  # derived from --cache-dir (bundler.config.option_table)
RUNTIME_PACKS = "runtime-packs"  # compiled runtime packs, a folder each (docs/runtime-pack.md)
# Their folder's name before issue 39: moved to RUNTIME_PACKS on first use (acquire/cache.py's
# runtime_packs), removed by `cache clean --all` where both exist.
OLD_RUNTIME_PACKS = "packs"


def cache_root(flag: Path | None) -> Path:
    """The cache folder of one command: its --cache-dir (`flag`), else $BUNDLE_CACHE_DIR, else
    the platform's per-user cache folder. Each command resolves it once and passes it down
    (Cache, the templates' caches, the audit's Wine prefix); nothing remembers it elsewhere."""
    return flag or env_cache_dir() or platform_cache_dir()


def runtime_packs_folder(root: Path) -> Path:
    """Where `bundle build --runtime-pack` keeps the compiled runtime packs of the cache `root`
    (a path only: bundler.acquire.cache.runtime_packs moves an old `packs/` there first)."""
    return root / RUNTIME_PACKS


def default_cache_dir() -> Path:
    """The cache folder without a --cache-dir: $BUNDLE_CACHE_DIR, else the platform's."""
    return cache_root(None)


def env_cache_dir() -> Path | None:
    """$BUNDLE_CACHE_DIR, when set and not blank."""
    configured = (variable(CACHE_ENV) or "").strip()
    return Path(configured) if configured else None


def platform_cache_dir() -> Path:
    """The platform's per-user cache folder (platformdirs: $XDG_CACHE_HOME/bundle or
    ~/.cache/bundle, %LOCALAPPDATA%\\bundle\\Cache on Windows, ~/Library/Caches/bundle on
    macOS)."""
    from platformdirs import user_cache_path

    return user_cache_path("bundle", appauthor=False)
