"""Unified diffs in colour: what ``edit`` and ``write`` changed (or would change)."""

from __future__ import annotations

from rich.text import Text

__all__ = ["MAX_DIFF_LINES", "coloured_diff"]

MAX_DIFF_LINES = 200
"""Lines of one diff shown in the terminal; the rest is counted, not printed."""


def coloured_diff(text: str, *, indent: str = "  ", max_lines: int = MAX_DIFF_LINES,
                  head_style: str = "") -> Text:
    """``text`` with its diff lines coloured (additions green, removals red, hunks cyan).

    Lines before the first ``--- `` header (a question's first line, a command) are left plain,
    so a ``-flag`` in them is not taken for a removal; ``head_style`` is theirs."""
    out = Text()
    in_diff = False
    lines = text.rstrip("\n").split("\n")
    for number, line in enumerate(lines):
        if number == max_lines:
            out.append(f"{indent}… {len(lines) - max_lines} more lines\n", style="dim")
            break
        if line.startswith("--- ") and not in_diff:
            in_diff = True
        style = head_style
        if in_diff:
            if line.startswith(("--- ", "+++ ")):
                style = "bold"
            elif line.startswith("@@"):
                style = "cyan"
            elif line.startswith("+"):
                style = "green"
            elif line.startswith("-"):
                style = "red"
            elif line.startswith("\\"):
                style = "dim"
        out.append(f"{indent}{line}\n", style=style)
    # Only the last newline goes: rstrip() would also eat a context line that is one space
    # (an empty line of the file), and the diff would lose a line.
    if out.plain.endswith("\n"):
        out.right_crop(1)
    return out
