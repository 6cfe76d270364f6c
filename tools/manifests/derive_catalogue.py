"""Derive the whole profile catalogue again and print how it differs from the shipped one.

For every ORT minor release since 1.19, its newest patch with a Windows wheel, of each package
(bundler.rules.derive.catalogue.PACKAGES): the GPU profile (the flavour of the CUDA major the
wheel's version_info.py states), the CPU profile, and the DirectML profile where that package
has the release (after 1.24, onnxruntime-windowsml's newest build of each minor release). Each
is derived with `bundle profiles new`'s code from the package index and compared with
manifests/profiles/<name>.toml as data (bundler.rules.derive.catalogue.differences). The result
is one JSON document on stdout: a maintainer's diff, not text.

    python -m tools.manifests.derive_catalogue [--write] [--only 1.31.1 ...]
                                               [--kind gpu|cpu|directml|windowsml-directml]
                                               [--cache DIR]
                                               [--index-url URL]

--write replaces the derived profiles that differ and adds the new ones; hand-written profiles
(no "# Derived by" header, e.g. the 1.19.2 ones) are only compared, never written. Exit 1 when
anything differs or is missing (without --write), so CI or a cron job can gate on it.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from bundler.acquire.artifacts import AcquireOptions
from bundler.acquire.cache import Cache
from bundler.acquire.download import DownloadPolicy
from bundler.config.cache_root import default_cache_dir
from bundler.config.environment import pip_index_url
from bundler.config.settings import http_limits, lock_timeout
from bundler.errors import BundleError
from bundler.render.engine import write_text
from bundler.reporter import Reporter
from bundler.rules.derive import NewProfile, derive_profile
from bundler.rules.derive.catalogue import PACKAGES, differences, profile_facts, since
from bundler.rules.derive.flavours import load_flavour
from bundler.rules.derive.index import PYPI_SIMPLE, newest_per_minor, released_versions
from bundler.target import resources
from bundler.target.profiles import load_profile_file

# the flavour whose package is fetched, per kind
CARRIER = {"gpu": "gpu-cuda12", "cpu": "cpu", "directml": "directml"}
CARRIER["windowsml-directml"] = "windowsml-directml"


def releases(kind: str, index: str, policy: DownloadPolicy) -> list[str]:
    flavour = load_flavour(CARRIER[kind])
    found = released_versions(PACKAGES[kind], flavour.python, flavour.architecture, index, policy)
    return newest_per_minor(found, since(kind))


def download_policy() -> DownloadPolicy:
    """The download policy `bundle profiles new` has: $BUNDLE_HTTP_TIMEOUT and the like, read
    through the one configuration home (bundler.config.settings)."""
    return DownloadPolicy(**asdict(http_limits()))


def derive_one(
    kind: str, release: str, cache: Cache, index: str, policy: DownloadPolicy
) -> tuple[str, str]:
    """(profile name, TOML text) of one release."""
    request = NewProfile(
        ort=release,
        flavour=load_flavour(CARRIER[kind]),
        components=None,
        index_url=index,
        policy=policy,
        command=f"bundle profiles new --ort {release} --flavour {'' if kind == 'gpu' else kind}",
        cuda_from_build=kind == "gpu",
    )
    derived = derive_profile(request, cache, AcquireOptions(mode="pip", policy=policy), QUIET)
    return derived.name, derived.text


def steps_only(label: str, total: int | None) -> None:
    """Each step's label on stderr, no progress within it."""
    print(f"  {label}", file=sys.stderr, flush=True)


QUIET = Reporter(progress=steps_only)


def compare(name: str, text: str, write: bool) -> dict[str, object]:
    path = resources.profiles_dir() / f"{name}.toml"
    fresh_path = Path(sys.argv[0]).parent / f".{name}.fresh.toml"
    fresh_path.write_text(text, encoding="utf-8")
    try:
        fresh = profile_facts(load_profile_file(fresh_path))
    finally:
        fresh_path.unlink()
    if not path.is_file():
        status, found = "new", []
    else:
        shipped_text = path.read_text(encoding="utf-8")
        found = differences(profile_facts(load_profile_file(path)), fresh)
        hand = not shipped_text.startswith("# Derived by")
        status = "hand-written" if hand else ("changed" if found else "unchanged")
    if write and status in ("new", "changed"):
        write_text(path, text)
    return {"profile": name, "status": status, "differences": found}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--kind", choices=sorted(PACKAGES), action="append")
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--index-url", default=pip_index_url() or PYPI_SIMPLE)
    args = parser.parse_args()
    cache = Cache(args.cache or default_cache_dir(), lock_timeout=lock_timeout())
    fetching = download_policy()
    report: list[dict[str, object]] = []
    for kind in args.kind or list(PACKAGES):
        for release in releases(kind, args.index_url, fetching):
            if args.only and release not in args.only:
                continue
            print(f"deriving {kind} {release}", file=sys.stderr, flush=True)
            try:
                name, text = derive_one(kind, release, cache, args.index_url, fetching)
            except BundleError as error:
                report.append({"release": release, "kind": kind, "error": error.message})
                continue
            report.append({"release": release, "kind": kind, **compare(name, text, args.write)})
    print(json.dumps({"profiles": report}, indent=2))
    stale = [item for item in report if item.get("status") in ("new", "changed") or "error" in item]
    return 1 if stale and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
