"""One MCP server: its connection, owned by one task, and the calls made through it.

The official SDK is built on anyio: a transport and a ``ClientSession`` are context managers
that must be entered and left in the same task. So each connection has an owner task that
enters them, hands the session out, and waits to be told to stop; calls from tool tasks use the
session concurrently, which the SDK allows.

A server that goes away fails the calls in flight at once (a stdio process that dies closes the
connection; a transport failure, such as an HTTP server refusing connections, ends the owner
task, which ends the calls waiting on it; over HTTP, a response stream cut off mid-way, which
the SDK only logs and would leave the call waiting for its deadline, is seen by a watch on the
HTTP client's transport) and is marked down for the rest of that turn: later
calls in the same turn get an error result at once. A call cancelled by a hard abort or its
deadline is cancelled on the server (the SDK sends ``notifications/cancelled`` for an abandoned
request) and leaves the server suspect: the next call checks it first (a ping on a 2025 server,
``tools/list`` on a 2026 one, which has no ping); no answer in the same turn marks it down, in a
later turn restarts it. A server marked down is restarted by the first call of a later turn.

The protocol revision is negotiated per connection (the SDK's ``auto`` mode): ``server/discover``
first (the 2026-07-28 revision), the ``initialize`` handshake of the 2025 revisions when the
server does not know it. What a server asks of the person during a call (``input_required``
rounds at 2026-07-28, ``elicitation/create`` at 2025) becomes the calling tool's questions
(``_input``); the call's deadline stops while they wait for an answer.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import os
import re
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from typing import Any

import anyio
import httpx2
from mcp import Client, ClientSession, MCPError, StdioServerParameters, types
from mcp.client import ClientRequestContext
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from steerable import FilePart, ImagePart, ToolContext, ToolResult
from steerable._parts import Part
from steerable.errors import ConfigurationError, ToolError
from steerable.integrations.mcp._input import MAX_ROUNDS, Relay, answer_requests, paused

__all__ = ["DEFAULT_TIMEOUT", "MCPServer"]

log = logging.getLogger("steerable.mcp")

DEFAULT_TIMEOUT = 60.0
"""Seconds an MCP tool call may take unless the server's ``timeout`` says otherwise: a hung
server must end in an error result, never a hung turn."""
_PING_TIMEOUT = 2.0
_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")
_CLOSE_GRACE = 3.0
_STATE_ONLY_WAIT = 0.1
"""Seconds before calling again when ``input_required`` carries only a state."""


class MCPServer:
    """An MCP server reached over stdio (``command``) or streamable HTTP (``url``).

    ``name`` prefixes its tools (``mcp__<name>__<tool>``). ``env`` is added to the environment
    a stdio server is started with; ``headers`` are sent with every HTTP request. ``timeout``
    bounds each tool call (seconds, default 60) once the server is up; ``connect_timeout``
    bounds starting it. Connect with ``async with`` or ``connect()``; ``tools()``
    lists the server's tools as steerable tools.
    """

    def __init__(self, name: str, *, command: str | None = None, args: Sequence[str] = (),
                 env: Mapping[str, str] | None = None, cwd: str | None = None,
                 url: str | None = None, headers: Mapping[str, str] | None = None,
                 timeout: float | None = None, connect_timeout: float = 30.0) -> None:
        if not isinstance(name, str) or not _NAME.fullmatch(name) or "__" in name:
            raise ConfigurationError(f"MCP server name must be letters, digits, '-' and '_' "
                                     f"(no '__'): it becomes part of tool names; got {name!r}")
        if (command is None) == (url is None):
            raise ConfigurationError(f"MCP server {name!r} needs exactly one of command "
                                     "(stdio) or url (streamable HTTP)")
        if timeout is not None and timeout <= 0:
            raise ConfigurationError(f"MCP server {name!r}: timeout must be > 0, got {timeout}")
        self.name = name
        self.command = command
        self.args = [str(a) for a in args]
        self.env = dict(env or {})
        self.cwd = cwd
        self.url = url
        self.headers = dict(headers or {})
        self.timeout = DEFAULT_TIMEOUT if timeout is None else float(timeout)
        self._connect_timeout = connect_timeout
        self._session: ClientSession | None = None
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._down_in: str | None = None
        """The turn in which the server was found down; a later turn restarts it."""
        self._suspect_in: str | None = None
        """The turn in which a call was cancelled: the next call pings the server first."""
        self._broken: asyncio.Future[BaseException] | None = None
        """Set when the transport reports a failure (an HTTP server gone, say)."""
        self._lock = asyncio.Lock()
        self._background: set[asyncio.Task[None]] = set()
        self._relays: list[Relay] = []
        """The calls in flight, earliest first (a 2025 server's elicitation goes to the first)."""
        self.starts = 0
        """How many times a connection was made (1 + restarts)."""

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    @property
    def protocol_version(self) -> str | None:
        """The MCP revision agreed with the server (``2026-07-28``, or a 2025 one when the server
        does not know ``server/discover``); None while not connected."""
        return self._session.protocol_version if self._session is not None else None

    def __repr__(self) -> str:
        where = self.url if self.url is not None else " ".join([self.command or "", *self.args])
        return f"<MCPServer {self.name} {self.transport} {where}>"

    # -- connection ---------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _streams(self, broken: asyncio.Future[BaseException]
                       ) -> AsyncIterator[tuple[Any, Any]]:
        if self.command is not None:
            params = StdioServerParameters(command=self.command, args=self.args,
                                           env={**os.environ, **self.env}, cwd=self.cwd)
            async with stdio_client(params) as (read, write):
                yield read, write
        else:
            assert self.url is not None

            def gone(exc: BaseException) -> None:
                if not broken.done():
                    broken.set_result(exc)

            # The SDK's own client settings, with a transport that reports a cut-off stream.
            http = httpx2.AsyncClient(
                headers=self.headers, transport=_Watched(httpx2.AsyncHTTPTransport(), gone),
                timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT))
            async with http, streamable_http_client(self.url, http_client=http) as (read, write):
                yield read, write

    async def _own(self, ready: asyncio.Future[ClientSession], stop: asyncio.Event,
                   broken: asyncio.Future[BaseException]) -> None:
        ended: BaseException = ConnectionError("the connection to the server ended")
        try:
            # mode="auto": server/discover, or the initialize handshake of a 2025 server. No
            # response cache: a tool list must be the server's current one after a restart.
            async with Client(self._streams(broken), mode="auto", cache=None,
                              message_handler=self._on_message,
                              elicitation_callback=self._on_elicit) as client:
                ready.set_result(client.session)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            elif not isinstance(exc, asyncio.CancelledError | Exception):
                raise
            else:
                log.debug("MCP server %s connection ended: %r", self.name, exc)
                ended = exc
        finally:
            # Calls still waiting on this connection end now, with the reason.
            if not broken.done():
                broken.set_result(ended)

    async def connect(self) -> None:
        """Start the server (stdio) or open the session (HTTP) and initialise it."""
        async with self._lock:
            if self._session is None:
                await self._open()

    async def _on_message(self, message: Any) -> None:
        # The SDK hands transport failures to the message handler and leaves the requests in
        # flight waiting; a failure of the transport itself ends the calls at once instead.
        if isinstance(message, httpx2.TransportError | OSError | anyio.BrokenResourceError |
                      anyio.ClosedResourceError):
            broken = self._broken
            if broken is not None and not broken.done():
                broken.set_result(message)
        elif isinstance(message, Exception):
            log.debug("MCP server %s: %r", self.name, message)

    async def _open(self) -> None:
        self._stop = asyncio.Event()
        self._broken = asyncio.get_running_loop().create_future()
        ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._owner = asyncio.get_running_loop().create_task(
            self._own(ready, self._stop, self._broken))
        try:
            self._session = await asyncio.wait_for(asyncio.shield(ready), self._connect_timeout)
        except BaseException as exc:
            await self._close_owner()
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise ToolError(f"MCP server {self.name!r} could not be started: "
                            f"{_describe(exc)}") from exc
        self.starts += 1
        self._down_in, self._suspect_in = None, None

    async def _close_owner(self) -> None:
        await self._detach()

    def _detach(self) -> Coroutine[Any, Any, None]:
        """Forget the current connection at once; the returned coroutine ends it."""
        owner, stop = self._owner, self._stop
        self._owner, self._session = None, None
        return _end_connection(owner, stop)

    async def aclose(self) -> None:
        """Close the session (a stdio server process is ended). Idempotent."""
        async with self._lock:
            await self._close_owner()
        if self._background:
            await asyncio.wait(set(self._background), timeout=_CLOSE_GRACE)

    async def __aenter__(self) -> MCPServer:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- tools --------------------------------------------------------------------------------

    async def list_tools(self) -> list[types.Tool]:
        """The server's tool descriptions as the SDK gives them (every page)."""
        await self.connect()
        assert self._session is not None
        found: list[types.Tool] = []
        cursor: str | None = None
        while True:
            page = await self._session.list_tools(
                params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            found += page.tools
            cursor = page.next_cursor
            if not cursor:
                return found

    async def tools(self) -> list[Any]:
        """The server's tools as steerable tools, named ``mcp__<server>__<tool>``."""
        from steerable.integrations.mcp._tool import MCPTool

        return [MCPTool(self, spec) for spec in await self.list_tools()]

    async def _usable(self, turn_id: str) -> ClientSession:
        async with self._lock:
            if self._down_in is not None:
                if self._down_in == turn_id:
                    raise ToolError(f"MCP server {self.name!r} is not responding (it failed "
                                    "earlier in this turn); it will be restarted on the next turn")
                log.info("restarting MCP server %s", self.name)
                await self._close_owner()
            if self._broken is not None and self._broken.done():
                # The connection broke while no call was made (the server died between turns).
                log.info("reconnecting to MCP server %s (the connection broke)", self.name)
                await self._close_owner()
            if self._session is None:
                await self._open()
            session = self._session
            assert session is not None
            if self._suspect_in is not None and not await self._ping(session):
                if self._suspect_in != turn_id:  # a new turn: restart it now
                    log.info("restarting MCP server %s (no answer to a ping)", self.name)
                    await self._close_owner()
                    await self._open()
                    assert self._session is not None
                    return self._session
                self._mark_down(turn_id)
                raise ToolError(f"MCP server {self.name!r} does not answer a ping; it will be "
                                "restarted on the next turn")
            self._suspect_in = None
            return session

    async def _ping(self, session: ClientSession) -> bool:
        # The 2026 revision has no ping: a tools/list (uncached) is the cheapest request it has.
        probe = (session.send_ping() if session.initialize_result is not None
                 else session.list_tools())
        try:
            # Within the call's own deadline, so the answer is ours and not a tool timeout.
            await asyncio.wait_for(probe, min(_PING_TIMEOUT, self.timeout / 2))
        except (Exception, TimeoutError):
            return False
        return True

    async def call(self, tool: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """Call ``tool`` on the server; progress notifications become ``ctx.progress``, and what
        the server asks of the person becomes the tool's questions (see ``_input``)."""
        session = await self._usable(ctx.turn_id)
        relay = Relay()
        self._relays.append(relay)
        try:
            # The deadline starts once the server is up (a restart does not eat into it) and
            # stops while a person answers.
            async with asyncio.timeout(self.timeout) as deadline:
                result = await self._rounds(session, tool, dict(arguments), ctx, relay, deadline)
        except TimeoutError:
            raise ToolError(f"MCP tool {tool!r} of server {self.name!r} timed out after "
                            f"{self.timeout:g} s; the call was cancelled on the server") from None
        except MCPError as exc:
            if exc.error.code == types.CONNECTION_CLOSED:
                self._mark_down(ctx.turn_id)
                raise ToolError(f"MCP server {self.name!r} closed the connection during the "
                                "call; it will be restarted on the next turn") from None
            raise ToolError(f"MCP server {self.name!r}: {exc.error.message}") from None
        except ToolError:
            raise  # the call's own outcome (a question nobody answered...): the server is fine
        except Exception as exc:  # a broken pipe, a transport error: the server is gone
            self._mark_down(ctx.turn_id)
            raise ToolError(f"MCP server {self.name!r} failed during the call: "
                            f"{_describe(exc)}; it will be restarted on the next turn") from None
        finally:
            self._relays.remove(relay)
            relay.close()
        return _result(result)

    async def _rounds(self, session: ClientSession, tool: str, arguments: dict[str, Any],
                      ctx: ToolContext, relay: Relay, deadline: asyncio.Timeout
                      ) -> types.CallToolResult:
        """The call, made again with the person's answers while the server (2026-07-28)
        answers ``input_required``."""
        responses: types.InputResponses | None = None
        state: str | None = None
        for answered in range(MAX_ROUNDS + 1):
            result = await self._request(session, tool, arguments, ctx, relay, deadline,
                                         responses, state)
            if not isinstance(result, types.InputRequiredResult):
                done: types.CallToolResult = result
                return done
            if answered == MAX_ROUNDS:
                break
            state = result.request_state
            if result.input_requests:
                with paused(deadline):
                    responses = await answer_requests(ctx, self.name, result.input_requests)
            else:  # only a state: the server is still at work; ask again in a moment
                responses = None
                await asyncio.sleep(_STATE_ONLY_WAIT)
        raise ToolError(f"MCP server {self.name!r} still asked for input after {MAX_ROUNDS} "
                        f"rounds of answers; {tool!r} was given up")

    async def _request(self, session: ClientSession, tool: str, arguments: dict[str, Any],
                       ctx: ToolContext, relay: Relay, deadline: asyncio.Timeout,
                       responses: types.InputResponses | None, state: str | None) -> Any:
        async def report(progress: float, total: float | None, message: str | None) -> None:
            shown = message or (f"{progress:g}/{total:g}" if total else f"{progress:g}")
            ctx.progress(shown, progress=progress, total=total)

        call = asyncio.ensure_future(session.call_tool(
            tool, arguments, progress_callback=report, input_responses=responses,
            request_state=state, allow_input_required=True))
        try:
            return await self._outcome(call, ctx, relay, deadline)
        except asyncio.CancelledError:  # our deadline, a hard abort, a park, the loop's timeout
            self._suspect_in = ctx.turn_id
            raise
        finally:
            if not call.done():
                # Cancelling the request makes the SDK send notifications/cancelled; it is
                # sent before anything else reaches the server (an unanswered elicitation's
                # ``cancel``, see Relay.close), or the server could run the tool on.
                call.cancel()
                await asyncio.wait({call}, timeout=_PING_TIMEOUT)

    async def _outcome(self, call: asyncio.Future[Any], ctx: ToolContext, relay: Relay,
                       deadline: asyncio.Timeout) -> Any:
        """The call's result, or the transport's failure if that comes first; what a 2025
        server asks meanwhile is asked by this (the tool's) task."""
        broken = self._broken
        while True:
            asked = asyncio.ensure_future(relay.next())
            either: set[asyncio.Future[Any]] = {call, asked}
            if broken is not None:
                either.add(broken)
            try:
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            finally:
                asked.cancel()  # (an elicitation taken but not asked is cancelled by close())
            if call.done():
                return call.result()
            if broken is not None and broken.done():
                raise broken.result()
            with paused(deadline):
                await relay.answer(ctx, self.name, asked.result())

    async def _on_elicit(self, context: ClientRequestContext, params: types.ElicitRequestParams
                         ) -> types.ElicitResult | types.ErrorData:
        # A 2025 server's elicitation does not say which call it belongs to: the earliest call
        # in flight on this server asks it (calls to one server rarely overlap while it asks).
        if not self._relays:
            return types.ErrorData(code=types.INVALID_REQUEST,
                                   message="no tool call is in flight to ask the person for")
        return await self._relays[0].relay(params)

    def _mark_down(self, turn_id: str) -> None:
        """Fail the rest of this turn's calls; end the old connection now (a hung process can
        take seconds to go), so that the next turn only has to start a new one."""
        self._down_in = turn_id
        self._own_task(self._detach())

    def _own_task(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


class _Watched(httpx2.AsyncBaseTransport):
    """An HTTP transport that calls ``gone`` when a response body breaks off (the server died
    or the network dropped), then lets the error go on to the SDK as before."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, gone: Any) -> None:
        self._inner = inner
        self._gone = gone

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except _CUT_OFF as exc:
            self._gone(exc)
            raise
        response.stream = _WatchedStream(response.stream, self._gone)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _WatchedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, gone: Any) -> None:
        self._inner = inner
        self._gone = gone

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except _CUT_OFF as exc:
            self._gone(exc)
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


_CUT_OFF = (httpx2.NetworkError, httpx2.RemoteProtocolError)
"""Failures that mean the server is gone (a read timeout on an idle stream is not one)."""


async def _end_connection(owner: asyncio.Task[None] | None, stop: asyncio.Event) -> None:
    if owner is None:
        return
    stop.set()
    done, _ = await asyncio.wait({owner}, timeout=_CLOSE_GRACE)
    if not done:  # a hung server does not leave politely
        owner.cancel()
        await asyncio.wait({owner}, timeout=_CLOSE_GRACE)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _result(result: types.CallToolResult) -> ToolResult:
    """What the model reads: text as it is; images and binary resources as parts (sent to
    models that read them, placeholders elsewhere); audio and links described."""
    texts: list[str] = []
    parts: list[Part] = []
    for item in result.content:
        if isinstance(item, types.TextContent):
            texts.append(item.text)
        elif isinstance(item, types.ImageContent):
            parts.append(_binary(item.data, item.mime_type, None))
        elif isinstance(item, types.AudioContent):
            texts.append(f"[audio ({item.mime_type}), {len(item.data)} bytes base64]")
        elif isinstance(item, types.EmbeddedResource):
            res = item.resource
            if isinstance(res, types.TextResourceContents):
                texts.append(res.text)
            else:
                parts.append(_binary(res.blob, res.mime_type, str(res.uri)))
        elif isinstance(item, types.ResourceLink):
            texts.append(f"[resource link {item.uri}]")
    if not texts and not parts and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return ToolResult("\n".join(texts), is_error=bool(result.is_error), parts=tuple(parts))


def _binary(data: str, media_type: str | None, uri: str | None) -> ImagePart | FilePart:
    """An MCP image or blob (base64 text) as a part: an ``ImagePart`` for ``image/*``."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ToolError(f"the MCP server sent {media_type or 'binary data'} that is not valid "
                        "base64") from None
    media = media_type or "application/octet-stream"
    if media.startswith("image/"):
        return ImagePart(data=raw, media_type=media)
    return FilePart(data=raw, media_type=media, name=None if uri is None else uri.rsplit("/", 1)[-1])
