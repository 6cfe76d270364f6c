"""One Wine prefix on an Xvfb display for the whole session (`display_wine`), shared by the
tests that need Wine's DXGI adapter or its Direct3D 12: the EP packs (tests/test_ep_packs_wine.py)
and the doctor's pack probes (tests/test_doctor.py). A prefix is ~700 MB written and seconds of
wineboot; one per module made two of them.

A module that changes the prefix puts it back when it ends (the EP packs' driver stand-ins in
System32 with `drivers_installed`; the doctor's registry keys in its own tests), replacing files,
never writing into them: the prefix's program files are hard links (tests/support/wineprefix.py).

Wine's Direct3D 12 (vkd3d) needs a Vulkan driver for a device: LAVAPIPE is Mesa's software one,
which a test names in $VK_ICD_FILENAMES (the doctor's probe, the EP packs' installed setup)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.inno import Xvfb
from tests.support.skips import require
from tests.support.wine import SERVER_TIMEOUT, Wine, require_wine
from tests.support.wineprefix import replace_file

# Mesa's software Vulkan driver (Debian 12: mesa-vulkan-drivers), which vkd3d needs for D3D12.
LAVAPIPE = Path("/usr/share/vulkan/icd.d/lvp_icd.x86_64.json")


class DisplayWine(Wine):
    """A private prefix whose every Wine call sees one Xvfb display (DXGI needs a screen).

    With a display, a program's first window (ORT's DXGI probe, COM's apartment window) needs
    the desktop process, explorer.exe /desktop; started by a run, it inherits the run's pipes
    and the run ends only when it does, 5-20 s later. So `start` opens a window that stays
    (notepad, its output to the log) and the desktop lives as long as the prefix."""

    def __init__(self, prefix: Path, display: str) -> None:
        super().__init__(prefix)
        self.display = display
        self._window: subprocess.Popen[str] | None = None

    def env(self, **extra: str) -> dict[str, str]:
        return {**super().env(**extra), "DISPLAY": self.display}

    def start(self) -> None:
        if self._up:
            return
        super().start()
        self._window = self.background("notepad.exe", to_log=True)

    def stop(self) -> None:
        super().stop()  # wineserver -k ends notepad too
        if self._window is not None:
            self._window.wait(timeout=SERVER_TIMEOUT)
            self._window = None

    @property
    def system32(self) -> Path:
        return self.prefix / "drive_c" / "windows" / "system32"

    @contextmanager
    def drivers_installed(self, files: list[Path]) -> Iterator[None]:
        """`files` copied into System32 (as a driver's installer puts them there), and on exit
        the folder as it was: a file replaced gets its old bytes back, a new one goes."""
        saved: dict[Path, bytes | None] = {}
        try:
            for source in files:
                target = self.system32 / source.name
                saved[target] = target.read_bytes() if target.is_file() else None
                replace_file(target, source.read_bytes())
            yield
        finally:
            for target, old in saved.items():
                if old is None:
                    target.unlink(missing_ok=True)
                else:
                    replace_file(target, old)


@pytest.fixture(scope="session")
def display_wine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DisplayWine]:
    """The session's prefix on its own Xvfb display: Wine's DXGI then has one adapter (wined3d
    on the display's OpenGL) and its d3d12 a device (vkd3d on Mesa's Vulkan, lavapipe). Stopped
    and removed at the end."""
    require_wine()
    require(shutil.which("Xvfb") is not None, "Xvfb is not installed (apt-get install xvfb)")
    root = tmp_path_factory.mktemp("display-wine")
    xvfb = Xvfb(root / "xvfb.log")
    harness = DisplayWine(root / "prefix", xvfb.start())
    try:
        harness.start()
        yield harness
    finally:
        harness.stop()
        xvfb.stop()
        shutil.rmtree(harness.prefix, ignore_errors=True)
