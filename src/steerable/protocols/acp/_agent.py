"""``SteerableAcpAgent``: an ``AgentLoop`` behind the Agent Client Protocol.

One loop serves every session of the connection. A prompt goes through ``AgentLoop.send``, so
a prompt that arrives while a turn runs follows the busy policy, and the response is sent when
the turn that took it has ended *and* every update of that turn has been sent (ACP asks for
updates before the response). ``session/cancel`` is ``CancelMode.AFTER_MODEL``: the turn stops
at its next safe point and keeps what it did; the loop keeps no checkpoints here, so a
cancelled turn is saved as it stands and the next prompt continues from it, as the editor's
transcript shows. Steering: ``_session/steering`` (the extension the Codex and Claude adapters
answer, advertised in ``_meta.steering``) and, behind ``--unstable``, ``_session/inject``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    AvailableCommand,
    AvailableCommandInput,
    AvailableCommandsUpdate,
    ClientCapabilities,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionAdditionalDirectoriesCapabilities,
    SessionCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
    ToolCallStart,
    UnstructuredCommandInput,
    Usage,
)

from steerable import __version__
from steerable._core._agent import Agent
from steerable._core._bus import Subscription
from steerable._core._cancel import CancelMode
from steerable._core._turn import TurnResult
from steerable._events import Event, EventKind, MessageStateEvent
from steerable._hooks import ToolCallContext
from steerable.coding import Sandbox, Workspace
from steerable.coding.bash import DEFAULT_TIMEOUT
from steerable.drivers._lanes import BusyPolicy
from steerable.drivers._loop import AgentLoop
from steerable.errors import ConfigurationError, SessionBusyError
from steerable.protocols.acp._approval import EditorApprover
from steerable.protocols.acp._editor import EditorFiles, editor_tools
from steerable.protocols.acp._mcp import SessionServers, mcp_available
from steerable.protocols.acp._prompt import prompt_text, stop_reason
from steerable.protocols.acp._sessions import SessionRecord, SessionRegistry, replay
from steerable.protocols.acp._steering import SteeringDesk
from steerable.protocols.acp._terminal import EditorTerminals, make_editor_bash_tool
from steerable.protocols.acp._updates import ToolView, Update, call_start, text_block, translate
from steerable.tools import Tool

__all__ = ["AcpOptions", "AgentFactory", "SteerableAcpAgent"]

log = logging.getLogger("steerable.acp")

AgentFactory = Callable[[Workspace, Sequence[Tool]], tuple[Agent, Agent]]
"""Build the coding agent (and its dry-run twin) for a session's folder; the tools given
stand in for the built-in ones of the same name (the editor-backed read, write, edit, bash)
and the others are added (the tools of the editor's MCP servers)."""

_KINDS = [EventKind.LLM_DELTA, EventKind.LLM_RESPONSE, EventKind.TOOL_EXEC_START,
          EventKind.TOOL_EXEC_PROGRESS, EventKind.TOOL_EXEC_END, EventKind.TOOL_EXEC_SKIPPED,
          EventKind.STEERING_INJECTED, EventKind.PLAN_UPDATED, EventKind.TURN_END,
          EventKind.MESSAGE_STATE]
_ANNOUNCE_WAIT = 5.0
_CLOSE_GRACE = 5.0
_PAGE = 50
_COMMANDS = [
    ("steer", "Add this message to the running turn (it reaches the model at the next step)"),
    ("follow-up", "Queue this message to run as its own turn after the running one"),
    ("interrupt", "Stop the running turn gently (it sums up), then run this message"),
    ("dry-run", "on or off: tools that change things only show what they would do"),
]
_POLICY_COMMANDS: dict[str, BusyPolicy] = {"steer": "steer", "follow-up": "follow_up",
                                           "interrupt": "interrupt"}


@dataclass(frozen=True, slots=True)
class AcpOptions:
    """``busy_policy``: what a prompt for a busy session does (see ``AgentLoop.send``);
    ``unstable``: offer the draft ``_session/inject``; ``editor_fs`` / ``editor_terminal``:
    read and write files / run bash through the editor when it offers to (bash with
    ``sandbox`` and ``bash_timeout``, as the built-in tool); ``registry``: where session
    folders are kept."""

    busy_policy: BusyPolicy = "steer"
    unstable: bool = False
    editor_fs: bool = True
    editor_terminal: bool = True
    sandbox: Sandbox | None = None
    bash_timeout: float = DEFAULT_TIMEOUT
    registry: Path | None = None


@dataclass(slots=True)
class _Session:
    session_id: str
    root: Path
    agent: Agent
    dry_agent: Agent
    view: ToolView
    servers: SessionServers
    dry_run: bool = False
    announced: dict[str, asyncio.Event] = field(default_factory=dict)
    arguments: dict[str, dict[str, Any]] = field(default_factory=dict)
    terminals: dict[str, str] = field(default_factory=dict)
    """call id -> the editor terminal it runs in."""
    cancelled: set[str] = field(default_factory=set)
    """Turns the editor cancelled: answered ``cancelled`` even if the model finished first."""

    @property
    def current(self) -> Agent:
        return self.dry_agent if self.dry_run else self.agent

    def announcement(self, call_id: str) -> asyncio.Event:
        return self.announced.setdefault(call_id, asyncio.Event())


class _TurnEnds:
    """Turns whose every update has been sent (the pump passed their TURN_END)."""

    def __init__(self, keep: int = 1024) -> None:
        self._done: OrderedDict[str, None] = OrderedDict()
        self._waiters: dict[str, asyncio.Event] = {}
        self._keep = keep

    def mark(self, turn_id: str) -> None:
        self._done[turn_id] = None
        if len(self._done) > self._keep:
            self._done.popitem(last=False)
        waiter = self._waiters.pop(turn_id, None)
        if waiter is not None:
            waiter.set()

    async def wait(self, turn_id: str, sub: Subscription) -> None:
        if turn_id in self._done:
            return
        waiter = self._waiters.setdefault(turn_id, asyncio.Event())
        while not waiter.is_set():
            try:
                await asyncio.wait_for(waiter.wait(), 1.0)
            except TimeoutError:
                # A TURN_END lost to a full buffer would make this wait forever.
                if sub.dropped.get(EventKind.TURN_END) and not len(sub):
                    log.warning("updates of turn %s were dropped; answering anyway", turn_id)
                    return


class SteerableAcpAgent:
    """The ACP ``Agent`` side over ``loop``; serve it with ``acp.run_agent`` inside
    ``async with`` (which runs the update pump, and closes the loop on the way out)."""

    def __init__(self, loop: AgentLoop, make_agent: AgentFactory, *,
                 approver: EditorApprover | None = None,
                 options: AcpOptions | None = None) -> None:
        self._loop = loop
        self._make_agent = make_agent
        self._options = options or AcpOptions()
        self._registry = SessionRegistry(self._options.registry)
        self._sessions: dict[str, _Session] = {}
        self._client: Any = None
        self._caps = ClientCapabilities()
        self._ends = _TurnEnds()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._sub: Subscription | None = None
        self._steering = SteeringDesk(loop, self._start_from_steering)
        if approver is not None:
            approver.bind(self._ask_permission, self._prepare_call, loop.permissions)

    # -- lifetime -----------------------------------------------------------------------------

    async def __aenter__(self) -> SteerableAcpAgent:
        self._sub = self._loop.subscribe(kinds=_KINDS, buffer=65536)
        self._own(self._pump(self._sub), name="acp-pump")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._settle(_CLOSE_GRACE)
        if self._sub is not None:
            self._sub.close()
        await self._loop.aclose()
        for session in self._sessions.values():
            await session.servers.aclose()
        for task in list(self._tasks):
            if not task.done() and task.get_name() != "acp-pump":
                task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5.0)

    async def _settle(self, grace: float) -> None:
        """The editor went away: stop running turns as a cancel does (they keep what they did
        and are saved), waiting ``grace`` seconds before closing the loop aborts the rest."""
        busy = [sid for sid in self._sessions if self._loop.busy(sid)]
        for sid in busy:
            self._loop.drop_queued(sid)
            self._loop.cancel(sid, CancelMode.AFTER_MODEL)
        if not busy:
            return
        waiters = [asyncio.ensure_future(self._loop.wait_session(sid)) for sid in busy]
        _, late = await asyncio.wait(waiters, timeout=grace)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late)

    def _own(self, coro: Coroutine[Any, Any, Any], *, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def on_connect(self, conn: Any) -> None:
        self._client = conn

    # -- initialize ---------------------------------------------------------------------------

    async def initialize(self, protocol_version: int,
                         client_capabilities: ClientCapabilities | None = None,
                         client_info: Implementation | None = None,
                         **kwargs: Any) -> InitializeResponse:
        self._caps = client_capabilities or ClientCapabilities()
        steering = {"supported": True, "method": "_session/steering",
                    "idleBehaviors": ["startNewTurn", "promptRequired"]}
        meta: dict[str, Any] = {"steering": steering, "steerable": {
            "busyPolicy": self._options.busy_policy, "inject": self._options.unstable}}
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(image=False, audio=False,
                                                       embedded_context=True),
                mcp_capabilities=McpCapabilities(http=mcp_available(), sse=False),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(), resume=SessionResumeCapabilities(),
                    additional_directories=SessionAdditionalDirectoriesCapabilities())),
            auth_methods=[],
            agent_info=Implementation(name="steerable", title="steerable", version=__version__),
            field_meta=meta)

    # -- sessions -----------------------------------------------------------------------------

    def _root(self, cwd: str) -> Path:
        root = Path(cwd)
        if not root.is_absolute() or not root.is_dir():
            raise RequestError.invalid_params(
                {"message": f"cwd must be an absolute path to a folder, got {cwd!r}"})
        return root

    async def _open(self, session_id: str, root: Path, extra: Sequence[str] | None,
                    mcp_servers: Sequence[Any] | None) -> _Session:
        try:
            ws = Workspace(root, extra or ())
        except ConfigurationError as exc:
            raise RequestError.invalid_params({"message": str(exc)}) from None
        old = self._sessions.pop(session_id, None)
        if old is not None:  # reopened: the editor passes its servers again
            await old.servers.aclose()
        servers = SessionServers()
        tools = [*self._stand_ins(ws), *await servers.open(mcp_servers or (), root)]
        agent, dry_agent = self._make_agent(ws, tools)
        session = _Session(session_id, root, agent, dry_agent,
                           ToolView(root, agent.tools_by_name), servers)
        self._sessions[session_id] = session
        self._own(self._announce_commands(session_id), name="acp-commands")
        return session

    def _stand_ins(self, ws: Workspace) -> list[Tool]:
        """The editor-backed tools the client offers and the options allow."""
        if self._client is None:
            return []
        fs, options = self._caps.fs, self._options
        use = options.editor_fs and fs is not None
        files: EditorFiles = self._client
        tools: list[Tool] = list(editor_tools(ws, files, read=bool(use and fs and fs.read_text_file),
                                              write=bool(use and fs and fs.write_text_file)))
        if options.editor_terminal and self._caps.terminal:
            terms: EditorTerminals = self._client
            tools.append(make_editor_bash_tool(ws, terms, sandbox=options.sandbox,
                                               default_timeout=options.bash_timeout))
        return tools

    async def new_session(self, cwd: str, additional_directories: list[str] | None = None,
                          mcp_servers: list[Any] | None = None,
                          **kwargs: Any) -> NewSessionResponse:
        root = self._root(cwd)
        sid = f"acp-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"
        await self._open(sid, root, additional_directories, mcp_servers)
        self._registry.put(SessionRecord(sid, str(root)))
        return NewSessionResponse(session_id=sid)

    async def _reopen(self, cwd: str, session_id: str, extra: Sequence[str] | None,
                      mcp_servers: Sequence[Any] | None) -> _Session:
        root = self._root(cwd)
        try:
            known = self._loop.store.exists(session_id) or self._registry.get(session_id)
        except ConfigurationError as exc:
            raise RequestError.invalid_params({"message": str(exc)}) from None
        if not known:
            raise RequestError.resource_not_found(session_id)
        record = self._registry.get(session_id) or SessionRecord(session_id, str(root))
        record.cwd = str(root)
        self._registry.put(record)
        return await self._open(session_id, root, extra, mcp_servers)

    async def load_session(self, cwd: str, session_id: str,
                           mcp_servers: list[Any] | None = None,
                           additional_directories: list[str] | None = None,
                           **kwargs: Any) -> LoadSessionResponse:
        session = await self._reopen(cwd, session_id, additional_directories, mcp_servers)
        for update in replay(self._loop.session_messages(session_id), session.view):
            await self._send(session_id, update)
        return LoadSessionResponse()

    async def resume_session(self, session_id: str, cwd: str,
                             additional_directories: list[str] | None = None,
                             mcp_servers: list[Any] | None = None,
                             **kwargs: Any) -> ResumeSessionResponse:
        await self._reopen(cwd, session_id, additional_directories, mcp_servers)
        return ResumeSessionResponse()

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None,
                            **kwargs: Any) -> ListSessionsResponse:
        saved = {i.session_id: i.updated for i in self._loop.store.list_sessions()}
        # Sessions with a saved conversation: not the ones never prompted, nor ones removed
        # with 'steerable sessions rm'.
        rows = [(saved[r.session_id], r) for r in self._registry
                if r.session_id in saved and (cwd is None or r.cwd == cwd)]
        rows.sort(key=lambda r: r[0], reverse=True)
        start = int(cursor) if cursor and cursor.isdigit() else 0
        page = rows[start:start + _PAGE]
        return ListSessionsResponse(
            sessions=[SessionInfo(session_id=r.session_id, cwd=r.cwd, title=r.title or None,
                                  updated_at=datetime.fromtimestamp(u, UTC).isoformat())
                      for u, r in page],
            next_cursor=str(start + _PAGE) if start + _PAGE < len(rows) else None)

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params(
                {"message": f"session {session_id!r} is not open here; use session/new, "
                            "session/load or session/resume first"})
        return session

    # -- prompts ------------------------------------------------------------------------------

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        session = self._session(session_id)
        text = prompt_text(prompt)
        policy = self._options.busy_policy
        name, _, rest = text[1:].partition(" ") if text.startswith("/") else ("", "", "")
        if name == "dry-run":
            return await self._dry_run(session, rest.strip())
        if name in _POLICY_COMMANDS and rest.strip():
            policy, text = _POLICY_COMMANDS[name], rest.strip()
        try:
            sent = self._loop.send(text, session_id, policy, agent=session.current)
        except SessionBusyError as exc:
            raise RequestError.invalid_request({"message": str(exc)}) from None
        self._title(session_id, text)  # after the turn started: off the path to its updates
        try:
            result: TurnResult = await sent
        except RuntimeError as exc:  # withdrawn by a cancel, or the loop closed
            return PromptResponse(stop_reason="cancelled", field_meta={"steerable": {
                "notDelivered": [{"messageId": sent.message_id, "kind": "send",
                                  "text": text}], "reason": str(exc)}})
        await self._ends.wait(result.turn_id, self._require_sub())
        cancelled = result.turn_id in session.cancelled
        session.cancelled.discard(result.turn_id)
        return self._response(result, cancelled)

    def _response(self, result: TurnResult, cancelled: bool) -> PromptResponse:
        # ACP: a cancelled prompt is answered "cancelled", however far its turn got.
        reason = "cancelled" if cancelled else stop_reason(result)
        usage = None
        if result.usage is not None:
            u = result.usage
            usage = Usage(input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                          total_tokens=u.input_tokens + u.output_tokens)
        meta: dict[str, Any] = {"turnId": result.turn_id, "status": result.status.value}
        if result.unprocessed:
            meta["notDelivered"] = [{"messageId": item.message_id, "kind": item.kind,
                                     "text": item.text} for item in result.unprocessed]
        return PromptResponse(stop_reason=reason, usage=usage, field_meta={"steerable": meta})

    async def _dry_run(self, session: _Session, arg: str) -> PromptResponse:
        if arg not in ("on", "off"):
            note = "usage: /dry-run on|off"
        else:
            session.dry_run = arg == "on"
            note = ("dry run on: tools that change things only show what they would do"
                    if session.dry_run else "dry run off: tools act again")
        await self._send(session.session_id, AgentMessageChunk(
            session_update="agent_message_chunk", content=text_block(note)))
        return PromptResponse(stop_reason="end_turn")

    def _title(self, session_id: str, text: str) -> None:
        record = self._registry.get(session_id)
        if record is not None and not record.title:
            record.title = text.strip().splitlines()[0][:80]
            self._registry.put(record)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """Stop the session's turn at its next safe point (``AFTER_MODEL``; never a rollback)
        and withdraw prompts queued behind it (their responses say so)."""
        session = self._sessions.get(session_id)
        if session is None:
            return
        self._loop.drop_queued(session_id)
        info = self._loop.active_turn(session_id)
        if info is not None:
            session.cancelled.add(info.turn_id)
        self._loop.cancel(session_id, CancelMode.AFTER_MODEL)

    # -- steering -----------------------------------------------------------------------------

    def _start_from_steering(self, session_id: str, text: str) -> Any:
        session = self._session(session_id)
        return self._loop.send(text, session_id, "follow_up", agent=session.current)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "session/steering":
            self._session(str(params.get("sessionId", "")))
            return self._steering.steer(params)
        if method == "session/inject" and self._options.unstable:
            self._session(str(params.get("sessionId", "")))
            return self._steering.inject(params)
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        log.debug("ignored extension notification _%s", method)

    # -- updates ------------------------------------------------------------------------------

    def _require_sub(self) -> Subscription:
        if self._sub is None:
            raise RuntimeError("serve the agent inside 'async with' (it runs the update pump)")
        return self._sub

    async def _send(self, session_id: str, update: Update | AvailableCommandsUpdate) -> None:
        await self._client.session_update(session_id=session_id, update=update)

    async def _announce_commands(self, session_id: str) -> None:
        commands = [AvailableCommand(name=n, description=d, input=AvailableCommandInput(
            root=UnstructuredCommandInput(hint="on|off" if n == "dry-run" else "message")))
                    for n, d in _COMMANDS]
        try:
            await self._send(session_id, AvailableCommandsUpdate(
                session_update="available_commands_update", available_commands=commands))
        except ConnectionError:
            log.debug("client gone before the commands of %s were sent", session_id)

    async def _pump(self, sub: Subscription) -> None:
        async for event in sub:
            if event.kind is EventKind.MESSAGE_STATE:
                await self._message_state(event)
                continue
            session = self._sessions.get(event.session_id)
            if session is not None:
                try:
                    await self._forward(session, event)
                except ConnectionError:
                    pass  # the editor went away; keep marking turn ends for waiting prompts
                except Exception:  # a bad update must not stop the others
                    log.exception("could not send an update for %s", event.kind)
            if event.kind is EventKind.TURN_END and event.parent_turn_id is None:
                if session is not None:
                    session.announced.clear()
                    session.arguments.clear()
                    session.terminals.clear()
                self._ends.mark(event.turn_id)

    async def _message_state(self, event: MessageStateEvent) -> None:
        """Tell the editor how a message it steered with ended (``_session/message_state``;
        a client that does not know the notification ignores it, as ACP asks)."""
        if not event.state.terminal:
            return
        session_id = self._steering.watched.pop(event.message_id, None)
        if session_id is None:
            return
        with contextlib.suppress(ConnectionError):  # the editor went away
            await self._client.ext_notification("session/message_state", {
                "sessionId": session_id, "messageId": event.message_id,
                "state": event.state.value, "detail": event.detail})

    async def _forward(self, session: _Session, event: Event) -> None:
        if event.kind is EventKind.LLM_RESPONSE and event.parent_turn_id is None:
            for call in event.tool_calls:
                session.arguments[call.id] = dict(call.arguments)
        elif event.kind is EventKind.TOOL_EXEC_PROGRESS and "terminalId" in event.data:
            session.terminals[event.call_id] = str(event.data["terminalId"])
        window = session.current.context_window
        for update in translate(event, session.view, session.arguments, window,
                                session.terminals, session.announced):
            if isinstance(update, ToolCallStart):
                seen = session.announcement(update.tool_call_id)
                if seen.is_set():
                    continue  # the approver announced it already
                seen.set()  # set before sending: the send is queued first all the same
            await self._send(session.session_id, update)

    # -- approvals ----------------------------------------------------------------------------

    async def _prepare_call(self, ctx: ToolCallContext) -> ToolView | None:
        """Make sure the editor knows the call before it is asked about it: wait for the
        pump to announce it (so the model's text comes first), or announce it here."""
        session = self._sessions.get(ctx.session_id)
        if session is None:
            return None
        seen = session.announcement(ctx.call.id)
        if not seen.is_set() and ctx.parent_turn_id is None:
            try:
                await asyncio.wait_for(seen.wait(), _ANNOUNCE_WAIT)
            except TimeoutError:
                log.warning("call %s was not announced in time; announcing it now", ctx.call.id)
        if not seen.is_set():
            seen.set()
            await self._send(ctx.session_id, call_start(session.view, ctx.call))
        return session.view

    async def _ask_permission(self, session_id: str, update: Any, options: Any) -> Any:
        return await self._client.request_permission(session_id=session_id, tool_call=update,
                                                     options=options)

