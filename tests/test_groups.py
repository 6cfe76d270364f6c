"""The option groups of bundler.cli.groups: declared once, shown in their own help panel, and
handed to the command as one value."""

from __future__ import annotations

from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from bundler.cli.groups import ANY_SOURCE, NO_INSTALLER_FLAGS, Installer, Sources, takes


def _toy_app(seen: list[object]) -> typer.Typer:
    toy = typer.Typer(add_completion=False)

    @toy.command()
    @takes
    def run(
        name: Annotated[str, typer.Option("--name")] = "x",
        sources: Sources = ANY_SOURCE,
        installer: Installer = NO_INSTALLER_FLAGS,
    ) -> None:
        seen.extend([name, sources, installer])

    return toy


def test_a_group_reaches_the_command_as_one_value() -> None:
    seen: list[object] = []
    given = ["--name", "n", "--mirror", "a", "--mirror", "b", "--offline", "--app-name", "App"]
    result = CliRunner().invoke(_toy_app(seen), given)
    assert result.exit_code == 0, result.output
    name, sources, installer = seen
    assert name == "n"
    assert sources == Sources(mirror=["a", "b"], offline=True)
    assert installer == Installer(app_name="App")


def test_a_group_has_its_own_help_panel() -> None:
    result = CliRunner().invoke(_toy_app([]), ["--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0
    assert Sources.panel in result.output and Installer.panel in result.output
    assert "--allow-http" in result.output and "--require-gpu" in result.output


def test_a_parameter_a_group_also_declares_is_refused() -> None:
    def clash(
        offline: Annotated[bool, typer.Option("--offline")] = False,
        sources: Sources = ANY_SOURCE,
    ) -> None:
        pass

    with pytest.raises(TypeError, match="repeats a parameter"):
        takes(clash)


def test_every_flag_of_build_is_in_its_help_once() -> None:
    from bundler.cli.commands import command

    build = command().commands["build"]
    options = [opt for param in build.params for opt in param.opts]
    assert len(options) == len(set(options))
    for flag in ("--cache-dir", "--iss", "--no-doctor", "--vc-runtime", "--locked", "--app-name"):
        assert flag in options
