"""The EP pack x core proof (manifests/ep-matrix.toml, issue 40) held against the catalogue, and
what the build does with it.

The data is written by `python -m tools.evidence.ep_matrix` under Wine, outside CI; here, fast:
every profile x every pack has exactly one row (a profile or pack added without rows fails),
no row names a profile or pack the catalogue lacks, a row that ran names the release the
profile pins, and no pack registered with a core below its min_ort (min_ort would then be
wrong). Each check also runs on planted data, so it can fail. The build refuses a pair recorded
as refused or crashed (exit 25, the recorded reason), and a pair not run is noted in the lock
and the build's output. tests/test_ep_packs_wine.py reruns a few of the rows under Wine.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bundler.cli.build_views import pack_lines
from bundler.closure.lock import LockedEp
from bundler.config.options import Options
from bundler.eps import matrix
from bundler.eps.choice import chosen_packs
from bundler.eps.matrix import PairProof, load_matrix
from bundler.eps.plugins import available_packs, load_pack
from bundler.errors import EpPairFailedError, ProfileError
from bundler.target.profile_names import version_key
from bundler.target.profiles import available_profiles, load_profile, profile_ort_release


def core_release(profile: str) -> str:
    """The ORT release of the profile's core as ORT reports it: the package version's first
    three parts (onnxruntime-windowsml's versions have a fourth, its build)."""
    return ".".join((profile_ort_release(load_profile(profile)) or "").split(".")[:3])


def problems(pairs: dict[tuple[str, str], PairProof]) -> list[str]:
    """What is wrong with `pairs` against the catalogue, one line each."""
    releases = {name: core_release(name) for name in available_profiles()}
    packs = {name: load_pack(name) for name in available_packs()}
    found = [
        f"no row for {profile} x {pack}"
        for profile in releases
        for pack in packs
        if (profile, pack) not in pairs
    ]
    for (profile, pack), proof in pairs.items():
        if profile not in releases or pack not in packs:
            found.append(f"{profile} x {pack}: not in the catalogue")
            continue
        if proof.outcome != "not-run" and proof.ort != releases[profile]:
            found.append(
                f"{profile} x {pack}: ran ORT {proof.ort}, the profile pins {releases[profile]}"
            )
        below = version_key(releases[profile]) < version_key(packs[pack].min_ort)
        if below and proof.outcome == "registered":
            found.append(f"{profile} x {pack}: registered below min_ort {packs[pack].min_ort}")
    return found


def test_the_proof_covers_every_profile_and_pack_and_agrees_with_the_catalogue() -> None:
    assert problems(load_matrix()) == []


def test_every_allowed_pair_has_run_or_says_why_not() -> None:
    """Allowed (release at or above min_ort) and not run: the row says why."""
    for (profile, pack), proof in load_matrix().items():
        if proof.outcome == "not-run":
            assert proof.message, (profile, pack)


def test_a_profile_without_rows_fails() -> None:
    pairs = dict(load_matrix())
    profile = "ort-1.31.1-gpu-cuda13"
    for pack in available_packs():
        del pairs[(profile, pack)]
    assert problems(pairs) == [f"no row for {profile} x {pack}" for pack in available_packs()]


def test_a_pack_without_rows_fails_and_an_unknown_row_fails() -> None:
    pairs = {key: proof for key, proof in load_matrix().items() if key[1] != "webgpu"}
    pairs[("ort-9.9.9-cpu", "webgpu")] = PairProof("ort-9.9.9-cpu", "webgpu", "registered", "9.9.9")
    found = problems(pairs)
    assert "no row for ort-1.31.1-cpu x webgpu" in found
    assert "ort-9.9.9-cpu x webgpu: not in the catalogue" in found


def test_a_pack_registered_below_its_minimum_or_with_another_release_fails() -> None:
    pairs = dict(load_matrix())
    pairs[("ort-1.23.2-cpu", "webgpu")] = PairProof(
        "ort-1.23.2-cpu", "webgpu", "registered", "1.23.2"
    )
    pairs[("ort-1.31.1-cpu", "openvino")] = PairProof(
        "ort-1.31.1-cpu", "openvino", "registered", "1.30.0"
    )
    assert problems(pairs) == [
        "ort-1.23.2-cpu x webgpu: registered below min_ort 1.24.4",
        "ort-1.31.1-cpu x openvino: ran ORT 1.30.0, the profile pins 1.31.1",
    ]


def test_a_bad_row_is_named(tmp_path: Path) -> None:
    path = tmp_path / "ep-matrix.toml"
    path.write_text(
        'schema_version = 1\n[[pair]]\nprofile = "ort-1.31.1-cpu"\npack = "webgpu"\n'
        'outcome = "refused"\nort = "1.31.1"\n',
        encoding="utf-8",
    )
    with pytest.raises(ProfileError, match=r"\[pair#1\]: a 'refused' row needs its 'message'"):
        load_matrix(path)


# --- the build acts on it ----------------------------------------------------------------------


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A proof file of this test's own in place of manifests/ep-matrix.toml."""
    path = tmp_path / "ep-matrix.toml"
    path.write_text(
        'schema_version = 1\n[[pair]]\nprofile = "ort-1.31.1-cpu"\npack = "webgpu"\n'
        'outcome = "crashed"\nort = "1.31.1"\nmessage = "exit status 0xc0000005, no verdict"\n',
        encoding="utf-8",
    )
    monkeypatch.setattr(matrix, "matrix_file", lambda: path)
    yield path


def test_the_build_refuses_a_pair_recorded_as_failed_with_exit_25(planted: Path) -> None:
    with pytest.raises(EpPairFailedError) as raised:
        chosen_packs(["webgpu"], "ort-1.31.1-cpu", "x64", "1.31.1", Options())
    assert raised.value.exit_code == 25
    assert raised.value.message.startswith(
        "--ep webgpu: registering the pack with profile ort-1.31.1-cpu's onnxruntime.dll (ORT "
        "1.31.1) under Wine crashed: exit status 0xc0000005, no verdict (the pack x core proof"
    )
    assert [
        pack.name
        for pack in chosen_packs(["openvino"], "ort-1.31.1-cpu", "x64", "1.31.1", Options())
    ] == ["openvino"]  # no row: not refused


def test_the_build_takes_every_allowed_pair_the_real_data_does_not_record_as_failed() -> None:
    """Every allowed pair of the real data: refused with its recorded message where it failed
    (none in the run of 2026-12-05), taken where it registered or did not run."""
    minimum = {name: load_pack(name).min_ort for name in available_packs()}
    for (profile, pack), proof in load_matrix().items():
        release = profile_ort_release(load_profile(profile)) or ""
        if version_key(release) < version_key(minimum[pack]):
            continue  # exit 25 by min_ort (tests/test_ep_packs_build.py)
        if proof.failed:
            with pytest.raises(EpPairFailedError, match=re.escape(proof.message)):
                chosen_packs([pack], profile, "x64", release, Options())
        else:
            assert [p.name for p in chosen_packs([pack], profile, "x64", release, Options())] == [
                pack
            ]


def _locked(proof: str, note: str) -> LockedEp:
    return LockedEp(
        "webgpu", "onnxruntime-ep-webgpu", "0.4.0", "WebGpuExecutionProvider",
        "WebGpuExecutionProvider", "ep/webgpu/onnxruntime_providers_webgpu.dll", "1.24.4", 10,
        proof=proof, proof_note=note,
    )  # fmt: skip


class _Result:
    dry_run = False

    def __init__(self, *eps: LockedEp) -> None:
        self.lock = type("Lock", (), {"eps": eps})()


def test_a_pair_not_run_is_noted_and_a_registered_one_is_not() -> None:
    noted = pack_lines(_Result(_locked("not-run", "onnxruntime-gpu 1.27.0 not fetched")))  # type: ignore[arg-type]
    assert noted[1] == (
        "  note: webgpu has not been registered with this profile's ORT under Wine "
        "(onnxruntime-gpu 1.27.0 not fetched); the pack x core proof is manifests/ep-matrix.toml"
    )
    assert len(pack_lines(_Result(_locked("registered", "")))) == 1  # type: ignore[arg-type]
