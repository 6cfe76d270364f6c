"""Act layer: put the Plan's files into the output folder, atomically and idempotently.

Decide first (`plan_deployment`, reads only), then apply (`apply`). Rules:
- a target already equal to its source (same inode, or same size and mtime, which copying
  preserves) is skipped: an unchanged re-build copies nothing and hashes nothing;
- every write goes to a temporary name in the same folder and is renamed into place, so a killed
  build never leaves a partial DLL under its final name (leftovers are removed by the next run);
- a different file that bundle did not write (not in the previous lock file) is never
  overwritten without --force;
- --clean removes the files an earlier build wrote (from its lock), and nothing else.

Copying costs what the kernel's copy costs (benchmarks/README.md, P2): a clone where the
filesystem shares blocks (FICLONE on Btrfs, XFS, bcachefs; block cloning on ReFS and Dev Drive
volumes, bundler.disk.files), else `copy_file_range` / `sendfile` as shutil.copyfile uses them, in
chunks so the progress bar moves, several files at once. Counters say which was used. Like cp,
xcopy and MSBuild's Copy, nothing is fsynced: the rename protects against a killed build, the
page cache writes the bytes back.
"""

from __future__ import annotations

import filecmp
import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from bundler.binary.pe import format_version, read_pe
from bundler.disk.files import (
    case_collisions,
    copy_file,
    remove,
    replace,
    too_long,
    wait_until_free,
)
from bundler.disk.process_locks import file_lock
from bundler.errors import ConflictError, FileInUseError, InputFileError, OutputError
from bundler.progress_meter import ProgressCallback, ProgressMeter
from bundler.reporter import Note
from bundler.ship.output_folder import Counters, Placement, same_file

TEMP_SUFFIX = ".bundle-tmp"
BUILD_LOCK = ".bundle-build.lock"  # held by the build writing the folder (output_lock)
# Files copied at once: a page-cache copy is CPU work in the kernel, so two files on two cores
# take about half the time of one after the other (measured: benchmarks/README.md, P2).
COPY_WORKERS = max(2, min(4, os.cpu_count() or 2))


@dataclass(frozen=True)
class Step:
    placement: Placement
    action: str  # "copy" | "link" | "skip" | "touch" (same bytes, other mtime) | "replace"
    reason: str = ""


@dataclass(frozen=True)
class Deployment:
    out: Path
    steps: tuple[Step, ...]
    stale: tuple[str, ...] = ()  # written by an earlier build, no longer in the plan
    removals: tuple[str, ...] = ()  # --clean: removed before copying

    @property
    def bytes_to_write(self) -> int:
        return sum(s.placement.size for s in self.steps if s.action not in ("skip", "touch"))


def same_content(source: Path, target: Path) -> bool:
    """Byte comparison, for a same-sized file the quick check could not settle (e.g. a copy
    made by hand): equal files are adopted, not reported as conflicts."""
    if source.stat().st_size != target.stat().st_size:
        return False
    return filecmp.cmp(source, target, shallow=False)


def plan_deployment(
    placements: Sequence[Placement],
    out: Path,
    previous: Mapping[str, int],
    link: bool = False,
    force: bool = False,
    clean: bool = False,
) -> Deployment:
    """`previous`: name -> size of the files the earlier build's lock file lists."""
    _refuse_case_collisions(placements)
    removals = tuple(sorted(previous)) if clean else ()
    steps = [_step(p, out, previous, link, force, clean) for p in placements]
    wanted = {p.name.lower() for p in placements}
    stale = tuple(name for name in sorted(previous) if name.lower() not in wanted)
    return Deployment(out, tuple(steps), () if clean else stale, removals)


def _refuse_case_collisions(placements: Sequence[Placement]) -> None:
    """Two files whose names differ only by case are one file on Windows: the second would
    silently replace the first there, so the bundle is refused everywhere."""
    pairs = case_collisions(p.name for p in placements)
    if pairs:
        sources = {p.name: p.source for p in placements}
        first, second = pairs[0]
        raise ConflictError(
            f"{first} ({sources[first]}) and {second} ({sources[second]}) differ only by case: "
            "on Windows they are one file, and one would overwrite the other. Rename one of "
            "them (or drop one from the profile or bundle.toml)."
        )


def _step(
    placement: Placement,
    out: Path,
    previous: Mapping[str, int],
    link: bool,
    force: bool,
    clean: bool,
) -> Step:
    target = out / placement.name
    fresh = "link" if link else "copy"
    if not target.exists():
        return Step(placement, fresh)
    if placement.name in previous and clean:
        return Step(placement, fresh, "rebuilt by --clean")
    if same_file(placement.source, target):
        return Step(placement, "skip", "already identical")
    if same_content(placement.source, target):
        return Step(placement, "touch", "same content, other time stamp")
    if placement.name in previous and previous[placement.name] == target.stat().st_size:
        return Step(placement, "replace", "written by an earlier build")
    if force:
        return Step(placement, "replace", "--force")
    raise ConflictError(
        f"{target}: a different file is already there ({_describe(target)}); bundle would "
        f"put {_describe(placement.source)} from {placement.source}. Remove it, or pass --force."
    )


def _describe(path: Path) -> str:
    size = f"{path.stat().st_size:,} bytes"
    try:
        version = read_pe(path).file_version
    except InputFileError:
        return f"not a PE file, {size}"
    return f"version {format_version(version)}, {size}" if version else f"no version, {size}"


def apply(
    deployment: Deployment, counters: Counters, progress: ProgressCallback | None = None
) -> None:
    """Carry out the steps; `progress` hears (bytes placed, bytes to place) as bytes land.

    A write that fails (read-only folder, full disk) is an OutputError, and the files this
    call created where nothing was before are removed again: a failed build leaves the folder
    as it found it, not with half its DLLs (files it replaced cannot be brought back, but each
    is whole, old or new, never partial)."""
    out = deployment.out
    existed = out.exists()
    created = [
        out / step.placement.name
        for step in deployment.steps
        if step.action in ("copy", "link") and not (out / step.placement.name).exists()
    ]
    try:
        _apply(deployment, counters, progress)
    except FileInUseError:
        _remove_created(out, created, existed)
        raise
    except OSError as exc:
        _remove_created(out, created, existed)
        name = f" {Path(exc.filename).name}" if exc.filename else ""
        fix = too_long(exc.filename or out, exc) or (
            "Check free space and permissions there, or pass --out DIR."
        )
        raise OutputError(
            f"{out}: cannot write{name} there ({exc.strerror or exc}); the files this build "
            f"had added were removed. {fix}"
        ) from exc


def _remove_created(out: Path, created: Sequence[Path], existed: bool) -> None:
    """Undo a failed apply: the new files, then the folders that held only them."""
    for path in created:
        path.unlink(missing_ok=True)
    folders = {parent for path in created for parent in path.parents if out in parent.parents}
    for folder in sorted(folders, key=lambda folder: len(folder.parts), reverse=True):
        _rmdir_if_empty(folder)
    if not existed:
        _rmdir_if_empty(out)


def _rmdir_if_empty(folder: Path) -> None:
    with suppress(OSError):  # not empty (files of others), or already gone
        folder.rmdir()


def _apply(
    deployment: Deployment, counters: Counters, progress: ProgressCallback | None = None
) -> None:
    out = deployment.out
    out.mkdir(parents=True, exist_ok=True)
    remove_leftovers(out)
    wait_until_free(_changed_files(deployment))  # a held file stops the build before any change
    for name in deployment.removals:
        if (out / name).is_file():
            remove(out / name)
            counters.removed += 1
    writes = []
    for step in deployment.steps:
        if step.action in ("skip", "touch"):
            counters.skipped += 1
            if step.action == "touch":  # later builds then pass the quick check
                stat = step.placement.source.stat()
                os.utime(out / step.placement.name, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        else:
            writes.append(step)
    _place_all(writes, out, counters, ProgressMeter(deployment.bytes_to_write, progress))


def _changed_files(deployment: Deployment) -> list[Path]:
    """The existing files this deployment replaces or removes."""
    out = deployment.out
    names = [*deployment.removals]
    names += [s.placement.name for s in deployment.steps if s.action not in ("skip", "touch")]
    return [out / name for name in dict.fromkeys(names) if (out / name).is_file()]


def _place_all(steps: Sequence[Step], out: Path, counters: Counters, meter: ProgressMeter) -> None:
    """Largest files first on COPY_WORKERS threads; the first error is raised after the
    files already being written are finished or removed."""
    ordered = sorted(steps, key=lambda step: step.placement.size, reverse=True)
    with ThreadPoolExecutor(max_workers=COPY_WORKERS, thread_name_prefix="bundle-copy") as pool:
        futures = [pool.submit(_place, step, out, meter) for step in ordered]
        try:
            for future in futures:
                if future.exception() is not None:
                    break
        finally:  # after an error or Ctrl-C, files not yet started are not started
            for other in futures:
                other.cancel()
    for step, future in zip(ordered, futures, strict=True):
        if future.cancelled():
            continue
        _count(counters, step, future.result())


def _count(counters: Counters, step: Step, how: str) -> None:
    if how == "link":
        counters.linked += 1
        return
    if step.action == "link":
        counters.link_fallbacks += 1
    if how == "clone":
        counters.cloned += 1
    else:
        counters.copied += 1
        counters.bytes_written += step.placement.size


def _place(step: Step, out: Path, meter: ProgressMeter) -> str:
    """Write one file under a temporary name, then rename it into place. Says how: "link",
    "clone" or "copy"."""
    target = out / step.placement.name
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}{TEMP_SUFFIX}")
    remove(temp)
    try:
        if step.action == "link" and _try_link(step.placement.source, temp):
            meter.add(step.placement.size)
            how = "link"
        else:
            how = copy_file(step.placement.source, temp, meter.add)
        replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return how


def _try_link(source: Path, temp: Path) -> bool:
    try:
        os.link(source, temp)
        return True
    except OSError:  # another filesystem, or links not supported: copy instead
        return False


@contextmanager
def output_lock(out: Path, note: Note, lock_timeout: float | None) -> Iterator[None]:
    """One build at a time per output folder, across processes: two builds into one folder
    would otherwise plan against the same old lock file and overwrite each other's temporary
    files. A second build waits, then plans against what the first one wrote. The lock file
    (BUILD_LOCK) is removed on release; a folder this call created and nothing filled is
    removed again, so a build that fails leaves no trace. `lock_timeout`: how long a second
    build waits (the command's $BUNDLE_LOCK_TIMEOUT; None: as long as it takes)."""
    existed = out.exists()
    try:
        with ExitStack() as held:
            try:
                out.mkdir(parents=True, exist_ok=True)
                building = f"the build into {out}"
                lock = file_lock(out / BUILD_LOCK, building, note, limit=lock_timeout, remove=True)
                held.enter_context(lock)
            except OSError as exc:
                fix = too_long(out, exc) or "Check the permissions, or pass --out DIR."
                raise OutputError(
                    f"{out}: cannot write there ({exc.strerror or exc}). {fix}"
                ) from exc
            yield
    finally:
        if not existed:
            _rmdir_if_empty(out)


def remove_leftovers(out: Path) -> list[Path]:
    """Temporary files of a build that was killed part way."""
    leftovers = [p for p in out.rglob(f".*{TEMP_SUFFIX}") if p.is_file()]
    for path in leftovers:
        remove(path)
    return leftovers
