"""Benchmark P9 and P10: packing the real 2.6 GB GPU payload, beside `7z a -mx5 -mmt=on` of
the same files in the same run (time and size).

- P9: ISCC 6.4.1 under Wine compiling the GPU bundle's setup.iss, once as `bundle` renders it
  and once for each variant of Inno's compression directives in VARIANTS (the rendered
  script with those lines added to [Setup]), so the choice of the default stays measured.
- P10: `bundle build --archive X.7z` (a --link build, so the archive is what it costs).

Run through benchmarks/run.py (`--only P9,P10`); each runs once (`--repeat` is ignored: one
ISCC run of the GPU payload takes minutes). Needs 7z (p7zip-full) and, for P9, the test
harness's Wine prefix with ISCC (tests/support/inno.py: wine32, Xvfb, the npm innosetup
package in the test cache).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmarks.harness import Data, Row, Sample

SEVEN_ZIP = ("7z", "a", "-bd", "-mx5", "-mmt=on")
# Inno's own knobs: each variant's lines replace those of the rendered [Setup] (the rendered
# default is lzma2/normal, a 16 MiB dictionary, solid, in the separate process: bundle's choice
# from this measurement). Inno's own default is lzma2 = lzma2/max (8 MiB), file by file.
VARIANTS: dict[str, tuple[str, ...]] = {
    "Inno's own default (lzma2 = max, per file)": (
        "Compression=lzma2",
        "LZMADictionarySize=8192",
        "SolidCompression=no",
        "LZMAUseSeparateProcess=no",
    ),
}


def payload(folder: Path) -> list[str]:
    """The files of the bundle in `folder` that an installer or archive carries."""
    from bundler.closure.lockfile import read_lock

    lock = read_lock(folder / "bundle.lock.json")
    assert lock is not None, folder
    return sorted(entry.name for entry in lock.payload() if entry.kind != "installer")


def seven_zip(data: Data, target: Path) -> tuple[Sample, int]:
    """The yardstick: 7-Zip at its default level with every core, on the payload's files."""
    from benchmarks.harness import run

    target.unlink(missing_ok=True)
    names = data.work / "payload.txt"
    names.write_text("\n".join(payload(data.reference)) + "\n")
    here = Path.cwd()
    os.chdir(data.reference)  # 7z stores the names as given: relative, as the bundle has them
    try:
        sample = run([*SEVEN_ZIP, str(target), f"@{names}"])
    finally:
        os.chdir(here)
    return sample, target.stat().st_size


def p9_iscc(data: Data, repeat: int) -> list[Row]:
    from benchmarks.harness import Row
    from tests.support.inno import InnoSetup, Xvfb, iscc_path

    scratch = Path(tempfile.mkdtemp(prefix="p9-", dir=data.work))
    display = Xvfb(scratch / "xvfb.log")
    harness = InnoSetup(scratch / "prefix", iscc_path(), display.start())
    rows: list[Row] = []
    try:
        harness.start()
        yard, yard_size = seven_zip(data, scratch / "yardstick.7z")
        script = _render(data, scratch)
        for name, lines in {"as rendered": (), **VARIANTS}.items():
            variant = script.with_name(f"setup-{len(rows)}.iss")
            _with_directives(script, variant, lines)
            sample, size = _compile(harness, variant, scratch / f"out-{len(rows)}")
            row = Row(f"P9 {len(rows)}", f"ISCC, {name}", "<= 1.5x", limit=1.5)
            row.command, row.yardstick, row.yardstick_name = [sample], [yard], "7z a -mx5"
            _sized(row, size, yard_size, 1.1)
            rows.append(row)
    finally:
        harness.stop()
        display.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return rows


def p10_archive(data: Data, repeat: int) -> list[Row]:
    from benchmarks.harness import EXE, Row, bundle, gpu_args, run

    scratch = Path(tempfile.mkdtemp(prefix="p10-", dir=data.work))
    try:
        yard, yard_size = seven_zip(data, scratch / "yardstick.7z")
        archive = scratch / "bundle.7z"
        build = bundle("build", str(EXE), *gpu_args(data.cache), "--link", "--out")
        sample = run([*build, str(scratch / "out"), "--archive", str(archive)])
        row = Row("P10", "bundle build --link --archive .7z", "<= 1.5x", limit=1.5)
        row.command, row.yardstick, row.yardstick_name = [sample], [yard], "7z a -mx5"
        _sized(row, archive.stat().st_size, yard_size, 1.05)
        return [row]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _render(data: Data, scratch: Path) -> Path:
    """setup.iss of the reference bundle, as `bundle render iss` writes it."""
    from benchmarks.harness import bundle

    script = data.reference / "setup.iss"
    lock = data.reference / "bundle.lock.json"
    subprocess.run(bundle("render", "iss", "--lock", str(lock), "--out", str(script)), check=True)
    return script


def _with_directives(script: Path, target: Path, lines: Sequence[str]) -> None:
    """`script` with `lines` replacing or joining its [Setup] directives of the same name."""
    text = script.read_text(encoding="utf-8-sig").splitlines()
    names = {line.split("=", 1)[0] for line in lines}
    kept = [line for line in text if line.split("=", 1)[0] not in names]
    at = kept.index("[Setup]") + 1
    target.write_text("\r\n".join([*kept[:at], *lines, *kept[at:]]) + "\r\n", encoding="utf-8-sig")


def _compile(harness: object, script: Path, output: Path) -> tuple[Sample, int]:
    from benchmarks.harness import run
    from tests.support.inno import InnoSetup

    assert isinstance(harness, InnoSetup)
    output.mkdir(parents=True)
    command = ["wine", str(harness.iscc), "/Q", f"/O{harness.windows_path(output)}"]
    sample = run([*command, harness.windows_path(script)], env=harness.env(WINEDEBUG="-all"))
    size = sum(path.stat().st_size for path in output.iterdir() if path.is_file())
    shutil.rmtree(output)
    return sample, size


def _sized(row: Row, ours: int, theirs: int, limit: float) -> None:
    """The row's size verdict: the output against the yardstick's archive."""
    row.size_ratio, row.size_limit = ours / theirs, limit
    verdict = "met" if row.size_ratio <= limit else "MISSED"
    row.note = (
        f"size {ours / 1e9:.3f} GB against {theirs / 1e9:.3f} GB: "
        f"{row.size_ratio:.3f}x, limit {limit}x, {verdict}"
    )
