"""Permission rules: which tool calls run, which are asked, which are refused.

A rule is ``allow``, ``ask`` or ``deny`` with a pattern ``tool`` or ``tool(argument-glob)``,
for example ``bash(git status*)`` or ``write(src/**)``. The tool part matches the tool name and
the argument part matches the tool's permission key (its ``permission_key``, by default its
first string parameter), both as shell globs where ``*`` matches any characters, ``/`` included.
Among the rules that match a call, deny beats ask and ask beats allow. With no matching rule a
read-only tool is allowed and any other tool is asked.
"""

from __future__ import annotations

import enum
import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Permission", "PermissionRule", "Permissions"]

_RULE = re.compile(r"^\s*([^\s()]+)\s*(?:\((.*)\))?\s*$", re.S)


class Permission(enum.StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


_RANK = {Permission.ALLOW: 0, Permission.ASK: 1, Permission.DENY: 2}


@dataclass(frozen=True, slots=True)
class PermissionRule:
    action: Permission
    tool: str
    argument: str | None = None

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

    def matches(self, tool_name: str, key_value: str | None) -> bool:
        if not fnmatch.fnmatchcase(tool_name, self.tool):
            return False
        if self.argument is None:
            return True
        return key_value is not None and fnmatch.fnmatchcase(key_value, self.argument)

    def __str__(self) -> str:
        arg = "" if self.argument is None else f"({self.argument})"
        return f"{self.action}: {self.tool}{arg}"


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

    def add(self, action: str | Permission, pattern: str) -> PermissionRule:
        rule = PermissionRule.parse(action, pattern)
        self._rules.append(rule)
        return rule

    @property
    def rules(self) -> tuple[PermissionRule, ...]:
        return tuple(self._rules)

    def decide(
        self,
        tool_name: str,
        arguments: Mapping[str, Any],
        *,
        read_only: bool,
        permission_key: str | None = None,
    ) -> tuple[Permission, PermissionRule | None]:
        key_value = None
        if permission_key is not None and permission_key in arguments:
            key_value = str(arguments[permission_key])
        best: PermissionRule | None = None
        for rule in self._rules:
            if rule.matches(tool_name, key_value) and (
                best is None or _RANK[rule.action] > _RANK[best.action]
            ):
                best = rule
        if best is not None:
            return best.action, best
        return (Permission.ALLOW if read_only else Permission.ASK), None
