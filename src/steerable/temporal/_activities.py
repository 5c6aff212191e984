"""The activities: one LLM call, one tool call, run by a worker with the agent's real provider
and tools.

Both heartbeat while they run (a background beat, plus one per streamed chunk), so a cancel
from the workflow (a hard abort, a tool timeout) reaches them within a heartbeat, and a worker
that dies is noticed within ``heartbeat_timeout``: Temporal then runs the call again on another
worker. A tool call that runs again gets ``ctx.resumed`` set (its attempt is past the first),
as a tool resumed from a local checkpoint does. What happens inside a call is published live to
the session's event stream (``_eventlog``): text deltas, argument pieces, retries, progress.

A tool's ``ctx.ask`` cannot wait inside an activity (a worker that dies would lose the
question, and the activity's timeout would deny it): a question the call has no answer for yet
ends the call with the question (``{"asked": ...}``); the workflow asks it, waits durably for
the answer, and runs the call again with every answer so far (``answers``), ``resumed`` set,
each ``ask`` then returning its recorded answer at once (SPEC 11's replay up to the question).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import ExitStack, aclosing
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from steerable import (
    Agent,
    Event,
    LLMDelta,
    LLMRetry,
    PlanUpdated,
    ToolCall,
    ToolCallDelta,
    ToolExecProgress,
    ToolResult,
    event_to_dict,
)
from steerable._secrets import known_secrets
from steerable.errors import ProviderError, ToolError
from steerable.providers._base import (
    LLMRequest,
    LLMResponse,
    RetryNotice,
    StreamEnd,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    ToolCallChunk,
    guard_secrets,
    text_guarded,
)
from steerable.temporal._codec import request_from_json, response_to_json, result_to_json
from steerable.temporal._eventlog import Publisher
from steerable.temporal._hooks import (
    HOOK_ACTIVITY,
    READ_ACTIVITY,
    context_from_json,
    decision_to_json,
)
from steerable.temporal._tree import agent_table
from steerable.tools import CarriedState, ToolContext, result_from_return

__all__ = ["HOOK_ACTIVITY", "LLM_ACTIVITY", "PROVIDER_FAILED", "READ_ACTIVITY", "TOOL_ACTIVITY",
           "Activities"]

LLM_ACTIVITY = "steerable.llm"
TOOL_ACTIVITY = "steerable.tool"
PROVIDER_FAILED = "ProviderError"
"""The type of the (non-retryable) application error of a failed model call."""

class _Asked(BaseException):
    """A question this call has no answer for yet: ends the call (see the module doc).

    A ``BaseException``, as ``CancelledError`` is, so that a tool's ``except Exception``
    around its ``ask`` cannot swallow it."""

    def __init__(self, question: str, choices: Sequence[str] | None,
                 schema: Mapping[str, Any] | None) -> None:
        super().__init__(question)
        self.asked = {"question": question, "choices": None if choices is None
                      else list(choices), "schema": None if schema is None else dict(schema)}


def _replayed_answers(answers: Sequence[Any]) -> Callable[..., Awaitable[Any]]:
    """``ToolContext._ask`` of a tool activity: the recorded answers in order, then stop."""
    given = iter(answers)

    async def ask(question: str, choices: Sequence[str] | None,
                  schema: Mapping[str, Any] | None) -> Any:
        answer = next(given, _Asked)
        if answer is _Asked:  # (None is an answer: JSON null, for a schema that allows it)
            raise _Asked(question, choices, schema)
        return answer

    return ask


class _Beat:
    """Heartbeats every ``every`` seconds while the call runs, so a silent call (a model
    thinking, a slow tool) still hears its cancel and still proves its worker alive."""

    def __init__(self, every: float) -> None:
        self.every = every
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> _Beat:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def _run(self) -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(self.every)

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


class _Emitter:
    """Builds the events of one call with its turn's ids and hands them to the publisher."""

    def __init__(self, publisher: Publisher | None, call: Mapping[str, Any]) -> None:
        self.publisher = publisher if call.get("live", True) else None
        self.session_id: str = call["session_id"]
        self.ids = {"turn_id": call["turn_id"], "parent_turn_id": call["parent_turn_id"],
                    "session_id": call["session_id"], "seq": call["seq"]}
        self.iteration: int = call["iteration"]
        self.call = call

    def __call__(self, cls: type[Event], **fields: Any) -> None:
        if self.publisher is not None:
            event = cls(**self.ids, time=time.time(), **fields)
            self.publisher.put(self.session_id, [(0, event_to_dict(event))])


class Activities:
    """The worker's activities over ``agent`` (its provider and its tools by name)."""

    def __init__(self, agent: object, publisher: Publisher | None, *,
                 hooks: Sequence[Any] = (), reads: Mapping[str, Callable[..., Any]] | None = None,
                 heartbeat_every: float = 1.0, home: str | None = None) -> None:
        self.agents = agent_table(agent)
        self.root = next(iter(self.agents.values()), None)
        self.hooks = list(hooks)
        """The hooks that run here (``_hooks.WorkerHook``, not ``in_workflow``), by index."""
        self.reads = dict(reads or {})
        self.publisher = publisher
        self.heartbeat_every = heartbeat_every
        self.home = home
        """This worker's home (``_homes``): said with each tool call's result, so the workflow
        knows where the turn's calls ran."""

    @activity.defn(name=LLM_ACTIVITY)
    async def llm(self, call: dict[str, Any]) -> dict[str, Any]:
        """``call``: the request (``_codec``) and the turn's ids; the assembled reply."""
        emit = _Emitter(self.publisher, call)
        async with _Beat(self.heartbeat_every):
            try:
                response = await self._stream(request_from_json(call["request"]), emit)
            except ProviderError as exc:
                # The provider retried what can be retried already: the turn reads the error.
                raise ApplicationError(str(exc), type=PROVIDER_FAILED,
                                       non_retryable=True) from None
        return response_to_json(response)

    def _agent(self, call: Mapping[str, Any]) -> Agent:
        agent = self.agents.get(call["agent"])
        if agent is None:  # a worker whose agent differs from the workflow's: not retried
            raise ApplicationError(f"this worker's agent has no agent {call['agent']!r}",
                                   type="UnknownAgent", non_retryable=True)
        return agent

    async def _stream(self, request: Any, emit: _Emitter,
                      agent: Agent | None = None) -> LLMResponse:
        provider = (agent or self._agent(emit.call)).provider
        raw = provider.stream(request)
        stream = raw if text_guarded(provider) else guard_secrets(raw, known_secrets())
        texts: list[str] = []
        thinking: list[str] = []
        calls: list[ToolCall] = []
        end = StreamEnd()
        it = emit.iteration
        async with aclosing(stream) as chunks:
            async for chunk in chunks:
                activity.heartbeat()
                if type(chunk) is TextDelta and chunk.text:
                    texts.append(chunk.text)
                    emit(LLMDelta, iteration=it, text=chunk.text)
                elif type(chunk) is ThinkingDelta and chunk.text:
                    thinking.append(chunk.text)
                    emit(LLMDelta, iteration=it, text=chunk.text, thinking=True)
                elif type(chunk) is ToolArgsDelta and chunk.text:
                    emit(ToolCallDelta, iteration=it, call_index=chunk.index,
                         tool_name=chunk.name, arguments_delta=chunk.text)
                elif type(chunk) is ToolCallChunk:
                    calls.append(chunk.call)
                elif type(chunk) is RetryNotice:
                    texts.clear()
                    thinking.clear()
                    calls.clear()
                    emit(LLMRetry, iteration=it, attempt=chunk.attempt, reason=chunk.reason,
                         delay=chunk.delay)
                elif type(chunk) is StreamEnd:
                    end = chunk
        return LLMResponse(text="".join(texts), tool_calls=tuple(calls),
                           thinking="".join(thinking), usage=end.usage,
                           finish_reason=end.finish_reason)

    @activity.defn(name=HOOK_ACTIVITY)
    async def hook(self, call: dict[str, Any]) -> Any:
        """``call``: the hook's index, its point and the context's JSON form; its decision.
        A hook's own model call (``ctx.ask``) is made with the root agent's provider here."""
        hook = self.hooks[call["hook"]]
        point: str = call["point"]
        ctx = context_from_json(point, call["ctx"], self._hook_ask)
        async with _Beat(self.heartbeat_every):
            fn = getattr(hook, point)
            value = (await fn(ctx)) if inspect.iscoroutinefunction(fn) \
                else await asyncio.to_thread(fn, ctx)
            if inspect.isawaitable(value):
                value = await value
        return decision_to_json(value)

    @activity.defn(name=READ_ACTIVITY)
    async def read(self, call: dict[str, Any]) -> Any:
        """``call``: a read's name and its arguments (``_hooks.workflow_read``); its value."""
        fn = self.reads.get(call["name"])
        if fn is None:  # a worker set up differently from the workflow's: not retried
            raise ApplicationError(f"this worker has no read {call['name']!r}",
                                   type="UnknownRead", non_retryable=True)
        value = (await fn(*call["args"])) if inspect.iscoroutinefunction(fn) \
            else await asyncio.to_thread(fn, *call["args"])
        return value

    async def _hook_ask(self, request: LLMRequest, purpose: str) -> LLMResponse:
        if self.root is None:
            raise RuntimeError("this worker's agent has no model")
        emit = _Emitter(None, {"agent": "", "session_id": "", "turn_id": "",
                               "parent_turn_id": None, "seq": 0, "iteration": 0})
        return await self._stream(request, emit, self.root)

    @activity.defn(name=TOOL_ACTIVITY)
    async def tool(self, call: dict[str, Any]) -> dict[str, Any]:
        """``call``: the tool's name and arguments, the turn's ids and the ``answers`` to its
        questions so far; its ``ToolResult``, or ``{"asked": question}``."""
        name: str = call["name"]
        tool = self._agent(call).tools_by_name.get(name)
        if tool is None:
            return result_to_json(ToolResult(
                f"Tool '{name}' is not known to this worker (its agent has no such tool).",
                is_error=True))
        emit = _Emitter(self.publisher, call)
        answers: list[Any] = call.get("answers") or []
        ctx = ToolContext(
            call_id=call["call_id"], tool_name=name, turn_id=call["turn_id"],
            session_id=call["session_id"], parent_turn_id=call["parent_turn_id"],
            iteration=call["iteration"], _ask=_replayed_answers(answers),
            resumed=activity.info().attempt > 1 or bool(answers),
            _report=lambda text, data: emit(ToolExecProgress, call_id=call["call_id"],
                                            tool_name=name, text=text, data=dict(data)),
            _plan=lambda items: emit(PlanUpdated, call_id=call["call_id"], items=items))
        async with _Beat(self.heartbeat_every):
            with _brought(tool, call):
                try:
                    out = result_to_json(await _run(name, lambda: tool.run(
                        tool.validate(call["arguments"]), ctx), ctx))
                except _Asked as asked:
                    out = {"asked": asked.asked}
        return out if self.home is None else {**out, "home": self.home}


def _brought(tool: object, call: Mapping[str, Any]) -> ExitStack:
    """The call judged by what its turn's process decided (``CarriedState``), not by this
    worker's own state, which may never have seen the turn. A call scheduled before its tool
    carried anything brings nothing, and this worker's state decides, as it did then."""
    held = ExitStack()
    states: tuple[CarriedState, ...] = tuple(getattr(tool, "carried", ()))
    for state, value in zip(states, call.get("carried") or (), strict=False):
        held.enter_context(state.applied(call["turn_id"], value))
    return held


async def _run(name: str, start: Callable[[], Awaitable[Any]], ctx: ToolContext) -> ToolResult:
    """The tool's outcome as the local engine words it (``_core._tool_exec._invoke``)."""
    try:
        return result_from_return(await start())
    except asyncio.CancelledError:
        ctx.cancel()  # a sync tool in its thread sees ``ctx.cancelled``
        raise
    except ToolError as exc:
        return ToolResult(str(exc), is_error=True)
    except Exception as exc:
        return ToolResult(f"Tool '{name}' failed: {type(exc).__name__}: {exc}", is_error=True)
