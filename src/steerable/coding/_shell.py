"""What a shell command line runs, for permission rules: each simple command on its own.

``git status && rm -rf build`` is two commands; a rule allowing ``git *`` must not cover the
second. Operators (``;``, ``&&``, ``||``, ``|``, ``&``, newlines) split the line outside quotes,
and the bodies of ``$( )``, backticks and ``( )`` subshells count as commands too. This is a
conservative reading for rule matching, not a shell parser: anything it cannot split stays in a
bigger piece, which is harder, never easier, for an allow rule to cover.
"""

from __future__ import annotations

__all__ = ["command_subjects"]

_OPERATORS = ("&&", "||", ";", "|", "&", "\n")


def _closing(line: str, start: int, opener: str, closer: str) -> int:
    """Index of the bracket closing the one opened just before ``start`` (or len(line))."""
    depth = 1
    quote = ""
    i = start
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "\\":
            i += 2
            continue
        elif ch == opener:
            depth += 1
        elif ch == closer:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(line)


def command_subjects(line: str) -> list[str]:
    """The simple commands of ``line``, stripped, in order, nested ones included."""
    pieces: list[str] = []
    nested: list[str] = []
    current: list[str] = []
    quote = ""
    i = 0
    while i < len(line):
        ch = line[i]
        if quote == "'":
            current.append(ch)
            quote = "" if ch == "'" else quote
            i += 1
            continue
        if ch == "\\" and i + 1 < len(line):
            current.append(line[i : i + 2])
            i += 2
            continue
        if line.startswith("$(", i) or (ch == "(" and not quote):
            body_start = i + (2 if ch == "$" else 1)
            end = _closing(line, body_start, "(", ")")
            nested.extend(command_subjects(line[body_start:end]))
            current.append(line[i : end + 1])
            i = end + 1
            continue
        if ch == "`":
            end = line.find("`", i + 1)
            end = len(line) if end < 0 else end
            nested.extend(command_subjects(line[i + 1 : end]))
            current.append(line[i : end + 1])
            i = end + 1
            continue
        if quote == '"':
            current.append(ch)
            quote = "" if ch == '"' else quote
            i += 1
            continue
        if ch in "'\"":
            quote = ch
            current.append(ch)
            i += 1
            continue
        op = next((o for o in _OPERATORS if line.startswith(o, i)), None)
        if op is not None:
            pieces.append("".join(current))
            current = []
            i += len(op)
            continue
        current.append(ch)
        i += 1
    pieces.append("".join(current))
    subjects = [p.strip() for p in pieces if p.strip()]
    return subjects + [n for n in nested if n not in subjects]
