"""Act layer: run one program of the load proof with a time limit, and on timeout kill it with
everything it started.

Output goes to temporary files, not pipes: a process the run starts (Wine's services) may keep
a pipe open long after the run itself ended.

The whole tree, on each system:
- Linux: the program starts a session of its own (start_new_session), and the process group
  is killed (os.killpg with SIGKILL).
- Windows: the program is put into a job object right after it starts, and the job is
  terminated (TerminateJobObject): every process in it, children and grandchildren included,
  since a job's processes' children join the job. The job is created with
  JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, so if bundle itself dies the tree dies with it. Between
  CreateProcess and AssignProcessToJobObject the program runs a few instructions outside the
  job; a child started in that window would escape (documented in docs/windows.md). Nested
  jobs need Windows 8 or newer; where the job cannot be made, only the program is killed.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Outcome:
    exit_code: int | None  # None: stopped at the time limit
    stdout: str
    stderr: str


class _Tree(Protocol):
    def adopt(self, process: subprocess.Popen[bytes]) -> None: ...
    def kill(self, process: subprocess.Popen[bytes]) -> None: ...
    def close(self) -> None: ...


def run(command: Sequence[str], cwd: Path | None, env: dict[str, str], timeout: float) -> Outcome:
    """Run `command`; on timeout its whole process tree is killed and exit_code is None."""
    tree = _windows_job() if sys.platform == "win32" else _ProcessGroup()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            process = subprocess.Popen(
                list(command),
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=sys.platform != "win32",
            )
            tree.adopt(process)
            try:
                code: int | None = process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                tree.kill(process)
                process.wait()
                code = None
        finally:
            tree.close()
        out.seek(0)
        err.seek(0)
        return Outcome(code, _text(out.read()), _text(err.read()))


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


class _ProcessGroup:
    """POSIX: the program leads a new session; its group is the tree."""

    def adopt(self, process: subprocess.Popen[bytes]) -> None:
        del process

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        import signal

        with contextlib.suppress(ProcessLookupError):  # the group is gone already
            os.killpg(process.pid, signal.SIGKILL)

    def close(self) -> None:
        pass


class _ProgramOnly:
    """Where no job object could be made: the program alone."""

    def adopt(self, process: subprocess.Popen[bytes]) -> None:
        del process

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        process.kill()

    def close(self) -> None:
        pass


def _windows_job() -> _Tree:
    if sys.platform != "win32":  # for mypy: the module below exists on Windows alone
        return _ProgramOnly()
    from bundler.audit import winjob

    job = winjob.Job.create()
    return job if job is not None else _ProgramOnly()
