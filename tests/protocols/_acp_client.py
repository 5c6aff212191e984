"""An editor for the ACP tests: the ``agent-client-protocol`` package's client side, which
records every update and checks every message both ways against the package's schema models."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import acp
from acp import schema
from acp.connection import StreamDirection, StreamEvent
from acp.core import AgentSideConnection, ClientSideConnection
from pydantic import BaseModel

from steerable import Agent, AgentLoop
from steerable.protocols.acp import AcpOptions, SteerableAcpAgent

# What each JSON-RPC method's params and result must be, by the package's models.
REQUESTS: dict[str, tuple[type[BaseModel], type[BaseModel] | None]] = {
    "initialize": (schema.InitializeRequest, schema.InitializeResponse),
    "session/new": (schema.NewSessionRequest, schema.NewSessionResponse),
    "session/load": (schema.LoadSessionRequest, schema.LoadSessionResponse),
    "session/resume": (schema.ResumeSessionRequest, schema.ResumeSessionResponse),
    "session/list": (schema.ListSessionsRequest, schema.ListSessionsResponse),
    "session/prompt": (schema.PromptRequest, schema.PromptResponse),
    "session/request_permission": (schema.RequestPermissionRequest,
                                   schema.RequestPermissionResponse),
    "fs/read_text_file": (schema.ReadTextFileRequest, schema.ReadTextFileResponse),
    "fs/write_text_file": (schema.WriteTextFileRequest, schema.WriteTextFileResponse),
    "terminal/create": (schema.CreateTerminalRequest, schema.CreateTerminalResponse),
    "terminal/output": (schema.TerminalOutputRequest, schema.TerminalOutputResponse),
    "terminal/wait_for_exit": (schema.WaitForTerminalExitRequest,
                               schema.WaitForTerminalExitResponse),
    "terminal/kill": (schema.KillTerminalRequest, schema.KillTerminalResponse),
    "terminal/release": (schema.ReleaseTerminalRequest, schema.ReleaseTerminalResponse),
}
NOTIFICATIONS: dict[str, type[BaseModel]] = {
    "session/update": schema.SessionNotification,
    "session/cancel": schema.CancelNotification,
}
STEERING_OUTCOMES = {"injected", "startedNewTurn", "queued"}
IDLE = {"outcome": "promptRequired", "reason": "noRunningTurn"}
STATES = {"delivered", "returned", "rejected", "revoked"}


def _check_steering(asked: str, result: dict[str, Any]) -> None:
    if result == IDLE or set(result) in ({"revoked"}, {"replaced"}):
        return
    assert result["outcome"] in STEERING_OUTCOMES, result
    assert result["outcome"] != "queued" or asked == "_session/inject", result
    taken = result["_meta"]["steerable"]
    assert taken["messageId"].startswith("msg_") and taken["state"] in ("queued", "delivered")



def _strict(model: type[BaseModel], raw: Any, where: str) -> None:
    """Valid, and nothing salvaged or dropped: the package's models quietly replace a bad
    field with None, so the value must also survive a round trip unchanged."""
    value = model.model_validate(raw if raw is not None else {})
    again = value.model_dump(mode="json", by_alias=True, exclude_unset=True)
    assert again == (raw or {}), f"{where}: {model.__name__} changed it:\n{raw}\n{again}"


class SchemaChecker:
    """A stream observer: every JSON-RPC message of the connection, checked."""

    def __init__(self) -> None:
        self.methods: dict[tuple[str, Any], str] = {}
        self.checked = 0
        self.errors: list[str] = []

    def __call__(self, event: StreamEvent) -> None:
        message = event.message
        mine = "out" if event.direction is StreamDirection.OUTGOING else "in"
        theirs = "in" if mine == "out" else "out"
        try:
            self._check(message, mine, theirs)
        except AssertionError as exc:
            self.errors.append(str(exc))

    def _check(self, message: dict[str, Any], mine: str, theirs: str) -> None:
        assert message.get("jsonrpc") == "2.0", message
        method = message.get("method")
        if method is not None and "id" in message:
            self.methods[(mine, message["id"])] = method
            if method in REQUESTS:
                _strict(REQUESTS[method][0], message.get("params"), method)
            else:
                assert method in ("_session/steering", "_session/inject"), method
        elif method == "_session/message_state":
            params = message["params"]
            assert set(params) == {"sessionId", "messageId", "state", "detail"}, params
            assert params["state"] in STATES, params
        elif method is not None:
            _strict(NOTIFICATIONS[method], message.get("params"), method)
        else:
            asked = self.methods.pop((theirs, message["id"]))
            if "error" in message:
                _strict(schema.Error, message["error"], f"{asked} error")
            elif asked in ("_session/steering", "_session/inject"):
                _check_steering(asked, message["result"])
            elif REQUESTS[asked][1] is not None:
                _strict(REQUESTS[asked][1], message.get("result"), f"{asked} result")
        self.checked += 1


class Editor:
    """The client: records updates, answers permission requests with ``choose``, and offers
    its buffers (``files``) when ``fs`` is on."""

    def __init__(self, choose: Callable[[Any], str] = lambda request: "allow_once",
                 files: dict[str, str] | None = None) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.permission_requests: list[Any] = []
        self.choose = choose
        self.files = files if files is not None else {}
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []
        self.changed = asyncio.Event()
        self.notes: list[tuple[str, dict[str, Any]]] = []
        self.terminals: dict[str, dict[str, Any]] = {}

    def of(self, kind: str) -> list[Any]:
        return [u for _, u in self.updates if u.session_update == kind]

    async def wait_for(self, test: Callable[[Any], bool], timeout: float = 20.0) -> Any:
        async def look() -> Any:
            while True:
                for _, u in self.updates:
                    if test(u):
                        return u
                self.changed.clear()
                await self.changed.wait()

        return await asyncio.wait_for(look(), timeout)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.changed.set()

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kwargs: Any) -> schema.RequestPermissionResponse:
        self.permission_requests.append((tool_call, options))
        choice = self.choose(tool_call)
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=choice))

    async def read_text_file(self, session_id: str, path: str, line: int | None = None,
                             limit: int | None = None, **kwargs: Any) -> Any:
        self.reads.append(path)
        text = self.files[path]
        lines = text.splitlines(keepends=True)[(line or 1) - 1:]
        if limit is not None:
            lines = lines[:limit]
        return schema.ReadTextFileResponse(content="".join(lines))

    async def write_text_file(self, session_id: str, path: str, content: str,
                              **kwargs: Any) -> Any:
        self.writes.append((path, content))
        self.files[path] = content
        return schema.WriteTextFileResponse()

    # -- a terminal: the command really runs, as in an editor's terminal panel ------------

    async def create_terminal(self, session_id: str, command: str,
                              args: list[str] | None = None, env: Any = None,
                              cwd: str | None = None, output_byte_limit: int | None = None,
                              **kwargs: Any) -> Any:
        proc = await asyncio.create_subprocess_exec(
            command, *(args or []), cwd=cwd, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True)
        tid = f"term-{len(self.terminals) + 1}"
        self.terminals[tid] = {"proc": proc, "argv": [command, *(args or [])], "cwd": cwd,
                               "released": False}
        return schema.CreateTerminalResponse(terminal_id=tid)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str,
                                     **kwargs: Any) -> Any:
        term = self.terminals[terminal_id]
        if "output" not in term:
            out, _ = await term["proc"].communicate()
            term["output"] = out.decode()
        code = term["proc"].returncode
        return schema.WaitForTerminalExitResponse(exit_code=code if code >= 0 else None,
                                                  signal=None if code >= 0 else "SIGKILL")

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        term = self.terminals[terminal_id]
        return schema.TerminalOutputResponse(output=term.get("output", ""), truncated=False)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        proc = self.terminals[terminal_id]["proc"]
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        return schema.KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        await self.kill_terminal(session_id, terminal_id)
        self.terminals[terminal_id]["released"] = True
        return schema.ReleaseTerminalResponse()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        self.notes.append((method, params))
        self.changed.set()

    def on_connect(self, conn: Any) -> None:
        return None


@asynccontextmanager
async def in_process(loop: AgentLoop, agent: Agent, editor: Editor,
                     options: AcpOptions | None = None) -> AsyncIterator[ClientSideConnection]:
    """The package's client side talking to ``SteerableAcpAgent`` over a socket pair."""
    near, far = socket.socketpair()
    a_reader, a_writer = await asyncio.open_connection(sock=near)
    c_reader, c_writer = await asyncio.open_connection(sock=far)
    checker = SchemaChecker()
    async with SteerableAcpAgent(loop, lambda ws, stand_ins: (agent, agent),
                                 options=options) as impl:
        server = AgentSideConnection(impl, a_writer, a_reader, use_unstable_protocol=True)
        client = ClientSideConnection(editor, c_writer, c_reader, observers=[checker])
        try:
            await client.initialize(protocol_version=acp.PROTOCOL_VERSION)
            yield client
        finally:
            await client.close()
            await server.close()
            for writer in (a_writer, c_writer):
                writer.close()
                await writer.wait_closed()
    assert not checker.errors, checker.errors[:3]
