"""Loop hooks on a Temporal worker, and where each one runs.

A hook runs in one of two places (``WorkerHook.in_workflow``):

- **In the workflow**, beside the engine: for hooks that only *decide*, from the turn's data
  and the model's answers (``HumanApprover``, the coding agent's ``ToolPolicy``). Workflow code
  must be deterministic: such a hook may not read the clock, files or the network to decide
  (its own model calls, ``ctx.ask``, are activities like any model call, so they are recorded);
  what it must read of the world it reads through ``workflow_read``: a function the worker
  registers (``TemporalWorker(reads=...)``), run as a ``steerable.read`` activity whose
  result the history records.
  In return its state is rebuilt by replay on whichever worker takes the session over: so
  it is given as a factory, called for each run of each session's workflow (a replay must
  start from a fresh hook, as the run it replays did). Its sync methods are called inline
  (``inline_hook``): a workflow has no threads.
- **In an activity** (``steerable.hook``), on a worker: for hooks with side effects on the
  worker's machine (undo's snapshots, the project's command hooks, background shells, spans
  sent to a collector). The workflow calls a proxy (``_RemoteHook``) with the context in its
  JSON form; the worker runs the real hook and returns its decision, which the workflow's
  history records (a replay reads it, and runs nothing again). Their state lives in the worker
  process: one that holds state of the calls it ran (the background commands) says
  ``at_every_home`` and hears each event on every worker that ran one of the turn's calls
  (``_homes``). They see ``on_event`` only for the kinds in their ``event_kinds`` (an
  activity per event).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, get_args

from temporalio import workflow
from temporalio.exceptions import ActivityError

from steerable import Event, EventKind, TurnStatus, event_to_dict
from steerable._hooks import (
    CompressContext,
    HookAction,
    HookDecision,
    LLMRequestContext,
    LLMResponseContext,
    ToolCallContext,
    ToolResultContext,
    hook_points,
)
from steerable._messages import ToolCall
from steerable.errors import ConfigurationError
from steerable.providers._base import ToolChoice
from steerable.temporal._codec import (
    choice_from_json,
    choice_to_json,
    messages_from_json,
    messages_to_json,
    request_from_json,
    request_to_json,
    response_from_json,
    response_to_json,
    result_from_json,
    result_to_json,
)
from steerable.temporal._homes import Homes, home_queue, never_taken

__all__ = [
    "HOOK_ACTIVITY",
    "READ_ACTIVITY",
    "WorkerHook",
    "context_from_json",
    "context_to_json",
    "decision_from_json",
    "decision_to_json",
    "event_from_json",
    "inline_hook",
    "remote_hook",
    "workflow_read",
]

HOOK_ACTIVITY = "steerable.hook"
READ_ACTIVITY = "steerable.read"
_READ_TIMEOUT = timedelta(seconds=60)


def workflow_read(name: str) -> Callable[..., Awaitable[Any]]:
    """An async function, for a hook that runs in the workflow, that calls the worker's read
    ``name`` (``TemporalWorker(reads={name: fn})``) with JSON arguments, as an activity: the
    first run reads the world, a replay reads what it read. Call it only from workflow code."""
    async def read(*args: Any) -> Any:
        return await workflow.execute_activity(
            READ_ACTIVITY, {"name": name, "args": list(args)},
            start_to_close_timeout=_READ_TIMEOUT, summary=f"read {name}")
    return read


@dataclass(frozen=True, slots=True)
class WorkerHook:
    """A hook of a ``TemporalWorker``'s sessions, registered as ``AgentLoop.register_hook``
    would (``priority``, ``timeout``). ``in_workflow`` says where it runs (module doc): then
    ``hook`` is a factory (no arguments) of the hook, called for each workflow run."""

    hook: Any
    priority: int = 0
    timeout: float | None = None
    in_workflow: bool = False

    def __post_init__(self) -> None:
        factory = isinstance(self.hook, type) or (callable(self.hook) and not _is_hook(self.hook))
        if self.in_workflow and not factory:
            raise ConfigurationError(
                "a hook that runs in the workflow is given as a factory (e.g. "
                "WorkerHook(lambda: MyHook(), in_workflow=True)): each workflow run needs a "
                "fresh one, or a replay would start from another run's state")
        # Refuse a hook with no hook method (or a misspelt one) now.
        hook_points(self.hook() if self.in_workflow else self.hook)

    def make(self) -> Any:
        """The hook for one workflow run (``in_workflow``), or the one hook (otherwise)."""
        return self.hook() if self.in_workflow else self.hook


def _is_hook(obj: Any) -> bool:
    try:
        hook_points(obj)
    except TypeError:
        return False
    return True


_EVENT_CLASSES: dict[EventKind, type[Any]] = {
    cls.kind: cls for cls in get_args(Event) if hasattr(cls, "kind")}


def event_from_json(raw: Mapping[str, Any]) -> Event:
    """An event rebuilt from its JSON form (statuses as ``TurnStatus``; other values as JSON)."""
    cls = _EVENT_CLASSES[EventKind(raw["kind"])]
    fields = {k: v for k, v in raw.items() if k != "kind"}
    if "status" in fields and fields["status"] is not None:
        fields["status"] = TurnStatus(fields["status"])
    fields.pop("usage", None)
    event: Event = cls(**fields)
    return event


# -- contexts and decisions in their JSON form -----------------------------------------------

def _call_json(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "arguments": dict(call.arguments)}


def context_to_json(point: str, ctx: Any) -> dict[str, Any]:
    if point == "on_event":
        return event_to_dict(ctx)
    out: dict[str, Any] = {"turn_id": ctx.turn_id, "session_id": ctx.session_id,
                           "parent_turn_id": ctx.parent_turn_id, "iteration": ctx.iteration}
    if isinstance(ctx, LLMRequestContext | LLMResponseContext):
        out["request"] = request_to_json(ctx.request)
    if isinstance(ctx, LLMResponseContext):
        out["response"] = response_to_json(ctx.response)
    if isinstance(ctx, ToolCallContext | ToolResultContext):
        out["call"] = _call_json(ctx.call)
    if isinstance(ctx, ToolCallContext | ToolResultContext):
        out.update(read_only=ctx.read_only, dry_run=ctx.dry_run)
    if isinstance(ctx, ToolResultContext):
        out["result"] = result_to_json(ctx.result)
    if isinstance(ctx, CompressContext):
        out.update(messages=messages_to_json(ctx.messages), reason=ctx.reason,
                   tokens=ctx.tokens)
    return out


def context_from_json(point: str, raw: Mapping[str, Any],
                      ask: Callable[..., Awaitable[Any]]) -> Any:
    """The context a hook method gets on the worker; ``ask`` makes its own model calls."""
    if point == "on_event":
        return event_from_json(raw)
    ids = {k: raw[k] for k in ("turn_id", "session_id", "parent_turn_id", "iteration")}
    if point == "before_llm":
        return LLMRequestContext(**ids, request=request_from_json(raw["request"]), _ask=ask)
    if point == "after_llm":
        return LLMResponseContext(**ids, request=request_from_json(raw["request"]),
                                  response=response_from_json(raw["response"]), _ask=ask)
    if point == "before_compress":
        return CompressContext(**ids, messages=tuple(messages_from_json(raw["messages"])),
                               reason=raw["reason"], tokens=raw["tokens"])
    c = raw["call"]
    call = ToolCall(c["id"], c["name"], c["arguments"])
    if point == "after_tool":
        # A history written before these two fields existed: may have changed something.
        return ToolResultContext(**ids, call=call, result=result_from_json(raw["result"]),
                                 read_only=raw.get("read_only", False),
                                 dry_run=raw.get("dry_run", False))
    return ToolCallContext(**ids, call=call, read_only=raw["read_only"],
                           dry_run=raw["dry_run"])


def decision_to_json(value: Any) -> Any:
    """A hook's return value: None, a bool (approve_tool), or a decision (its fields set)."""
    if value is None or isinstance(value, bool):
        return value
    if not isinstance(value, HookDecision):
        raise TypeError(f"a hook returned {type(value).__name__}; expected None or "
                        "HookDecision")
    out: dict[str, Any] = {"action": value.action.value}
    for name in value.fields_set():
        v = getattr(value, name)
        if name == "messages":
            v = messages_to_json(v)
        elif name == "tool_choice":
            v = choice_to_json(v)
        elif name == "tools":
            raise ConfigurationError("a hook running in an activity cannot change the tools "
                                     "offered (run it in the workflow: in_workflow=True)")
        elif name == "tool_calls":
            v = [[n, dict(a)] for n, a in v]
        elif name in ("arguments", "params"):
            v = dict(v)
        out[name] = v
    return out


def decision_from_json(raw: Any) -> Any:
    if raw is None or isinstance(raw, bool):
        return raw
    fields = {k: v for k, v in raw.items() if k != "action"}
    if "messages" in fields:
        fields["messages"] = messages_from_json(fields["messages"])
    if "tool_choice" in fields:
        choice: ToolChoice = choice_from_json(fields["tool_choice"])
        fields["tool_choice"] = choice
    if "tool_calls" in fields:
        fields["tool_calls"] = [(n, a) for n, a in fields["tool_calls"]]
    return HookDecision(HookAction(raw["action"]), **fields)


# -- the two places ----------------------------------------------------------------------------

def inline_hook(hook: Any) -> Any:
    """``hook`` for the workflow's loop: each of its methods awaited in place (sync ones
    called inline: no worker thread in a workflow)."""
    points = hook_points(hook)

    def method(point: str) -> Callable[[Any, Any], Awaitable[Any]]:
        async def call(self: Any, ctx: Any) -> Any:
            value = getattr(hook, point)(ctx)
            if isinstance(value, Awaitable):
                value = await value
            return value
        return call

    attrs: dict[str, Any] = {p: method(p) for p in points}
    attrs["name"] = getattr(hook, "name", type(hook).__name__)
    if hasattr(hook, "event_kinds"):
        attrs["event_kinds"] = hook.event_kinds
    return type(f"Inline{type(hook).__name__}", (), attrs)()


def remote_hook(index: int, spec: WorkerHook, options: Any, homes: Homes) -> Any:
    """A proxy for the workflow's loop whose methods are ``steerable.hook`` activities that
    run ``spec.hook`` (the worker's ``index``-th activity hook). A hook ``at_every_home``
    hears each event on every worker that ran one of the event's turn's calls (``_homes``)."""
    hook = spec.hook
    points = hook_points(hook)
    kinds = getattr(hook, "event_kinds", None)
    timeout = timedelta(seconds=spec.timeout) if spec.timeout is not None \
        else options.tool_timeout
    label = getattr(hook, "name", type(hook).__name__)
    every_home = bool(getattr(hook, "at_every_home", False))

    async def run(point: str, ctx: Any, home: str | None = None) -> Any:
        try:
            return await workflow.execute_activity(
                HOOK_ACTIVITY, {"hook": index, "point": point,
                                "ctx": context_to_json(point, ctx)},
                start_to_close_timeout=timeout, heartbeat_timeout=options.heartbeat_timeout,
                retry_policy=options.retry, summary=f"{label}.{point}",
                task_queue=None if home is None
                else home_queue(workflow.info().task_queue, home),
                schedule_to_start_timeout=None if home is None else options.home_wait)
        except ActivityError as exc:
            if home is not None and never_taken(exc):
                return None  # that worker is gone, and what it held with it
            raise RuntimeError(f"{exc.cause or exc}") from None  # the hook's failure

    def method(point: str) -> Callable[[Any, Any], Awaitable[Any]]:
        async def call(self: Any, ctx: Any) -> Any:
            at = homes.of(ctx.turn_id) if every_home and point == "on_event" else ()
            if at:
                await asyncio.gather(*(run(point, ctx, home) for home in at))
                return None  # an observer: nothing to decide
            return decision_from_json(await run(point, ctx))
        return call

    attrs: dict[str, Any] = {p: method(p) for p in points}
    attrs["name"] = label
    if "on_event" in points:
        # An activity per event: only the kinds the hook asks for (TURN_END by default).
        attrs["event_kinds"] = tuple(kinds) if kinds is not None else (EventKind.TURN_END,)
    return type(f"Remote{type(hook).__name__}", (), attrs)()
