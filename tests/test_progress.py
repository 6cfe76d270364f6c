"""Progress output: plain lines in logs (no TTY), a redrawn bar on a terminal."""

from __future__ import annotations

import io

from bundler.cli.progress import ProgressBars


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_log_lines_every_ten_percent() -> None:
    out = io.StringIO()
    report = ProgressBars(out)("cudnn.whl", 1000)
    assert report is not None
    for done in range(0, 1001, 25):
        report(done, 1000)
    lines = out.getvalue().splitlines()
    assert [line.split(": ")[1].split("%")[0] for line in lines] == [
        "0", "10", "20", "30", "40", "50", "60", "70", "80", "90", "100",
    ]  # fmt: skip
    assert lines[-1] == "cudnn.whl: 100% (0.0 MB of 0.0 MB)"


def test_unknown_size_prints_a_line_per_64_mb() -> None:
    out = io.StringIO()
    report = ProgressBars(out)("stream", None)
    assert report is not None
    for done in range(0, 200_000_001, 1_000_000):
        report(done, None)
    assert out.getvalue().splitlines() == [
        "stream: 0.0 MB",
        "stream: 64.0 MB",
        "stream: 128.0 MB",
        "stream: 192.0 MB",
    ]


def test_terminal_bar_redraws_one_line_and_ends_it() -> None:
    out = Terminal()
    report = ProgressBars(out)("ort.zip", 2_000_000)
    assert report is not None
    report(0, 2_000_000)
    report(2_000_000, 2_000_000)
    text = out.getvalue()
    assert text.count("\n") == 1  # one line, redrawn in place, ended once
    assert "\r" in text and "ort.zip" in text and "2.0/2.0 MB" in text  # rich's bar


def test_terminal_bar_without_a_size_shows_the_bytes() -> None:
    out = Terminal()
    report = ProgressBars(out)("stream", None)
    assert report is not None
    report(3_000_000, None)
    report(5_000_000, 5_000_000)
    assert "5.0/5.0 MB" in out.getvalue() and out.getvalue().count("\n") == 1


def test_a_bar_draws_from_its_first_byte_and_a_failed_step_is_stopped() -> None:
    """rich's Progress hides the cursor and redirects stdout/stderr while it draws: a step that
    fails never reaches 100 %, so the CLI stops what its run's bars still draw (stop_all)."""
    import sys

    streams = (sys.stdout, sys.stderr)
    out = Terminal()
    bars = ProgressBars(out)
    report = bars("planned.zip", 1000)
    assert report is not None
    assert (sys.stdout, sys.stderr) == streams and out.getvalue() == ""  # nothing yet
    report(100, 1000)  # then the download fails
    assert "\x1b[?25l" in out.getvalue()  # the cursor is hidden while it draws
    assert bars.live == [report]
    bars.stop_all()
    assert bars.live == []
    assert (sys.stdout, sys.stderr) == streams
    assert out.getvalue().endswith("\x1b[?25h")  # and shown again
