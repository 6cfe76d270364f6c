#!/usr/bin/env python3
"""Cross-check manifests/windows/system.toml against Wine and against real import tables.

Wine reimplements the Windows system DLLs, so its x86_64 PE DLL folder is a useful second
opinion on the system list:

* every name of ours that Wine does not provide deserves a look (a typo, a redistributable
  that slipped in, or simply a DLL Wine has not implemented yet);
* ``--show-wine-extra`` prints the DLLs Wine has and our list lacks (candidates only: Wine
  also ships redistributables such as msvcp140.dll or d3dx9_43.dll, which must stay out).

With ``--imports DIR...`` the script also reads the import and delay-import tables of every
*.dll / *.exe / *.pyd below each DIR and prints each imported name that is neither covered by
the manifest (system list, KnownDLLs, API-set prefixes) nor present as a file in the DIRs:
those are the names the list may be missing (or real third-party dependencies).

Exit status: 0 with a report; 1 with ``--strict`` when a name of ours is absent from Wine
(names in KNOWN_WINE_GAPS below are reported but tolerated; ``--no-known-gaps`` drops that
allowance) or the manifest has a consistency problem; 2 on usage errors (no manifest, no Wine
folder with ``--strict``, pefile missing).

Stdlib only, plus pefile for ``--imports``.  Python 3.11+ (tomllib).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MANIFEST = REPO_ROOT / "manifests" / "windows" / "system.toml"

WINE_ARCH_DIR = "x86_64-windows"
# Well-known places of Wine's x86_64 PE DLL folder (distribution packages and WineHQ builds).
KNOWN_WINE_DIRS = (
    "/usr/lib/x86_64-linux-gnu/wine/x86_64-windows",  # Debian / Ubuntu packages
    "/usr/lib64/wine/x86_64-windows",  # Fedora / openSUSE
    "/usr/lib/wine/x86_64-windows",  # Arch, upstream default prefix
    "/usr/local/lib/wine/x86_64-windows",  # built from source
    "/usr/local/lib64/wine/x86_64-windows",
    "/opt/wine-stable/lib64/wine/x86_64-windows",  # WineHQ packages
    "/opt/wine-stable/lib/wine/x86_64-windows",
    "/opt/wine-staging/lib64/wine/x86_64-windows",
    "/opt/wine-staging/lib/wine/x86_64-windows",
    "/opt/wine-devel/lib64/wine/x86_64-windows",
    "/opt/wine-devel/lib/wine/x86_64-windows",
)
# Wine launchers to ask for a version and to locate the installation from.
WINE_PROGRAMS = ("wine64", "wine")
KNOWN_WINE_LOADERS = ("/usr/lib/wine/wine64", "/usr/lib64/wine/wine64", "/usr/lib/wine/wine")

# Real Windows system DLLs of the manifest that Wine (8.0, Debian 12) does not implement,
# reviewed by hand: each is in System32 per the manifest's sources, Wine just lacks it.
KNOWN_WINE_GAPS = {
    "bcryptprimitives.dll": "crypto primitives host (ProcessPrng); not implemented by Wine",
    "clbcatq.dll": "COM+ catalog; KnownDLL; not implemented by Wine",
    "coml2.dll": "structured storage; KnownDLL; not implemented by Wine",
    "cryptbase.dll": "base crypto helper (SystemFunction036 host); not implemented by Wine",
    "dxcore.dll": "DXCore (Windows 10 2004+); not in Wine 8.0",
}

PE_SUFFIXES = (".dll", ".exe", ".pyd")
# File kinds in Wine's folder that can be named in an import table.
WINE_MODULE_SUFFIXES = (".dll", ".drv", ".sys", ".exe", ".cpl", ".ocx", ".acm", ".ax", ".tlb")


class UsageError(Exception):
    """A problem with the arguments or the environment (exit status 2)."""


@dataclass
class Group:
    since: str
    source: str
    names: list[str]


@dataclass
class Manifest:
    path: Path
    prefixes: tuple[str, ...]
    known_dlls: list[str]
    groups: list[Group]
    problems: list[str] = field(default_factory=list)

    # Comparisons are case-insensitive like the Windows loader; names that are not lower case
    # are still reported as manifest problems.
    @property
    def system_names(self) -> set[str]:
        return {name.lower() for group in self.groups for name in group.names}

    @property
    def all_names(self) -> set[str]:
        return self.system_names | {name.lower() for name in self.known_dlls}

    def since_of(self, name: str) -> str:
        for group in self.groups:
            if name in {listed.lower() for listed in group.names}:
                return group.since
        return "KnownDLLs only"

    def covers(self, name: str) -> bool:
        lowered = name.lower()
        return lowered in self.all_names or lowered.startswith(self.prefixes)


def _str_list(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UsageError(f"{where} must be a list of strings")
    return list(value)


def load_manifest(path: Path) -> Manifest:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError as exc:
        raise UsageError(f"manifest not found: {path}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: invalid TOML: {exc}") from exc

    if data.get("schema_version") != 1:
        raise UsageError(f"{path}: unsupported schema_version {data.get('schema_version')!r}")
    prefixes = tuple(_str_list(data.get("api_sets", {}).get("prefixes"), "api_sets.prefixes"))
    known = _str_list(data.get("known_dlls", {}).get("names"), "known_dlls.names")
    raw_groups = data.get("system_dlls")
    if not isinstance(raw_groups, list) or not raw_groups:
        raise UsageError(f"{path}: [[system_dlls]] groups are missing")
    groups = []
    for index, raw in enumerate(raw_groups):
        where = f"system_dlls[{index}]"
        since, source = raw.get("since"), raw.get("source")
        if not isinstance(since, str) or not isinstance(source, str):
            raise UsageError(f"{path}: {where} needs string 'since' and 'source'")
        groups.append(Group(since, source, _str_list(raw.get("names"), f"{where}.names")))

    manifest = Manifest(path, prefixes, known, groups)
    manifest.problems.extend(_sanity_problems(manifest))
    return manifest


def _sanity_problems(manifest: Manifest) -> Iterator[str]:
    seen: dict[str, str] = {}
    listed = [("known_dlls", name) for name in manifest.known_dlls]
    for group in manifest.groups:
        listed.extend((f"system_dlls since {group.since}", name) for name in group.names)
    for where, name in listed:
        if name != name.lower() or name != name.strip():
            yield f"{where}: {name!r} is not a trimmed lower-case name"
        if "." not in name:
            yield f"{where}: {name!r} has no extension"
        if name.startswith(manifest.prefixes):
            yield f"{where}: {name!r} is already covered by an API-set prefix"
        if where != "known_dlls":
            if name in seen:
                yield f"{where}: {name!r} is listed twice (also in {seen[name]})"
            seen[name] = where
    for name in sorted({name.lower() for name in manifest.known_dlls} - manifest.system_names):
        yield f"known_dlls: {name!r} is not in any [[system_dlls]] group"


# --------------------------------------------------------------------------- Wine


def _run_version(program: str) -> str | None:
    env = dict(os.environ, WINEDEBUG="-all")
    try:
        completed = subprocess.run(
            [program, "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    version = completed.stdout.strip()
    return version.splitlines()[0] if completed.returncode == 0 and version else None


def _wine_programs() -> list[str]:
    found = [path for name in WINE_PROGRAMS if (path := shutil.which(name))]
    found.extend(loader for loader in KNOWN_WINE_LOADERS if os.access(loader, os.X_OK))
    return list(dict.fromkeys(found))


def wine_version() -> str | None:
    for program in _wine_programs():
        version = _run_version(program)
        if version:
            return f"{version} ({program})"
    return None


def _dirs_near_program(program: str) -> Iterator[Path]:
    # <prefix>/bin/wine64 or <prefix>/lib/wine/wine64 -> <prefix>/lib*/wine/x86_64-windows
    real = Path(program).resolve()
    for prefix in (real.parent.parent, real.parent.parent.parent):
        for libdir in ("lib/x86_64-linux-gnu", "lib64", "lib"):
            yield prefix / libdir / "wine" / WINE_ARCH_DIR


def find_wine_dir(explicit: str | None) -> Path | None:
    if explicit is not None:
        path = Path(explicit)
        if not path.is_dir():
            raise UsageError(f"--wine-dir {explicit}: not a directory")
        return path
    candidates: list[Path] = []
    for program in _wine_programs():
        candidates.extend(_dirs_near_program(program))
    candidates.extend(Path(known) for known in KNOWN_WINE_DIRS)
    for candidate in dict.fromkeys(candidates):
        if candidate.is_dir() and any(candidate.glob("*.dll")):
            return candidate
    return None


def wine_modules(wine_dir: Path) -> set[str]:
    return {
        entry.name.lower()
        for entry in wine_dir.iterdir()
        if entry.is_file() and entry.name.lower().endswith(WINE_MODULE_SUFFIXES)
    }


# --------------------------------------------------------------------------- imports


@dataclass
class ImportScan:
    files_present: set[str] = field(default_factory=set)
    importers: dict[str, set[str]] = field(default_factory=dict)
    scanned: int = 0
    unreadable: list[str] = field(default_factory=list)


def _walk_files(roots: Iterable[Path]) -> Iterator[Path]:
    for root in roots:
        if root.is_file():
            yield root
            continue
        for dirpath, _dirnames, filenames in os.walk(root):
            for filename in filenames:
                yield Path(dirpath) / filename


def scan_imports(roots: Sequence[Path]) -> ImportScan:
    try:
        import pefile
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise UsageError("--imports needs pefile (pip install pefile)") from exc

    directories = [
        pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"],
        pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"],
    ]
    scan = ImportScan()
    for path in _walk_files(roots):
        scan.files_present.add(path.name.lower())
        if not path.name.lower().endswith(PE_SUFFIXES):
            continue
        try:
            pe = pefile.PE(str(path), fast_load=True)
            try:
                pe.parse_data_directories(directories=directories, import_dllnames_only=True)
                entries = [
                    *getattr(pe, "DIRECTORY_ENTRY_IMPORT", []),
                    *getattr(pe, "DIRECTORY_ENTRY_DELAY_IMPORT", []),
                ]
                names = {entry.dll.decode("ascii", "replace").lower() for entry in entries}
            finally:
                pe.close()
        except (pefile.PEFormatError, OSError) as exc:
            scan.unreadable.append(f"{path}: {exc}")
            continue
        scan.scanned += 1
        for name in names:
            scan.importers.setdefault(name, set()).add(path.name)
    return scan


# --------------------------------------------------------------------------- report


def _print_names(names: Iterable[str], describe: dict[str, str] | None = None) -> None:
    for name in sorted(names):
        extra = f"  ({describe[name]})" if describe and name in describe else ""
        print(f"  {name}{extra}")


def _wrap(names: Iterable[str], width: int = 96) -> Iterator[str]:
    line = " "
    for name in sorted(names):
        if len(line) + len(name) + 1 > width:
            yield line
            line = " "
        line += " " + name
    if line.strip():
        yield line


def report_wine(
    manifest: Manifest, wine_dir: Path, show_extra: bool, known_gaps: dict[str, str]
) -> set[str]:
    """Print the Wine comparison; return the absent names that are not known gaps."""
    modules = wine_modules(wine_dir)
    ours = manifest.all_names
    absent = ours - modules
    unexpected = absent - set(known_gaps)
    print(f"Wine DLL folder: {wine_dir} ({len(modules)} modules)")
    print(f"Wine version: {wine_version() or 'unknown (no wine/wine64 launcher answered)'}")
    print()
    print(
        f"== Names in {manifest.path.name} that Wine does not provide: {len(absent)} "
        f"({len(unexpected)} not yet reviewed)"
    )
    if absent:
        notes = {}
        for name in absent:
            note = f"since {manifest.since_of(name)}"
            if name in known_gaps:
                note += f"; known Wine gap: {known_gaps[name]}"
            else:
                note += "; NOT REVIEWED - check the name"
            notes[name] = note
        _print_names(absent, notes)
    else:
        print("  (none)")
    stale = sorted(set(known_gaps) & modules)
    if stale:
        print(f"  note: Wine now provides {', '.join(stale)} (listed as known gaps)")
    if show_extra:
        extra = {name for name in modules if name.endswith(".dll")} - ours
        extra = {name for name in extra if not name.startswith(manifest.prefixes)}
        print()
        print(f"== DLLs Wine provides that the list lacks (candidates only): {len(extra)}")
        for line in _wrap(extra):
            print(line)
    return unexpected


def report_imports(
    manifest: Manifest, roots: Sequence[Path], wine_names: set[str] | None, max_importers: int
) -> None:
    scan = scan_imports(roots)
    covered = {name for name in scan.importers if manifest.covers(name)}
    shipped = {name for name in scan.importers if name in scan.files_present} - covered
    candidates = set(scan.importers) - covered - shipped
    api_sets = {name for name in covered if name.startswith(manifest.prefixes)}

    print()
    print(f"== Import check: {scan.scanned} PE files under {', '.join(map(str, roots))}")
    print(f"   {len(scan.importers)} distinct imported names:")
    print(f"   {len(api_sets)} API-set names (covered by prefixes {list(manifest.prefixes)})")
    print(f"   {len(covered) - len(api_sets)} covered by the system list / KnownDLLs:")
    for line in _wrap(covered - api_sets):
        print(line)
    print(f"   {len(shipped)} present as files in the scanned folders (shipped alongside):")
    for line in _wrap(shipped):
        print(line)
    print()
    print(f"== Imported names neither covered nor present as a file: {len(candidates)}")
    if not candidates:
        print("  (none)")
    for name in sorted(candidates):
        users = sorted(scan.importers[name])
        shown = ", ".join(users[:max_importers])
        if len(users) > max_importers:
            shown += f", ... ({len(users)} files)"
        wine_note = ""
        if wine_names is not None:
            wine_note = "  [Wine has it]" if name in wine_names else "  [not in Wine]"
        print(f"  {name}{wine_note}  <- {shown}")
    if scan.unreadable:
        print()
        print(f"== Files skipped (not readable as PE): {len(scan.unreadable)}")
        for line in scan.unreadable:
            print(f"  {line}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Cross-check the Windows system DLL list against Wine and import tables.",
    )
    parser.add_argument(
        "--manifest",
        type=Path,
        default=DEFAULT_MANIFEST,
        help="system DLL manifest (default: %(default)s)",
    )
    parser.add_argument(
        "--wine-dir",
        metavar="DIR",
        help="Wine's x86_64 PE DLL folder (default: detected from wine64/wine and known paths)",
    )
    parser.add_argument(
        "--imports",
        nargs="+",
        type=Path,
        metavar="DIR",
        help="also check the import tables of the *.dll/*.exe/*.pyd files below these folders",
    )
    parser.add_argument(
        "--show-wine-extra",
        action="store_true",
        help="list the DLLs Wine provides that the manifest does not name",
    )
    parser.add_argument(
        "--max-importers",
        type=int,
        default=4,
        metavar="N",
        help="importing files to show per candidate name (default: %(default)s)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a name of the manifest is absent from Wine (known gaps excepted)",
    )
    parser.add_argument(
        "--no-known-gaps",
        action="store_true",
        help="treat the reviewed Wine gaps (KNOWN_WINE_GAPS) like any other absent name",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        missing_roots = [str(root) for root in args.imports or () if not root.exists()]
        if missing_roots:
            raise UsageError(f"--imports: no such file or folder: {', '.join(missing_roots)}")
        manifest = load_manifest(args.manifest)
        print(
            f"Manifest: {manifest.path} - {len(manifest.system_names)} system DLLs in "
            f"{len(manifest.groups)} groups, {len(manifest.known_dlls)} KnownDLLs, "
            f"API-set prefixes {list(manifest.prefixes)}"
        )
        if manifest.problems:
            print(f"== Manifest problems: {len(manifest.problems)}")
            for problem in manifest.problems:
                print(f"  {problem}")
        print()

        wine_dir = find_wine_dir(args.wine_dir)
        absent: set[str] = set()
        wine_names: set[str] | None = None
        if wine_dir is None:
            message = (
                "Wine's x86_64-windows DLL folder was not found (install wine64, or pass "
                "--wine-dir DIR); skipping the Wine check"
            )
            if args.strict:
                raise UsageError(message)
            print(message, file=sys.stderr)
        else:
            known_gaps = {} if args.no_known_gaps else KNOWN_WINE_GAPS
            absent = report_wine(manifest, wine_dir, args.show_wine_extra, known_gaps)
            wine_names = wine_modules(wine_dir)

        if args.imports:
            report_imports(manifest, args.imports, wine_names, max(1, args.max_importers))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    if args.strict and (absent or manifest.problems):
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
        sys.exit(0)
