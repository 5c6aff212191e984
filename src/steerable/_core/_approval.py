"""Human approval: a built-in approver that asks through events and waits for an answer.

``HumanApprover`` is a hook; register it and every call that needs approval emits
``APPROVAL_REQUESTED`` with a ``request_id``, then waits for ``loop.resolve_approval`` (or the
approval timeout, which denies). The broker is the loop-wide table of open requests.

A request id is the only thing an answer needs, so it is a capability: 128 random bits, never
a counter. Two processes (Redis workers) can then never hand out the same id, and nobody who
did not see the request (a web page guessing ids) can answer it.
"""

from __future__ import annotations

import asyncio

from steerable._hooks import HookAction, HookDecision, ToolCallContext
from steerable._ids import random_hex

__all__ = ["ApprovalBroker", "HumanApprover"]


class ApprovalBroker:
    def __init__(self) -> None:
        self._pending: dict[str, asyncio.Future[tuple[bool, str]]] = {}

    def open(self) -> tuple[str, asyncio.Future[tuple[bool, str]]]:
        request_id = f"approval_{random_hex(16)}"
        future: asyncio.Future[tuple[bool, str]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        return request_id, future

    def discard(self, request_id: str) -> None:
        self._pending.pop(request_id, None)

    def resolve(self, request_id: str, approved: bool, reason: str) -> bool:
        future = self._pending.pop(request_id, None)
        if future is None or future.done():
            return False
        future.set_result((approved, reason))
        return True


class HumanApprover:
    """Asks a person: emits APPROVAL_REQUESTED and waits for ``resolve_approval``."""

    name = "HumanApprover"

    async def approve_tool(self, ctx: ToolCallContext) -> HookDecision | None:
        approved, reason = await ctx.ask_human()
        if approved:
            return None
        return HookDecision(HookAction.DENY_TOOL, reason=reason or "denied by the user")
