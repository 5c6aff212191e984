"""Human approval: a built-in approver that asks through events and waits for an answer.

``HumanApprover`` is a hook; register it and every call that needs approval emits
``APPROVAL_REQUESTED`` with a ``request_id``, then waits for ``loop.resolve_approval`` (or the
approval timeout, which denies); with ``AgentLoop(park=True)`` the turn parks instead
(``_parking``). Request ids and the table of open requests are ``_requests``.
"""

from __future__ import annotations

from steerable._hooks import HookAction, HookDecision, ToolCallContext

__all__ = ["HumanApprover"]


class HumanApprover:
    """Asks a person: emits APPROVAL_REQUESTED and waits for ``resolve_approval``."""

    name = "HumanApprover"

    async def approve_tool(self, ctx: ToolCallContext) -> HookDecision | None:
        approved, reason = await ctx.ask_human()
        if approved:
            return None
        return HookDecision(HookAction.DENY_TOOL, reason=reason or "denied by the user")
