"""The agent the workflow runs: the worker's agent with its provider and its tools replaced by
proxies whose calls are activities (``_activities``). Everything else (instructions, budget,
schemas, permission subjects, argument checks) is the real agent's, so the engine running in
the workflow decides exactly what it decides in a local loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

from steerable import Agent, Subscription
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
from steerable.tools import Tool, ToolContext

__all__ = ["CallOptions", "remote_agent"]


class CallOptions:
    """How the workflow schedules its activities (the worker's settings, the same on every
    worker of a task queue)."""

    def __init__(self, *, heartbeat_timeout: float = 10.0, llm_timeout: float = 600.0,
                 tool_timeout: float = 3600.0, attempts: int = 3) -> None:
        if attempts < 1:
            raise ConfigurationError(f"attempts must be >= 1, got {attempts}")
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
    followers live from the activity). ``text_guarded``: the activity guarded the text."""

    text_guarded = True

    def __init__(self, seq_base: Callable[[], int], options: CallOptions) -> None:
        self._requests: Subscription | None = None
        self._seq_base = seq_base
        self._options = options

    def bind(self, requests: Subscription) -> None:
        """Read the loop's LLM_REQUEST events from ``requests`` (made once the loop is)."""
        self._requests = requests

    async def stream(self, request: LLMRequest) -> AsyncIterator[Chunk]:
        # The engine emits LLM_REQUEST and calls ``stream`` in the same step (no await in
        # between): the request event just taken is this call's.
        # A call with no LLM_REQUEST of its own (a background summary) streams no events.
        emitted = self._requests.drain_nowait() if self._requests is not None else []
        ev: Any = emitted[-1] if emitted else None
        call = {"session_id": "", "turn_id": "", "parent_turn_id": None, "seq": 0,
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

    def __init__(self, real: Tool, options: CallOptions) -> None:
        self._real = real
        self._options = options
        self.name = real.name
        self.description = real.description
        self.read_only = real.read_only
        self.timeout = real.timeout  # the engine's own timer (a workflow timer) enforces it
        self.permission_key = getattr(real, "permission_key", None)
        self.permission_family = getattr(real, "permission_family", None)

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
        call = {"name": self.name, "arguments": dict(arguments), "call_id": ctx.call_id,
                "session_id": ctx.session_id, "turn_id": ctx.turn_id,
                "parent_turn_id": ctx.parent_turn_id, "iteration": ctx.iteration, "seq": 0}
        answers: list[Any] = []
        while True:
            try:
                raw = await workflow.execute_activity(
                    TOOL_ACTIVITY, {**call, "answers": answers},
                    start_to_close_timeout=o.tool_timeout,
                    heartbeat_timeout=o.heartbeat_timeout, retry_policy=o.retry,
                    summary=f"{self.name} {ctx.call_id}")
            except ActivityError as exc:
                _cancelled(exc.cause)
                raise RuntimeError(f"the call failed on Temporal: {exc.cause or exc}") from None
            asked = raw.get("asked")
            if asked is None:
                return result_from_json(raw)
            # The engine's own ask (QUESTION_ASKED, the answer checked against the choices or
            # schema), waiting here, in the workflow, for as long as it takes; then the call
            # runs again with every answer so far (``_activities``).
            answers.append(await ctx.ask(asked["question"], choices=asked["choices"],
                                         schema=asked["schema"]))


def remote_agent(agent: object, seq_base: Callable[[], int],
                 options: CallOptions) -> tuple[Agent, _RemoteProvider]:
    """``agent`` with its calls made as activities, and its provider (to ``bind``)."""
    if type(agent) is not Agent:
        raise ConfigurationError(
            "a Temporal worker runs an Agent (composite agents are not supported on Temporal "
            f"yet), got {type(agent).__name__}")
    if agent.subagents:
        raise ConfigurationError("an agent with subagents cannot run on Temporal yet")
    provider = _RemoteProvider(seq_base, options)
    return Agent(provider=provider, name=agent.name,
                 instructions=agent.instructions,
                 tools=[_RemoteTool(t, options) for t in agent.tools],
                 max_iterations=agent.max_iterations, dry_run=agent.dry_run, model=agent.model,
                 params=agent.params, context_window=agent.context_window,
                 summary=agent.summary, description=agent.description), provider
