"""The agent the workflow runs: the worker's agent with its provider and its tools replaced by
proxies whose calls are activities (``_activities``). Everything else (instructions, budget,
schemas, permission subjects, argument checks) is the real agent's, so the engine running in
the workflow decides exactly what it decides in a local loop. The whole tree is proxied
(subagents, a composite's children): each call names its agent by path (``_tree``).

A tool call that asks a question (``ctx.ask``) comes back with the question: the proxy asks
it through the engine, in the workflow, and runs the call again with the answers.
"""

from __future__ import annotations

import asyncio
import copy as pycopy
from collections.abc import AsyncGenerator, Callable, Mapping
from datetime import timedelta
from typing import Any, cast

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

from steerable import Agent, Subscription
from steerable._core._agent import BaseAgent
from steerable._core._composite import CompositeAgent
from steerable._messages import ToolResult
from steerable.errors import ConfigurationError, ProviderError
from steerable.providers import (
    Chunk,
    LLMRequest,
    StreamEnd,
    TextDelta,
    ThinkingDelta,
    ToolCallChunk,
)
from steerable.temporal._activities import LLM_ACTIVITY, PROVIDER_FAILED, TOOL_ACTIVITY
from steerable.temporal._codec import request_to_json, response_from_json, result_from_json
from steerable.temporal._homes import Homes, home_queue, never_taken
from steerable.temporal._tree import agent_table
from steerable.tools import CarriedState, Tool, ToolContext
from steerable.tools._base import valid_home

__all__ = ["CallOptions", "remote_agent"]


class CallOptions:
    """How the workflow schedules its activities (the worker's settings, the same on every
    worker of a task queue)."""

    def __init__(self, *, heartbeat_timeout: float = 10.0, llm_timeout: float = 600.0,
                 tool_timeout: float = 3600.0, attempts: int = 3,
                 home_wait: float = 30.0) -> None:
        if attempts < 1:
            raise ConfigurationError(f"attempts must be >= 1, got {attempts}")
        if home_wait <= 0:
            raise ConfigurationError(f"home_wait must be > 0 seconds, got {home_wait}")
        self.home_wait = timedelta(seconds=home_wait)
        """How long a call for one worker's own state (``_homes``) waits to be taken before
        that worker counts as gone."""
        self.heartbeat_timeout = timedelta(seconds=heartbeat_timeout)
        self.llm_timeout = timedelta(seconds=llm_timeout)
        self.tool_timeout = timedelta(seconds=tool_timeout)
        # Only a lost worker (a missed heartbeat, the call's timeout) makes a call run again:
        # a provider's failure is not retried (the provider retried already), a tool's
        # failure is its result.
        self.retry = RetryPolicy(initial_interval=timedelta(milliseconds=200),
                                 maximum_attempts=attempts)


class _RemoteProvider:
    """Each ``stream`` is one LLM activity; its reply comes back whole (the deltas went to
    followers live from the activity). ``text_guarded``: the activity guarded the text.
    ``of(path)``: the same for the agent at ``path`` of the tree (``agent_table``)."""

    text_guarded = True

    def __init__(self, seq_base: Callable[[], int], options: CallOptions,
                 path: str = "", shared: _RemoteProvider | None = None) -> None:
        self._shared = shared or self
        self._requests: Subscription | None = None
        self._seq_base = seq_base
        self._options = options
        self.path = path

    def of(self, path: str) -> _RemoteProvider:
        return _RemoteProvider(self._seq_base, self._options, path, self)

    def bind(self, requests: Subscription) -> None:
        """Read the loop's LLM_REQUEST events from ``requests`` (made once the loop is)."""
        self._shared._requests = requests

    async def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        # The engine emits LLM_REQUEST and calls ``stream`` in the same step (no await in
        # between): the request event just taken is this call's.
        # A call with no LLM_REQUEST of its own (a background summary) streams no events.
        requests = self._shared._requests
        emitted = requests.drain_nowait() if requests is not None else []
        ev: Any = emitted[-1] if emitted else None
        call = {"agent": self.path, "session_id": "", "turn_id": "", "parent_turn_id": None,
                "seq": 0,
                "iteration": 0, "live": False, "request": request_to_json(request)}
        if ev is not None:
            call.update(session_id=ev.session_id, turn_id=ev.turn_id,
                        parent_turn_id=ev.parent_turn_id, seq=ev.seq + self._seq_base(),
                        iteration=ev.iteration, live=True)
        o = self._options
        try:
            raw = await workflow.execute_activity(
                LLM_ACTIVITY, call, start_to_close_timeout=o.llm_timeout,
                heartbeat_timeout=o.heartbeat_timeout, retry_policy=o.retry,
                summary=f"model call {call['turn_id']}#{call['iteration']}")
        except ActivityError as exc:
            cause = exc.cause
            _cancelled(cause)
            if isinstance(cause, ApplicationError) and cause.type == PROVIDER_FAILED:
                raise ProviderError(cause.message) from None
            raise ProviderError(f"the model call failed on Temporal: {cause or exc}") from None
        response = response_from_json(raw)
        if response.thinking:
            yield ThinkingDelta(response.thinking)
        if response.text:
            yield TextDelta(response.text)
        for tool_call in response.tool_calls:
            yield ToolCallChunk(tool_call)
        yield StreamEnd(response.usage, response.finish_reason)

    async def aclose(self) -> None:
        return None


def _cancelled(cause: BaseException | None) -> None:
    """An activity cancelled because its caller was (a hard abort, a timeout) ends in an
    ``ActivityError``: give the caller its ``CancelledError`` back, so the engine's edge that
    owns the cancel (the turn, the tool's timer) sees what it expects."""
    if isinstance(cause, CancelledError):
        raise asyncio.CancelledError from None


class _RemoteTool:
    """The real tool's description and checks; its ``run`` is a tool activity."""

    def __init__(self, real: Tool, options: CallOptions, path: str, homes: Homes) -> None:
        self._real = real
        self._options = options
        self._path = path
        self._homes = homes
        self._home_of: Callable[[Mapping[str, Any]], str | None] | None = getattr(
            real, "home_of", None)
        self.name = real.name
        self.description = real.description
        self.read_only = real.read_only
        self.timeout = real.timeout  # the engine's own timer (a workflow timer) enforces it
        self.permission_key = getattr(real, "permission_key", None)
        self.permission_family = getattr(real, "permission_family", None)
        self._carried: tuple[CarriedState, ...] = tuple(getattr(real, "carried", ()))

    @property
    def parameters(self) -> Mapping[str, Any]:
        return self._real.parameters

    def permission_subjects(self, arguments: Mapping[str, Any]) -> list[str]:
        subjects = getattr(self._real, "permission_subjects", None)
        return list(subjects(arguments)) if subjects is not None else []

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        # Checked here (the model reads a refusal at once); the activity gets the arguments
        # as the model wrote them (JSON) and validates them again before running.
        self._real.validate(arguments)
        return arguments

    def preview(self, arguments: Mapping[str, Any], ctx: ToolContext) -> str:
        return self._real.preview(arguments, ctx)

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        o = self._options
        call = {"agent": self._path, "name": self.name, "arguments": dict(arguments),
                "call_id": ctx.call_id,
                "session_id": ctx.session_id, "turn_id": ctx.turn_id,
                "parent_turn_id": ctx.parent_turn_id, "iteration": ctx.iteration, "seq": 0,
                # What this process decided about the turn (the write gate its policy opened
                # here) goes with the call: another worker may run it (``CarriedState``).
                "carried": [state.export(ctx.turn_id) for state in self._carried]}
        home = self._home_of(arguments) if self._home_of is not None else None
        if home is not None and not valid_home(home):  # a tool's own home_of: refused here,
            return _nowhere(home)  # not by the server, which would fail the workflow task
        answers: list[Any] = []
        while True:
            try:
                raw = await workflow.execute_activity(
                    TOOL_ACTIVITY, {**call, "answers": answers},
                    start_to_close_timeout=o.tool_timeout,
                    heartbeat_timeout=o.heartbeat_timeout, retry_policy=o.retry,
                    summary=f"{self.name} {ctx.call_id}",
                    task_queue=None if home is None
                    else home_queue(workflow.info().task_queue, home),
                    schedule_to_start_timeout=None if home is None else o.home_wait)
            except ActivityError as exc:
                _cancelled(exc.cause)
                if home is not None and never_taken(exc):
                    return _gone(home)
                raise RuntimeError(f"the call failed on Temporal: {exc.cause or exc}") from None
            self._homes.seen(ctx.turn_id, raw.get("home"))
            asked = raw.get("asked")
            if asked is None:
                return result_from_json(raw)
            # The engine's own ask (QUESTION_ASKED, the answer checked against the choices or
            # schema), waiting here, in the workflow, for as long as it takes; then the call
            # runs again with every answer so far (``_activities``).
            answers.append(await ctx.ask(asked["question"], choices=asked["choices"],
                                         schema=asked["schema"]))


def _nowhere(home: str) -> ToolResult:
    return ToolResult(f"This call names a worker ({home[:80]!r}) no worker can be: nothing ran.",
                      is_error=True)


def _gone(home: str) -> ToolResult:
    return ToolResult(f"The worker this call must run on ({home}) is no longer running (it took "
                      "no call for a while): what it was running ended with it.", is_error=True)


def remote_agent(agent: object, seq_base: Callable[[], int], options: CallOptions,
                 homes: Homes | None = None) -> tuple[BaseAgent, _RemoteProvider]:
    """``agent``'s tree with every model call and tool call made as an activity, and the
    provider to ``bind`` (one for the whole tree: each call names its agent by path)."""
    agent_table(agent)  # refuse what cannot run, with the path of the culprit
    provider = _RemoteProvider(seq_base, options)
    homes = homes if homes is not None else Homes()
    made: dict[int, BaseAgent] = {}  # an agent repeated in a sequence stays one agent

    def twin(real: BaseAgent, path: str) -> BaseAgent:
        if id(real) in made:
            return made[id(real)]
        copy: BaseAgent
        if isinstance(real, Agent):
            children = [twin(c, f"{path}/{c.name}") for c in real.subagents]
            builtin = {"subagent", "spawn"} if children else set()
            copy = Agent(provider=provider.of(path), name=real.name,
                         instructions=real.instructions,
                         tools=[_RemoteTool(t, options, path, homes) for t in real.tools
                                if t.name not in builtin],
                         max_iterations=real.max_iterations, dry_run=real.dry_run,
                         model=real.model, params=real.params,
                         context_window=real.context_window, summary=real.summary,
                         description=real.description, subagents=children,
                         output_type=None if real.output is None else real.output.type,
                         output_retries=2 if real.output is None else real.output.retries)
        else:
            # A composite's own code runs in the workflow (deterministic: it only awaits its
            # children); a shallow copy keeps its settings, with its children's twins.
            composite = cast(CompositeAgent, real)
            copy = pycopy.copy(composite)
            copy.agents = tuple(twin(c, f"{path}/{c.name}") for c in composite.agents)
            if hasattr(composite, "agent"):  # LoopAgent's one child
                copy.agent = copy.agents[0]  # type: ignore[attr-defined]
        made[id(real)] = copy
        return copy

    root = cast(BaseAgent, agent)
    return twin(root, root.name), provider
