"""steerable as an MCP server (SPEC 12): any MCP client can run the agent as a tool.

Tools: ``run`` (start a turn; each of the turn's steps is a progress notification, the final
text the result), ``steer`` (a message into the running turn), ``cancel`` (stop the turn at a
safe point), ``approve`` (answer a tool call waiting for approval, announced by a progress
notification of ``run``) and ``status`` (a session at a glance). Served over stdio by ``steerable
mcp serve`` and at ``/mcp`` on ``steerable serve`` (streamable HTTP).

A thin adapter: every tool is one call of a ``Runner``, the interface ``steerable serve``'s
routes use (its ``LocalRunner`` or Redis runner fits it as it is), and progress is read from the
same redacted event stream the native SSE clients get. The protocol's types come from the
official ``mcp`` SDK (the ``mcp`` extra).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Protocol, TypeVar

from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

from steerable.drivers._lanes import BusyPolicy
from steerable.errors import SteerableError

__all__ = ["Runner", "build_server", "http_endpoint", "progress_text"]

CancelName = Literal["immediate", "after_model", "after_tools"]
_SHOWN = 300
"""Characters of a model's text or a tool's output a progress message carries."""


class _Sent(Protocol):
    @property
    def turn_id(self) -> str | None: ...

    @property
    def action(self) -> str: ...


class _Taken(Protocol):
    """A steer's answer: whether the turn took it, and the message's id and state (SPEC 10)."""

    @property
    def ok(self) -> bool: ...

    @property
    def message_id(self) -> str | None: ...

    @property
    def state(self) -> str | None: ...


class Runner(Protocol):
    """What the tools call: a subset of ``steerable.server.SessionRunner``."""

    async def send(self, session_id: str, text: str, policy: BusyPolicy | None) -> _Sent: ...

    async def steer(self, session_id: str, text: str) -> _Taken: ...

    async def cancel(self, session_id: str, mode: CancelName) -> bool: ...

    async def resolve_approval(self, request_id: str, approved: bool, reason: str) -> bool: ...

    async def get_session(self, session_id: str) -> dict[str, Any]: ...

    def events(self, session_id: str, after: int | None) -> AsyncIterator[tuple[int, str]]: ...


_T = TypeVar("_T")


async def _answer(call: Awaitable[_T]) -> _T:
    """The runner's refusals (no such session, busy, bad value, a worker away) as the tool's
    error result with their message; anything else stays a crash, logged on this side."""
    try:
        return await call
    except (LookupError, ValueError, SteerableError, ConnectionError) as exc:
        raise ToolError(str(exc.args[0]) if exc.args else type(exc).__name__) from exc


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def progress_text(event: dict[str, Any]) -> str | None:
    """One line for an event worth a progress notification, None for the others (state
    changes, stream deltas and requests would drown the client)."""
    kind = event.get("kind")
    sub = "sub-turn: " if event.get("parent_turn_id") else ""
    if kind == "llm_response" and event.get("text"):
        return f"{sub}model: {_cut(event['text'])}"
    if kind == "tool_exec_start":
        return f"{sub}tool {event['tool_name']} {_cut(json.dumps(event.get('arguments', {})))}"
    if kind == "tool_exec_progress":
        return f"{sub}tool {event['tool_name']}: {_cut(event['text'])}"
    if kind == "tool_exec_end":
        outcome = "failed" if event.get("is_error") else "done"
        return f"{sub}tool {event['tool_name']} {outcome}: {_cut(event.get('content', ''))}"
    if kind == "approval_requested":
        return (f"approval needed: tool {event['tool_name']} "
                f"{_cut(json.dumps(event.get('arguments', {})))}; call approve with request_id "
                f"{event['request_id']}")
    if kind == "steering_injected":
        return f"steered: {_cut(event['text'])}"
    if kind == "subturn_spawn":
        return f"sub-agent {event['agent']} started"
    if kind == "error":
        return f"error: {_cut(event['message'])}"
    return None


async def _run(runner: Runner, ctx: Context, prompt: str, session_id: str | None
               ) -> types.CallToolResult:
    sid = session_id or f"mcp-{secrets.token_hex(6)}"
    # Attached before the turn starts, so none of its events is missed.
    events = runner.events(sid, None)
    try:
        sent = await _answer(runner.send(sid, prompt, "reject"))
        step = 0
        try:
            async for _seq, data in events:
                event = json.loads(data)
                if event.get("kind") == "turn_end" and event.get("turn_id") == sent.turn_id:
                    return _outcome(sid, event)
                shown = progress_text(event)
                if shown is not None:
                    step += 1
                    await ctx.report_progress(step, None, shown)
        except BaseException:
            # The client cancelled the call (or went away): the turn it started stops too.
            await runner.cancel(sid, "immediate")
            raise
    finally:
        await _close(events)
    raise ConnectionError("the event stream ended before the turn did")


async def _close(events: AsyncIterator[tuple[int, str]]) -> None:
    close = getattr(events, "aclose", None)
    if close is not None:
        await close()


def _outcome(session_id: str, end: dict[str, Any]) -> types.CallToolResult:
    status = str(end.get("status"))
    text = end.get("text") or ""
    if status not in ("completed", "max_iterations") and not text:
        text = f"the turn ended {status}" + (f": {end['error']}" if end.get("error") else "")
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content={"session_id": session_id, "turn_id": end.get("turn_id"),
                            "status": status, "text": end.get("text") or ""},
        is_error=status == "error")


def build_server(runner: Runner, *, name: str = "steerable") -> MCPServer:
    """The MCP server whose tools drive ``runner``'s sessions."""
    server: MCPServer = MCPServer(name, instructions=(
        "Run a steerable agent: `run` starts a turn and returns its final text (progress "
        "notifications show each step); while it runs, `steer` adds a message to it, "
        "`approve` answers a tool call waiting for approval, `cancel` stops it, `status` "
        "shows a session."), log_level="WARNING")

    @server.tool()
    async def run(prompt: str, ctx: Context, session_id: str | None = None
                  ) -> types.CallToolResult:
        """Run one turn of the agent on `prompt` and return its final text. `session_id`
        continues a session (a new one is made when absent; the result names it). A session
        already at work refuses: steer it instead."""
        return await _run(runner, ctx, prompt, session_id)

    @server.tool()
    async def steer(session_id: str, text: str) -> dict[str, Any]:
        """Add `text` to the running turn of `session_id`; the model reads it at its next
        step. `ok` is false when no turn is running; `message_id` and `state` follow the
        message (queued until a model call carries it)."""
        taken = await _answer(runner.steer(session_id, text))
        return {"ok": taken.ok, "message_id": taken.message_id, "state": taken.state}

    @server.tool()
    async def cancel(session_id: str, mode: CancelName = "after_model") -> dict[str, bool]:
        """Stop the running turn of `session_id`: `after_model` (default) keeps the model's
        answer in progress, `after_tools` lets the tools under way finish, `immediate` stops
        at once."""
        return {"ok": await _answer(runner.cancel(session_id, mode))}

    @server.tool()
    async def approve(request_id: str, approved: bool, reason: str = "") -> dict[str, bool]:
        """Answer the approval request `request_id` (named by a progress notification of
        `run`): allow the tool call or deny it with `reason`."""
        return {"ok": await _answer(runner.resolve_approval(request_id, approved, reason))}

    @server.tool()
    async def status(session_id: str) -> dict[str, Any]:
        """A session at a glance: whether a turn runs, queued messages, message count and the
        last answer."""
        info = await _answer(runner.get_session(session_id))
        messages = info.get("messages", [])
        last = next((m.get("content") for m in reversed(messages)
                     if m.get("role") == "assistant" and m.get("content")), None)
        return {"session_id": session_id, "busy": info.get("busy", False),
                "queued": info.get("queued", []), "messages": len(messages),
                "last_answer": last}

    return server


class _Endpoint:
    """The streamable HTTP endpoint as a plain ASGI app (Starlette routes call an object's
    ``__call__`` as ASGI, not as a request handler)."""

    def __init__(self, handle: Callable[[Scope, Receive, Send], Any]) -> None:
        self._handle = handle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._handle(scope, receive, send)


def http_endpoint(server: MCPServer) -> tuple[_Endpoint, AbstractAsyncContextManager[None]]:
    """The ASGI endpoint to route at ``/mcp`` and the context that must run around the app's
    life (the SDK's session manager). Host, origin and token checks are the hosting app's (its
    guard sees every request first), so the SDK's own DNS-rebinding check is off."""
    server.streamable_http_app(transport_security=TransportSecuritySettings(
        enable_dns_rebinding_protection=False))
    manager = server.session_manager
    return _Endpoint(manager.handle_request), manager.run()
