"""A synthetic ORT-like release for interruption and concurrency tests: a zip of real-shaped
PE files (onnxruntime.dll importing four provider DLLs), its pinned profile, and a throttled
route on the test HTTP server so that a download lasts long enough to be interrupted.

The DLLs carry a seeded random overlay (incompressible bytes after the last section, which
the PE reader ignores), so hashing, extracting and copying them takes measurable time. The
zip is stored, not deflated: building it must stay cheap. Profiles accept only https:// URLs,
so the pinned URL is unreachable and the bytes come from `--mirror http://127.0.0.1:PORT/dl`
with `--allow-http`, exactly as a corporate mirror is used.
"""

from __future__ import annotations

import hashlib
import io
import random
import re
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tests.support.httpserver import Handler, HttpServer
from tests.support.pefactory import PESpec, build_pe
from tests.support.profiles import artifact, profile, source

NAME = "onnxruntime-slow-1.0.zip"
PATH = f"/dl/{NAME}"
DEPS = ("dep_a.dll", "dep_b.dll", "dep_c.dll", "dep_d.dll")
TOP = "ort-slow"
_RANGE = re.compile(r"bytes=(\d+)-")


@dataclass(frozen=True)
class Release:
    archive: bytes
    sha256: str
    members: dict[str, bytes]  # archive path -> bytes

    def write_profile(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "slow-release.toml"
        url = f"https://downloads.invalid/dl/{NAME}"
        zip_source = source("url", url=url, sha256=self.sha256, size=len(self.archive))
        provides = ["onnxruntime.dll", "dep_*.dll"]
        ort = artifact("onnxruntime", "1.0", provides, zip_source, licenses=["LICENSE"])
        description = "a synthetic release served slowly by a local server"
        path.write_text(profile("slow-release", ["onnxruntime.dll"], ort, description=description))
        return path


def make_release(overlay: int = 3 << 20, seed: int = 11) -> Release:
    """onnxruntime.dll and its four imports, each with `overlay` random bytes appended."""
    rng = random.Random(seed)
    dlls = {"onnxruntime.dll": PESpec(imports=("KERNEL32.dll", *DEPS), file_version=(1, 0, 0, 0))}
    dlls |= {name: PESpec(imports=("KERNEL32.dll",), file_version=(1, 0, 0, 0)) for name in DEPS}
    members = {
        f"{TOP}/lib/{name}": build_pe(spec) + rng.randbytes(overlay) for name, spec in dlls.items()
    }
    members[f"{TOP}/LICENSE"] = b"MIT (synthetic)\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, data in members.items():
            archive.writestr(zipfile.ZipInfo(name, (2024, 9, 4, 12, 0, 0)), data)
    data = buffer.getvalue()
    return Release(data, hashlib.sha256(data).hexdigest(), members)


def app_exe() -> bytes:
    return build_pe(PESpec(dll=False, imports=("onnxruntime.dll", "KERNEL32.dll")))


def serve_slowly(server: HttpServer, data: bytes, rate: int, chunk: int = 64 << 10) -> None:
    """Serve `data` at about `rate` bytes per second, honouring `Range: bytes=N-` (so an
    interrupted download resumes), in chunks of `chunk` bytes."""

    def behaviour(handler: Handler, _n: int) -> None:
        match = _RANGE.fullmatch((handler.headers.get("Range") or "").strip())
        start = int(match[1]) if match and int(match[1]) < len(data) else 0
        handler.send_response(206 if start else 200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Accept-Ranges", "bytes")
        if start:
            handler.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        handler.send_header("Content-Length", str(len(data) - start))
        handler.end_headers()
        if handler.command == "HEAD":
            return
        for offset in range(start, len(data), chunk):
            if server.stopping.is_set():
                return
            handler.wfile.write(data[offset : offset + chunk])
            time.sleep(chunk / rate)

    server.route(PATH, behaviour)


def mirror_args(server: HttpServer) -> list[str]:
    return ["--mirror", server.url("/dl"), "--allow-http"]
