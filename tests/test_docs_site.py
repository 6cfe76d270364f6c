"""The documentation site as a newcomer meets it: the front page shares README.md's text
(tools/docs/docs_index.py), nothing says the tool is about ORT 1.19.2 alone, every exit code has
its row and its troubleshooting section, the Quickstart's commands are the CLI's, its code
blocks fit a desktop and a phone screen in a real browser (headless Chromium,
tests/support/chromium.py), and the release workflow (.github/workflows/release.yml) builds,
checks and publishes the distribution with PyPI's trusted publishing."""

from __future__ import annotations

import ast
import html
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from bundler.errors import ExitCode
from tests.support.chromium import CHROMIUM, NetworkRecorder, headless
from tests.support.docs_site import built_site
from tests.support.paths import REPO, test_cache_dir
from tests.support.runs import pip_env
from tests.support.skips import require
from tests.support.workflows import actionlint, load_yaml
from tools.docs import docs_index, repository_map

DOCS = REPO / "docs"
RELEASE_WORKFLOW = REPO / ".github" / "workflows" / "release.yml"
QUICKSTART_PROFILE = "ort-1.31.1-cpu"
WIDTHS = (1400, 420)  # a desktop browser, a phone


# --- one source for the README and the front page ----------------------------------------------


def test_the_front_page_shares_the_readmes_text() -> None:
    """docs/index.md's shared parts are README.md's (python -m tools.docs.docs_index --write)."""
    result = subprocess.run(
        [sys.executable, "-m", "tools.docs.docs_index", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    for name in ("overview", "contents"):
        start, end = f"<!-- shared:{name} -->\n", f"<!-- /shared:{name} -->"
        assert start in index and end in index, name
        assert len(index.split(start, 1)[1].split(end, 1)[0]) > 200, f"{name} is empty"


def test_the_shared_part_check_can_fail(tmp_path: Path) -> None:
    """A drifted copy and a link the site cannot resolve are both caught."""
    readme = "<!-- shared:a -->\nSee [x](docs/x.md).\n<!-- /shared:a -->\n"
    index = "# t\n<!-- shared:a -->\nold\n<!-- /shared:a -->\n"
    assert docs_index.render(readme, index) == index.replace("old", "See [x](x.md).")
    with pytest.raises(docs_index.SharedPartError, match=r"action\.yml"):
        docs_index.render(readme.replace("docs/x.md", "action.yml"), index)
    with pytest.raises(docs_index.SharedPartError, match="markers"):
        docs_index.render(readme, "# no markers\n")


def test_the_package_map_is_the_tree() -> None:
    """docs/repository.md lists every module of bundler/ with its layer and job, as the tree
    says today (python -m tools.docs.repository_map --write)."""
    result = subprocess.run(
        [sys.executable, "-m", "tools.docs.repository_map", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    page = (DOCS / "repository.md").read_text(encoding="utf-8")
    for path in (REPO / "bundler").rglob("*.py"):
        if not ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))):
            assert path.name in ("__init__.py", "__main__.py"), path  # a marker or the runner
            continue
        name = path.relative_to(REPO / "bundler").with_suffix("").as_posix()
        assert f"| `{name.removesuffix('/__init__')}` |" in page, f"{name} is not in the map"


def test_the_package_map_check_can_fail(tmp_path: Path) -> None:
    """A new module shows up in the map, and one without its layer stops the tool."""
    package = tmp_path / "bundler"
    (package / "ship").mkdir(parents=True)
    (package / "plan.py").write_text('"""Decide layer: the Plan. More."""\n')
    (package / "ship" / "deploy.py").write_text('"""Act layer, core: put files. Atomically."""\n')
    page = "# R\n<!-- modules -->\nstale\n<!-- /modules -->\nafter\n"
    rendered = repository_map.render(page, package)
    assert "| `plan` | decide | the Plan |" in rendered
    assert "| `ship/deploy` | act | put files |" in rendered
    assert "stale" not in rendered and rendered.endswith("after\n")
    (package / "ship" / "archive.py").write_text('"""Packs files."""\n')
    with pytest.raises(repository_map.GenerationError, match=r"ship/archive\.py"):
        repository_map.render(page, package)
    with pytest.raises(repository_map.GenerationError, match="markers"):
        repository_map.render("# no markers\n", package)


def test_the_front_page_lists_every_page() -> None:
    """The index (and so the README) links every page of the site."""
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([a-z-]+\.md)[#)]", index))
    pages = {path.name for path in DOCS.glob("*.md")} - {"index.md"}
    assert pages <= linked, f"not on the front page: {sorted(pages - linked)}"


# --- no stale promises -------------------------------------------------------------------------


def test_the_description_and_front_page_do_not_pin_one_release() -> None:
    """The tool covers ORT 1.19 to 1.32 (CPU, CUDA 12/13, DirectML); 1.19.2 is one release of
    many, named only where that release is meant (the example's profile)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert "1.19.2" not in project["description"]
    assert "1.19 to 1.32" in project["description"]
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    pinned = [line for line in index.splitlines() if "1.19.2" in line]
    assert all("ort-1.19.2-gpu-cuda12" in line or "ORT 1.19.2 /" in line for line in pinned), pinned
    mkdocs = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert "1.19.2" not in mkdocs


def test_the_readme_does_not_promise_a_pypi_package() -> None:
    """Until a release is published, `pip install ort-bundle` is not how to install it."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "not on PyPI yet" in readme
    assert "(`pip install ort-bundle`)" not in readme


# --- exit codes and troubleshooting ------------------------------------------------------------


def table_codes(page: str) -> dict[int, str]:
    return {int(m[1]): m[2] for m in re.finditer(r"^\| (\d+) \| (.*) \|$", page, re.MULTILINE)}


def test_every_exit_code_has_a_row_and_a_troubleshooting_section() -> None:
    rows = table_codes((DOCS / "exit-codes.md").read_text(encoding="utf-8"))
    assert set(rows) == {int(code) for code in ExitCode}
    troubleshooting = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    sections = {int(m[1]) for m in re.finditer(r"^## Exit (\d+)\b", troubleshooting, re.MULTILINE)}
    assert sections == {int(code) for code in ExitCode} - {0}
    # the cases other pages document for 6 and 14
    assert "profiles check" in rows[6] and "schema_version" in rows[6]
    for case in ("--ignore", "[sign]", "archive", "bundler", "LIEF", "--vc-redist"):
        assert case in rows[14], case


def test_errors_as_json_are_documented_with_their_keys() -> None:
    page = (DOCS / "exit-codes.md").read_text(encoding="utf-8")
    section = page.split("## Errors as JSON", 1)[1]
    example = re.search(r"```json\n(.*?)\n```", section, re.DOTALL)
    assert example is not None
    assert set(json.loads(example[1])) == {"error", "exit_code", "hint"}


def test_troubleshooting_quotes_real_finding_codes() -> None:
    """Every BAxxx the page names is in the findings catalogue."""
    from bundler.findings import CATALOGUE

    known = set(CATALOGUE)
    named = set(re.findall(r"\bBA\d{3}\b", (DOCS / "troubleshooting.md").read_text("utf-8")))
    assert named and named <= known, sorted(named - known)


def message_texts() -> list[str]:
    """Every string literal of the package and of the doctor's C sources, an f-string's
    replacement fields as NUL (adjacent literals are one string, as Python joins them)."""
    texts: list[str] = []
    for path in (REPO / "bundler").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.JoinedStr):
                texts.append(
                    "".join(
                        str(part.value) if isinstance(part, ast.Constant) else "\0"
                        for part in node.values
                    )
                )
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                texts.append(node.value)
    for path in (REPO / "doctor").glob("*.c"):
        texts += re.findall(r'"((?:[^"\\]|\\.)*)"', path.read_text(encoding="utf-8"))
    return texts


def test_troubleshooting_quotes_messages_bundle_prints() -> None:
    """Each message the page is keyed by (a quoted term, `...` where the message has a name or
    a number) is text `bundle` really prints: every piece between the `...` stands in one of
    its string literals. Exit 2's messages are click's."""
    texts = message_texts()
    page = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    checked = 0
    for section in re.split(r"^## ", page, flags=re.MULTILINE)[1:]:
        if section.startswith("Exit 2:"):
            continue
        terms = re.findall(r"^(`.*)\n: ", section, re.MULTILINE)
        for quoted in (q for term in terms for q in re.findall(r"`([^`]+)`", term)):
            pieces = [piece.strip() for piece in quoted.split("...")]
            for piece in (piece for piece in pieces if len(piece) > 2):
                assert any(piece in text for text in texts), f"{quoted!r}: {piece!r}"
                checked += 1
    assert checked > 60


# --- the Quickstart's commands -----------------------------------------------------------------


def quickstart_steps() -> list[tuple[str, list[str]]]:
    """The Quickstart's shell lines (bash and bat blocks), each with the output shown after it
    (the ```text block that follows its block, if any: it belongs to the block's last line)."""
    page = (DOCS / "quickstart.md").read_text(encoding="utf-8")
    steps: list[tuple[str, list[str]]] = []
    for kind, body in re.findall(r"^```(\w+)\n(.*?)\n```$", page, re.MULTILINE | re.DOTALL):
        if kind == "text":
            assert steps and not steps[-1][1], "an output block with no command before it"
            steps[-1][1].extend(body.splitlines())
        else:
            assert kind in {"bash", "bat"}, kind
            steps += [(line, []) for line in body.splitlines()]
    return steps


def shown_line_pattern(shown: str) -> re.Pattern[str]:
    """A shown output line as a pattern: `...` stands for the part of a real line left out."""
    return re.compile(".*".join(re.escape(part) for part in shown.split("...")))


def bundle(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bundler", *args],
        capture_output=True,
        encoding="utf-8",
        cwd=cwd,
        env={**os.environ, "BUNDLE_DEBUG": "", "PYTHONPATH": str(REPO), **env},
    )


@pytest.mark.realdata
def test_the_quickstart_commands_run_and_print_what_it_shows(tmp_path: Path) -> None:
    """The Quickstart run as written, in a copy of examples/: each `bundle` command exits 0, and
    each output line it shows is a real line of that command's output (`...` for what it
    leaves out), in order. Artifacts come from the test cache
    (tools/testing/fetch_test_wheels.py) as pip would download them; `pip install` and ISCC
    (Windows) are left out."""
    wheels = test_cache_dir() / "wheels"
    require(
        any(wheels.glob("onnxruntime-1.31.1-*win_amd64.whl")),
        f"the {QUICKSTART_PROFILE} wheels are not in {wheels}: "
        "run python -m tools.testing.fetch_test_wheels",
    )
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    shutil.rmtree(tmp_path / "examples" / "hello" / "dist", ignore_errors=True)
    env = {**pip_env(), "BUNDLE_CACHE_DIR": str(tmp_path / "cache")}
    cwd, ran = tmp_path, []
    for line, shown in quickstart_steps():
        words = line.split()
        if words[0] == "cd":
            cwd = cwd / words[1]
            continue
        if words[0] != "bundle":
            assert words[:2] in (["pip", "install"], ["iscc", "dist\\setup.iss"]), line
            continue
        result = bundle(*words[1:], cwd=cwd, **env)
        assert result.returncode == 0, (line, result.stderr)
        ran.append(" ".join(words[:2]))
        output = (result.stdout + result.stderr).splitlines()
        if words[1] == "--version":  # shown as an example: the version changes with each release
            assert len(shown) == 1 and re.fullmatch(r"bundle \d+\.\d+\.\d+", shown[0]), shown
            assert re.fullmatch(r"bundle \d+\.\d+\.\d+\S*", output[0]), output
            continue
        position = 0
        for text in shown:
            if not text.strip().strip("."):
                continue  # a line of its own that says lines were left out
            pattern = shown_line_pattern(text)
            found = [
                i for i, real in enumerate(output) if i >= position and pattern.fullmatch(real)
            ]
            assert found, f"{line}: shown {text!r}, not in the output:\n" + "\n".join(output)
            position = found[0] + 1
    assert ran == [
        "bundle --version",
        "bundle profiles",
        "bundle profiles",
        "bundle build",
        "bundle audit",
    ]
    assert (cwd / "dist" / "setup.iss").is_file() and (cwd / "dist" / "hello.exe").is_file()


# --- the Quickstart in a browser ---------------------------------------------------------------

# Runs in the page after its own scripts: every <pre> and <code> of the article wider than its
# box (it would scroll sideways), and whether the page itself is wider than its viewport. The
# result goes to the frame around the page (FRAME), which --dump-dom returns.
MEASURE = """<script>
addEventListener("load", () => {
  const wide = [...document.querySelectorAll("article pre, article code")]
    .filter((e) => e.scrollWidth > e.clientWidth)
    .map((e) => ({ tag: e.tagName, scroll: e.scrollWidth, client: e.clientWidth,
                   text: e.textContent.slice(0, 60) }));
  const root = document.scrollingElement;
  parent.postMessage(JSON.stringify({
    wide, width: innerWidth, blocks: document.querySelectorAll("article pre").length,
    page: root.scrollWidth > root.clientWidth,
  }), "*");
});
</script>"""
# Headless Chromium will not make a window narrower than 500 pixels: the page is shown in an
# iframe of the width asked for, whose viewport the page's media queries (Material's phone
# layout) then see.
FRAME = """<!DOCTYPE html><html><body style="margin: 0">
<iframe src="{src}" style="border: 0; width: {width}px; height: 1000px"></iframe>
<script>addEventListener("message", (e) => {{ document.body.dataset.overflow = e.data; }});</script>
</body></html>"""


def measured_copy(site: Path, page: str, extra: str = "") -> Path:
    """A copy of the built `page` that runs MEASURE, with `extra` HTML at its article's end."""
    built = site / page / "index.html"
    text = built.read_text(encoding="utf-8").replace("</article>", f"{extra}</article>", 1)
    copy = built.with_name("measured.html")
    copy.write_text(text.replace("</body>", f"{MEASURE}</body>", 1), encoding="utf-8")
    return copy


def measure(page: Path, width: int, workdir: Path) -> dict[str, Any]:
    """Open `page` in headless Chromium, `width` CSS pixels wide and offline; MEASURE's result."""
    assert CHROMIUM is not None
    frame = workdir / f"frame-{width}.html"
    frame.write_text(FRAME.format(src=page.resolve().as_uri(), width=width), encoding="utf-8")
    with NetworkRecorder() as recorder:
        result = subprocess.run(
            [
                *headless(workdir / f"profile-{width}", recorder.port),
                "--hide-scrollbars",
                f"--window-size={width + 100},1100",
                "--virtual-time-budget=5000",
                "--dump-dom",
                frame.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    found = re.search(r'<body[^>]*\sdata-overflow="([^"]*)"', result.stdout)
    assert found is not None, "the measuring script did not report"
    report: dict[str, Any] = json.loads(html.unescape(found[1]))
    return report


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(CHROMIUM is not None, "chromium is not installed (apt-get install -y chromium)")
    return built_site(tmp_path_factory.mktemp("docs-site"))


@pytest.mark.real_tools
@pytest.mark.parametrize("width", WIDTHS)
def test_no_quickstart_code_block_scrolls_sideways(site: Path, tmp_path: Path, width: int) -> None:
    """On a desktop and on a phone, every command and output of the Quickstart is seen whole."""
    report = measure(measured_copy(site, "quickstart"), width, tmp_path)
    assert report["width"] == width, report  # the page's viewport really was that wide
    assert report["blocks"] >= 8, report  # the page's code blocks were there to measure
    assert report["wide"] == [], report["wide"]
    assert not report["page"], "the page itself scrolls sideways"


@pytest.mark.real_tools
def test_the_browser_check_catches_a_wide_code_block(site: Path, tmp_path: Path) -> None:
    """A test that can fail: one 300-character line in a code block is reported."""
    line = "bundle build " + "x" * 287
    page = measured_copy(site, "quickstart", f"<pre><code>{line}</code></pre>")
    report = measure(page, WIDTHS[0], tmp_path)
    assert any(item["text"].startswith("bundle build xxx") for item in report["wide"]), report


# --- publishing --------------------------------------------------------------------------------


def release_workflow() -> dict[Any, Any]:
    workflow = load_yaml(RELEASE_WORKFLOW)
    assert isinstance(workflow, dict)
    return workflow


def steps_of(job: dict[str, Any]) -> list[dict[str, Any]]:
    steps = job["steps"]
    assert isinstance(steps, list)
    return steps


def test_the_release_workflow_builds_checks_and_publishes_on_a_version_tag() -> None:
    workflow = release_workflow()
    trigger = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert trigger == {"push": {"tags": ["v*"]}}
    assert workflow["permissions"] == {"contents": "read"}  # nothing else may write
    build, publish = workflow["jobs"]["build"], workflow["jobs"]["publish"]
    commands = [step.get("run", "") for step in steps_of(build)]
    assert any(command.startswith("python -m build") for command in commands), commands
    assert any(command.startswith("twine check") for command in commands), commands
    built = next(i for i, c in enumerate(commands) if c.startswith("python -m build"))
    checked = next(i for i, c in enumerate(commands) if c.startswith("twine check"))
    assert built < checked
    assert publish["needs"] == "build"
    assert publish["environment"]["name"] == "pypi"
    assert publish["permissions"] == {"id-token": "write"}
    uses = [step.get("uses", "") for step in steps_of(publish)]
    assert uses[-1].startswith("pypa/gh-action-pypi-publish@"), uses
    assert not any("password" in step.get("with", {}) for step in steps_of(publish))


@pytest.mark.real_tools
def test_actionlint_accepts_the_release_workflow() -> None:
    assert actionlint()(RELEASE_WORKFLOW) == []


@pytest.mark.real_tools
def test_the_release_steps_pass_on_this_tree(tmp_path: Path) -> None:
    """The workflow's `python -m build` and `twine check --strict dist/*`, run here on a copy of
    the working tree. build and twine are not in the test extra (.ci/run installs them):
    without them this skips, and fails under CI=true."""
    tools = importlib.util.find_spec("build") and importlib.util.find_spec("twine")
    require(tools is not None, "build and twine are not installed (pip install build twine)")
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    tree = tmp_path / "tree"
    for name in filter(None, listed):
        source = REPO / os.fsdecode(name)
        if source.is_file():
            (tree / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, tree / os.fsdecode(name))
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(tree)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    names = sorted(path.name for path in dist.iterdir())
    assert len(names) == 2 and names[0].endswith(".whl") and names[1].endswith(".tar.gz"), names
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, dist.iterdir())],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2, checked.stdout
