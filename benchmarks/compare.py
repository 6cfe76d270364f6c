"""Before and after: the quick commands of benchmarks/run.py (P1, P3, P7) from this checkout
against the same commands from another revision, interleaved in every repetition.

    python -m benchmarks.compare --base 958f878 --repeat 15

A refactoring promises "every command within +3 %" (issue 30). Two runs of run.py one after the
other cannot show 3 %: a change of load between them moves one side only. Here every repetition
runs the base's command and this checkout's, in alternating order (the second of two runs in a
row was measured up to 6 % slower), on the same data (run.py's GPU cache and reference folder),
and the change is the ratio of the two medians. The base is a temporary git worktree at REV
(removed at the end), run with its own modules first on PYTHONPATH and compiled to bytecode like
this checkout. Exits 1 when a command is more than --limit percent slower.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.harness import EXE, REPO, Data, bundle, bundle_env, gpu_args, output, run
from benchmarks.run import _msbuild_command, prepare
from tools.testing.fetch_test_wheels import default_cache


def commands(data: Data, side: str) -> dict[str, list[str]]:
    """What each side runs; outputs apart, so one side's files never make the other's no-op."""
    out = data.work / "compare" / side
    lock = data.reference / "bundle.lock.json"
    return {
        "P1 bundle audit of the GPU folder": bundle("audit", str(data.reference)),
        "P3 no-op rebuild": bundle(
            "build", str(EXE), *gpu_args(data.cache), "--copy", "--out", str(out / "p3"), "--json"
        ),
        "P3 start: bundle --version": bundle("--version"),
        "P7 bundle render iss": bundle(
            "render", "iss", "--lock", str(lock), "--out", str(out / "setup.iss")
        ),
        "P7 bundle render postbuild": bundle(
            "render", "postbuild", "--lock", str(lock), "--out", str(out)
        ),
        "P7 bundle msbuild (unchanged)": _out(_msbuild_command(data), out / "msbuild"),
    }


def _out(command: list[str], folder: Path) -> list[str]:
    """`command` with its --out value replaced."""
    at = command.index("--out") + 1
    return [*command[:at], str(folder), *command[at + 1 :]]


def side_env(tree: Path) -> dict[str, str]:
    return {**bundle_env(), "PYTHONPATH": str(tree)}


def compare(data: Data, base: Path, repeat: int) -> list[tuple[str, float, float]]:
    trees = {"base": base, "this": REPO}
    envs = {side: side_env(tree) for side, tree in trees.items()}
    plans = {side: commands(data, side) for side in trees}
    for side, plan in plans.items():  # lay out (the no-op and msbuild need a first run)
        for command in plan.values():
            _output_in(command, envs[side])
    rows = []
    for name in plans["this"]:
        walls: dict[str, list[float]] = {"base": [], "this": []}
        for turn in range(repeat):  # ABBA: neither side always runs first
            for side in ("base", "this") if turn % 2 == 0 else ("this", "base"):
                walls[side].append(run(plans[side][name], envs[side]).wall)
        rows.append((name, statistics.median(walls["base"]), statistics.median(walls["this"])))
    return rows


def _output_in(command: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()[-400:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the revision to compare with (git)")
    parser.add_argument("--repeat", type=int, default=15, help="repetitions (default 15)")
    parser.add_argument("--limit", type=float, default=3.0, help="percent slower allowed")
    parser.add_argument("--work", type=Path, default=default_cache() / "bench", help="scratch")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    print("preparing the GPU data (benchmarks/run.py's) ...", flush=True)
    data = prepare(args.work)
    output(bundle("--version"))
    with tempfile.TemporaryDirectory(prefix="compare-", dir=args.work) as scratch:
        base = Path(scratch) / "base"
        git = ["git", "-C", str(REPO)]
        subprocess.run([*git, "worktree", "add", "--detach", str(base), args.base], check=True)
        try:
            subprocess.run(
                [sys.executable, "-m", "compileall", "-q", str(base / "bundler")], check=True
            )
            rows = compare(data, base, args.repeat)
        finally:
            subprocess.run([*git, "worktree", "remove", "--force", str(base)], check=True)
    print(f"| command | {args.base} (median) | this checkout (median) | change | |")
    print("|---|---|---|---|---|")
    slower = False
    for name, before, after in rows:
        change = 100 * (after / before - 1)
        over = change > args.limit
        slower |= over
        verdict = f"OVER +{args.limit:g} %" if over else "ok"
        print(f"| {name} | {before:.3f} s | {after:.3f} s | {change:+.1f} % | {verdict} |")
    print(f"\n{args.repeat} interleaved repetitions; load average (1 min) {os.getloadavg()[0]:.2f}")
    sys.exit(1 if slower else 0)


if __name__ == "__main__":
    main()
