"""The compiled runtime packs' folder in the cache, `runtime-packs/` (issue 39; `packs/` before
it), as a user with a cache of an older bundle meets it: the first command that uses the folder
renames the old one, with the packs in it; `cache clean --all` also removes an old folder that
an older bundle made again beside the new one."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bundler.acquire import cache as cache_module
from bundler.acquire.cache import runtime_packs
from bundler.closure.lock import LOCK_NAME, runtime_pack
from bundler.closure.lockfile import write_lock
from tests.support.locks import sample_lock
from tests.support.runs import run_bundle

PACK = "0123456789abcdef-01234567"


def compiled(folder: Path, name: str = PACK, text: str = "a compiled runtime pack") -> Path:
    """A compiled pack as ISCC leaves it in `folder`: its folder, with the pack's setup."""
    exe = folder / name / f"bundle-pack-{name}.exe"
    exe.parent.mkdir(parents=True)
    exe.write_text(text)
    return exe


def listed(cache: Path) -> list[dict[str, object]]:
    done = run_bundle("cache", "list", "--cache-dir", str(cache), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["runtime_packs"]  # type: ignore[no-any-return]


def test_cache_list_moves_the_old_folder_with_its_packs(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    old = compiled(cache / "packs")
    (pack,) = listed(cache)
    moved = cache / "runtime-packs" / PACK
    assert pack == {"name": PACK, "path": str(moved), "size": 23}
    assert not (cache / "packs").exists()
    assert (moved / old.name).read_text() == "a compiled runtime pack"
    assert listed(cache) == [pack]  # moved once: the second use finds it in place


def test_render_iss_moves_the_old_folder_and_names_the_new_one(tmp_path: Path) -> None:
    """`render iss --runtime-pack`: the pack cache named for the script is the new folder,
    where the pack an older bundle compiled now lies, so ISCC reuses it instead of compiling it
    again."""
    cache, bundle = tmp_path / "cache", tmp_path / "bundle"
    bundle.mkdir()
    lock = sample_lock()
    write_lock(bundle / LOCK_NAME, replace(lock, runtime_pack=runtime_pack(lock.files)))
    compiled(cache / "packs")
    args = ("render", "iss", str(bundle), "--runtime-pack", "--cache-dir", str(cache))
    done = run_bundle(*args)
    assert done.returncode == 0, done.stderr
    assert not (cache / "packs").exists() and (cache / "runtime-packs" / PACK).is_dir()
    # the pack cache's folder is named beside the script, not in it (docs/reproducible.md)
    named = (bundle / "bundle-pack-cache.txt").read_text(encoding="utf-8")
    assert "\\runtime-packs\\" in named and "\\packs\\" not in named
    assert "runtime-packs" not in (bundle / "setup.iss").read_text(encoding="utf-8-sig")


def test_both_folders_stay_and_clean_all_removes_both(tmp_path: Path) -> None:
    """An older bundle compiled a pack into `packs/` after the move: nothing is moved over the
    new folder, the listing is the new folder's, and `cache clean --all` frees both."""
    cache = tmp_path / "cache"
    new = compiled(cache / "runtime-packs")
    old = compiled(cache / "packs", "fedcba9876543210-76543210", "an older bundle's pack")
    assert [pack["name"] for pack in listed(cache)] == [PACK]
    assert old.is_file() and new.is_file()
    at = ("--cache-dir", str(cache), "--json")
    would = json.loads(run_bundle("cache", "clean", "--all", "--dry-run", *at).stdout)
    assert would["would"][0].endswith("(45 B)"), would  # 23 + 22 bytes
    quick = json.loads(run_bundle("cache", "clean", *at).stdout)
    assert quick["freed_bytes"] == 0 and old.is_file() and new.is_file()  # packs are kept
    done = json.loads(run_bundle("cache", "clean", "--all", *at).stdout)
    assert done["freed_bytes"] == 45
    assert not (cache / "packs").exists() and not (cache / "runtime-packs").exists()


def test_processes_that_start_together_move_it_once(tmp_path: Path) -> None:
    """Four at once (each takes the cache's lock for the move and looks again once it holds
    it): the folder is moved once, every pack in it whole, and each answers the new folder."""
    cache = tmp_path / "cache"
    names = [f"{n:016x}-0000000{n}" for n in range(1, 6)]
    for name in names:
        compiled(cache / "packs", name, name)
    code = "import sys; from pathlib import Path; from bundler.acquire.cache import runtime_packs; "
    code += "print(runtime_packs(Path(sys.argv[1]), lock_timeout=None))"
    racers = [
        subprocess.Popen([sys.executable, "-c", code, str(cache)], stdout=subprocess.PIPE)
        for _ in range(4)
    ]
    answers = {racer.communicate()[0].decode().strip() for racer in racers}
    assert all(racer.returncode == 0 for racer in racers)
    assert answers == {str(cache / "runtime-packs")} and not (cache / "packs").exists()
    for name in names:
        assert (cache / "runtime-packs" / name / f"bundle-pack-{name}.exe").read_text() == name


def test_a_refused_rename_keeps_the_old_folder_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows refuses the rename while a program keeps a file in the folder open, and keeps
    refusing (the retries are the Windows tier's): the command goes on without the old packs."""

    def refused(old: Path, new: Path) -> None:
        raise PermissionError(13, "Access is denied")

    monkeypatch.setattr(cache_module.os, "rename", refused)
    cache = tmp_path / "cache"
    compiled(cache / "packs")
    notes: list[str] = []
    assert runtime_packs(cache, notes.append, lock_timeout=None) == cache / "runtime-packs"
    assert (cache / "packs" / PACK).is_dir() and not (cache / "runtime-packs").exists()
    (note,) = notes
    assert note.startswith(f"bundle: kept {cache / 'packs'}, which could not be renamed to ")
    assert "(Access is denied)" in note and "`bundle cache clean --all` removes it" in note
