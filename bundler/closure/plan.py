"""Decide layer: the Plan: the one document every command of bundle is a view of.

It holds the resolution (roots, every DLL with its classification and facts, the labelled edges
between them, findings) and serialises to JSON with a schema_version. `deps` prints it, `--json`
dumps it, and later stages (build, audit, render) read it instead of resolving again.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from bundler import __version__
from bundler.errors import PlanFormatError

SCHEMA_VERSION = 1
MAX_CHAINS = 200


class Status(StrEnum):
    APP = "app"  # an input file given on the command line
    BUNDLED = "bundled"  # found in a search folder; ships next to the app
    SYSTEM = "system"  # part of every Windows install the profile targets
    API_SET = "api-set"  # virtual name resolved by the loader's API set schema
    DRIVER = "driver"  # provided by the GPU driver: required on the target, never shipped
    REDIST = "redist"  # VC++ runtime installed by vc_redist.x64.exe (--vc-runtime installer)
    MISSING = "missing"  # needed, but no search folder has a usable file
    PRUNED = "pruned"  # left out: no op of the app's models loads it (bundler/pruning/prune.py)


class EdgeKind(StrEnum):
    IMPORT = "import"
    DELAY_IMPORT = "delay-import"
    RUNTIME = "runtime"  # a profile runtime rule: LoadLibrary at run time
    PROFILE_ROOT = "profile-root"  # always shipped by the profile


EDGE_LABELS = {
    EdgeKind.IMPORT: "import",
    EdgeKind.DELAY_IMPORT: "delay-import",
    EdgeKind.RUNTIME: "runtime",
    EdgeKind.PROFILE_ROOT: "profile root",
}


@dataclass(frozen=True)
class PlanFile:
    key: str  # lower-case name: the identity of the DLL
    name: str  # spelling to display and to write on disk
    status: Status
    source: str | None = None  # where the file was found (bundled, app)
    size: int | None = None
    machine: str | None = None
    file_version: str | None = None
    product_name: str | None = None  # the version resource's ProductName (the app's, for setup)
    linker_version: str | None = None
    signed: bool | None = None
    managed: bool | None = None  # a .NET image (CLR header): it loads the CLR via mscoree.dll
    sha256: str | None = None  # filled when a stage hashes the file (build), not by deps
    note: str | None = None  # e.g. why a missing file could not be used
    artifact: str | None = None  # the profile artifact that provided the file
    origin: str | None = None  # URL, mirror file, "pip:pkg==ver" or local folder it came from
    archive_sha256: str | None = None  # the verified archive the file was extracted from
    member: str | None = None  # the file's path inside that archive


@dataclass(frozen=True)
class Edge:
    parent: str | None  # None for a profile root
    child: str
    kind: EdgeKind
    detail: str | None = None  # the runtime rule's reason, or the pattern it matched
    # Where an edge of an absent DLL (its import tables) or a pattern's file name was taken
    # from when the folder could not show it: "the lock file" or "the profile".
    inferred: str | None = None


@dataclass(frozen=True)
class Finding:
    kind: str  # e.g. "machine-mismatch", "pattern-unmatched"
    name: str
    message: str
    path: str | None = None


@dataclass(frozen=True)
class Plan:
    """The one document build, audit, render and --json come from: the closure of the roots,
    each file's status and the edges that explain why it is there."""

    profile: str
    architecture: str
    min_windows: str
    search_folders: tuple[str, ...]
    roots: tuple[str, ...]  # keys, app files first, then profile roots
    files: tuple[PlanFile, ...]
    edges: tuple[Edge, ...]
    findings: tuple[Finding, ...] = ()
    tool_version: str = __version__
    schema_version: int = SCHEMA_VERSION
    _index: dict[str, PlanFile] = field(init=False, compare=False, repr=False)
    _children: dict[str, list[Edge]] = field(init=False, compare=False, repr=False)
    _parents: dict[str, list[Edge]] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        """Lookup maps derived once from the (frozen) files and edges."""
        children: dict[str, list[Edge]] = {}
        parents: dict[str, list[Edge]] = {}
        for edge in self.edges:
            if edge.parent is not None:
                children.setdefault(edge.parent, []).append(edge)
            parents.setdefault(edge.child, []).append(edge)
        object.__setattr__(self, "_index", {item.key: item for item in self.files})
        object.__setattr__(self, "_children", children)
        object.__setattr__(self, "_parents", parents)

    def file(self, name: str) -> PlanFile | None:
        return self._index.get(name.lower())

    def with_status(self, *statuses: Status) -> list[PlanFile]:
        return [item for item in self.files if item.status in statuses]

    @property
    def missing(self) -> list[PlanFile]:
        return self.with_status(Status.MISSING)

    def children(self, key: str) -> list[Edge]:
        return self._children.get(key, [])

    def parents(self, key: str) -> list[Edge]:
        """The edges that need `key` (a profile root's has no parent)."""
        return self._parents.get(key, [])

    def import_closure(self, start: str) -> dict[str, list[Edge]]:
        """What the loader maps together with `start`: its static imports, transitively, each
        with the shortest chain of import edges from `start`. Delay imports and runtime loads
        are left out: they happen later, when first used. This is what tells a start-up
        failure (error 126) from one that strikes at the first operation."""
        reached: dict[str, list[Edge]] = {start.lower(): []}
        queue = [start.lower()]
        while queue:
            key = queue.pop(0)
            for edge in self.children(key):
                if edge.kind is EdgeKind.IMPORT and edge.child not in reached:
                    reached[edge.child] = [*reached[key], edge]
                    queue.append(edge.child)
        return reached

    def chains_to(self, name: str) -> list[list[Edge]]:
        """Every cycle-free chain of edges from a root to `name`, root side first."""
        key = name.lower()
        chains: list[list[Edge]] = []
        self._walk_up(key, self._parents, [], {key}, chains)
        return sorted(chains, key=len)

    def _walk_up(
        self,
        key: str,
        parents: dict[str, list[Edge]],
        suffix: list[Edge],
        seen: set[str],
        chains: list[list[Edge]],
    ) -> None:
        incoming = parents.get(key, [])
        if key in self.roots and all(edge.parent is not None for edge in incoming):
            chains.append(suffix)  # an app file given on the command line starts this chain
        for edge in incoming:
            if len(chains) >= MAX_CHAINS:
                return
            if edge.parent is None:
                chains.append([edge, *suffix])  # a profile root starts this chain
            elif edge.parent not in seen:
                self._walk_up(edge.parent, parents, [edge, *suffix], seen | {edge.parent}, chains)

    def chain_text(self, chain: list[Edge], target: str) -> str:
        """`hello.exe -import-> onnxruntime.dll -runtime-> ...`, display spellings."""
        if not chain:
            return f"{self._name(target)} (given on the command line)"
        start, rest = chain[0], chain
        if start.parent is None:
            text, rest = f"[profile root] -> {self._name(start.child)}", chain[1:]
        else:
            text = self._name(start.parent)
        for edge in rest:
            text += f" -{EDGE_LABELS[edge.kind]}-> {self._name(edge.child)}"
        return text

    def why(self, name: str) -> str | None:
        """The shortest chain that needs `name`, as text (for the lock file)."""
        chains = self.chains_to(name)
        return self.chain_text(chains[0], name.lower()) if chains else None

    def _name(self, key: str) -> str:
        item = self._index.get(key)
        return item.name if item else key

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for derived in ("_index", "_children", "_parents"):
            data.pop(derived)
        return {"schema_version": data.pop("schema_version"), **data}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def plan_from_json(text: str, origin: str) -> Plan:
    try:
        data = json.loads(text)
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise PlanFormatError(
                f"{origin}: plan schema_version {version!r} is not {SCHEMA_VERSION}; "
                "regenerate it with this version of bundle."
            )
        return Plan(
            profile=data["profile"],
            architecture=data["architecture"],
            min_windows=data["min_windows"],
            search_folders=tuple(data["search_folders"]),
            roots=tuple(data["roots"]),
            files=tuple(
                PlanFile(**{**item, "status": Status(item["status"])}) for item in data["files"]
            ),
            edges=tuple(Edge(**{**item, "kind": EdgeKind(item["kind"])}) for item in data["edges"]),
            findings=tuple(Finding(**item) for item in data["findings"]),
            tool_version=data["tool_version"],
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise PlanFormatError(f"{origin}: not a valid bundle plan ({exc}).") from None
