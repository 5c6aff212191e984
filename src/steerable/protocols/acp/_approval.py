"""Approvals asked in the editor: ``session/request_permission`` with ACP's four option kinds.

The hook is an ordinary ``approve_tool`` approver on the loop, so it is consulted exactly when
any approver would be (mutating calls, and what permission rules say to ask). "Allow always"
and "reject always" add allow / deny rules for that session only, the same rules the terminal's
"always" adds (``steerable.coding._always``); a call no rule can cover (a bash line with
redirections...) is offered only the once-options.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from acp.schema import PermissionOption, ToolCallUpdate

from steerable._core._permissions import Permissions
from steerable._hooks import HookAction, HookDecision, ToolCallContext
from steerable.coding._always import always_rules, uncoverable
from steerable.protocols.acp._updates import ToolView, tool_kind

__all__ = ["EditorApprover", "permission_options"]

_ONCE = [PermissionOption(option_id="allow_once", name="Allow", kind="allow_once"),
         PermissionOption(option_id="reject_once", name="Reject", kind="reject_once")]
_ALWAYS = [PermissionOption(option_id="allow_always", name="Always allow in this session",
                            kind="allow_always"),
           PermissionOption(option_id="reject_always", name="Always reject in this session",
                            kind="reject_always")]


def permission_options(rememberable: bool) -> list[PermissionOption]:
    if not rememberable:
        return list(_ONCE)
    return [_ONCE[0], _ALWAYS[0], _ONCE[1], _ALWAYS[1]]


Ask = Callable[[str, ToolCallUpdate, list[PermissionOption]], Awaitable[Any]]
"""Send ``session/request_permission`` for a session; the client's response."""

Prepare = Callable[[ToolCallContext], Awaitable[ToolView | None]]
"""Make sure the editor has been told of the call; the session's view (None: unknown)."""


class EditorApprover:
    """``approve_tool``: ask the editor of the call's session; ``bind`` before turns run."""

    name = "acp-editor"

    def __init__(self) -> None:
        self._permissions = Permissions()
        self._ask: Ask | None = None
        self._prepare: Prepare | None = None

    def bind(self, ask: Ask, prepare: Prepare, permissions: Permissions) -> None:
        """Ask through ``ask``; "always" adds its rules to ``permissions`` (the loop's)."""
        self._ask, self._prepare, self._permissions = ask, prepare, permissions

    async def approve_tool(self, ctx: ToolCallContext) -> HookDecision | bool:
        if self._ask is None or self._prepare is None:
            return HookDecision(HookAction.DENY_TOOL, reason="no editor is connected to ask")
        view = await self._prepare(ctx)
        if view is None:
            return HookDecision(HookAction.DENY_TOOL,
                                reason=f"session {ctx.session_id} is not open in the editor")
        call = ctx.call
        arguments = dict(call.arguments)
        tool = view.tools.get(call.name)
        diff = view.diff(call.name, arguments)
        update = ToolCallUpdate(tool_call_id=call.id, title=view.title(call.name, arguments),
                                kind=tool_kind(call.name, tool), status="pending",
                                raw_input=arguments, locations=view.locations(arguments),
                                content=[diff] if diff is not None else None)
        rememberable = not uncoverable(tool, arguments)
        response = await self._ask(ctx.session_id, update, permission_options(rememberable))
        outcome = response.outcome
        if outcome.outcome != "selected":  # the prompt was cancelled while this was asked
            return HookDecision(HookAction.DENY_TOOL, reason="the prompt was cancelled")
        choice = outcome.option_id
        if choice in ("allow_always", "reject_always") and rememberable:
            action = "allow" if choice == "allow_always" else "deny"
            for pattern in always_rules(call.name, arguments):
                self._permissions.add(action, pattern, session_id=ctx.session_id)
        if choice in ("allow_once", "allow_always"):
            return True
        if choice in ("reject_once", "reject_always"):
            return HookDecision(HookAction.DENY_TOOL, reason="the user refused in the editor")
        return HookDecision(HookAction.DENY_TOOL,
                            reason=f"the editor answered with an unknown option {choice!r}")
