"""The A2A endpoints on ``steerable serve``: the agent card and the JSON-RPC endpoint.

The card is served at the well-known path, built per request so that its interface URL is the
address the client used; it is public (discovery needs no token) and, when the server has a
token, declares the bearer scheme the JSON-RPC endpoint requires. The JSON-RPC endpoint (send,
stream, get, list, cancel, subscribe) is the SDK's dispatcher over the SDK's default request
handler, with one change: a message to a task whose turn is working steers the turn at once
(the SDK would queue it until the running request ends).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from typing import Literal

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    GetTaskRequest,
    HTTPAuthSecurityScheme,
    Message,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_CURRENT
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Message as ASGIMessage

from steerable import __version__
from steerable.protocols.a2a._executor import Runner, TurnExecutor, busy_policy

__all__ = ["CARD_PATH", "MAX_REQUEST", "RPC_PATH", "A2AEndpoints", "BoundedTaskStore",
           "a2a_endpoints", "agent_card"]

CARD_PATH = AGENT_CARD_WELL_KNOWN_PATH
RPC_PATH = "/a2a"
_ENDED = frozenset({TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_CANCELED,
                    TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED})
MAX_REQUEST = 1 << 20
"""Bytes a JSON-RPC request may have (the SDK's dispatcher reads any body whole)."""


def agent_card(url: str, *, name: str, description: str, version: str,
               secured: bool) -> AgentCard:
    """The card of an agent whose JSON-RPC endpoint is ``url``."""
    card = AgentCard(
        name=name, description=description, version=version,
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC",
                                             protocol_version=PROTOCOL_VERSION_CURRENT)],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[AgentSkill(
            id="turn", name="Run a turn",
            description=("One turn of the agent on a message: its tool calls and their progress "
                         "as status updates, the final reply as the 'response' artifact. A "
                         "message to a working task steers it; a tool call waiting for approval "
                         "is input-required, answered by a message saying yes or no."),
            tags=["agent", "tools", "steering"])])
    if secured:
        card.security_schemes["bearer"].CopyFrom(SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer")))
        card.security_requirements.append(SecurityRequirement(
            schemes={"bearer": StringList()}))
    return card


class _Handler(DefaultRequestHandler):
    """The SDK's handler; a message to a working task steers its turn instead of waiting."""

    def __init__(self, executor: TurnExecutor, card: AgentCard) -> None:
        super().__init__(agent_executor=executor, task_store=BoundedTaskStore(),
                         agent_card=card)
        self._turns = executor

    async def _route(self, params: SendMessageRequest) -> Literal["steered", "sdk"]:
        """Steer the task the message names, or make the message a new task of the same
        context (it refers to the one it named) when its busy policy asks for a turn of its
        own; ``steered`` or ``sdk`` (the SDK takes it from here)."""
        message = params.message
        busy_policy(message, "follow_up")  # a bad one is the caller's error, at once
        if not message.task_id:
            return "sdk"
        route = await self._turns.steer(message.task_id, message)
        if route == "new":
            message.reference_task_ids.append(message.task_id)
            message.task_id = ""
            return "sdk"
        return route

    async def on_message_send(self, params: SendMessageRequest,
                              context: ServerCallContext) -> Message | Task:
        if await self._route(params) == "steered":
            task = await self.on_get_task(GetTaskRequest(id=params.message.task_id), context)
            assert isinstance(task, Task)  # on_get_task raises TaskNotFoundError instead
            return task
        result = await super().on_message_send(params, context)
        assert isinstance(result, Message | Task)
        return result

    async def on_message_send_stream(self, params: SendMessageRequest,
                                     context: ServerCallContext
                                     ) -> AsyncGenerator[Event, None]:
        if await self._route(params) == "steered":
            # The stream of the steered task goes on from here, as a subscription's does.
            stream = self.on_subscribe_to_task(
                SubscribeToTaskRequest(id=params.message.task_id), context)
        else:
            stream = super().on_message_send_stream(params, context)
        try:
            async for event in stream:
                yield event
        finally:
            await stream.aclose()


class BoundedTaskStore(InMemoryTaskStore):
    """The SDK's in-memory store, holding at most ``limit`` tasks: past that the tasks that
    ended longest ago are dropped (a task still at work or waiting for input is never dropped),
    so a long-running server does not keep every task it ever ran."""

    def __init__(self, limit: int = 4096) -> None:
        super().__init__(use_copying=False)
        self.limit = limit
        self._order: OrderedDict[str, tuple[ServerCallContext, bool]] = OrderedDict()
        """Task id -> the context it was saved under (the store scopes tasks by owner) and
        whether it has ended, oldest save first."""

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await super().save(task, context)
        self._order[task.id] = (context, task.status.state in _ENDED)
        self._order.move_to_end(task.id)
        if len(self._order) > self.limit:
            for task_id in [t for t, (_, ended) in self._order.items() if ended][
                    :len(self._order) - self.limit]:
                owner, _ = self._order.pop(task_id)
                await super().delete(task_id, owner)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        self._order.pop(task_id, None)
        await super().delete(task_id, context)


def _capped(endpoint: Callable[[Request], Awaitable[Response]]
            ) -> Callable[[Request], Awaitable[Response]]:
    """``endpoint`` behind a body cap: a larger body is refused (413, a JSON-RPC error) before
    any of it is parsed; a smaller one is handed on as it came. (A function: Starlette calls a
    route's object endpoint as an ASGI app.)"""

    async def capped(request: Request) -> Response:
        declared = request.headers.get("content-length")
        too_big = declared is not None and (not declared.isdigit()
                                            or int(declared) > MAX_REQUEST)
        raw = bytearray()
        if not too_big:
            async for chunk in request.stream():
                raw += chunk
                if len(raw) > MAX_REQUEST:
                    too_big = True
                    break
        if too_big:
            return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {
                "code": -32600, "message": f"request larger than {MAX_REQUEST} bytes"}}, 413)
        body = bytes(raw)
        given = False

        async def receive() -> ASGIMessage:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await request.receive()  # then the disconnect, for a stream

        return await endpoint(Request(request.scope, receive))

    return capped


class A2AEndpoints:
    """The routes to mount behind the server's guard, the paths that need no token, and the
    context to keep open while the app runs (it drains the SDK's tasks on shutdown)."""

    def __init__(self, runner: Runner, *, name: str, description: str, version: str,
                 secured: bool) -> None:
        self._card = partial(agent_card, name=name, description=description, version=version,
                             secured=secured)
        self.executor = TurnExecutor(runner)
        self.handler = _Handler(self.executor, self._card(RPC_PATH))
        self.routes: list[BaseRoute] = [Route(CARD_PATH, self._serve_card, methods=["GET"])]
        for route in create_jsonrpc_routes(self.handler, RPC_PATH):
            self.routes.append(Route(route.path, _capped(route.endpoint), methods=["POST"]))
        self.public: Sequence[str] = (CARD_PATH,)

    async def _serve_card(self, request: Request) -> Response:
        url = str(request.base_url).rstrip("/") + RPC_PATH
        return JSONResponse(agent_card_to_dict(self._card(url)), headers={"Cache-Control": "no-cache"})

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        @asynccontextmanager
        async def running() -> AsyncIterator[None]:
            try:
                yield
            finally:
                await self.executor.aclose()
                await self.handler.aclose()

        return running()


def a2a_endpoints(runner: Runner, *, name: str = "steerable",
                  description: str = "A steerable agent.", version: str = __version__,
                  secured: bool = False) -> A2AEndpoints:
    """A2A over ``runner`` (a ``steerable.server.SessionRunner``); ``secured``: the server
    requires a bearer token (the card says so)."""
    return A2AEndpoints(runner, name=name, description=description, version=version,
                        secured=secured)
