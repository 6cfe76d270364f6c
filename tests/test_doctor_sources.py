"""No circle between the doctor's C sources (issue 39): a file that calls another file's
function depends on it, and the dependencies of doctor/*.c must not come back to a caller
(checks.c once called packs.c, which called checks.c back). Read from the sources, no compiler:
comments, strings and character literals are blanked, a function definition is a name with its
parameter list followed by `{` at file level, and a file uses every non-static function of
another file whose name appears inside its own functions (a call, or a function pointer).
A call through one of doctor.h's macros is not seen: they call text.c only, which calls no
other file."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.graphs import circles
from tests.support.paths import REPO
from tests.support.trees import write_tree

DOCTOR = REPO / "doctor"

# a comment, a string or character literal, a preprocessor line: blanked before anything is read
LITERAL = re.compile(
    r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|^[ \t]*#(?:\\\n|[^\n])*',
    re.S | re.M,
)
# a file-level declaration that a `{` follows: `static? type name(parameters)`
DEFINITION = re.compile(r"\s*(static\b)?[^;{}]*?\b(\w+)\s*\([^;{}]*\)\s*$")
NAME = re.compile(r"\b[A-Za-z_]\w*\b")


def blanked(text: str) -> str:
    """`text` with its comments and literals replaced by spaces (line breaks kept)."""
    return LITERAL.sub(lambda match: re.sub(r"[^\n]", " ", match.group()), text)


def functions(text: str) -> tuple[dict[str, bool], str]:
    """The functions a C file defines (name -> static) and the text of their bodies."""
    defined: dict[str, bool] = {}
    bodies: list[str] = []
    depth, start, head = 0, 0, 0
    match = None
    for at, char in enumerate(text):
        if char == "{" and depth == 0:
            match = DEFINITION.match(text, head, at)
            if match:
                defined[match.group(2)] = match.group(1) is not None
            start = at
        if char in "{}":
            depth += 1 if char == "{" else -1
        if char == "}" and depth == 0:
            if match:
                bodies.append(text[start:at])
            head = at + 1
        elif char == ";" and depth == 0:
            head = at + 1
    return defined, "\n".join(bodies)


def call_graph(folder: Path) -> dict[str, set[str]]:
    """C file -> the other C files of `folder` whose functions it uses."""
    parsed = {path.name: functions(blanked(path.read_text())) for path in folder.glob("*.c")}
    owner = {
        name: file
        for file, (defined, _) in parsed.items()
        for name, static in defined.items()
        if not static
    }
    graph: dict[str, set[str]] = {}
    for file, (defined, bodies) in parsed.items():
        used = set(NAME.findall(bodies)) - set(defined)
        graph[file] = {owner[name] for name in used if owner.get(name, file) != file}
    return graph


def test_no_doctor_source_calls_back_into_a_caller() -> None:
    graph = call_graph(DOCTOR)
    # the reader sees the program: the command line uses the checks, everything the strings
    assert {"checks.c", "data.c", "text.c"} <= graph["bundle-doctor.c"], graph
    assert "text.c" in graph["checks.c"] and graph["text.c"] == set(), graph
    assert circles(graph) == [], graph


def test_a_planted_circle_between_doctor_sources_is_found(tmp_path: Path) -> None:
    sources = {path.name: path.read_text() for path in DOCTOR.glob("*.c")}
    # the machine asking the packs, which ask the machine: the circle issue 39 broke, turned round
    sources["machine.c"] += (
        '\nint planted(const Data *data)\n{\n    return in_absent_pack(data, "ep/x/y.dll");\n}\n'
    )
    # a static namesake or a name in a comment or string is no call
    sources["data.c"] += (
        "\nstatic void check_loads(void) { /* check_vc_runtime( */ }\n"
        "static void again(void) { check_loads(); }\n"
    )
    sources["findings.c"] += '\nstatic const char *say(void) { return "check_pruned(d)"; }\n'
    graph = call_graph(write_tree(tmp_path, sources))
    assert circles(graph) == [["machine.c", "packs.c"]]
