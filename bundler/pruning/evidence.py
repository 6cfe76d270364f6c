"""Read layer: the load evidence of manifests/evidence/: which run-time-loaded libraries (the cuDNN
sub-libraries, cuFFT, NVRTC, ...) ONNX Runtime's CUDA execution provider loads for each op, as
measured on a real GPU.

One TOML file per ORT release measured, written by tools/evidence/evidence_table.py from the raw
output of tools/evidence/gpu_matrix.py (committed beside it): every op in a matrix of configurations
(types, ranks, axes, convolution and pooling variants, ...), each model run once in a fresh process
with the CUDA EP, and what the process had mapped. A row is the union over its configurations. Rows
the measurement did not run are derived, and say so (`basis`): an op with no CUDA kernel in the
release runs on the CPU and loads nothing (`cpu-only`); a Constant becomes an initializer when the
graph is loaded (`folded`). Library names are the Windows DLL names of the same libraries
(libcudnn_ops.so.9 is cudnn_ops64_9.dll). docs/pruning.md describes the measurement and its limits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from bundler.target.manifest import Table, load_toml
from bundler.target.resources import manifests_dir

_V = TypeVar("_V")
MEASURED = "measured"
BASES = (MEASURED, "cpu-only", "folded")


@dataclass(frozen=True)
class OpLoads:
    """One op's row: the libraries its configurations loaded (their union), and how the row
    was made."""

    op: str
    loads: tuple[str, ...]  # DLL names, e.g. "cudnn_ops64_9.dll"
    model: str  # the raw results it came from (a configuration's name, or a count)
    configurations: int = 1  # how many measured configurations the row covers
    config_dependent: bool = False  # the configurations loaded different libraries
    basis: str = MEASURED  # measured, cpu-only (no CUDA kernel) or folded (never runs)
    note: str = ""
    # where the element types load differently: type (float, float16, ...) -> what its
    # configurations loaded, beyond every session's
    by_type: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def loads_for_types(self, types: frozenset[str]) -> tuple[str, ...]:
        """What the op loads with nodes of these element types: the union of their rows when
        every type was measured, else the whole row."""
        if not self.by_type or not types or not types <= set(self.by_type):
            return self.loads
        return tuple(sorted({name for kind in types for name in self.by_type[kind]}))


@dataclass(frozen=True)
class Fusion:
    """An op a session's graph optimizations may make of the model's ops (so its row counts
    too): `op` can appear when the model holds every op of `made_of`."""

    op: str
    made_of: tuple[str, ...]
    transformer: str  # ORT's graph transformer that makes it


@dataclass(frozen=True)
class Evidence:
    """One measured release: where and with what it was measured, and a row per op."""

    path: Path
    ort: str  # the ORT release, e.g. "1.31.1"
    cuda: str  # the CUDA major of the EP build measured, e.g. "13"
    cudnn: str  # the cuDNN version the measurement ran with
    platform: str  # where it ran, e.g. "linux-x86_64"
    gpu: str
    measured: str  # the date
    raw: str  # the probe's raw output, beside this file
    every_session: tuple[str, ...]  # what every session loaded (never pruned)
    ops: dict[str, OpLoads]
    provider_options: dict[str, str] = field(default_factory=dict)  # {} = the EP's defaults
    fusions: tuple[Fusion, ...] = ()
    # ops of the release with no row, each with why (no probe model, ORT refused it, ...)
    unmeasured: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.name

    def cudnn_major_minor(self) -> str:
        return ".".join(self.cudnn.split(".")[:2])

    @property
    def observed(self) -> frozenset[str]:
        """Every library (lower-case DLL name) some measured row loaded."""
        return frozenset(name.lower() for row in self.ops.values() for name in row.loads)

    @property
    def prunable(self) -> frozenset[str]:
        """What this table can speak for: libraries it saw some op load but not every session.
        A library no row loads may not be loaded lazily by the measured build at all (the Linux
        and Windows builds differ), so the table says nothing about it."""
        return self.observed - {name.lower() for name in self.every_session}

    def session_ops(self, ops: Iterable[str]) -> frozenset[str]:
        """`ops` and every op the session's fusions may make of them."""
        found = set(ops)
        return frozenset(found | {f.op for f in self.fusions if set(f.made_of) <= found})

    def loads_for(
        self, ops: Iterable[str], types: Mapping[str, frozenset[str]] | None = None
    ) -> tuple[frozenset[str], tuple[str, ...]]:
        """(what those ops and their fusions load, lower-case DLL names; the ops without a row).
        `types`: the element types of each op's nodes (bundler.pruning.onnx_models), where known: a
        row
        measured per type then counts only those types."""
        given = set(ops)
        wanted = sorted(self.session_ops(given))
        typed = self._fused_types(given, types or {})
        unknown = tuple(op for op in wanted if op not in self.ops)
        loaded = {
            name.lower()
            for op in wanted
            if op in self.ops
            for name in self.ops[op].loads_for_types(typed.get(op, frozenset()))
        }
        return frozenset(loaded | {n.lower() for n in self.every_session}), unknown

    def _fused_types(
        self, ops: set[str], types: Mapping[str, frozenset[str]]
    ) -> dict[str, frozenset[str]]:
        """Each op's element types; a fused op's are those of the ops it is made of (unknown,
        and so the whole row, when one of them has none)."""
        typed = {op: types.get(op, frozenset()) for op in ops}
        for fusion in self.fusions:
            if set(fusion.made_of) <= ops:
                parts = [types.get(op, frozenset()) for op in fusion.made_of]
                found = frozenset().union(*parts) if all(parts) else frozenset()
                before = typed.get(fusion.op)
                typed[fusion.op] = found if before is None else _both(found, before)
        return typed

    def describe(self) -> str:
        return (
            f"{self.name} (ORT {self.ort}, cuDNN {self.cudnn}, measured on {self.gpu}, "
            f"{self.platform})"
        )


FUSIONS_NAME = "fusions.toml"


def evidence_dir() -> Path:
    """The tables shipped with bundle."""
    return manifests_dir() / "evidence"


def evidence_dirs(own: Path | None = None) -> list[Path]:
    """Where tables are read: `own` first (the command's $BUNDLE_EVIDENCE_DIR, a team's own
    measurement with tools/evidence/gpu_matrix.py: bundler.config.settings.own_evidence_dir),
    then the shipped ones."""
    return [own, evidence_dir()] if own else [evidence_dir()]


_TEXT_KEYS = ("ort", "cuda", "cudnn", "platform", "gpu", "measured", "raw")


def load_evidence(path: Path, fusions: tuple[Fusion, ...] | None = None) -> Evidence:
    table = load_toml(path)
    ort, cuda, cudnn, platform, gpu, measured, raw = map(table.string, _TEXT_KEYS)
    every = table.strings("every_session")
    options = _options(table)
    # provenance for people: how it was measured, and which CUDA ops have no row
    table.string("probe", ""), table.string("kernels", ""), table.integer("configurations", 0)
    rows = {row.op: row for row in map(_op_row, table.tables("ops"))}
    unmeasured = dict(map(_unmeasured, table.tables("unmeasured", [])))
    found = load_fusions() if fusions is None else fusions
    evidence = Evidence(
        path, ort, cuda, cudnn, platform, gpu, measured, raw, every, rows, options, found,
        unmeasured,
    )  # fmt: skip
    return table.finished(evidence)


def _unmeasured(table: Table) -> tuple[str, str]:
    """An op of the release without a row, and why (bundle prunes nothing for it)."""
    return table.finished((table.string("op"), table.string("reason")))


def _options(table: Table) -> dict[str, str]:
    """The CUDA EP options the table was measured with ({}: the defaults), as strings."""
    return _each(table, "provider_options", lambda sub, key: str(sub.string(key)))


def _by_type(table: Table) -> dict[str, tuple[str, ...]]:
    """A row's loads per element type ({}: the row does not tell them apart)."""
    return _each(table, "by_type", lambda sub, key: tuple(sub.strings(key)))


def _each(table: Table, key: str, read: Callable[[Table, str], _V]) -> dict[str, _V]:
    """The optional sub-table `key`, each of its keys read with `read`."""
    keys = dict(table.peek(key) or {})
    sub = table.table(key, None)
    if sub is None:
        return {}
    found = {str(name): read(sub, name) for name in keys}
    sub.done()
    return found


def _op_row(table: Table) -> OpLoads:
    row = OpLoads(
        table.string("op"),
        table.strings("loads"),
        table.string("model", ""),
        table.integer("configurations", 1),
        table.boolean("config_dependent", False),
        table.string("basis", MEASURED),
        table.string("note", ""),
        _by_type(table),
    )
    if row.basis not in BASES:
        raise table.error(f"{table.where}: basis {row.basis!r} is not one of {', '.join(BASES)}.")
    return table.finished(row)


def _both(one: frozenset[str], other: frozenset[str]) -> frozenset[str]:
    """Two sources' types; empty ("unknown") when either is unknown."""
    return one | other if one and other else frozenset()


def load_fusions(path: Path | None = None) -> tuple[Fusion, ...]:
    """The fusions of manifests/evidence/fusions.toml (none when the file is absent)."""
    path = path or evidence_dir() / FUSIONS_NAME
    if not path.is_file():
        return ()
    table = load_toml(path)
    table.string("source")
    fusions = tuple(
        item.finished(Fusion(item.string("op"), item.strings("made_of"), item.string("by")))
        for item in table.tables("fusions")
    )
    return table.finished(fusions)


def all_evidence(folders: Sequence[Path]) -> list[Evidence]:
    """Every evidence table of `folders` (evidence_dirs), each folder's by name."""
    found = []
    fusions = load_fusions()
    for folder in folders:
        found += [
            load_evidence(path, fusions)
            for path in sorted(folder.glob("*.toml"))
            if path.name != FUSIONS_NAME
        ]
    return found
