"""Act layer: put the Plan's files into the output folder, atomically and idempotently.

Decide first (`plan_deployment`, reads only), then apply (`apply`). Rules:
- a target already equal to its source (same inode, or same size and mtime, which copying
  preserves) is skipped: an unchanged re-build copies nothing and hashes nothing;
- every write goes to a temporary name in the same folder and is renamed into place, so a killed
  build never leaves a partial DLL under its final name (leftovers are removed by the next run);
- a different file that bundle did not write (not in the previous lock file) is never
  overwritten without --force;
- --clean removes the files an earlier build wrote (from its lock), and nothing else.
"""

from __future__ import annotations

import filecmp
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bundler.download import ProgressCallback
from bundler.errors import ConflictError, InputFileError
from bundler.pe import format_version, read_pe

TEMP_SUFFIX = ".bundle-tmp"


@dataclass(frozen=True)
class Placement:
    """One file that must exist in the output folder."""

    name: str  # file name, relative to the output folder (posix, may include licenses/...)
    source: Path
    size: int


@dataclass(frozen=True)
class Step:
    placement: Placement
    action: str  # "copy" | "link" | "skip" | "touch" (same bytes, other mtime) | "replace"
    reason: str = ""


@dataclass
class Counters:
    copied: int = 0
    linked: int = 0
    skipped: int = 0
    removed: int = 0
    hashed: int = 0
    bytes_written: int = 0


@dataclass(frozen=True)
class Deployment:
    out: Path
    steps: tuple[Step, ...]
    stale: tuple[str, ...] = ()  # written by an earlier build, no longer in the plan
    removals: tuple[str, ...] = ()  # --clean: removed before copying

    @property
    def bytes_to_write(self) -> int:
        return sum(s.placement.size for s in self.steps if s.action not in ("skip", "touch"))


def same_file(source: Path, target: Path) -> bool:
    """The quick check (as rsync's): same inode, or same size and modification time."""
    try:
        a, b = source.stat(), target.stat()
    except OSError:
        return False
    if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
        return True
    return a.st_size == b.st_size and a.st_mtime_ns == b.st_mtime_ns


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
    removals = tuple(sorted(previous)) if clean else ()
    steps = [_step(p, out, previous, link, force, clean) for p in placements]
    wanted = {p.name.lower() for p in placements}
    stale = tuple(name for name in sorted(previous) if name.lower() not in wanted)
    return Deployment(out, tuple(steps), () if clean else stale, removals)


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
    """Carry out the steps; `progress` hears (bytes placed, bytes to place) after each file."""
    out = deployment.out
    total = deployment.bytes_to_write
    done = 0
    out.mkdir(parents=True, exist_ok=True)
    remove_leftovers(out)
    for name in deployment.removals:
        if (out / name).is_file():
            (out / name).unlink()
            counters.removed += 1
    for step in deployment.steps:
        if step.action in ("skip", "touch"):
            counters.skipped += 1
            if step.action == "touch":  # later builds then pass the quick check
                stat = step.placement.source.stat()
                os.utime(out / step.placement.name, ns=(stat.st_atime_ns, stat.st_mtime_ns))
            continue
        _place(step, out, counters)
        done += step.placement.size
        if progress is not None:
            progress(done, total)


def _place(step: Step, out: Path, counters: Counters) -> None:
    target = out / step.placement.name
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}{TEMP_SUFFIX}")
    temp.unlink(missing_ok=True)
    if step.action == "link" and _try_link(step.placement.source, temp):
        counters.linked += 1
    else:
        _copy(step.placement.source, temp)
        counters.copied += 1
        counters.bytes_written += step.placement.size
    os.replace(temp, target)


def _try_link(source: Path, temp: Path) -> bool:
    try:
        os.link(source, temp)
        return True
    except OSError:  # another filesystem, or links not supported: copy instead
        return False


def _copy(source: Path, temp: Path) -> None:
    with source.open("rb") as reader, temp.open("wb") as writer:
        shutil.copyfileobj(reader, writer, 1 << 20)
        writer.flush()
        os.fsync(writer.fileno())
    stat = source.stat()
    os.utime(temp, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # keeps the quick check valid


def remove_leftovers(out: Path) -> list[Path]:
    """Temporary files of a build that was killed part way."""
    leftovers = [p for p in out.rglob(f".*{TEMP_SUFFIX}") if p.is_file()]
    for path in leftovers:
        path.unlink()
    return leftovers
