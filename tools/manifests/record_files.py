"""Record the pinned DLLs' import tables in a hand-written profile's [[files]] block.

`bundle profiles new` writes the block itself; the hand-written profiles get it from here. For
every artifact with a pinned wheel, each DLL of the wheel that the artifact `provides` is read
(bundler.binary.pe, names only) and gets one [[files]] table: name, artifact, size and its import
and delay-import names (API sets left out). The block runs from its marker line to the end of
the file and is replaced as a whole; everything above it stays as written.

    python -m tools.manifests.record_files [PROFILE.toml ...] [--cache DIR] [--check]

Without PROFILE, every hand-written shipped profile (a derived one gets its block from
`bundle profiles new`). The wheels come from the test cache that
tools/testing/fetch_test_wheels.py fills (downloaded and verified against the profile's pins when
absent). --check changes nothing and exits 1 when a profile's block is not what it would write.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bundler.binary.pe import read_pe
from bundler.rules.derive.facts import recorded_file
from bundler.rules.derive.profile_toml import RECORDED_MARKER, recorded_files_toml
from bundler.target.loads import RecordedFile
from bundler.target.profiles import (
    PipSource,
    Profile,
    available_profiles,
    load_profile_file,
    matches,
)
from bundler.target.system import load_system_policy
from tools.testing.fetch_test_wheels import default_cache, download, extract


def recorded(profile: Profile, cache: Path) -> list[RecordedFile]:
    """Every provided DLL of every pinned wheel of the profile, in artifact order, by name."""
    policy = load_system_policy()
    found: list[RecordedFile] = []
    for artifact in profile.artifacts:
        wheel = next((s for s in artifact.sources if isinstance(s, PipSource)), None)
        if wheel is None:
            continue  # a local install only (TensorRT): nothing pinned to measure
        folder = extract(download(wheel, cache / "wheels"), cache / "extracted")
        first: dict[str, Path] = {}  # a wheel may hold a DLL twice: the shallowest copy
        for path in sorted(folder.rglob("*.dll"), key=lambda path: (len(path.parts), path)):
            if any(matches(wanted, path.name) for wanted in artifact.provides):
                first.setdefault(path.name.lower(), path)
        for key in sorted(first):
            found.append(recorded_file(read_pe(first[key]), artifact.name, policy))
    return found


def rewritten(path: Path, files: list[RecordedFile]) -> str:
    text = path.read_text(encoding="utf-8")
    head = text.split("\n" + RECORDED_MARKER, 1)[0].rstrip("\n") + "\n"
    how = "Measured by tools/manifests/record_files.py on each artifact's pinned wheel"
    return head + "\n".join(recorded_files_toml(files, how)) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="*", type=Path)
    parser.add_argument("--cache", type=Path, default=default_cache())
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    (args.cache / "wheels").mkdir(parents=True, exist_ok=True)
    (args.cache / "extracted").mkdir(parents=True, exist_ok=True)
    stale = 0
    hand_written = [
        path
        for path in available_profiles().values()
        if not path.read_text(encoding="utf-8").startswith("# Derived by")
    ]
    for path in args.profiles or hand_written:
        text = rewritten(path, recorded(load_profile_file(path), args.cache))
        if text == path.read_text(encoding="utf-8"):
            print(f"{path.name}: up to date")
        elif args.check:
            print(f"{path.name}: its [[files]] block differs from the pinned wheels' DLLs")
            stale += 1
        else:
            path.write_text(text, encoding="utf-8")
            load_profile_file(path)  # the loader must accept what was written
            print(f"{path.name}: [[files]] rewritten")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
