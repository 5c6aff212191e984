"""``Recorder``: everything a replay needs from a live run of an ``AgentLoop``, in one file.

The recorder stands between the loop and the outside world at exactly the places where the
outside world gets in: each agent's provider (what the model streamed back), the tools (their
raw results, through an ``after_tool`` hook that runs before every other), the inbound
commands (steering, follow-ups, interrupts, approval answers, sends, turn starts, each with its
position in the event stream, seen through ``AgentLoop.intercept_commands``) and the events
themselves. Providers are wrapped while recording, and put back when it stops.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
from collections.abc import AsyncGenerator, Callable, Iterable
from contextlib import aclosing
from pathlib import Path
from typing import IO, Any

from steerable import Agent, AgentLoop, BaseAgent, event_to_dict
from steerable._hooks import ToolResultContext
from steerable._parts_json import part_to_json
from steerable._secrets import Redactor, known_secrets, redacted
from steerable.drivers._commands import Command, Resume, Send, StartTurn
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
    with_parts,
)

__all__ = ["Recorder"]

# Above any priority a user would pick: the recorder must see a tool's result before a hook
# changes it, because a replay runs those hooks again on the recorded result.
_FIRST = 2**62
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

    async def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        self._calls += 1
        full = request_to_json(request)
        entry: dict[str, Any] = {"type": "llm", "agent": self._agent, "n": self._calls,
                                 "request": shorten_request(full, self._previous), "chunks": []}
        self._previous = full["messages"]
        try:
            stream = self.inner.stream(request)
            if not text_guarded(self.inner):
                stream = guard_secrets(stream, known_secrets())
            async with aclosing(stream) as chunks:
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
        entry = {"type": "tool", "call_id": ctx.call.id, "name": ctx.call.name,
                 "content": ctx.result.content, "is_error": ctx.result.is_error}
        if ctx.result.parts:  # images and files returned with the text, inline
            entry["parts"] = [part_to_json(p, None) for p in ctx.result.parts]
        self._recorder._write(entry)


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
        self._undo.append(self._loop.intercept_commands(self._intercept))
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

    def _intercept(self, command: Command, *, proceed: Callable[[Command], Any]) -> Any:
        """Every command that enters the loop: written with its position in the event
        stream (and, for turns and sends, the history before it), so a replay makes it at
        the same point. Runs on the loop's thread (``AgentLoop.submit``)."""
        agent = getattr(command, "agent", None)
        if agent is not None:
            self._add_agent(agent)
        after = self._position()
        if isinstance(command, StartTurn | Send):
            sid = command.session_id
            history = self._loop.session_messages(sid) if sid else []
            answer = proceed(command)
            if isinstance(command, StartTurn):
                self._write(with_parts({
                    "type": "turn", "after": after, "session_id": answer.session_id,
                    "input": command.input, "agent": (agent or self._loop.agent).name,
                    "history": messages_to_json(history),
                    # Turns the loop's lanes start are started again by the replayed
                    # ``send``: marked so.
                    "by_send": command.by_lane}, command.parts))
                self._sessions[answer.session_id] = None
            else:
                self._write(with_parts({
                    "type": "control", "after": after, "verb": "send", "text": command.text,
                    "session_id": sid, "policy": command.policy,
                    "agent": None if agent is None else agent.name,
                    "history": messages_to_json(history)}, command.parts))
            return answer
        described = self._describe(command)
        answer = proceed(command)
        if isinstance(command, Resume):
            if answer is not None:
                # A resumed turn starts from a checkpoint the replay does not have: say so in
                # the file, so that replaying it fails with that reason, not a puzzling diff.
                self._write({"type": "unsupported", "what": "loop.resume",
                             "session_id": answer.session_id, "after": self._position()})
        elif described is not None and answer:  # a refused control did nothing to replay
            self._write({"type": "control", "after": after, **described})
        return answer

    def _describe(self, command: Command) -> dict[str, Any] | None:
        """A command as the recording names it: its verb and wire form (the replay decodes it
        with ``from_wire``, as a Redis worker does). A control for a turn is named by its
        session (a replay's turns have other ids); None for one aimed at a sub-turn (a replay
        cannot name it) or one that cannot cross a process."""
        if not command.remote:
            return None
        fields = command.fields()
        if "session_id" in fields:
            sid = fields["session_id"] or self._active_session()
            turn_id = fields.pop("turn_id", None)
            if turn_id is not None:
                top = None if sid is None else self._loop.active_turn(sid)
                if top is None or top.turn_id != turn_id:
                    return None
            fields["session_id"] = sid
        return {"verb": command.verb, **fields}
