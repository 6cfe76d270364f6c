"""A Wine prefix made once per Wine build and cloned by hard links: every prefix of the suite
(the loader's, the Windows tier's, Inno Setup's, the display's) starts as the same wineboot
output, and Wine 8's wineboot writes 1.3 GB into each (the PE builtins are copied into
drive_c/windows), in ~10 s.

The template lives in the test cache (`wine-prefixes/<wine version>-<wine.inf time>`), made by
`wineboot -i` under a file lock the workers share. A clone hard-links the program files
(`LINKED`: DLLs, EXEs, drivers, NLS tables, which Wine reads and never writes) and copies
everything else (the registry, win.ini and the other files Wine rewrites), so each prefix's
state is its own. The key names the Wine build: wineboot compares the prefix's
`.update-timestamp` with wine.inf's time and updates an older prefix in place, which a shared
file must never see, so another Wine makes another template.

A clone's program files are shared with the template and every other clone: a test that puts
a file into System32 replaces it (`replace_file`: unlink, then write), never writes into it.
`intact` re-checks the linked files' sizes and times before each clone, so a write that got
through anyway costs a rebuilt template, not a wrong prefix.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from filelock import FileLock

from tests.support.paths import test_cache_dir

# What Wine reads and never writes: hard-linked into each clone.
LINKED = frozenset(
    {".dll", ".exe", ".drv", ".sys", ".nls", ".ocx", ".cpl", ".acm", ".tlb", ".vxd", ".ds"}
    | {".ax", ".com", ".msstyles"}
)
MANIFEST = ".bundle-template.json"  # the linked files' sizes and times, as made
BOOT_TIMEOUT = 300.0


def wine_inf() -> Path | None:
    """The wine.inf whose time wineboot writes into a prefix's .update-timestamp."""
    wine = shutil.which("wine")
    if wine is None:
        return None
    inf = Path(wine).resolve().parents[1] / "share" / "wine" / "wine.inf"
    return inf if inf.is_file() else None


def template_key(inf: Path) -> str:
    version = subprocess.run(["wine", "--version"], capture_output=True, text=True).stdout
    return re.sub(r"[^A-Za-z0-9.]+", "-", version.strip()) + f"-{int(inf.stat().st_mtime)}"


def prefix_template() -> Path | None:
    """The template for this machine's Wine, made on first use; None where Wine's data folder
    is not where Debian puts it (each prefix is then booted by Wine itself)."""
    inf = wine_inf()
    if inf is None:
        return None
    root = test_cache_dir() / "wine-prefixes"
    root.mkdir(parents=True, exist_ok=True)
    key = template_key(inf)
    template = root / key
    with FileLock(root / f"{key}.lock"):
        if not intact(template):
            make_template(template)
    return template


def linked_files(prefix: Path) -> dict[str, list[int]]:
    files = (
        path
        for path in prefix.rglob("*")
        if path.suffix.lower() in LINKED and path.is_file() and not path.is_symlink()
    )
    return {
        path.relative_to(prefix).as_posix(): [stat.st_size, stat.st_mtime_ns]
        for path, stat in ((path, path.stat()) for path in files)
    }


def intact(template: Path) -> bool:
    """The template exists and its linked files are as they were made."""
    manifest = template / MANIFEST
    if not manifest.is_file():
        return False
    return bool(json.loads(manifest.read_text(encoding="utf-8")) == linked_files(template))


def make_template(template: Path) -> None:
    """`wineboot -i` into a new folder (Wine Mono and Gecko left out, no display), its server
    waited out, the manifest written, then renamed into place."""
    shutil.rmtree(template, ignore_errors=True)
    building = template.with_name(template.name + ".new")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir()
    env = {**os.environ, "WINEPREFIX": str(building), "WINEARCH": "win64", "WINEDEBUG": "-all"}
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        env.pop(name, None)

    def run(*command: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command, env={**env, **extra}, stdin=subprocess.DEVNULL, capture_output=True,
            text=True, errors="replace", timeout=BOOT_TIMEOUT,
        )  # fmt: skip

    done = run("wineboot", "-i", WINEDLLOVERRIDES="mscoree,mshtml=")
    run("wineserver", "-w")
    if done.returncode != 0:
        raise RuntimeError(f"wineboot -i of the prefix template failed: {done.stderr[-2000:]}")
    manifest = json.dumps(linked_files(building), sort_keys=True)
    (building / MANIFEST).write_text(manifest, encoding="utf-8")
    building.rename(template)


def clone_prefix(template: Path, prefix: Path) -> None:
    """`template`'s tree into `prefix` (an empty or absent folder): program files hard-linked,
    the rest copied, symbolic links (dosdevices) kept as links."""

    def link_or_copy(source: str, target: str) -> None:
        if Path(source).suffix.lower() in LINKED:
            try:
                os.link(source, target)
                return
            except OSError:  # another file system: a copy, as wineboot would have made
                pass
        shutil.copy2(source, target)

    shutil.copytree(
        template,
        prefix,
        symlinks=True,
        dirs_exist_ok=True,
        copy_function=link_or_copy,
        ignore=shutil.ignore_patterns(MANIFEST),
    )


def seed(prefix: Path) -> None:
    """A prefix not made yet starts as a clone of the template (where there is one)."""
    if (prefix / "system.reg").exists():
        return
    template = prefix_template()
    if template is not None:
        clone_prefix(template, prefix)


def replace_file(target: Path, data: bytes) -> None:
    """`target` with `data` as a new file: a prefix's program files are hard links shared
    with the template, which writing into them would change for every prefix."""
    target.unlink(missing_ok=True)
    target.write_bytes(data)
