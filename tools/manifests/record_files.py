"""Record the pinned DLLs' import tables in a hand-written profile's [[files]] block.

`bundle profiles new` writes the block itself; the hand-written profiles get it from here. For
every artifact with a pinned wheel, each DLL of the wheel that the artifact `provides` is read
(bundler.binary.pe, names only) and gets one [[files]] table: name, artifact, size and its import
and delay-import names (API sets left out). The block runs from its marker line to the end of
the file and is replaced as a whole; everything above it stays as written.

    python -m tools.manifests.record_files [PROFILE.toml ...] [--cache DIR] [--write | --check]

Without PROFILE, every hand-written shipped profile (a derived one gets its block from
`bundle profiles new`). The wheels come from the test cache that
tools/testing/fetch_test_wheels.py fills (downloaded and verified against the profile's pins when
absent). Without a flag it prints the profiles as they should be; --write rewrites those whose
block differs, --check changes nothing and exits 1 when a block is not what it would write
(tools.generated.command: the command line every generator shares).
"""

from __future__ import annotations

import argparse
import functools
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
from tools.generated.command import Generated, generated_main
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


def hand_written() -> list[Path]:
    """The shipped profiles written by hand (a derived one starts with "# Derived by")."""
    profiles = available_profiles().values()
    return [path for path in profiles if not path.read_text("utf-8").startswith("# Derived by")]


def profile_files(args: argparse.Namespace) -> list[Generated]:
    (args.cache / "wheels").mkdir(parents=True, exist_ok=True)
    (args.cache / "extracted").mkdir(parents=True, exist_ok=True)

    def text(path: Path) -> str:
        return rewritten(path, recorded(load_profile_file(path), args.cache))

    chosen = args.profiles or hand_written()
    return [Generated(path, functools.partial(text, path), load_profile_file) for path in chosen]


def main(argv: list[str] | None = None) -> int:
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("profiles", nargs="*", type=Path, help="default: the hand-written")
        parser.add_argument("--cache", type=Path, default=default_cache(), help="the test cache")

    description = __doc__.splitlines()[0]
    return generated_main(__spec__.name, description, profile_files, argv, arguments)


if __name__ == "__main__":
    sys.exit(main())
