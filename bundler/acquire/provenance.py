"""Decide layer: which artifact, archive and member each bundled file came from.

The resolver only knows paths; the lock file, the SBOM and the licence folder need to know that
`.../extracted/<archive sha256>/nvidia/cudnn/bin/cudnn64_9.dll` is member
`nvidia/cudnn/bin/cudnn64_9.dll` of the pinned cuDNN wheel. Pure: paths are compared, not read.
Both sides are made absolute first: the resolver's search folders are absolute, an artifact's
folder is under the cache root as given (a relative --cache-dir stays relative).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from bundler.acquire.acquired import Acquired
from bundler.closure.plan import Plan, PlanFile, Status


def attach_provenance(plan: Plan, acquired: Sequence[Acquired]) -> Plan:
    return replace(plan, files=tuple(_with_origin(item, acquired) for item in plan.files))


def _with_origin(item: PlanFile, acquired: Sequence[Acquired]) -> PlanFile:
    if item.status is not Status.BUNDLED or item.source is None:
        return item
    path = Path(os.path.abspath(item.source))
    for artifact in acquired:
        folder = Path(os.path.abspath(artifact.folder))
        if path.is_relative_to(folder):
            member = path.relative_to(folder).as_posix() if artifact.sha256 else None
            return replace(
                item,
                artifact=artifact.artifact,
                origin=artifact.pinned,
                archive_sha256=artifact.sha256,
                member=member,
            )
    return replace(item, origin=str(path.parent))
