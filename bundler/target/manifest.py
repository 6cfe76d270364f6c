"""Read layer: reading manifests/ TOML files into typed values with messages that name file and key.

Raw dicts never leave the loaders: each loader walks its table with a `Table`, which takes keys
out one by one, checks their types, and rejects keys it was not asked for (typos in a profile
must not be silently ignored).
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from bundler.errors import BundleError, ProfileError

SUPPORTED_SCHEMA = 1
_HEX = re.compile(r"[0-9a-f]+")


_T = TypeVar("_T")


def load_toml(path: Path) -> Table:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read manifest: {exc.strerror}.") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: invalid TOML: {exc}.") from None
    table = Table(data, str(path))
    schema = table.integer("schema_version")
    if schema != SUPPORTED_SCHEMA:
        raise ProfileError(
            f"{path}: schema_version {schema} is not supported (this bundle reads "
            f"{SUPPORTED_SCHEMA}); upgrade bundle or fix the manifest."
        )
    return table


class Table:
    """A TOML table being validated; `where` names the file and key path for messages."""

    def __init__(
        self, data: dict[str, Any], where: str, error: type[BundleError] = ProfileError
    ) -> None:
        self._data = dict(data)
        self.where = where
        self.error = error

    def _fail(self, key: str, problem: str) -> BundleError:
        return self.error(f"{self.where}: key '{key}' {problem}.")

    def _take(self, key: str, kind: type, default: Any = ...) -> Any:
        if key not in self._data:
            if default is ...:
                raise self._fail(key, "is required")
            return default
        value = self._data.pop(key)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self._fail(key, f"must be a {kind.__name__}, not {type(value).__name__}")
        return value

    def string(self, key: str, default: Any = ...) -> Any:
        return self._take(key, str, default)

    def boolean(self, key: str, default: Any = ...) -> Any:
        return self._take(key, bool, default)

    def integer(self, key: str, default: Any = ...) -> Any:
        return self._take(key, int, default)

    def strings(self, key: str, default: Any = ...) -> tuple[str, ...]:
        values = self._take(key, list, default)
        if values is None:
            return default  # type: ignore[no-any-return]
        if not all(isinstance(item, str) for item in values):
            raise self._fail(key, "must be a list of strings")
        return tuple(values)

    def hexdigest(self, key: str, length: int, default: Any = ...) -> Any:
        value = self.string(key, default)
        if value is not None and (len(value) != length or not _HEX.fullmatch(value)):
            raise self._fail(key, f"must be {length} lower-case hex digits")
        return value

    def table(self, key: str, default: Any = ...) -> Any:
        """The sub-table `key`; with a default, that default when the key is absent."""
        data = self._take(key, dict, default)
        if data is default:
            return default
        return Table(data, f"{self.where} [{key}]", self.error)

    def tables(self, key: str, default: Any = ...) -> list[Table]:
        items = self._take(key, list, default)
        if not all(isinstance(item, dict) for item in items):
            raise self._fail(key, "must be an array of tables")
        return [
            Table(item, f"{self.where} [{key}#{index + 1}]", self.error)
            for index, item in enumerate(items)
        ]

    def peek(self, key: str) -> Any:
        """The raw value of `key` (None if absent), for a key that takes more than one type."""
        return self._data.get(key)

    def record(self, kind: type[_T], **read: Any) -> _T:
        """A frozen dataclass `kind` read from this whole table: each field by its annotation
        (str, bool, int, tuple[str, ...], each optional where the field has a default); the
        fields a caller checks more closely come read already in `read`."""
        values = dict(read)
        for item in dataclasses.fields(kind):  # type: ignore[arg-type]
            if item.name in values:
                continue
            reader = _READERS[str(item.type).removesuffix(" | None")]
            default = ... if item.default is dataclasses.MISSING else item.default
            values[item.name] = reader(self, item.name, default)
        return self.finished(kind(**values))

    def finished(self, value: _T) -> _T:
        """`value`, read from this table, once every key has been read (see done)."""
        self.done()
        return value

    def done(self) -> None:
        """Every key must have been read: an unknown key is a typo or a newer schema."""
        if self._data:
            unknown = ", ".join(sorted(self._data))
            raise self.error(f"{self.where}: unknown key(s): {unknown}.")


# A dataclass field's annotation -> how Table.record reads it.
_READERS: dict[str, Callable[[Table, str, Any], Any]] = {
    "str": Table.string,
    "bool": Table.boolean,
    "int": Table.integer,
    "tuple[str, ...]": Table.strings,
}
