"""``Recorder``: everything a replay needs from a live run of an ``AgentLoop``, in one file.

The recorder stands between the loop and the outside world at exactly the places where the
outside world gets in: each agent's provider (what the model streamed back), the tools (their
raw results, through an ``after_tool`` hook that runs before every other), the control methods
(steering, follow-ups, interrupts, approval answers, turn starts, each with its position in the
event stream) and the events themselves. It uses only the loop's public API: providers are
wrapped and control methods shadowed on this one loop instance while recording, and put back
when it stops.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import aclosing
from pathlib import Path
from typing import IO, Any

from steerable import Agent, AgentLoop, BaseAgent, TurnHandle, event_to_dict
from steerable._hooks import ToolResultContext
from steerable._receipts import MessageReceipt
from steerable._secrets import Redactor, known_secrets, redacted
from steerable.providers._base import Chunk, LLMRequest, Provider, guard_secrets, text_guarded
from steerable.replay._errors import RecordingError
from steerable.replay._format import (
    FORMAT,
    VERSION,
    chunk_to_json,
    error_to_json,
    messages_to_json,
    request_to_json,
    shorten_request,
)

__all__ = ["Recorder"]

# Above any priority a user would pick: the recorder must see a tool's result before a hook
# changes it, because a replay runs those hooks again on the recorded result.
_FIRST = 2**62
_LANES = "steerable._lanes"
_CONTROLS = ("inject_steering", "inject_follow_up", "interrupt_graceful", "interrupt_hard",
             "cancel")
# The positional parameters of each control method, to record its arguments by name.
_LOOP_PARAMS: dict[str, tuple[str, ...]] = {
    "inject_steering": ("text", "session_id"),
    "inject_follow_up": ("text", "session_id"),
    "interrupt_graceful": ("session_id", "hint"),
    "interrupt_hard": ("session_id",),
    "cancel": ("session_id", "mode"),
    "resolve_approval": ("request_id", "approved", "reason"),
}
_HANDLE_PARAMS: dict[str, tuple[str, ...]] = {
    "inject_steering": ("text",),
    "inject_follow_up": ("text",),
    "interrupt_graceful": ("hint",),
    "interrupt_hard": (),
    "cancel": ("mode",),
}


def _discard(fn: Callable[[], object]) -> None:
    fn()


def _agents(roots: Iterable[BaseAgent]) -> list[Agent]:
    """Every model-backed agent reachable from ``roots`` through ``subagents`` and the children
    of composite agents (``agents``, ``agent``), each once, in order."""
    seen: dict[int, BaseAgent] = {}
    stack = list(roots)
    while stack:
        agent = stack.pop(0)
        if id(agent) in seen or not isinstance(agent, BaseAgent):
            continue
        seen[id(agent)] = agent
        stack.extend(getattr(agent, "subagents", ()) or ())
        stack.extend(getattr(agent, "agents", ()) or ())
        child = getattr(agent, "agent", None)
        if child is not None:
            stack.append(child)
    return [a for a in seen.values() if isinstance(a, Agent)]


# The tools an Agent with subagents makes for itself: a replayed Agent makes them again.
_DELEGATES = ("subagent", "spawn")


def _agent_json(agent: Agent) -> dict[str, Any]:
    children = list(getattr(agent, "subagents", ()) or ())
    own = [t for t in agent.tools if not (children and t.name in _DELEGATES)]
    return {
        "provider": type(agent.provider).__name__,  # for the reader of a bug report
        "description": getattr(agent, "description", ""),
        "instructions": agent.instructions,
        "model": agent.model,
        "params": json.loads(json.dumps(dict(agent.params), default=str)),
        "max_iterations": agent.max_iterations,
        "dry_run": agent.dry_run,
        "context_window": agent.context_window,
        "subagents": [a.name for a in children],
        "tools": [
            {"name": t.name, "description": t.description, "parameters": dict(t.parameters),
             "read_only": bool(t.read_only), "timeout": t.timeout}
            for t in own
        ],
    }


class _RecordingProvider:
    """Passes every call through to ``inner`` and writes what came back: the text cut as the
    loop would cut it (no secret split between two chunks), so that each chunk is blanked
    whole in the file and the replay streams exactly the deltas the run streamed."""

    text_guarded = True

    def __init__(self, inner: Provider, recorder: Recorder, agent: str) -> None:
        self.inner = inner
        self._recorder = recorder
        self._agent = agent
        self._calls = 0
        self._previous: list[Any] = []

    async def stream(self, request: LLMRequest) -> AsyncIterator[Chunk]:
        self._calls += 1
        full = request_to_json(request)
        entry: dict[str, Any] = {"type": "llm", "agent": self._agent, "n": self._calls,
                                 "request": shorten_request(full, self._previous), "chunks": []}
        self._previous = full["messages"]
        try:
            stream = self.inner.stream(request)
            if not text_guarded(self.inner):
                stream = guard_secrets(stream, known_secrets())
            async with aclosing(stream) as chunks:  # type: ignore[type-var]
                async for chunk in chunks:
                    entry["chunks"].append(chunk_to_json(chunk))
                    yield chunk
        except (asyncio.CancelledError, GeneratorExit):
            entry["cancelled"] = True
            raise
        except Exception as exc:
            entry["error"] = error_to_json(exc)
            raise
        finally:
            self._recorder._write(entry)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _ToolTap:
    """An ``after_tool`` hook that writes each tool's raw result."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    def after_tool(self, ctx: ToolResultContext) -> None:
        self._recorder._write({"type": "tool", "call_id": ctx.call.id, "name": ctx.call.name,
                               "content": ctx.result.content, "is_error": ctx.result.is_error})


class Recorder:
    """Records a loop's run to ``path`` (JSON lines) until ``aclose()``.

    Use as ``async with Recorder(loop, "run.jsonl"):`` around the turns to record. Sub-agents
    (``Agent(subagents=...)``) are found from the loop's agent; pass ``agents=`` for other agents
    given to ``start_turn(agent=...)``. Control made through the loop or a ``TurnHandle`` while
    recording is written with its position, so a replay makes it at the same point.

    Secrets are blanked in every entry before it is written, as the session files blank them
    (``redact``, default a ``Redactor()``: the environment's secrets and credential shapes); the
    replay then runs on the blanked values and still agrees with the blanked events.
    """

    def __init__(self, loop: AgentLoop, path: str | Path, *, agents: Iterable[BaseAgent] = (),
                 redact: Callable[[str], str] | None = None) -> None:
        if not isinstance(loop, AgentLoop):
            raise RecordingError(f"Recorder needs an AgentLoop, got {type(loop).__name__}")
        self._loop = loop
        self._path = Path(path)
        self._redact = redact if redact is not None else Redactor()
        self._agents = _agents([loop.agent, *agents])
        names = [a.name for a in self._agents]
        if len(set(names)) != len(names):
            raise RecordingError(f"agents must have distinct names to be recorded, got {names}")
        self._out: IO[str] | None = None
        self._lock = threading.Lock()
        self._aio: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None
        self._base = 0
        self._undo: list[Callable[[], None]] = []
        self._task: asyncio.Task[None] | None = None
        self._in_send = False
        self._sessions: dict[str, None] = {}
        """The sessions of the recorded turns, in order: their histories end the file."""

    # -- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> Recorder:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def start(self) -> None:
        """Open the file and start recording (from the loop's thread, inside a running loop)."""
        if self._out is not None:
            raise RecordingError("this Recorder has already been started")
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._out = self._path.open("w", encoding="utf-8")
        except OSError as exc:
            raise RecordingError(f"cannot write the recording {self._path}: "
                                 f"{exc.strerror or exc}") from None
        self._aio = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._base = self._loop.statistics().events_emitted
        rules = [[str(r.action), r.tool if r.argument is None else f"{r.tool}({r.argument})"]
                 for r in self._loop.permissions.rules]
        self._write({"type": "header", "format": FORMAT, "version": VERSION,
                     "agent": self._loop.agent.name, "permissions": rules,
                     "agents": {a.name: _agent_json(a) for a in self._agents}})
        for agent in self._agents:
            self._wrap_provider(agent)
        unregister = self._loop.register_hook(_ToolTap(self), priority=_FIRST)
        self._undo.append(functools.partial(_discard, unregister))
        self._shadow_loop()
        self._shadow_start_turn()
        self._shadow_send()
        self._shadow_resume()
        sub = self._loop.subscribe(None, buffer=1 << 20)
        self._undo.append(sub.close)
        self._task = asyncio.get_running_loop().create_task(self._write_events(sub))

    async def aclose(self) -> None:
        """Stop recording: put the loop back as it was and finish the file. Idempotent."""
        if self._out is None or self._out.closed:
            return
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        if self._task is not None:
            await self._task
        for sid in self._sessions:
            self._write({"type": "session", "session_id": sid,
                         "messages": messages_to_json(self._loop.session_messages(sid))})
        self._out.close()

    # -- what gets written --------------------------------------------------------------------

    def _write(self, entry: dict[str, Any]) -> None:
        # Through plain JSON values first, so that whatever default=str turns into text is
        # redacted too.
        plain = json.loads(json.dumps(entry, ensure_ascii=False, default=str))
        line = json.dumps(redacted(plain, self._redact), ensure_ascii=False) + "\n"
        with self._lock:  # sync tools and foreign threads write too
            if self._out is not None and not self._out.closed:
                self._out.write(line)

    def _position(self) -> int:
        return self._loop.statistics().events_emitted - self._base

    async def _write_events(self, sub: Any) -> None:
        async for event in sub:
            self._write({"type": "event", "event": event_to_dict(event)})
        if self._out is not None:
            self._out.flush()

    def _add_agent(self, agent: Agent) -> None:
        """An agent first seen in ``start_turn(agent=...)``: described and recorded from now."""
        for new in _agents([agent]):
            if any(new is a for a in self._agents):
                continue
            if any(new.name == a.name for a in self._agents):
                raise RecordingError(f"another agent named {new.name!r} is already recorded; "
                                     "agents must have distinct names to be recorded")
            self._agents.append(new)
            self._write({"type": "agent", "name": new.name, "spec": _agent_json(new)})
            self._wrap_provider(new)

    def _wrap_provider(self, agent: Agent) -> None:
        inner = agent.provider
        agent.provider = _RecordingProvider(inner, self, agent.name)

        def undo() -> None:
            agent.provider = inner

        self._undo.append(undo)

    # -- control ----------------------------------------------------------------------------

    def _active_session(self) -> str | None:
        try:
            info = self._loop.active_turn(None)
        except ValueError:  # several turns: the call itself will refuse it
            return None
        return None if info is None else info.session_id

    def _describe_loop_call(self, name: str, args: tuple[Any, ...],
                            kwargs: dict[str, Any]) -> dict[str, Any]:
        """The control's target session and payload, whatever way its arguments were passed."""
        params = _LOOP_PARAMS[name]
        bound = dict(zip(params, args, strict=False)) | kwargs
        if name != "resolve_approval" and bound.get("session_id") is None:
            bound["session_id"] = self._active_session()
        return bound

    def _shadow(self, target: Any, name: str,
                describe: Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]) -> None:
        original = getattr(target, name)

        @functools.wraps(original)
        def recorded(*args: Any, **kwargs: Any) -> Any:
            if not self._on_loop_thread():
                return self._on_loop(recorded, *args, **kwargs)
            after = self._position()
            described = describe(args, kwargs)
            changed = original(*args, **kwargs)
            if changed:  # a refused control (False, or no CancelHandle) did nothing to replay
                mode = described.get("mode")
                if mode is not None:
                    described["mode"] = getattr(mode, "name", mode)
                self._write({"type": "control", "after": after, "action": name, **described})
            return changed

        setattr(target, name, recorded)
        self._undo.append(lambda: target.__dict__.pop(name, None))

    def _on_loop_thread(self) -> bool:
        aio = self._aio
        return aio is None or threading.get_ident() == self._thread or not aio.is_running()

    def _on_loop(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a control on the loop's thread, so its recorded position is exact."""
        assert self._aio is not None
        answer: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            try:
                answer.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                answer.set_exception(exc)

        self._aio.call_soon_threadsafe(run)
        return answer.result(timeout=30)

    def _shadow_loop(self) -> None:
        for name in (*_CONTROLS, "resolve_approval"):
            self._shadow(self._loop, name,
                         functools.partial(self._describe_loop_call, name))

    def _shadow_handle(self, handle: TurnHandle) -> None:
        for name in _CONTROLS:
            params = _HANDLE_PARAMS[name]

            def describe(args: tuple[Any, ...], kwargs: dict[str, Any],
                         params: tuple[str, ...] = params) -> dict[str, Any]:
                return dict(zip(params, args, strict=False)) | kwargs | {
                    "session_id": handle.session_id}

            self._shadow(handle, name, describe)

    def _shadow_send(self) -> None:
        original = self._loop.send

        @functools.wraps(original)
        def send(text: str, session_id: str, policy: Any = None, *,
                 agent: Agent | None = None) -> Any:
            if not self._on_loop_thread():
                return self._on_loop(send, text, session_id, policy, agent=agent)
            if agent is not None and all(agent is not a for a in self._agents):
                self._add_agent(agent)
            after = self._position()
            history = self._loop.session_messages(session_id)
            self._in_send = True
            try:
                sent = original(text, session_id, policy, agent=agent)
            finally:
                self._in_send = False
            self._write({"type": "control", "after": after, "action": "send", "text": text,
                         "session_id": session_id, "policy": policy,
                         "agent": None if agent is None else agent.name,
                         "history": messages_to_json(history)})
            return sent

        self._loop.send = send  # type: ignore[method-assign]
        self._undo.append(lambda: self._loop.__dict__.pop("send", None))

    def _shadow_resume(self) -> None:
        original = self._loop.resume

        @functools.wraps(original)
        def resume(*args: Any, **kwargs: Any) -> Any:
            handle = original(*args, **kwargs)
            if handle is not None:
                # A resumed turn starts from a checkpoint the replay does not have: say so in
                # the file, so that replaying it fails with that reason, not a puzzling diff.
                self._write({"type": "unsupported", "what": "loop.resume",
                             "session_id": handle.session_id, "after": self._position()})
            return handle

        self._loop.resume = resume  # type: ignore[method-assign]
        self._undo.append(lambda: self._loop.__dict__.pop("resume", None))

    def _shadow_start_turn(self) -> None:
        original = self._loop.start_turn

        @functools.wraps(original)
        def start_turn(input: str, session_id: str | None = None, *,
                       agent: BaseAgent | None = None,
                       discard_checkpoint: bool = False,
                       receipt: MessageReceipt | None = None) -> TurnHandle:
            if not self._on_loop_thread():
                return self._on_loop(start_turn, input, session_id, agent=agent,  # type: ignore[no-any-return]
                                     discard_checkpoint=discard_checkpoint, receipt=receipt)
            if agent is not None:
                for found in _agents([agent]):
                    if all(found is not a for a in self._agents):
                        self._add_agent(found)
            after = self._position()
            # Turns the loop's own lanes start (for a message given to ``send``, or a follow-up
            # a sent turn handed back) are started again by the replayed ``send``: marked so.
            by_send = self._in_send or sys._getframe(1).f_globals.get("__name__") == _LANES
            history = self._loop.session_messages(session_id) if session_id else []
            handle = original(input, session_id, agent=agent,
                              discard_checkpoint=discard_checkpoint, receipt=receipt)
            self._write({"type": "turn", "after": after, "session_id": handle.session_id,
                         "input": input, "agent": (agent or self._loop.agent).name,
                         "history": messages_to_json(history), "by_send": by_send})
            self._sessions[handle.session_id] = None
            self._shadow_handle(handle)
            return handle

        self._loop.start_turn = start_turn  # type: ignore[method-assign]
        self._undo.append(lambda: self._loop.__dict__.pop("start_turn", None))
