"""Each option is declared once (issue 39): bundler.config.option_table holds every option of
the command line, its flag, its help (a command's own wording beside it where one differs) and
whether a variable stands in for it; every command takes its options from there
(bundler.cli.flags), and nothing else in the package declares one. A variable that stands in
for an option is named after the option's flag, never spelt, and is what the command reads."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bundler.config.option_table import OPTIONS, Flag, table
from tests.support.paths import REPO
from tests.support.runs import cli
from tests.support.trees import write_tree

PACKAGE = REPO / "bundler"
ADAPTER = "cli/flags.py"  # the one module that turns the table's entries into typer's options
DECLARING = {"typer.Option", "click.Option", "click.option", "Option"}
# The names users have today (docs/building.md before the table was derived): a rename of an
# option must not rename its variable silently.
VARIABLES_TODAY = {"cache-dir": "BUNDLE_CACHE_DIR", "debug": "BUNDLE_DEBUG"}
VARIABLES_TODAY |= {"index-url": "PIP_INDEX_URL"}


def declarations(root: Path) -> list[str]:
    """`module:line call` of each option declared outside the table's adapter."""
    found = []
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            declares = isinstance(node, ast.Call) and ast.unparse(node.func) in DECLARING
            if declares and where != ADAPTER:
                found.append(f"{where}:{node.lineno} {ast.unparse(node)[:60]}")
    return found


def test_no_option_is_declared_outside_the_table() -> None:
    assert declarations(PACKAGE) == []


def test_an_option_declared_in_a_command_is_found(tmp_path: Path) -> None:
    planted = "import typer\n\ndef go(as_json: bool = typer.Option('--json', help='x')): ...\n"
    write_tree(tmp_path, {ADAPTER: "import typer\nOK = typer.Option('--json')\n"})
    write_tree(tmp_path, {"cli/extra_commands.py": planted})
    assert [found.split()[0] for found in declarations(tmp_path)] == ["cli/extra_commands.py:3"]


def test_the_table_refuses_an_option_declared_twice() -> None:
    with pytest.raises(ValueError, match="--json is declared twice"):
        table(Flag("--json", "Print the result as JSON."), Flag("--json", "Print it."))
    with pytest.raises(ValueError, match="--link/--copy is declared twice"):
        table(Flag("--link", "Hard-link."), Flag("--link/--copy", "Hard-link, or copy."))


def options() -> Iterator[tuple[str, Any]]:
    """(command path, option) of every option of every command, the root's included."""
    from bundler.cli.commands import command

    def walk(node: Any, path: str) -> Iterator[tuple[str, Any]]:
        for param in node.params:
            if param.param_type_name == "option":  # typer vendors click: no isinstance
                yield path, param
        for name, sub in (getattr(node, "commands", None) or {}).items():
            yield from walk(sub, f"{path} {name}")

    yield from walk(command(), "bundle")


def test_every_option_of_every_command_is_the_table_s() -> None:
    """Its flags, short form, placeholder and help are one entry's, in one of its wordings; and
    each entry and each wording is some command's (the table holds nothing dead)."""
    used: set[tuple[str, str | None]] = set()
    for path, param in options():
        name = param.opts[0].removeprefix("--")
        assert name in OPTIONS, f"{path}: {param.opts[0]} is not in the option table"
        flag = OPTIONS[name]
        spelt = "/".join([param.opts[0], *param.secondary_opts])
        assert spelt == flag.flag, path
        assert param.opts[1:] == ([flag.short] if flag.short else []), path
        assert param.metavar == flag.metavar, path
        wordings = {flag.wording(key): key for key in (None, *flag.wordings)}
        assert param.help in wordings, f"{path} {flag.flag}: its help is not the table's"
        used.add((name, wordings[param.help]))
    declared = {(name, key) for name, flag in OPTIONS.items() for key in (None, *flag.wordings)}
    assert declared - used == set()


def test_options_several_commands_take_are_alike_in_each() -> None:
    """--json, --cache-dir, --profile, --config, --force, --dry-run: more than one command
    takes each, every one from the same entry (what several declarations let drift apart)."""
    takers: dict[str, set[str]] = {}
    for path, param in options():
        takers.setdefault(param.opts[0], set()).add(path)
    shared = {"--json", "--cache-dir", "--profile", "--config", "--force", "--dry-run"}
    assert all(len(takers[flag]) > 1 for flag in shared)


def test_each_option_s_variable_is_named_after_its_flag() -> None:
    """$BUNDLE_ (pip's own: $PIP_) and the flag's name in capitals, `-` as `_`; and these are
    the names users have today."""
    named = {name: flag.variable for name, flag in OPTIONS.items() if flag.env is not None}
    assert named == VARIABLES_TODAY
    for name, variable in named.items():
        prefix = "PIP" if name == "index-url" else "BUNDLE"
        assert variable == prefix + "_" + name.upper().replace("-", "_")
        assert f"${variable}" in OPTIONS[name].wording() or name == "debug"


def test_every_option_variable_is_in_the_table_of_variables() -> None:
    from bundler.config.variables import VARIABLES

    instead = {v.name: v.instead_of.split("`")[1] for v in VARIABLES if v.instead_of}
    named = {flag.variable: flag.flag for flag in OPTIONS.values() if flag.variable}
    assert {name: instead[name] for name in named} == named


@pytest.mark.parametrize("name", sorted(VARIABLES_TODAY))
def test_the_derived_name_is_the_variable_the_command_reads(
    name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Set under its derived name, the variable reaches the setting, and the resolver names it
    as the setting's origin."""
    from bundler.config.options import Options

    variable = OPTIONS[name].variable
    assert variable is not None
    picked = Options()
    if name == "cache-dir":
        from bundler.cli.origins import cache_folder

        monkeypatch.setenv(variable, str(tmp_path))
        assert cache_folder(None, picked) == tmp_path
        assert picked.origins["cache_dir"] == f"${variable}"
    elif name == "index-url":
        from bundler.cli.profile_commands import _index

        monkeypatch.setenv(variable, "https://index.invalid/simple/")
        assert _index(None, picked) == "https://index.invalid/simple/"
        assert picked.origins["index_url"] == f"${variable}"
    else:
        from bundler.cli.session import Session

        monkeypatch.setenv(variable, "0")
        assert Session().debug is False
        monkeypatch.setenv(variable, "1")
        assert Session().debug is True


def test_each_commands_config_help_names_the_table_it_reads() -> None:
    """`--config` is one option read for different tables: publish reads [publish] (bundler/cli/
    publish_commands.py loads its `publish` settings), render iss the [render] table."""
    wide = {"COLUMNS": "300"}  # rich wraps help at the terminal's width
    publish = cli(("publish", "--help"), env=wide)
    assert "bundle.toml holding the [publish] table" in publish.stdout, publish.stdout
    render = cli(("render", "iss", "--help"), env=wide)
    assert "bundle.toml holding the render table" in render.stdout, render.stdout
