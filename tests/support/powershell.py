"""The arguments a PowerShell command line hands a native program, by PowerShell's quoting
rules (about_Quoting_Rules, about_Parsing), for the lines bundle prints and documents: no
PowerShell runs here.

- Words are separated by blanks; quotes join the parts of one word.
- Single quotes: every character is literal; two single quotes are one.
- Double quotes and bare words: `$name` and `${name}` are replaced by the variable's value
  (`variables`, else nothing, as for an unset variable), and a backtick escapes the next
  character.
"""

from __future__ import annotations

import re

_VARIABLE = re.compile(r"\$(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_:]*)")


def words(line: str, variables: dict[str, str] | None = None) -> list[str]:
    """`line` split into the words a native program receives."""
    values = {name.lower(): value for name, value in (variables or {}).items()}
    found: list[str] = []
    word: list[str] | None = None
    at = 0
    while at < len(line):
        char = line[at]
        if char in " \t":
            if word is not None:
                found.append("".join(word))
            word, at = None, at + 1
            continue
        word = word if word is not None else []
        if char == "'":
            end = at + 1
            while True:
                end = line.index("'", end)  # ValueError: an unclosed quote
                if line.startswith("''", end):
                    end += 2
                    continue
                break
            word.append(line[at + 1 : end].replace("''", "'"))
            at = end + 1
        elif char == '"':
            end = line.index('"', at + 1)
            word.append(_expand(line[at + 1 : end], values))
            at = end + 1
        else:
            end = at
            while end < len(line) and line[end] not in " \t'\"":
                end += 1
            word.append(_expand(line[at:end], values))
            at = end
    if word is not None:
        found.append("".join(word))
    return found


def _expand(text: str, values: dict[str, str]) -> str:
    text = re.sub(r"`(.)", lambda match: "\0" + match[1], text)  # escaped: kept as it is

    def value(match: re.Match[str]) -> str:
        return values.get(match[1].strip("{}").lower(), "")

    expanded = _VARIABLE.sub(value, re.sub(r"\0\$", "\0D", text))
    return expanded.replace("\0D", "$").replace("\0", "")
