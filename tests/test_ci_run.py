"""The CI entry point keeps measuring itself (issue 38): `.ci/run` prints the wall time and the
bytes written of each of its sections and of the whole run, and its last command is the README's
test command. The budget itself is a measurement (docs/ci.md, "Where the time goes"), not a
timed test: these tests check that the measurement is there and reads right."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import REPO

RUN = REPO / ".ci" / "run"
PHASES = REPO / ".ci" / "phases.sh"
posix = pytest.mark.posix_only(reason="runs bash, which CPython for Windows does not have")


def test_every_section_of_ci_run_is_a_timed_phase() -> None:
    text = RUN.read_text(encoding="utf-8")
    assert re.search(r"^source \.ci/phases\.sh$", text, re.MULTILINE), "phases.sh not sourced"
    assert not re.search(r"^\s*echo \"== ", text, re.MULTILINE), "an untimed section header"
    phases = re.findall(r'^phase "([^"]+)"$', text, re.MULTILINE)
    assert len(phases) >= 5 and phases[-1].startswith("tests"), phases
    assert "--durations=30" in (REPO / "pyproject.toml").read_text(encoding="utf-8")


def test_the_last_command_of_ci_run_is_the_readmes_test_command() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, re.DOTALL)
    assert len(blocks) >= 2, "README.md no longer opens with its two commands"
    commands = [line for line in RUN.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert commands[-1] in {blocks[1], blocks[1].replace("python ", "python3 ", 1)}


def run_phases(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "ci.sh"
    script.write_text(f"set -euo pipefail\nsource {PHASES.as_posix()}\n{body}\n")
    return subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)},
    )


@posix
def test_each_phase_and_the_total_are_printed_with_time_and_bytes(tmp_path: Path) -> None:
    done = run_phases(
        tmp_path,
        f'phase "first step"\nhead -c 4096 /dev/zero > {tmp_path.as_posix()}/data; sync\n'
        'phase "second step"\nsleep 1',
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "== first step"
    timed = re.compile(r"^-- phase time: (.+): (\d+):(\d\d), (\d+\.\d\d) GB written$")
    closed = [match.group(1) for line in lines if (match := timed.match(line))]
    assert closed == ["first step", "second step"], done.stdout
    table = lines[lines.index("== phase times (exit status 0)") + 1 :]
    row = re.compile(r"^\s*(\d+) s\s+(\d+\.\d\d) GB\s+(.+)$")
    rows = [match.groups() for line in table if (match := row.match(line))]
    assert [name for _, _, name in rows] == ["first step", "second step", "total"], table
    seconds = {name: int(time) for time, _, name in rows}
    assert seconds["second step"] >= 1 and seconds["total"] >= seconds["second step"]
    assert re.search(r"^free disk at .*: \d+ GB at the start, lowest \d+ GB", done.stdout, re.M)


@posix
def test_a_failing_run_still_prints_its_table_and_keeps_its_status(tmp_path: Path) -> None:
    done = run_phases(tmp_path, 'phase "doomed"\nfalse\nphase "never"')
    assert done.returncode == 1
    assert "== phase times (exit status 1)" in done.stdout
    assert "never" not in done.stdout.split("== phase times")[1]
    assert re.search(r"^\s*\d+ s\s+\d+\.\d\d GB\s+doomed$", done.stdout, re.MULTILINE)
