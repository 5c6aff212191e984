"""What "always allow" adds for an asked call: the permission rules that cover it from now on.

For ``bash`` one rule per command of the line, each exact (glob characters escaped; rules match
each command of a line on its own, so allowing ``git status`` never allows
``git status; rm -rf ~``), for any other tool the tool as a whole. Every front end that asks a
person (the terminal, the web page, an editor over ACP) uses these, so "always" means the same
everywhere.
"""

from __future__ import annotations

from typing import Any

from steerable.coding._shell import command_subjects

__all__ = ["always_rules", "uncoverable"]


def _escape_glob(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def always_rules(tool_name: str, arguments: Any) -> list[str]:
    if tool_name == "bash" and isinstance(arguments, dict) and "command" in arguments:
        commands = command_subjects(str(arguments["command"]))
        return [f"bash({_escape_glob(c)})" for c in commands] or [tool_name]
    return [tool_name]


def uncoverable(tool: Any, arguments: Any) -> bool:
    """Whether no "always" rule can cover this call of ``tool``: part of it is something the
    permission reader cannot vouch for (a bash line with redirections, substitutions...), which
    only an unconditional rule would allow; "always" would add a rule that never matches."""
    from steerable.tools import UncoveredSubject

    subjects_of = getattr(tool, "permission_subjects", None)
    if subjects_of is None or not isinstance(arguments, dict):
        return False
    try:
        subjects = subjects_of(arguments)
    except Exception:  # the call will fail anyway
        return False
    return any(isinstance(x, UncoveredSubject) for x in subjects)
