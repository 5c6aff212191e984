"""Permission rules: which tool calls run, which are asked, which are refused.

A rule is ``allow``, ``ask`` or ``deny`` with a pattern ``tool`` or ``tool(argument-glob)``,
for example ``bash(git status*)`` or ``write(src/**)``. The tool part matches the tool name and
the argument part matches the call's *subjects*, both as shell globs where ``*`` matches any
characters, ``/`` included. A call's subjects are what the tool says its arguments touch
(``permission_subjects``): by default the value of its ``permission_key`` argument; the coding
tools give a path normalised against the workspace, and bash each command of a compound line,
so ``./secrets/k`` cannot dodge ``deny: write(secrets/*)`` and ``git log; rm -rf .`` is not
covered by ``allow: bash(git *)``.

A deny rule matching any subject refuses the call; else an ask rule matching any subject asks;
else the call is allowed only when allow rules cover every subject (a rule with no argument part
covers them all). With no rule deciding, a read-only tool is allowed and any other tool asked.

Rules follow what a tool touches, not only its name: a tool may belong to a *family* (``grep``,
``find`` and ``ls`` to ``read``; ``edit`` to ``write``), and a rule on the family holds for it.
Fail closed: a subject the tool cannot vouch for (an ``UncoveredSubject``, e.g. a bash line the
reader does not fully understand) is covered by no allow rule with an argument part, and when
deny or ask rules exist for the tool such a call is asked even under an unconditional allow
(those rules cannot be checked against what it really runs).
"""

from __future__ import annotations

import enum
import fnmatch
import re
from collections.abc import Iterable, Sequence

from steerable._records import Record, record
from steerable.tools import UncoveredSubject

__all__ = ["Permission", "PermissionRule", "Permissions"]

_RULE = re.compile(r"^\s*([^\s()]+)\s*(?:\((.*)\))?\s*$", re.S)


class Permission(enum.StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


@record(kw_only=False)
class PermissionRule(Record):
    """One permission rule: an action for the tool names it matches."""

    action: Permission
    tool: str
    argument: str | None = None
    session_id: str | None = None
    """Set: the rule holds only in that session (an "always" answer), else everywhere."""

    @classmethod
    def parse(cls, action: str | Permission, pattern: str) -> PermissionRule:
        try:
            act = Permission(action)
        except ValueError:
            raise ValueError(f"permission must be allow, ask or deny, got {action!r}") from None
        if not isinstance(pattern, str):
            raise TypeError(f"permission pattern must be a str, got {type(pattern).__name__}")
        m = _RULE.match(pattern)
        if not m:
            raise ValueError(
                f"bad permission pattern {pattern!r}; expected 'tool' or 'tool(argument-glob)'"
            )
        return cls(act, m.group(1), m.group(2))

    def matches_tool(self, tool_name: str, family: str | None = None) -> bool:
        if fnmatch.fnmatchcase(tool_name, self.tool):
            return True
        return family is not None and fnmatch.fnmatchcase(family, self.tool)

    def matches_subject(self, subject: str) -> bool:
        return self.argument is None or fnmatch.fnmatchcase(subject, self.argument)

    def __str__(self) -> str:
        arg = "" if self.argument is None else f"({self.argument})"
        scope = "" if self.session_id is None else f" (session {self.session_id})"
        return f"{self.action}: {self.tool}{arg}{scope}"


class Permissions:
    """An ordered set of rules; ``decide`` answers for one call."""

    def __init__(self, rules: Iterable[PermissionRule | tuple[str, str]] = ()) -> None:
        self._rules: list[PermissionRule] = []
        for rule in rules:
            if isinstance(rule, PermissionRule):
                self._rules.append(rule)
            elif isinstance(rule, tuple) and len(rule) == 2:
                self._rules.append(PermissionRule.parse(*rule))
            else:
                raise TypeError(
                    f"permission rules are PermissionRule or (action, pattern), got {rule!r}"
                )

    def add(self, action: str | Permission, pattern: str, *,
            session_id: str | None = None) -> PermissionRule:
        """Add a rule; with ``session_id`` it holds only for that session's calls."""
        rule = PermissionRule.parse(action, pattern)
        if session_id is not None:
            rule = PermissionRule(rule.action, rule.tool, rule.argument, session_id)
        self._rules.append(rule)
        return rule

    def _for(self, session_id: str | None) -> list[PermissionRule]:
        return [r for r in self._rules if r.session_id is None or r.session_id == session_id]

    @property
    def rules(self) -> tuple[PermissionRule, ...]:
        return tuple(self._rules)

    def decide(
        self, tool_name: str, subjects: Sequence[str], *, read_only: bool,
        family: str | None = None, session_id: str | None = None,
    ) -> tuple[Permission, PermissionRule | None]:
        """The permission for a call of ``tool_name`` touching ``subjects`` in ``session_id``,
        and the deciding rule."""
        rules = [r for r in self._for(session_id) if r.matches_tool(tool_name, family)]
        for action in (Permission.DENY, Permission.ASK):
            for rule in rules:
                if rule.action is action and (
                    rule.argument is None or any(rule.matches_subject(s) for s in subjects)
                ):
                    return action, rule
        uncovered = any(isinstance(s, UncoveredSubject) for s in subjects)
        if uncovered:
            guard = next((r for r in rules if r.action is not Permission.ALLOW), None)
            if guard is not None:
                return Permission.ASK, guard
        allows = [r for r in rules if r.action is Permission.ALLOW]
        if allows:
            unconditional = next((r for r in allows if r.argument is None), None)
            if unconditional is not None:
                return Permission.ALLOW, unconditional
            covering = [
                None if isinstance(s, UncoveredSubject)
                else next((r for r in allows if r.matches_subject(s)), None)
                for s in subjects
            ]
            if subjects and all(covering):
                return Permission.ALLOW, covering[0]
        if uncovered:
            return Permission.ASK, None
        return (Permission.ALLOW if read_only else Permission.ASK), None

    def refuses(self, tool_name: str, subject: str, *, family: str | None = None,
                session_id: str | None = None) -> bool:
        """Whether a deny or ask rule names ``subject`` for this tool: tools that walk folders
        (grep, find, ls) leave such entries out, since they cannot ask about each one."""
        return any(
            r.action is not Permission.ALLOW and r.argument is not None
            and r.matches_tool(tool_name, family) and r.matches_subject(subject)
            for r in self._for(session_id)
        )
