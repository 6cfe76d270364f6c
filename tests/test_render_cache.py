"""Rendered outputs kept between runs (bundler/render/kept.py): a repeated rendering is read
back without importing jinja2, and the cache never changes what a rendering says: an edited
template, a damaged entry, values that are not plain data, True against 1, a crowded or an
unwritable cache folder all still give the text the template engine gives.

Every test has its own cache folder ($BUNDLE_CACHE_DIR under tmp_path) and its own owner of the
caches (Templates): a new owner is a new run, with the files under the cache folder kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bundler.closure.lock import Lock, LockedFile
from bundler.errors import ConfigError
from bundler.render import kept as render_cache
from bundler.render.engine import Templates
from bundler.render.postbuild import SCRIPT_TEMPLATE, postbuild_values
from bundler.target import resources
from tests.support.httpserver import HttpServer
from tests.support.paths import REPO
from tests.support.slowbuilds import ENV, setup
from tests.support.slowrelease import make_release, mirror_args
from tests.support.slowrelease import serve_slowly as serve


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("BUNDLE_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def engine(cache_dir: Path) -> Templates:
    """One run's owner of the caches, over the test's cache folder."""
    return Templates(cache_dir)


@pytest.fixture
def templates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A templates folder of the test's own, in place of bundle's."""
    folder = tmp_path / "templates"
    folder.mkdir()
    monkeypatch.setattr(resources, "templates_dir", lambda: folder)
    return folder


@pytest.fixture
def engine_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The templates the engine really rendered (Templates.render calls _render on every miss,
    and only then)."""
    calls: list[str] = []
    real = Templates._render

    def counting(self: Templates, template: str, values: dict[str, object]) -> str:
        calls.append(template)
        return real(self, template, values)

    monkeypatch.setattr(Templates, "_render", counting)
    return calls


def entries(cache_dir: Path) -> list[Path]:
    folder = cache_dir / "templates"
    return sorted(folder.glob("rendered-*")) if folder.is_dir() else []


def entry_bytes(text: str) -> bytes:
    """An entry as the module's docstring describes it: the SHA-256 of the text, a newline,
    the text in UTF-8."""
    body = text.encode("utf-8")
    return hashlib.sha256(body).hexdigest().encode() + b"\n" + body


# --- a second run is read back without jinja2 ---------------------------------------------------

RUN = """
import json, sys
from bundler.closure.lock import Lock, LockedFile
from bundler.config.cache_root import cache_root
from bundler.render.engine import Templates
from bundler.render.postbuild import SCRIPT_TEMPLATE, postbuild_values

def locked(name, kind="bundled"):
    return LockedFile(name, kind, "0" * 64, 1)

lock = Lock("ort-1.19.2-cpu", "x64", "installer", (
    locked("onnxruntime.dll"),
    locked("100% ünï.dll"),
    locked("hello.exe", "app"),
    locked("licenses/onnxruntime/LICENSE", "license"),
), app="hello.exe")
before = "jinja2" in sys.modules
text = Templates(cache_root(None)).render(
    SCRIPT_TEMPLATE, **postbuild_values(lock, source="..\\\\bundle\\\\")
)
print(json.dumps({"text": text, "before": before, "jinja2": "jinja2" in sys.modules}))
"""


def sample_lock() -> Lock:
    """The lock RUN builds, for the check rendered here."""

    def locked(name: str, kind: str = "bundled") -> LockedFile:
        return LockedFile(name, kind, "0" * 64, 1)

    return Lock(
        "ort-1.19.2-cpu",
        "x64",
        "installer",
        (
            locked("onnxruntime.dll"),
            locked("100% ünï.dll"),
            locked("hello.exe", "app"),
            locked("licenses/onnxruntime/LICENSE", "license"),
        ),
        app="hello.exe",
    )


def run_bundle_python(cache_dir: Path) -> dict[str, object]:
    env = {**os.environ, "BUNDLE_CACHE_DIR": str(cache_dir), "PYTHONIOENCODING": "utf-8"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", RUN],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_second_run_reads_the_postbuild_script_back_without_jinja2(cache_dir: Path) -> None:
    first = run_bundle_python(cache_dir)
    assert first["before"] is False  # nothing imported jinja2 before render()
    assert first["jinja2"] is True  # the first run needed the engine
    assert len(entries(cache_dir)) == 1

    second = run_bundle_python(cache_dir)
    assert second["jinja2"] is False
    assert second["text"] == first["text"]

    # The text both runs gave is the engine's own rendering (Templates._render bypasses the cache)
    # and is the real script: escaped and with the UTF-8 switch for the non-ASCII name.
    values = postbuild_values(sample_lock(), source="..\\bundle\\")
    assert first["text"] == Templates(None)._render(SCRIPT_TEMPLATE, values)
    text = str(first["text"])
    assert '"%SOURCE%100%% ünï.dll"' in text
    assert 'set "SOURCE=%~dp0..\\bundle\\"' in text
    assert "chcp 65001" in text
    assert "hello.exe" in text and "LICENSE" in text
    assert entries(cache_dir)[0].read_bytes() == entry_bytes(text)


def test_a_valid_entry_is_what_render_returns(
    templates: Path, cache_dir: Path, engine_calls: list[str], engine: Templates
) -> None:
    """The entry's format is the one documented: an entry written by hand is served as is."""
    (templates / "t.j2").write_text("Hello {{ name }}", encoding="utf-8")
    key = engine.output_key("t.j2", {"name": "World"})
    assert key is not None
    folder = cache_dir / "templates"
    folder.mkdir(parents=True)
    (folder / f"rendered-{key}").write_bytes(entry_bytes("from the cache: ünï"))

    assert engine.render("t.j2", name="World") == "from the cache: ünï"
    assert engine_calls == []


# --- an edited template is rendered again ---------------------------------------------------------


def test_an_edited_template_is_never_served_stale(
    templates: Path, cache_dir: Path, engine_calls: list[str], engine: Templates
) -> None:
    template = templates / "t.j2"
    template.write_text("Hello {{ name }}", encoding="utf-8")
    assert engine.render("t.j2", name="World") == "Hello World"
    assert engine.render("t.j2", name="World") == "Hello World"
    assert engine_calls == ["t.j2"]  # the second was a hit
    stamp = template.stat()

    # Same length and, put back, the same modification time: only the content tells.
    template.write_text("Howdy {{ name }}", encoding="utf-8")
    os.utime(template, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    engine = Templates(cache_dir)  # a new run; the folder on disk is kept
    assert entries(cache_dir)

    assert engine.render("t.j2", name="World") == "Howdy World"
    assert engine_calls == ["t.j2", "t.j2"]


def test_an_edited_included_template_is_never_served_stale(
    templates: Path, engine: Templates
) -> None:
    (templates / "t.j2").write_text('[{% include "part.j2" %}]', encoding="utf-8")
    part = templates / "part.j2"
    part.write_text("one {{ name }}", encoding="utf-8")
    assert engine.render("t.j2", name="x") == "[one x]"

    part.write_text("two {{ name }}", encoding="utf-8")
    engine = Templates(engine.root)  # a new run
    assert engine.render("t.j2", name="x") == "[two x]"


# --- a damaged entry is a miss --------------------------------------------------------------------


def flip_body_byte(data: bytes) -> bytes:
    at = data.index(b"\n") + 1  # the first byte of the text, an ASCII letter: stays UTF-8
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


def flip_checksum_byte(data: bytes) -> bytes:
    return bytes([data[0] ^ 0x01]) + data[1:]


def truncate(data: bytes) -> bytes:
    return data[:-3]


def empty(data: bytes) -> bytes:
    return b""


@pytest.mark.parametrize("damage", [flip_body_byte, flip_checksum_byte, truncate, empty])
def test_a_damaged_entry_is_a_miss_and_is_written_again(
    templates: Path,
    cache_dir: Path,
    engine_calls: list[str],
    damage: Callable[[bytes], bytes],
    engine: Templates,
) -> None:
    (templates / "t.j2").write_text("Hello {{ name }}, ünï", encoding="utf-8")
    assert engine.render("t.j2", name="World") == "Hello World, ünï"
    [entry] = entries(cache_dir)
    assert entry.read_bytes() == entry_bytes("Hello World, ünï")

    entry.write_bytes(damage(entry.read_bytes()))
    assert entry.read_bytes() != entry_bytes("Hello World, ünï")
    assert engine.render("t.j2", name="World") == "Hello World, ünï"
    assert engine_calls == ["t.j2", "t.j2"]  # the damaged entry was not used

    assert entries(cache_dir) == [entry]
    assert entry.read_bytes() == entry_bytes("Hello World, ünï")
    assert engine.render("t.j2", name="World") == "Hello World, ünï"
    assert engine_calls == ["t.j2", "t.j2"]  # and the rewritten one verifies again


# --- values that are not plain data are not cached ------------------------------------------------


class Thing:
    def __str__(self) -> str:
        return "a thing"


@pytest.mark.parametrize(
    "value",
    [
        Path("some/folder"),
        Thing(),
        [1, Path("inside/a/list")],
        {"nested": Thing()},
        {1: "key not a string"},
        {"one"},
        b"bytes",
    ],
    ids=["path", "object", "in-list", "in-dict", "int-key", "set", "bytes"],
)
def test_values_that_are_not_plain_data_are_rendered_but_not_kept(
    templates: Path, cache_dir: Path, engine_calls: list[str], value: object, engine: Templates
) -> None:
    (templates / "t.j2").write_text("<{{ value }}>", encoding="utf-8")
    assert engine.output_key("t.j2", {"value": value}) is None
    expected = f"<{value}>"  # Jinja without autoescape writes str(value)
    assert engine.render("t.j2", value=value) == expected
    assert engine.render("t.j2", value=value) == expected
    assert engine_calls == ["t.j2", "t.j2"]
    assert entries(cache_dir) == []


class LooksLikeX:
    """Its repr is the repr of the string "x", its text is not: a key made of repr would
    confuse the two."""

    def __repr__(self) -> str:
        return "'x'"

    def __str__(self) -> str:
        return "y"


def test_an_object_with_a_plain_repr_does_not_get_a_plain_values_entry(
    templates: Path, engine: Templates
) -> None:
    (templates / "t.j2").write_text("{{ value }}", encoding="utf-8")
    assert engine.render("t.j2", value="x") == "x"
    assert engine.render("t.j2", value=LooksLikeX()) == "y"


class Shouty(str):
    """A str whose text differs from its repr: subclasses of plain types are not plain."""

    def __str__(self) -> str:
        return "other"


class Eleven(int):
    def __str__(self) -> str:
        return "eleven"


@pytest.mark.parametrize(
    ("odd", "plain", "odd_text", "plain_text"),
    [(Shouty("x"), "x", "other", "x"), (Eleven(11), 11, "eleven", "11")],
    ids=["str-subclass", "int-subclass"],
)
def test_a_subclass_of_a_plain_type_never_answers_for_the_plain_value(
    templates: Path,
    cache_dir: Path,
    odd: object,
    plain: object,
    odd_text: str,
    plain_text: str,
    engine: Templates,
) -> None:
    (templates / "t.j2").write_text("{{ value }}", encoding="utf-8")
    assert engine.output_key("t.j2", {"value": odd}) is None
    assert engine.render("t.j2", value=odd) == odd_text  # first: it must not be stored
    assert engine.render("t.j2", value=plain) == plain_text
    assert engine.render("t.j2", value=odd) == odd_text
    assert engine.render("t.j2", value=plain) == plain_text  # a hit now
    assert len(entries(cache_dir)) == 1


def test_a_list_holding_itself_is_rendered_as_jinja2_renders_it(
    templates: Path, cache_dir: Path, engine: Templates
) -> None:
    loop: list[object] = [1]
    loop.append(loop)
    (templates / "t.j2").write_text("{{ value }}", encoding="utf-8")
    assert engine.output_key("t.j2", {"value": loop}) is None
    assert engine.render("t.j2", value=loop) == "[1, [...]]"  # str() of such a list
    assert entries(cache_dir) == []


def test_another_jinja2_gives_other_keys(
    templates: Path, monkeypatch: pytest.MonkeyPatch, engine: Templates
) -> None:
    """An upgraded jinja2 may render the same template differently: its file's identity is
    part of the key."""
    (templates / "t.j2").write_text("{{ value }}", encoding="utf-8")
    before = engine.output_key("t.j2", {"value": "x"})
    monkeypatch.setattr(render_cache, "_jinja2_identity", lambda: b"jinja2 of another size")
    assert Templates(engine.root).output_key("t.j2", {"value": "x"}) not in (None, before)


# --- True is not 1 ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("one", "other", "one_text", "other_text"),
    [
        (True, 1, "True", "1"),
        (False, 0, "False", "0"),
        (1, 1.0, "1", "1.0"),
        ((1, 2), [1, 2], "(1, 2)", "[1, 2]"),
        ("1", 1, "1", "1"),  # the same text, yet different values: two entries
        (None, "None", "None", "None"),
    ],
)
def test_equal_looking_values_have_their_own_entries(
    templates: Path,
    cache_dir: Path,
    engine_calls: list[str],
    one: object,
    other: object,
    one_text: str,
    other_text: str,
    engine: Templates,
) -> None:
    (templates / "t.j2").write_text("{{ flag }}", encoding="utf-8")
    one_key = engine.output_key("t.j2", {"flag": one})
    other_key = engine.output_key("t.j2", {"flag": other})
    assert one_key is not None and other_key is not None
    assert one_key != other_key

    for _ in range(2):  # the second round is read from a warm cache
        assert engine.render("t.j2", flag=one) == one_text
        assert engine.render("t.j2", flag=other) == other_text
        assert engine.render("t.j2", flag=one) == one_text
    assert engine_calls == ["t.j2", "t.j2"]
    assert {entry.name for entry in entries(cache_dir)} == {
        f"rendered-{one_key}",
        f"rendered-{other_key}",
    }


def test_the_key_depends_on_the_template_name(templates: Path, engine: Templates) -> None:
    (templates / "a.j2").write_text("A {{ v }}", encoding="utf-8")
    (templates / "b.j2").write_text("B {{ v }}", encoding="utf-8")
    assert engine.render("a.j2", v=1) == "A 1"
    assert engine.render("b.j2", v=1) == "B 1"
    assert engine.render("a.j2", v=1) == "A 1"


# --- a failed rendering is not kept ---------------------------------------------------------------


def test_a_refused_value_is_refused_again(
    templates: Path, cache_dir: Path, engine: Templates
) -> None:
    (templates / "t.j2").write_text('"{{ value | cmd_quoted }}"', encoding="utf-8")
    for _ in range(2):
        with pytest.raises(ConfigError, match="double quote"):
            engine.render("t.j2", value='a"b')
    assert entries(cache_dir) == []


# --- pruning ------------------------------------------------------------------------------------


def test_only_the_newest_entries_are_kept(
    templates: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch, engine: Templates
) -> None:
    monkeypatch.setattr(render_cache, "KEEP", 3)
    (templates / "t.j2").write_text("n={{ n }}", encoding="utf-8")
    folder = cache_dir / "templates"
    base = time.time() - 1000  # every stamp set below is older than a new entry's
    # Each entry gets its stamp after it is written (and after the pruning its store ran), in
    # an order that is neither the order of writing nor of the names.
    stamps = {0: 50, 1: 10, 2: 40, 3: 20, 4: 30}
    keys: dict[int, str] = {}
    for n, offset in stamps.items():
        assert engine.render("t.j2", n=n) == f"n={n}"
        key = engine.output_key("t.j2", {"n": n})
        assert key is not None
        keys[n] = key
        os.utime(folder / f"rendered-{key}", (base + offset, base + offset))

    # 4th store: 0 (50), 1 (10), 2 (40) and the new 3: 1 goes. 5th: 0 (50), 2 (40), 3 (20) and
    # the new 4: 3 goes.
    assert {entry.name for entry in entries(cache_dir)} == {
        f"rendered-{keys[n]}" for n in (0, 2, 4)
    }
    # jinja2's compiled template shares the folder and is not an entry: it stays.
    assert [p for p in folder.iterdir() if not p.name.startswith("rendered-")]
    assert engine.render("t.j2", n=1) == "n=1"  # a pruned entry is simply rendered again


def test_an_entry_read_again_is_kept_longer(
    templates: Path,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    engine_calls: list[str],
    engine: Templates,
) -> None:
    """Pruning goes by last use: a hit renews the entry."""
    monkeypatch.setattr(render_cache, "KEEP", 2)
    (templates / "t.j2").write_text("n={{ n }}", encoding="utf-8")
    folder = cache_dir / "templates"
    old = time.time() - 1000
    for n in (0, 1):
        engine.render("t.j2", n=n)
        key = engine.output_key("t.j2", {"n": n})
        os.utime(folder / f"rendered-{key}", (old + n, old + n))  # 0 is the oldest
    assert engine.render("t.j2", n=0) == "n=0"  # a hit: 0 is now the newest
    engine.render("t.j2", n=2)  # a third entry: the least recently used (1) goes
    kept = {engine.output_key("t.j2", {"n": n}) for n in (0, 2)}
    assert {entry.name for entry in entries(cache_dir)} == {f"rendered-{key}" for key in kept}
    assert engine_calls == ["t.j2", "t.j2", "t.j2"]


# --- a cache that cannot be written -------------------------------------------------------------


def test_an_unwritable_cache_folder_only_means_rendering(
    templates: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine_calls: list[str]
) -> None:
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder", encoding="utf-8")
    engine = Templates(blocker / "cache")
    (templates / "t.j2").write_text("Hello {{ name }}", encoding="utf-8")

    assert engine.folder is None
    assert engine.render("t.j2", name="World") == "Hello World"
    assert engine.render("t.j2", name="World") == "Hello World"
    assert engine_calls == ["t.j2", "t.j2"]
    assert blocker.read_text(encoding="utf-8") == "not a folder"


def test_an_entry_that_cannot_be_written_only_means_rendering(
    templates: Path, cache_dir: Path, engine_calls: list[str], engine: Templates
) -> None:
    """The folder exists but a folder stands where the entry would go: neither reading nor
    replacing it works, and no temporary file is left behind."""
    (templates / "t.j2").write_text("Hello {{ name }}", encoding="utf-8")
    key = engine.output_key("t.j2", {"name": "World"})
    folder = cache_dir / "templates"
    (folder / f"rendered-{key}").mkdir(parents=True)

    assert engine.render("t.j2", name="World") == "Hello World"
    assert engine.render("t.j2", name="World") == "Hello World"
    assert engine_calls == ["t.j2", "t.j2"]
    assert not list(folder.glob(".rendered-*"))


# --- where the kept renderings live -------------------------------------------------------------


def test_a_build_keeps_its_renderings_in_the_cache_dir_it_was_given(
    tmp_path: Path, http_server: HttpServer, cache_dir: Path
) -> None:
    """--cache-dir holds everything the run keeps, the rendered scripts too ($BUNDLE_CACHE_DIR
    points elsewhere and must stay empty); `bundle cache clean` removes them."""
    release = make_release(overlay=0)
    serve(http_server, release.archive, 64 << 20)
    exe, profile = setup(tmp_path, release)
    given = tmp_path / "given-cache"
    build = [
        sys.executable, "-m", "bundler", "build", str(exe), "--profile", str(profile),
        "--cache-dir", str(given), "--out", str(tmp_path / "out"), *mirror_args(http_server),
    ]  # fmt: skip
    env = {**ENV, "BUNDLE_CACHE_DIR": str(cache_dir)}
    done = subprocess.run(build, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert len(list((given / "templates").glob("rendered-*"))) == 3  # iss, cmd, event
    assert not cache_dir.exists()
    clean = [sys.executable, "-m", "bundler", "cache", "clean", "--cache-dir", str(given)]
    assert subprocess.run(clean, capture_output=True, env=env).returncode == 0
    assert not (given / "templates").exists()
    assert (given / "blobs" / "sha256" / release.sha256).is_file()  # without --all: kept
