"""Benchmark: `bundle` on the real 2.6 GB GPU payload, each command beside its yardstick.

    python -m benchmarks.run [--repeat N] [--only P1,P2,...] [--work DIR] [--json FILE]
    python -m benchmarks.run --windows 3.13 --only P1,P2,P3   # CPython for Windows, under Wine

Prepares the real data in the tests' cache ($BUNDLE_TEST_CACHE, else ~/.cache/bundle-tests:
the pinned wheels, fetched by tools/testing/fetch_test_wheels.py when missing), then times whole
processes, N repetitions of each command paired with its yardstick in the same repetition, and
prints the median, min and max, the ratio (median of the paired ratios) next to its target,
and the machine. Exits 1 when a target is missed, 2 when something could not be measured.
Needs x86_64-w64-mingw32-objdump and -dlltool (mingw-w64), unzip and cp, and about 12 GB free
beside the cache (scratch folders are removed after each step). What the targets mean and
what was measured: benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from benchmarks import compression, runtime_pack, windows
from benchmarks.harness import (
    EXE,
    PROFILE,
    PYTHON,
    REPO,
    WINDOWS,
    Data,
    Failed,
    Row,
    Sample,
    bundle,
    bundle_env,
    fresh,
    gpu_args,
    output,
    quiet_disk,
    run,
    warm,
)
from bundler.disk.files import FICLONE
from bundler.errors import BundleError
from bundler.target.profiles import PipSource, UrlSource, load_profile
from tools.testing.fetch_test_wheels import default_cache, dll_folder, pinned_wheels

OBJDUMP = "x86_64-w64-mingw32-objdump"
DLLTOOL = "x86_64-w64-mingw32-dlltool"
# What one hashlib pass over the archives costs in a process of its own: P5's yardstick.
HASH_ONCE = """
import hashlib, sys
for name in sys.argv[1:]:
    digest = hashlib.sha256()
    with open(name, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    print(digest.hexdigest(), name)
"""


# --- the data ---------------------------------------------------------------------------------


def prepare(work: Path) -> Data:
    env = bundle_env()
    # Bytecode, as pip writes it at install: a checkout run with PYTHONDONTWRITEBYTECODE would
    # otherwise compile every module in every process measured.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "bundler")], check=True)
    wheels = default_cache() / "wheels"
    wanted = [source.wheel for source in _pip_sources()]
    if not all((wheels / name).is_file() for name in wanted):
        fetch_wheels = [sys.executable, "-m", "tools.testing.fetch_test_wheels"]
        subprocess.run(fetch_wheels, cwd=REPO, check=True)
    cache = work / "cache"
    pip_env = {**env, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)}
    fetch = bundle("fetch", "--profile", PROFILE, "--source", "pip", "--cache-dir", str(cache))
    if WINDOWS:  # no pip in the embeddable Python's way: the same wheels, by file name
        fetch = bundle(
            "fetch", "--profile", PROFILE, "--mirror", str(wheels), "--cache-dir", str(cache)
        )
    subprocess.run(fetch, env=pip_env, check=True, capture_output=True)
    reference = work / "reference"
    if not (reference / "bundle.lock.json").is_file():
        output(bundle("build", str(EXE), *gpu_args(cache), "--link", "--out", str(reference)))
    store = cache / "blobs" / "sha256"
    blobs = tuple(store / s.sha256 for s in _pip_sources() if (store / s.sha256).is_file())
    return Data(work, cache, reference, blobs)


def _pip_sources() -> list[PipSource]:
    """The pinned wheels of the GPU profile: what the benchmark's cache is made of."""
    artifacts = load_profile(PROFILE).artifacts
    return [s for a in artifacts for s in a.sources if isinstance(s, PipSource)]


def blobs_only(data: Data, cache: Path) -> Path:
    """A cache holding only the verified archives (hard links), as after `cache clean`."""
    fresh(cache)
    store = cache / "blobs" / "sha256"
    store.mkdir(parents=True)
    for blob in data.blobs:
        for path in (blob, blob.with_name(f"{blob.name}.json")):
            if path.is_file():
                os.link(path, store / path.name)
    return cache


# --- the measurements -------------------------------------------------------------------------


def p1_audit(data: Data, repeat: int) -> Row:
    row = Row("P1", "bundle audit of the GPU folder", "<= 0.25x", limit=0.25)
    row.yardstick_name = "objdump -p of its DLLs"
    dlls = sorted(str(path) for path in data.reference.glob("*.dll"))
    warm([Path(dll) for dll in dlls])
    for _ in range(repeat):
        row.command.append(run(bundle("audit", str(data.reference)), bundle_env()))
        row.yardstick.append(_silent([OBJDUMP, "-p", *dlls]))
    return row


def _silent(command: list[str]) -> Sample:
    """A yardstick whose output goes nowhere (a terminal would slow it down)."""
    return run(["sh", "-c", f"{shlex.join(command)} >/dev/null"])


def p2_build(data: Data, repeat: int, link: bool) -> Row:
    flag = ["--link"] if link else []
    row = Row(
        "P2" + (" link" if link else ""),
        f"warm bundle build{' --link' if link else ''} into a new folder",
        "<= 0.05x" if link else "<= 1.15x",
        limit=0.05 if link else 1.15,
    )
    row.yardstick_name = "cp -r of the same files"
    out, copy = data.work / "p2" / "out", data.work / "p2" / "copy"
    warm([path for path in data.reference.rglob("*") if path.is_file()])
    for _ in range(repeat):
        fresh(out)
        fresh(copy)
        quiet_disk()
        build = bundle("build", str(EXE), *gpu_args(data.cache), *flag, "--out", str(out))
        row.command.append(run(build, bundle_env()))
        quiet_disk()
        row.yardstick.append(run(["cp", "-r", str(data.reference), str(copy)]))
    fresh(out)
    fresh(copy)
    return row


def p3_noop(data: Data, repeat: int) -> tuple[Row, Row]:
    out = data.work / "p3" / "out"
    build = bundle("build", str(EXE), *gpu_args(data.cache), "--copy", "--out", str(out), "--json")
    if not (out / "bundle.lock.json").is_file():
        output(build)
    row = Row("P3", "no-op rebuild of a copied bundle", "<= 0.30 s", limit=0.3, unit="s")
    for _ in range(repeat):
        row.command.append(run(build, bundle_env()))
    counters = json.loads(output(build))["counters"]
    if counters["copied"] or counters["linked"] or counters["hashed"]:
        row.note = f"not a no-op: {counters}"
        row.limit = 0.0
    startup = Row("P3 start", "bundle --version (CLI start-up)", "(information)", unit="s")
    for _ in range(repeat):
        startup.command.append(run(bundle("--version"), bundle_env()))
    fresh(out)
    return row, startup


def p4_extract(data: Data, repeat: int) -> Row:
    row = Row("P4", "cold extraction (fetch --offline, archives only)", "<= 0.40x", limit=0.4)
    row.yardstick_name = "unzip of the same members"
    cache, unzipped = data.work / "p4" / "cache", data.work / "p4" / "unzip"
    script = _unzip_script(data, unzipped)
    warm(data.blobs)
    for _ in range(repeat):
        blobs_only(data, cache)
        quiet_disk()
        row.command.append(run(bundle("fetch", *gpu_args(cache)), bundle_env()))
        fresh(unzipped).mkdir(parents=True)
        quiet_disk()
        row.yardstick.append(run(["sh", "-c", script]))
    fresh(cache)
    fresh(unzipped)
    return row


def _unzip_script(data: Data, target: Path) -> str:
    """One unzip per archive, of exactly the members bundle extracted from it (its marker)."""
    lines = []
    for blob in data.blobs:
        marker = json.loads((data.cache / "extracted" / blob.name / ".complete").read_text())
        members = [_unzip_pattern(name) for name in _zip_names(blob, marker["members"])]
        lines.append(shlex.join(["unzip", "-qq", "-o", str(blob), *members, "-d", str(target)]))
    return " && ".join(lines)


def _zip_names(blob: Path, tree_paths: list[str]) -> list[str]:
    wanted = set(tree_paths)
    with zipfile.ZipFile(blob) as archive:
        return [name for name in archive.namelist() if name.replace("\\", "/") in wanted]


def _unzip_pattern(name: str) -> str:
    """unzip reads member names as wildcards: [ is the only one in real names to escape."""
    return name.replace("[", "[[]")


def p5_verify(data: Data, repeat: int) -> Row:
    row = Row("P5", "fetch --offline --verify (re-hash 1.5 GB)", "<= 0.75x", limit=0.75)
    row.yardstick_name = "one hashlib pass, one thread"
    once = [sys.executable, "-c", HASH_ONCE, *(str(blob) for blob in data.blobs)]
    warm(data.blobs)
    for _ in range(repeat):
        row.command.append(run(bundle("fetch", *gpu_args(data.cache), "--verify"), bundle_env()))
        row.yardstick.append(run(once))
    return row


def p6_rss(data: Data, repeat: int) -> Row:
    row = Row("P6", "peak RSS of a cold GPU build", "<= 150 MB", limit=150.0, unit="MB")
    cache, out = data.work / "p6" / "cache", data.work / "p6" / "out"
    for _ in range(repeat):
        blobs_only(data, cache)
        fresh(out)
        build = bundle("build", str(EXE), *gpu_args(cache), "--out", str(out))
        row.command.append(run(build, bundle_env()))
    fresh(cache)
    fresh(out)
    return row


def p7_render(data: Data, repeat: int) -> list[Row]:
    lock = data.reference / "bundle.lock.json"
    out = data.work / "p7"
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    commands = {
        "iss": bundle("render", "iss", "--lock", str(lock), "--out", str(out / "setup.iss")),
        "postbuild": bundle("render", "postbuild", "--lock", str(lock), "--out", str(out)),
        "msbuild": _msbuild_command(data),
    }
    for name, command in commands.items():
        what = f"bundle render {name}" if name != "msbuild" else "bundle msbuild (unchanged)"
        row = Row(f"P7 {name}", what, "<= 0.30 s", limit=0.3, unit="s")
        output(command)  # the first run lays out (msbuild) or warms up
        for _ in range(repeat):
            row.command.append(run(command, bundle_env()))
        rows.append(row)
    fresh(out)
    return rows


# P8: LOCKS acquisitions and releases of bundle's lock (filelock) in one process, beside the same
# count of bare flock(2) calls on one open file: what each lock costs above the system call.
LOCKS = 2000
LOCK_LOOP = """
import sys
from pathlib import Path
folder, mode = Path(sys.argv[1]), sys.argv[2]
if mode == "flock":
    import fcntl, os
    fd = os.open(folder / "bare.lock", os.O_RDWR | os.O_CREAT)
    for _ in range({n}):
        fcntl.flock(fd, fcntl.LOCK_EX)
        fcntl.flock(fd, fcntl.LOCK_UN)
else:
    from bundler.disk.process_locks import file_lock
    for _ in range({n}):
        with file_lock(folder / "ours.lock", "benchmark", limit=None, remove=mode == "remove"):
            pass
"""


def p8_locks(data: Data, repeat: int) -> list[Row]:
    folder = data.work / "p8"
    folder.mkdir(parents=True, exist_ok=True)
    loop = [*PYTHON, "-c", LOCK_LOOP.format(n=LOCKS), str(folder)]
    rows = []
    for mode, what in (("keep", "cache lock"), ("remove", "output folder lock (removed)")):
        row = Row(f"P8 {mode}", f"{LOCKS} x {what}", "(information)")
        row.yardstick_name = f"{LOCKS} x flock(2)"
        for _ in range(repeat):
            row.command.append(run([*loop, mode]))
            row.yardstick.append(run([*loop, "flock"]))
        rows.append(row)
    fresh(folder)
    return rows


def _msbuild_command(data: Data) -> list[str]:
    """`bundle msbuild` needs ORT's release zip, unreachable here: the tests' replica (the real
    DLLs in the zip's layout, tests/support/replica.py) stands in, pinned by a copy of the
    profile."""
    from tests.support.replica import build_replica

    folder = data.work / "replica"
    recorded = folder / "replica.json"
    if recorded.is_file():
        pins = json.loads(recorded.read_text())
    else:
        wheel = next(w for w, s in pinned_wheels().items() if s.package == "onnxruntime-gpu")
        dlls = dll_folder(default_cache() / "extracted" / wheel.removesuffix(".whl"))
        replica = build_replica(dlls, folder)
        pins = {"sha256": replica.sha256, "sha512": replica.sha512}
        recorded.write_text(json.dumps(pins))
    profile = _replica_profile(folder / "replica.toml", pins)
    return bundle(
        "msbuild", "--profile", str(profile), "--cache-dir", str(data.cache), "--offline",
        "--mirror", str(folder), "--out", str(data.work / "p7" / "msbuild"), "--link",
    )  # fmt: skip


def _replica_profile(path: Path, pins: dict[str, str]) -> Path:
    """The GPU profile with the release zip's pins replaced by the replica's."""
    text = (REPO / "manifests" / "profiles" / f"{PROFILE}.toml").read_text()
    zips = [
        source
        for artifact in load_profile(PROFILE).artifacts
        for source in artifact.sources
        if isinstance(source, UrlSource) and source.sdk
    ]
    (zip_source,) = zips
    text = text.replace(zip_source.sha256, pins["sha256"])
    if zip_source.sha512:
        text = text.replace(zip_source.sha512, pins["sha512"])
    path.write_text(text.replace(f'name = "{PROFILE}"', 'name = "replica-gpu"'))
    return path


# --- the report -------------------------------------------------------------------------------


def machine(work: Path) -> dict[str, str]:
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    kib = next((int(line.split()[1]) for line in meminfo if line.startswith("MemTotal:")), 0)
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    models = [line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")]
    memory, cpu = f"{kib / 1024**2:.1f} GiB", (models or [platform.processor() or "?"])[0]
    return {
        "cores": str(os.cpu_count()),
        "cpu": cpu,
        "memory": memory,
        "file system": f"{_file_system(work)} ({'reflinks' if _reflinks(work) else 'no reflinks'})",
        "kernel": platform.release(),
        "python": platform.python_version(),
        "libraries": _versions(),
        "load average (1 min) at start": f"{os.getloadavg()[0]:.2f}",
    }


def _versions() -> str:
    """The libraries that decide start-up (typer) and inflating (isal) where bundle runs."""
    probe = (
        "from importlib.metadata import version as v, PackageNotFoundError as E\n"
        "def f(n):\n    try: return n + ' ' + v(n)\n    except E: return n + ' absent'\n"
        "print(', '.join(map(f, ['typer', 'isal', 'pefile'])))"
    )
    done = subprocess.run([*PYTHON, "-c", probe], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _file_system(path: Path) -> str:
    """The type of the mount holding `path` (the longest mount point that prefixes it)."""
    best, kind = "", "?"
    target = str(path.resolve())
    with open("/proc/mounts") as mounts:
        for line in mounts:
            _, point, fstype, *_ = line.split()
            inside = target == point or target.startswith(point.rstrip("/") + "/")
            if inside and len(point) > len(best):
                best, kind = point, fstype
    return kind


def _reflinks(folder: Path) -> bool:
    import fcntl

    with tempfile.TemporaryDirectory(dir=folder) as scratch:
        source, copy = Path(scratch) / "a", Path(scratch) / "b"
        source.write_bytes(b"x" * 4096)
        with source.open("rb") as reader, copy.open("wb") as writer:
            try:
                fcntl.ioctl(writer.fileno(), FICLONE, reader.fileno())
                return True
            except OSError:
                return False


def report(rows: Sequence[Row], facts: dict[str, str]) -> str:
    lines = ["| target | command | median | min | max | yardstick (median) | ratio | limit | |"]
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        lines.append(_line(row))
    lines.append("")
    lines += [f"- {name}: {value}" for name, value in facts.items()]
    return "\n".join(lines)


def _line(row: Row) -> str:
    if row.unit == "MB":
        values = [sample.rss_mb for sample in row.command]
        shown = [f"{statistics.median(values):.0f} MB", f"{min(values):.0f}", f"{max(values):.0f}"]
    else:
        walls = [sample.wall for sample in row.command]
        shown = [f"{statistics.median(walls):.2f} s", f"{min(walls):.2f}", f"{max(walls):.2f}"]
    yard, ratio = "", ""
    if row.yardstick:
        median = statistics.median(sample.wall for sample in row.yardstick)
        yard = f"{row.yardstick_name}: {median:.2f} s"
        ratio = f"{row.value():.2f}x"
    verdict = {True: "met", False: "MISSED", None: ""}[row.passed()]
    note = f" ({row.note})" if row.note else ""
    cells = [row.key, row.what, *shown, yard, ratio, row.target, verdict + note]
    return "| " + " | ".join(cells) + " |"


STEPS: dict[str, Callable[[Data, int], list[Row]]] = {
    "P1": lambda data, n: [p1_audit(data, n)],
    "P2": lambda data, n: [p2_build(data, n, link=False), p2_build(data, n, link=True)],
    "P3": lambda data, n: list(p3_noop(data, n)),
    "P4": lambda data, n: [p4_extract(data, n)],
    "P5": lambda data, n: [p5_verify(data, n)],
    "P6": lambda data, n: [p6_rss(data, min(n, 2))],
    "P7": lambda data, n: p7_render(data, n),
    "P8": lambda data, n: p8_locks(data, n),
    "P9": lambda data, n: compression.p9_iscc(data, n),
    "P10": lambda data, n: compression.p10_archive(data, n),
    "P12": lambda data, n: runtime_pack.p12_second_release(data, n),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="repetitions of each (default 5)")
    parser.add_argument("--only", default=",".join(STEPS), help="e.g. P2,P3 (default: all)")
    parser.add_argument("--work", type=Path, default=default_cache() / "bench", help="scratch")
    parser.add_argument("--json", type=Path, help="also write every sample here")
    parser.add_argument("--python", type=Path, help="run bundle with this interpreter")
    parser.add_argument(
        "--windows", metavar="3.11|3.13", help="run bundle with CPython for Windows, under Wine"
    )
    args = parser.parse_args()
    if args.python:
        PYTHON[:] = [str(args.python)]
    if args.windows:
        args.work = args.work.with_name(f"{args.work.name}-windows-{args.windows}")
        args.work.mkdir(parents=True, exist_ok=True)
        PYTHON[:], environment = windows.interpreter(args.windows, args.work)
        WINDOWS.update(environment)
    missing = [tool for tool in (OBJDUMP, DLLTOOL, "unzip", "cp") if shutil.which(tool) is None]
    if missing:
        sys.exit(f"missing {', '.join(missing)}: apt-get install mingw-w64 unzip")
    args.work.mkdir(parents=True, exist_ok=True)
    facts = machine(args.work)
    if args.windows:
        facts.update(windows.overhead(PYTHON, bundle_env(), args.repeat))
    print("preparing the GPU data (first run: fetch and extract 1.5 GB) ...", flush=True)
    rows: list[Row] = []
    step = "preparing"
    try:
        data = prepare(args.work)
        for step in [key.strip().upper() for key in args.only.split(",")]:
            print(f"measuring {step} ({args.repeat} repetitions) ...", flush=True)
            rows += STEPS[step](data, args.repeat)
    except (Failed, BundleError, subprocess.CalledProcessError) as failure:
        print(f"{step}: could not be measured: {failure}", file=sys.stderr)
        sys.exit(2)
    if WINDOWS:  # the targets are for a native run; under Wine the rows are information
        for row in rows:
            row.limit, row.note = None, "under Wine: information"
    facts["load average (1 min) at end"] = f"{os.getloadavg()[0]:.2f}"
    print(report(rows, facts))
    if args.json:
        samples = {row.key: asdict(row) for row in rows}
        args.json.write_text(json.dumps({"machine": facts, "rows": samples}, indent=1))
    sys.exit(1 if any(row.passed() is False for row in rows) else 0)


if __name__ == "__main__":
    main()
