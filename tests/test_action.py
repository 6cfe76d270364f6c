"""The GitHub Action (action.yml) and the example workflow using it (examples/hello/release.yml).

Three levels: the action's metadata against the rules GitHub applies to a composite action (read
with PyYAML); actionlint on the example workflow and on the action's steps laid out as a
reusable workflow (its expression and context checks); and the action's steps run here, in
order, by a small stand-in for the runner (their `if:` conditions and `${{ }}` values evaluated,
`uses:` steps recorded instead of run) against the real CLI: the cache key, the build, the audit
and its report, what fails the job; and the compile step itself, with an `iscc` on PATH that runs
the real ISCC under Wine (`test_the_compile_step_compiles_every_setup_with_the_builds_arguments`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.inno import InnoSetup
from tests.support.paths import CPU, GPU, HELLO, REPO, hello_app
from tests.support.runs import pip_env
from tests.support.signing import PASSWORD, install_osslsigncode, make_pki
from tests.support.workflows import actionlint, load_yaml, yaml_module

ACTION = REPO / "action.yml"
RELEASE = REPO / "examples" / "hello" / "release.yml"
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
WORKFLOW_REF = "example/hello/.github/workflows/release.yml@refs/tags/v1.0.0"


def action() -> dict[str, Any]:
    data = load_yaml(ACTION)
    assert isinstance(data, dict)
    return data


def expressions(text: str) -> list[str]:
    return [match.strip() for match in EXPRESSION.findall(text)]


# --- the metadata ------------------------------------------------------------------------------


def test_the_action_is_composite_with_name_description_and_steps() -> None:
    data = action()
    for key in ("name", "description", "runs"):
        assert data.get(key), f"action.yml lacks {key}"
    assert data["runs"]["using"] == "composite"
    assert data["runs"]["steps"]
    for name, spec in {**data["inputs"], **data["outputs"]}.items():
        assert spec.get("description"), f"{name} has no description"


def test_the_inputs_of_the_issue_are_declared_with_defaults() -> None:
    inputs = action()["inputs"]
    wanted = {
        "exe": "",
        "profile": "",
        "config": "",
        "out": "",
        "python-version": None,
        "ort-bundle-version": "",
        "strict": "true",
        "installer": "true",
        "upload": "true",
        "artifact-name": None,
    }
    for name, default in wanted.items():
        assert name in inputs, name
        assert "default" in inputs[name] and not inputs[name].get("required"), name
        if default is not None:
            assert inputs[name]["default"] == default, name
    assert {"out", "setup", "lock"} <= set(action()["outputs"])


def test_every_run_step_names_its_shell_and_gets_no_expression_in_its_script() -> None:
    """A composite action's `run` step must say its shell (GitHub refuses the action otherwise).
    Values reach scripts through `env:` only: an input pasted into a script is shell code."""
    for step in action()["runs"]["steps"]:
        if "run" in step:
            assert step.get("shell") in {"bash", "pwsh"}, step.get("name")
            assert "${{" not in step["run"], f"{step.get('name')}: an expression in the script"
        else:
            assert "uses" in step and "shell" not in step, step.get("name")


def test_every_expression_names_a_declared_input_and_an_earlier_step() -> None:
    data = action()
    declared = set(data["inputs"])
    ids: list[str] = []
    for step in data["runs"]["steps"]:
        text = json.dumps({key: value for key, value in step.items() if key != "run"})
        condition = str(step.get("if", ""))
        for expr in [*expressions(text), condition]:
            for name in re.findall(r"\binputs\.([A-Za-z0-9_-]+)", expr):
                assert name in declared, f"{step.get('name')}: inputs.{name} is not declared"
            for name in re.findall(r"\bsteps\.([A-Za-z0-9_-]+)", expr):
                assert name in ids, f"{step.get('name')}: steps.{name} is not an earlier step"
        if "id" in step:
            assert step["id"] not in ids, f"two steps with id {step['id']}"
            ids.append(step["id"])
    used = {
        name
        for expr in expressions(ACTION.read_text(encoding="utf-8"))
        for name in re.findall(r"\binputs\.([A-Za-z0-9_-]+)", expr)
    }
    used |= {
        name
        for step in data["runs"]["steps"]
        for name in re.findall(r"\binputs\.([A-Za-z0-9_-]+)", str(step.get("if", "")))
    }
    assert declared <= used, f"declared but never used: {sorted(declared - used)}"


def test_every_output_is_a_step_output_the_step_writes() -> None:
    data = action()
    steps = {step["id"]: step for step in data["runs"]["steps"] if "id" in step}
    for name, spec in data["outputs"].items():
        found = re.fullmatch(
            r"\$\{\{\s*steps\.([A-Za-z0-9_-]+)\.outputs\.([A-Za-z0-9_-]+)\s*\}\}", spec["value"]
        )
        assert found, f"output {name}: {spec['value']!r} is not one step output"
        step_id, key = found.groups()
        assert step_id in steps, f"output {name}: no step {step_id}"
        assert f"{key}=" in steps[step_id]["run"], f"step {step_id} never writes {key}"


def test_actions_are_pinned_to_a_major_version() -> None:
    for step in action()["runs"]["steps"]:
        if "uses" in step:
            assert re.fullmatch(r"actions/[a-z-]+(/[a-z-]+)?@v\d+", step["uses"]), step["uses"]


@pytest.mark.posix_only(reason="runs bash -n")
def test_the_bash_scripts_parse() -> None:
    for step in action()["runs"]["steps"]:
        if step.get("shell") == "bash":
            result = subprocess.run(
                ["bash", "-n"], input=step["run"], capture_output=True, text=True
            )
            assert result.returncode == 0, f"{step['name']}: {result.stderr}"


def test_the_example_workflow_uses_the_action_with_its_inputs() -> None:
    workflow = load_yaml(RELEASE)
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as true
    assert triggers["push"]["tags"]
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    uses = [step for step in steps if re.fullmatch(r"\S+/ort-bundle@v\d+", step.get("uses", ""))]
    assert len(uses) == 1, "release.yml does not use the ort-bundle action"
    assert "this repository" in RELEASE.read_text(encoding="utf-8")
    declared = set(action()["inputs"])
    assert set(uses[0]["with"]) <= declared, set(uses[0]["with"]) - declared
    assert (REPO / uses[0]["with"]["exe"]).resolve() == HELLO.resolve()


# --- actionlint --------------------------------------------------------------------------------


@pytest.mark.real_tools
def test_actionlint_accepts_the_example_workflow(tmp_path: Path) -> None:
    lint = actionlint()
    assert lint(RELEASE) == []
    # The same workflow using the action from a checkout (`uses: ./`) in a project that holds
    # action.yml: a binary actionlint then checks the `with:` keys against the action's inputs.
    project = tmp_path / "project"
    (project / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(ACTION, project / "action.yml")
    local = re.sub(r"uses: \S+/ort-bundle@v1", "uses: ./", RELEASE.read_text(encoding="utf-8"))
    assert "uses: ./\n" in local
    (project / ".github" / "workflows" / "release.yml").write_text(local, encoding="utf-8")
    assert lint(project / ".github" / "workflows" / "release.yml") == []


@pytest.mark.real_tools
def test_actionlint_accepts_the_actions_steps_as_a_workflow(tmp_path: Path) -> None:
    """actionlint reads workflows, not action.yml: the steps are laid out as a reusable
    workflow's job, the inputs as its string inputs, so that its checks of expressions, contexts
    and step ids apply to them. A step that names a step id it does not know must fail."""
    data = action()
    workflow = {
        "name": "ort-bundle action steps",
        "on": {
            "workflow_call": {
                "inputs": {
                    name: {"type": "string", "required": False, "default": spec["default"]}
                    for name, spec in data["inputs"].items()
                }
            }
        },
        "jobs": {"action": {"runs-on": "windows-latest", "steps": data["runs"]["steps"]}},
    }
    path = tmp_path / "action-steps.yml"
    path.write_text(yaml_module().safe_dump(workflow, sort_keys=False), encoding="utf-8")
    lint = actionlint()
    assert lint(path) == []
    path.write_text(path.read_text().replace("steps.build.outputs.out", "steps.biuld.outputs.out"))
    assert any("biuld" in finding["message"] for finding in lint(path))


# --- the steps, run by a stand-in for the runner -----------------------------------------------

TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<op>&&|\|\||==|!=|!|\(|\))"
    r"|(?P<name>[A-Za-z_][\w-]*(?:\.[\w-]+)*)(?P<call>\(\))?)"
)
STATUS = ("success", "failure", "always", "cancelled")


@dataclass
class Run:
    """What the stand-in runner did: each step's outcome, what `uses:` steps were given, the
    log."""

    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)  # step name -> success/failure/skipped
    uses: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    log: str = ""
    exit_codes: dict[str, int] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return "failure" in self.outcomes.values()

    def action_outputs(self) -> dict[str, str]:
        context = {"steps": {k: {"outputs": v} for k, v in self.outputs.items()}}
        return {
            name: substitute(spec["value"], context, self.failed)
            for name, spec in action()["outputs"].items()
        }


def evaluate(expression: str, context: dict[str, Any], failed: bool) -> Any:
    """The part of GitHub's expression language action.yml uses: strings, ==, !=, !, &&, ||,
    parentheses, context paths and the status functions."""
    body = expression.strip()
    if body.startswith("${{") and body.endswith("}}"):
        body = body[3:-2]
    python: list[str] = []
    position = 0
    while position < len(body.rstrip()):
        token = TOKEN.match(body, position)
        assert token and token.end() > position, f"cannot read {body[position:]!r}"
        position = token.end()
        if token["string"]:
            python.append(repr(token["string"][1:-1].replace("''", "'")))
        elif token["op"]:
            python.append({"&&": " and ", "||": " or ", "!": " not "}.get(token["op"], token["op"]))
        elif token["call"]:
            status = {"success": not failed, "failure": failed, "always": True, "cancelled": False}
            python.append(repr(status[token["name"]]))
        else:
            value: Any = context
            for part in token["name"].split("."):
                value = value.get(part, "") if isinstance(value, dict) else ""
            python.append(repr(value))
    return eval("".join(python), {"__builtins__": {}})  # our own tokens only


def substitute(text: str, context: dict[str, Any], failed: bool) -> str:
    def value(match: re.Match[str]) -> str:
        result = evaluate(match[1], context, failed)
        return str(result).lower() if isinstance(result, bool) else str(result)

    return EXPRESSION.sub(value, text)


def run_action(
    inputs: dict[str, str],
    workspace: Path,
    runner_temp: Path,
    *,
    before: Callable[[str, Run], None] | None = None,
    stop_after: str | None = None,
    uses_outputs: dict[str, dict[str, str]] | None = None,
    os_name: str = "Linux",
    stand_ins: dict[str, Callable[[], dict[str, str]]] | None = None,
    programs: dict[str, str] | None = None,
) -> Run:
    """Run action.yml's steps as a Linux runner would, with the CLI of this checkout (the
    install step is left out: it would install this checkout again). `os_name` is what
    runner.os says; a step in `stand_ins` is replaced by its entry, which does what the step
    would and returns its outputs; `programs` are more scripts on PATH (name: text), such as
    an `iscc` that runs the real ISCC under Wine."""
    data = action()
    given = {name: spec.get("default", "") for name, spec in data["inputs"].items()} | inputs
    context: dict[str, Any] = {
        "inputs": given,
        "runner": {"os": os_name, "temp": str(runner_temp)},
        "github": {"action_path": str(REPO), "workspace": str(workspace)},
        "steps": {},
    }
    run = Run()
    # `python` and `bundle` of this interpreter first on PATH, as setup-python would put them
    tools = runner_temp / "_tools"
    tools.mkdir(parents=True, exist_ok=True)
    scripts = {
        name: f'#!/bin/sh\nexec "{sys.executable}"{command} "$@"\n'
        for name, command in (("python", ""), ("bundle", " -m bundler"))
    }
    for name, text in (scripts | (programs or {})).items():
        (tools / name).write_text(text)
        (tools / name).chmod(0o755)
    base_env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "BUNDLE_"))},
        # artifacts only from the cache the test put in place: pip can reach no wheel
        **pip_env(PIP_FIND_LINKS="/nonexistent"),
        "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}",
        "RUNNER_TEMP": str(runner_temp),
        "BUNDLE_DEBUG": "",
        # what a runner sets for every step (GitHub's "Default environment variables")
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_WORKFLOW_REF": WORKFLOW_REF,
    }
    for index, step in enumerate(data["runs"]["steps"]):
        name = step.get("name", f"step {index}")
        step_id = step.get("id", f"__{index}")
        condition = str(step.get("if", "success()"))
        if not any(f"{status}()" in condition for status in STATUS):
            condition = f"success() && ({condition})"
        if not evaluate(condition, context, run.failed):
            run.outcomes[name] = "skipped"
            continue
        if before:
            before(step_id, run)
        outputs: dict[str, str] = {}
        if "uses" in step:
            with_ = {k: substitute(str(v), context, run.failed) for k, v in step["with"].items()}
            run.uses.append((step["uses"], with_))
            run.outcomes[name] = "success"
            outputs = dict((uses_outputs or {}).get(step_id, {}))
        elif step_id == "install":
            run.outcomes[name] = "success"
        elif step_id in (stand_ins or {}):
            run.outcomes[name] = "success"
            outputs = (stand_ins or {})[step_id]()
        else:
            assert step["shell"] == "bash", f"{name}: only bash steps run here"
            output_file = runner_temp / f"_output_{index}"
            output_file.write_text("")
            env = {k: substitute(str(v), context, run.failed) for k, v in step["env"].items()}
            script = runner_temp / f"_step_{index}.sh"
            script.write_text(step["run"])
            result = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                capture_output=True,
                text=True,
                cwd=workspace,
                env={**base_env, **env, "GITHUB_OUTPUT": str(output_file)},
            )
            run.log += f"== {name}\n{result.stdout}{result.stderr}"
            run.exit_codes[name] = result.returncode
            run.outcomes[name] = "success" if result.returncode == 0 else "failure"
            for line in output_file.read_text(encoding="utf-8").splitlines():
                key, _, value = line.partition("=")
                outputs[key] = value
        run.outputs[step_id] = outputs
        context["steps"][step_id] = {"outputs": outputs, "outcome": run.outcomes[name]}
        if step_id == stop_after:
            break
    return run


def pins_of(profile: Path) -> str:
    """The cache key as docs/ci.md defines it, read from the profile's TOML itself."""
    data = tomllib.loads(profile.read_text(encoding="utf-8"))
    pins = sorted(
        {
            source[key]
            for artifact in data["artifacts"]
            for source in artifact["sources"]
            for key in ("sha256", "sha512")
            if key in source
        }
    )
    return hashlib.sha256("\n".join(pins).encode()).hexdigest()


@pytest.mark.parametrize(
    ("inputs", "profile", "argument"),
    [
        ({"exe": "examples/hello/hello.exe"}, GPU, GPU),  # from examples/hello/bundle.toml
        ({"config": "examples/hello/bundle.toml"}, GPU, GPU),
        ({"profile": CPU, "exe": "examples/hello/hello.exe"}, CPU, CPU),  # the input wins
        ({"profile": "1.19.2"}, GPU, "1.19.2"),  # an ORT release: its GPU profile
        ({}, GPU, GPU),  # no bundle.toml in the workspace: bundle's default profile
    ],
)
def test_the_cache_key_is_the_hash_of_the_profiles_pins(
    inputs: dict[str, str], profile: str, argument: str, tmp_path: Path
) -> None:
    workspace = tmp_path / "workspace"
    if inputs.get("exe") or inputs.get("config"):
        shutil.copytree(REPO / "examples" / "hello", workspace / "examples" / "hello")
    else:
        workspace.mkdir()
    run = run_action(inputs, workspace, tmp_path / "temp", stop_after="pins")
    assert not run.failed, run.log
    outputs = run.outputs["pins"]
    assert outputs["profile"] == profile
    assert outputs["profile-arg"] == argument  # what `bundle fetch --verify` is given
    assert outputs["key"] == pins_of(REPO / "manifests" / "profiles" / f"{profile}.toml")
    assert outputs["cache-dir"] == str(tmp_path / "temp" / "ort-bundle-cache")


def test_the_cpu_and_gpu_profiles_have_different_cache_keys() -> None:
    keys = {pins_of(REPO / "manifests" / "profiles" / f"{name}.toml") for name in (CPU, GPU)}
    assert len(keys) == 2


@pytest.fixture
def action_workspace(cpu_cache: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A workspace holding examples/hello and a runner temp folder whose download cache holds
    the CPU profile's archives (as actions/cache would restore it)."""
    workspace = tmp_path / "workspace"
    shutil.copytree(REPO / "examples" / "hello", workspace / "examples" / "hello")
    shutil.rmtree(workspace / "examples" / "hello" / "dist", ignore_errors=True)
    temp = tmp_path / "temp"
    shutil.copytree(cpu_cache, temp / "ort-bundle-cache", copy_function=os.link)
    return workspace, temp


CPU_INPUTS = {
    "exe": "examples/hello/hello.exe",
    "profile": CPU,
    "out": "dist",
    "build-args": "--offline\n--publisher\nExample Ltd\n",
}


def test_on_linux_the_action_builds_audits_and_uploads_the_report(
    action_workspace: tuple[Path, Path],
) -> None:
    from junitparser import JUnitXml

    workspace, temp = action_workspace
    # actions/cache restored the archives: they are re-hashed before the build uses them
    run = run_action(CPU_INPUTS, workspace, temp, uses_outputs={"cache": {"cache-hit": "true"}})
    assert not run.failed, run.log
    assert run.outcomes["Verify the restored archives"] == "success"
    assert run.outcomes["Save bundle's download cache"] == "skipped"  # a hit is not saved again
    outputs = run.action_outputs()
    assert outputs["out"] == str(workspace / "dist")
    lock = json.loads(Path(outputs["lock"]).read_text(encoding="utf-8"))
    assert lock["profile"] == CPU
    assert "AppPublisher=Example Ltd" in (workspace / "dist" / "setup.iss").read_text("utf-8-sig")
    assert outputs["setup"] == ""  # no ISCC on Linux: a notice says so
    assert "::notice title=ort-bundle::Inno Setup runs on Windows runners only" in run.log
    assert run.outcomes["Compile the installer (Inno Setup)"] == "skipped"
    assert run.outcomes["Fail on the audit's findings"] == "skipped"
    key = pins_of(REPO / "manifests" / "profiles" / f"{CPU}.toml")
    assert run.uses == [
        ("actions/setup-python@v5", {"python-version": "3.12"}),
        (
            "actions/cache/restore@v4",
            {"path": f"{temp}/ort-bundle-cache/blobs", "key": f"ort-bundle-Linux-{key}"},
        ),
        (
            "actions/upload-artifact@v4",
            {"name": "setup-audit", "path": outputs["audit-report"], "if-no-files-found": "warn"},
        ),
    ]
    report = JUnitXml.fromfile(outputs["audit-report"])
    assert report.tests > 0 and report.failures == 0 and report.errors == 0
    assert "--strict" in (temp / f"_step_{step_index('audit')}.sh").read_text()


def step_index(step_id: str) -> int:
    return next(i for i, s in enumerate(action()["runs"]["steps"]) if s.get("id") == step_id)


def test_a_failing_audit_uploads_its_report_then_fails_the_job(
    action_workspace: tuple[Path, Path],
) -> None:
    """A DLL lost between build and audit: the audit fails, no installer is compiled, the JUnit
    report with the finding is uploaded anyway, and the last step fails with audit's exit code."""
    from junitparser import JUnitXml

    workspace, temp = action_workspace

    def lose_a_dll(step_id: str, run: Run) -> None:
        if step_id == "audit":
            (workspace / "dist" / "onnxruntime_providers_shared.dll").unlink()

    key = f"ort-bundle-Linux-{pins_of(REPO / 'manifests' / 'profiles' / f'{CPU}.toml')}"
    run = run_action(
        {**CPU_INPUTS, "installer": "true", "artifact-name": "hello"},
        workspace,
        temp,
        before=lose_a_dll,
        uses_outputs={"cache": {"cache-hit": "false", "cache-primary-key": key}},  # a miss
    )
    audit_rc = int(run.outputs["audit"]["rc"])
    assert audit_rc != 0, run.log
    assert run.outcomes["bundle audit"] == "success"  # the step itself goes on
    assert run.outcomes["No installer on this runner"] == "skipped"
    assert run.outcomes["Upload the setup"] == "skipped"
    # the downloads are saved right after the build, before the audit fails the job
    saved = ("actions/cache/save@v4", {"path": f"{temp}/ort-bundle-cache/blobs", "key": key})
    assert saved in run.uses
    assert run.uses[-1][0] == "actions/upload-artifact@v4"
    assert run.uses[-1][1]["name"] == "hello-audit"
    assert run.outcomes["Fail on the audit's findings"] == "failure"
    assert run.exit_codes["Fail on the audit's findings"] == audit_rc
    assert "::error title=bundle audit::" in run.log
    report = JUnitXml.fromfile(run.outputs["audit"]["junit"])
    assert report.failures + report.errors > 0


@pytest.mark.posix_only(reason="runs the action's bash steps, as an ubuntu runner does")
def test_a_failing_build_fails_the_job_before_audit(tmp_path: Path) -> None:
    """No artifacts can be had (offline, empty cache): the build step fails, nothing after it
    runs but nothing is uploaded either (there is no report)."""
    workspace = tmp_path / "workspace"
    shutil.copytree(REPO / "examples" / "hello", workspace / "examples" / "hello")
    run = run_action({**CPU_INPUTS, "out": "out"}, workspace, tmp_path / "temp")
    assert run.outcomes["bundle build"] == "failure", run.log
    assert run.exit_codes["bundle build"] == 8  # no source could provide an artifact
    assert run.outcomes["bundle audit"] == "skipped"
    assert run.outcomes["Upload the audit report"] == "skipped"
    assert [uses for uses, _ in run.uses] == ["actions/setup-python@v5", "actions/cache/restore@v4"]


def test_publish_and_attest_follow_the_compile_step(action_workspace: tuple[Path, Path]) -> None:
    """With publish and attest on a Windows runner: the compile step (stood in for by a
    setup file where ISCC would write it) then `bundle publish` for real, its release folder
    uploaded, and attest-build-provenance given its SHA256SUMS as subject-checksums."""
    workspace, temp = action_workspace
    setup = workspace / "dist" / "Output" / "hello-1.0.0.0-setup.exe"

    def compiled() -> dict[str, str]:
        setup.parent.mkdir()
        setup.write_bytes(b"MZ a stand-in for the setup ISCC writes")
        return {"setup": str(setup), "dir": str(setup.parent)}

    inputs = {**CPU_INPUTS, "publish": "true", "attest": "true"}
    hit = {"cache": {"cache-hit": "true"}}
    run = run_action(
        inputs, workspace, temp, uses_outputs=hit, os_name="Windows", stand_ins={"iscc": compiled}
    )
    assert not run.failed, run.log
    release = Path(run.action_outputs()["release"])
    sums = (release / "SHA256SUMS").read_text(encoding="utf-8")
    digest = hashlib.sha256(setup.read_bytes()).hexdigest()
    assert f"{digest}  {setup.name}\n" in sums
    attest = (
        "actions/attest-build-provenance@v3",
        {"subject-checksums": str(release / "SHA256SUMS")},
    )
    assert attest in run.uses
    uploaded = [w for u, w in run.uses if u.startswith("actions/upload-artifact")]
    assert {"name": "setup-release", "path": str(release), "if-no-files-found": "error"} in uploaded
    statement = json.loads((release / "bundle.provenance.json").read_text(encoding="utf-8"))
    builder = statement["predicate"]["runDetails"]["builder"]["id"]
    assert builder == f"https://github.com/{WORKFLOW_REF}"


# --- the compile step for real: every setup of the build's JSON, ISCC under Wine -------------

PASSWORD_ENV = "ACTION_TEST_PFX_PASSWORD"  # not BUNDLE_*: the stand-in runner drops those
PACK_URL = "https://downloads.example.com/hello/packs"

ISCC = """#!{python}
# `iscc` for the Action's compile step: the real ISCC.exe under Wine. Unix paths become the Z:\\
# paths Wine maps; every other argument is handed on as the step gave it, and logged.
import json, os, subprocess, sys
def windows(arg):
    if arg.startswith("/O/"):
        return "/O" + windows(arg[2:])
    if arg.startswith("/") and os.path.exists(arg):
        return "Z:" + arg.replace("/", "\\\\")
    return arg
with open({log!r}, "a", encoding="utf-8") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
env = {{**os.environ, **{wine!r}}}
command = ["wine", {iscc!r}, *map(windows, sys.argv[1:])]
sys.exit(subprocess.run(command, env=env, stdin=subprocess.DEVNULL).returncode)
"""


def wine_iscc(inno: InnoSetup, log: Path) -> str:
    """The text of an `iscc` program that runs ISCC.exe in the `inno` prefix."""
    keep = ("WINEPREFIX", "WINEARCH", "WINEDEBUG", "DISPLAY")
    everything = inno.environment("-all", None, None)
    wine = {name: everything[name] for name in keep if name in everything}
    return ISCC.format(python=sys.executable, log=str(log), wine=wine, iscc=str(inno.iscc))


def osslsigncode_verifies(exe: Path, ca: Path) -> bool:
    checked = subprocess.run(
        ["osslsigncode", "verify", "-CAfile", str(ca), "-in", str(exe)],
        capture_output=True,
        timeout=60,
    )
    return checked.returncode == 0


CASES = {
    # name: [render] and [sign] lines, then each setup's kind, signed, runtime_pack
    "signed": (False, True, [("app", True, None)]),
    "runtime-pack": (True, False, [("full", False, "appended"), ("web", False, "downloaded")]),
    "signed-runtime-pack": (True, True, [("full", True, "appended"), ("web", True, "downloaded")]),
}


def action_bundle_toml(pack: bool, sign: Path | None) -> str:
    """examples/hello's CPU bundle, fast to compile (zip/1): with a runtime pack and a pack URL
    (the full and the web setup), and with a [sign] table for the test CA's PFX `sign`."""
    toml = f'[build]\nexe = "hello.exe"\nprofile = "{CPU}"\nout = "dist"\n\n'
    toml += '[render]\ncompression = "zip/1"\n'
    toml += f'runtime_pack = true\npack_url = "{PACK_URL}"\n' if pack else ""
    if sign is not None:
        toml += f'\n[sign]\ntool = "osslsigncode"\ncertificate = "{sign}"\n'
        toml += f'password_env = "{PASSWORD_ENV}"\n'
    return toml


@pytest.mark.real_tools
@pytest.mark.parametrize("case", list(CASES))
def test_the_compile_step_compiles_every_setup_with_the_builds_arguments(
    case: str, inno: InnoSetup, cpu_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41: a bundle with a [sign] table, a runtime pack with a pack URL, or both, through
    the Action's own steps on a Windows runner: the compile step hands ISCC, for each setup in
    order, exactly the arguments of `bundle build --json` (iss.setups); every setup it writes
    (and the pack) verifies against the test CA when signed, the full setup holds the pack and
    the web setup not, and publish lists them all. ISCC given the script alone, as the Action
    did before, refuses it."""
    pack, signed, kinds = CASES[case]
    pki = make_pki(tmp_path) if signed else None
    if pki is not None:
        install_osslsigncode(inno, tmp_path)
        monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    workspace, temp = tmp_path / "workspace", tmp_path / "temp"
    hello_app(workspace / "app", action_bundle_toml(pack, pki.pfx if pki else None))
    shutil.copytree(cpu_cache, temp / "ort-bundle-cache", copy_function=os.link)
    calls = tmp_path / "iscc-calls.jsonl"
    inputs = {"config": "app/bundle.toml", "build-args": "--offline\n", "publish": "true"}
    run = run_action(
        inputs,
        workspace,
        temp,
        uses_outputs={"cache": {"cache-hit": "true"}},
        os_name="Windows",
        programs={"iscc": wine_iscc(inno, calls)},
    )
    assert not run.failed, run.log
    assert run.outcomes["Compile the installer (Inno Setup)"] == "success"
    build = json.loads((temp / "ort-bundle-build.json").read_text(encoding="utf-8"))
    setups = build["iss"]["setups"]
    assert [(s["kind"], s["signed"], s["runtime_pack"]) for s in setups] == kinds
    output = workspace / "app" / "dist" / "Output"
    handed = [json.loads(line) for line in calls.read_text(encoding="utf-8").splitlines()]
    scripts = [str(workspace / s["script"]) for s in setups]  # the build's, from the workspace
    assert handed == [["/Q", f"/O{output}", *s["iscc_args"], scripts.pop(0)] for s in setups]
    command = workspace / "app" / "dist" / "signtool.txt"  # the sign command, as rendered
    sign = [f"/Sbundlesign={command.read_text('utf-8')}"] if signed else []
    wanted = (["/Sbundlepack=$p"] if pack else []) + sign
    assert handed[0][2:-1] == wanted and (not pack or handed[1][2:-1] == wanted[1:])
    assert PASSWORD not in run.log and PASSWORD not in json.dumps(build)

    exes = sorted(output.glob("*.exe"))
    web = [exe for exe in exes if exe.stem.endswith("-web")]
    (full,) = [exe for exe in exes if exe not in web]
    assert len(web) == pack and run.action_outputs()["setup"] == str(full)
    packs = list((temp / "ort-bundle-cache").glob("runtime-packs/*/bundle-pack-*.exe"))
    assert len(packs) == pack
    for exe in (*exes, *packs) if pki else ():
        assert osslsigncode_verifies(exe, pki.ca_pem), exe
    published = [*exes, *packs]
    for exe in packs:
        parts = sorted(exe.parent.glob(f"{exe.stem}-*.bin"))
        published += parts
        for piece in (exe, *parts):  # appended to the full setup by the Sign Tool bundlepack
            assert piece.read_bytes() in full.read_bytes(), piece
            assert piece.read_bytes() not in web[0].read_bytes(), piece  # web downloads it
    release = Path(run.action_outputs()["release"])
    listed = (release / "SHA256SUMS").read_text(encoding="utf-8")
    for path in published:
        assert f"  {path.name}\n" in listed, path.name

    # what the Action's step did before: the script alone, which ISCC refuses
    alone = inno.compile(workspace / setups[0]["script"], tmp_path / "alone")
    assert alone.returncode != 0
    assert 'Value of [Setup] section directive "SignTool" is invalid' in alone.stdout + alone.stderr
