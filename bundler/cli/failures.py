"""Talk layer: a failed command as JSON, for pipelines that asked for --json.

Whatever ends a command with an error (a BundleError, a usage error of typer/click: a bad
argument, an unknown option, a missing argument, exit 2; an internal error) still prints its
one line on stderr; with --json it also prints exactly one object on stdout:

    {"error": "<the message>", "exit_code": <int>, "hint": "<what to do>" or null}

`exit_code` is the process's exit code (docs/exit-codes.md). `hint` follows the message
convention `<file>: <what is wrong>; <what to do>`: it is the text after the message's last
"; " outside parentheses, or null when the message has no such part; for a usage error it
names the command's --help.

--json is read from the command line itself, not from the parsed options: a usage error can
stop the parsing before --json is reached. `bundle --json COMMAND ...` is the same as
`bundle COMMAND ... --json`.
"""

from __future__ import annotations

import json
from typing import Any

JSON_FLAG = "--json"
# The root command's own options: `bundle --debug --json deps ...` still names a global --json.
GLOBAL_FLAGS = frozenset({"--debug", "--version", "--help", JSON_FLAG})


def json_requested(args: list[str]) -> bool:
    """Whether the command line asks for JSON: --json before any `--` (after it, every word is
    an argument)."""
    options = args[: args.index("--")] if "--" in args else args
    return JSON_FLAG in options


def move_global_json(args: list[str]) -> list[str]:
    """`bundle --json COMMAND ...` as `bundle COMMAND ... --json`: the commands own --json, so
    a --json among the root's options moves behind the command's words (before any `--`).
    Unchanged when there is no global --json, or no command after it."""
    leading = 0
    while leading < len(args) and args[leading] in GLOBAL_FLAGS:
        leading += 1
    if JSON_FLAG not in args[:leading] or leading == len(args):
        return args
    rest = [arg for arg in args[:leading] if arg != JSON_FLAG] + args[leading:]
    end = rest.index("--") if "--" in rest else len(rest)
    return [*rest[:end], JSON_FLAG, *rest[end:]]


def hint_of(message: str) -> str | None:
    """What to do, by the message convention: the text after the last "; " outside
    parentheses (one inside belongs to an aside), else None."""
    depth, cut = 0, None
    for index, character in enumerate(message):
        depth += {"(": 1, ")": -1}.get(character, 0)
        if depth == 0 and message.startswith("; ", index):
            cut = index + 2
    hint = message[cut:].strip() if cut is not None else ""
    return hint or None


def click_error(error: BaseException | None) -> bool:
    """Whether `error` is one of click's errors (a usage error, a bad file), by class name:
    typer 0.12 raises click's own classes, later releases those of the click it vendors."""
    return _is(error, "ClickException")


def usage_hint(error: BaseException, root: Any, args: list[str]) -> str | None:
    """A usage error's hint: the --help of the command the words of `args` name (as click's
    own message says it); None for click's other errors."""
    if not _is(error, "UsageError"):
        return None
    words, group = ["bundle"], root
    for arg in args:
        if arg in GLOBAL_FLAGS and group is root:
            continue
        sub = getattr(group, "commands", {}).get(arg)
        if arg.startswith("-") or sub is None:
            break
        words.append(arg)
        group = sub
    return f"see '{' '.join(words)} --help'"


def _is(error: BaseException | None, name: str) -> bool:
    return error is not None and any(kind.__name__ == name for kind in type(error).__mro__)


def failure_json(message: str, exit_code: int, hint: str | None) -> str:
    """The one JSON object a failed command prints on stdout under --json."""
    return json.dumps({"error": message, "exit_code": int(exit_code), "hint": hint})
