"""Act layer, shared by every renderer: the Jinja environment and the atomic write.

Templates (`templates/*.j2`) never see a raw value: each value passes through a filter named
after the language and the place it lands in (bundler.render.escaping decides them). The
environment is StrictUndefined (a missing value fails loudly) and does not autoescape (there
is no HTML here); output is written atomically, byte-identical for the same input (no time
stamps, no machine paths).
"""

from __future__ import annotations

import contextlib
import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundler.disk import files
from bundler.errors import ConfigError, OutputError
from bundler.render import kept as render_cache
from bundler.render.escaping import FILTERS
from bundler.target import resources

UTF8_BOM = "\ufeff"


def relative_folder(folder: Path, start: Path) -> str:
    """`folder` relative to `start` ("." for the same folder), for a generated file that must
    keep working when both are moved together. Windows cannot express a path to another
    drive relatively, so that is refused with the two folders named."""
    try:
        return os.path.relpath(folder.resolve(), start.resolve())
    except ValueError:
        raise ConfigError(
            f"{folder} and {start} are on different drives: the generated file needs a "
            "relative path between them; put it on the bundle's drive."
        ) from None


if TYPE_CHECKING:  # jinja2 is imported by the first render, not by every command
    import jinja2


class Templates:
    """The template machinery of one command, passed to every renderer: the jinja2 environment
    (made on the first rendering that needs it) and what is kept between runs under
    <root>/templates, compiled templates and rendered outputs (bundler.render.kept). `root` is
    the command's cache folder (bundler.config.cache_root.cache_root); None keeps nothing on disk.
    What the owner reads once (the folder, the templates' digest) holds for its command only."""

    def __init__(self, root: Path | None) -> None:
        self.root = root

    @cached_property
    def folder(self) -> Path | None:
        """<root>/templates, created on first use; None: nothing is kept."""
        return render_cache.cache_folder(self.root)

    @cached_property
    def environment(self) -> jinja2.Environment:
        import jinja2

        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(resources.templates_dir())),
            bytecode_cache=_bytecode_cache(self.folder),
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            keep_trailing_newline=True,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        env.filters.update(FILTERS)
        return env

    @cached_property
    def sources(self) -> bytes:
        """The digest of the templates and filters (bundler.render.kept.sources_digest)."""
        return render_cache.sources_digest()

    def output_key(self, template: str, values: dict[str, object]) -> str | None:
        """The rendered-output cache's key of this rendering (None: not kept)."""
        return render_cache.output_key(template, values, self.sources)

    def render(self, template: str, **values: Any) -> str:
        """The template rendered with the values; the same rendering as an earlier run is read
        back from bundler.render.kept instead (jinja2 is then not even imported)."""
        folder = self.folder
        key = None if folder is None else self.output_key(template, values)
        if folder is None or key is None:
            return self._render(template, values)
        text = render_cache.load(folder, key)
        if text is None:
            text = self._render(template, values)
            render_cache.store(folder, key, text)
        return text

    def _render(self, template: str, values: dict[str, Any]) -> str:
        import jinja2

        try:
            return self.environment.get_template(template).render(**values)
        except jinja2.UndefinedError as exc:  # a bug in bundle, not in the user's input
            raise RuntimeError(f"template {template}: {exc.message}") from exc


def _bytecode_cache(folder: Path | None) -> jinja2.BytecodeCache | None:
    """Compiled templates kept between runs, in `folder` (<cache>/templates): compiling the two
    templates of a build cost more than rendering them (benchmarks/README.md, P3). jinja2 keys
    each by its template's source and the Python version, so an edited template or another
    Python compiles anew; a folder that cannot be written only means compiling every time."""
    if folder is None:
        return None
    import jinja2

    class QuietCache(jinja2.FileSystemBytecodeCache):
        def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            try:
                super().load_bytecode(bucket)
            except Exception:  # a damaged entry is a miss: the template is compiled again
                bucket.reset()

        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            with contextlib.suppress(OSError):
                super().dump_bytecode(bucket)

    return QuietCache(str(folder))


def write_text(path: Path, text: str, *, bom: bool = False, newline: str = "\n") -> None:
    """Write `text` atomically (temporary name in the same folder, then rename), with the
    given line ending and an optional UTF-8 byte-order mark."""
    data = ((UTF8_BOM if bom else "") + text.replace("\n", newline)).encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        files.write_atomically(path, data)
    except OSError as exc:
        raise OutputError(
            f"{path}: cannot write: {exc.strerror}; choose a writable place for it."
        ) from None
