"""``replay``: run a recording again with no model and no network, and check it went the same way.

The player builds the recorded agents with stand-ins (``ReplayProvider``, ``ReplayTool``, unless
real tools are given), starts the recorded turns on a fresh in-memory loop and reads every event
the loop emits, comparing each with the recorded one at the same position (see ``_compare``).

Controls (steering, interrupts, approval answers, turn starts) were recorded with ``after`` = the
number of events emitted before them. The player makes each one right after it has checked
event number ``after``. For that to land at the same point of the turn, the stand-ins wait at
every place a live run waits (between two streamed chunks, when a tool starts) until the player
has caught up with every event emitted so far (``gate``): the turn cannot run ahead of its
controls. Parallel tools return in their recorded order for the same reason.

The first difference stops the replay: running turns are aborted and ``ReplayDivergence`` says
which event (or LLM request) differed and how.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from steerable import (
    Agent,
    AgentLoop,
    Event,
    EventKind,
    HookAction,
    HookDecision,
    HumanApprover,
    InMemorySessionStore,
    Message,
    Permissions,
    Tool,
    TurnHandle,
    TurnResult,
    event_to_dict,
)
from steerable.drivers._controls import from_wire
from steerable.providers._base import LLMRequest
from steerable.replay._compare import IdMap, first_difference, first_request_difference
from steerable.replay._errors import RecordingError, ReplayDivergence
from steerable.replay._format import (
    Recording,
    load_recording,
    messages_from_json,
    messages_to_json,
    request_to_json,
)
from steerable.replay._stand_ins import ReplayProvider, ReplayTool

__all__ = ["ReplayResult", "replay"]


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """What the replayed run produced: the top-level turns' results in start order, every
    event, and each session's history at the end (all equal to the recording's)."""

    results: tuple[TurnResult, ...]
    events: tuple[Event, ...]
    sessions: Mapping[str, list[Message]]

    @property
    def text(self) -> str:
        """The last top-level turn's final text."""
        return self.results[-1].text if self.results else ""


def _makes_event(chunk: Mapping[str, Any]) -> bool:
    """Whether the loop emits an event for this recorded chunk (empty text makes none)."""
    kind = chunk.get("t")
    return kind in ("thinking", "retry") or (
        kind in ("text", "tool_args") and bool(chunk.get("text")))


class _InOrder:
    """An ``after_tool`` hook of the replay's own: a tool call (a real tool, a sub-agent) ends
    only once what was recorded before its end has happened again."""

    def __init__(self, player: Player) -> None:
        self._player = player

    async def after_tool(self, ctx: Any) -> None:
        await self._player.until_ready(ctx.call.id)


class _RecordedDenials:
    """An approver that refuses exactly the calls an approver refused in the recording without
    asking a person (``DENY_TOOL`` from a hook: the CLI's no-terminal approver, a policy hook),
    so that a replay without those hooks takes the same decisions. Used when no hooks are
    given to ``replay``; with hooks, they decide."""

    def __init__(self, denials: Mapping[str, str]) -> None:
        self._denials = denials

    def approve_tool(self, ctx: Any) -> HookDecision | None:
        reason = self._denials.get(ctx.call.id)
        return None if reason is None else HookDecision(HookAction.DENY_TOOL, reason=reason)


class Player:
    """One replay of one recording (use ``replay()``)."""

    def __init__(self, recording: Recording, *, tools: Iterable[Tool], hooks: Iterable[Any],
                 stall_timeout: float) -> None:
        self.recording = recording
        self._events = recording.events
        # A recording made before messages had a lifecycle has no MESSAGE_STATE events: the
        # replay's are passed over, and left out of the positions controls are made at.
        self._legacy = not any(e["kind"] == "message_state" for e in self._events)
        self._passed_over = 0
        self._live_tools = {t.name: t for t in tools}
        self._hooks = list(hooks)
        self._stall = stall_timeout
        self._llm: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for entry in sorted(recording.of_type("llm"), key=lambda e: (e["agent"], e["n"])):
            self._llm[entry["agent"]].append(entry)
        self._llm_used: dict[str, int] = defaultdict(int)
        self._tools = {e["call_id"]: e for e in recording.of_type("tool")}
        self._actions = sorted(
            (e for e in recording.entries if e["type"] in ("turn", "control")),
            key=lambda e: int(e["after"]),
        )  # a stable sort: controls at the same position keep their recorded order
        self._index_call_events()
        self._index_stream_events()
        self._ids = IdMap()
        self._matched = 0
        self._failure: ReplayDivergence | None = None
        self._tick = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._handles: list[TurnHandle] = []
        self._waiters: set[asyncio.Future[None]] = set()
        self._sent_sessions: dict[str, None] = {}
        self._sent_results: list[TurnResult] = []
        """One per started turn, owned here: it wakes the driver when the last turn ends."""
        self._seen: list[Event] = []
        self.loop = self._build_loop()
        self._base = 0

    # -- set-up -------------------------------------------------------------------------------

    def _index_call_events(self) -> None:
        self._progress: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        self._ready_at: dict[str, int] = {}
        for i, event in enumerate(self._events):
            kind = event["kind"]
            if kind == "tool_exec_progress":
                self._progress[event["call_id"]].append((i, event))
            elif kind == "tool_exec_end":
                # A tool returns once everything recorded before its end has happened again,
                # except the errors its own after_tool hooks report after it returned.
                ready = i
                while ready > 0 and self._events[ready - 1]["kind"] == "error":
                    ready -= 1
                self._ready_at[event["call_id"]] = ready

    def _index_stream_events(self) -> None:
        """For each recorded chunk that made an event, that event's position: a chunk is
        streamed only when everything recorded before its event has happened again, so turns
        running side by side (async sub-turns) interleave as they did."""
        events = self._events
        agent_of = {e["turn_id"]: e["agent"] for e in events if e["kind"] == "turn_start"}
        requests: dict[str, list[int]] = defaultdict(list)
        for i, e in enumerate(events):
            if e["kind"] == "llm_request":
                requests[agent_of.get(e["turn_id"], "")].append(i)
        for agent, entries in self._llm.items():
            for entry, start in zip(entries, requests.get(agent, []), strict=False):
                turn, produced = events[start]["turn_id"], []
                for j in range(start + 1, len(events)):
                    e = events[j]
                    if e["turn_id"] != turn:
                        continue
                    if e["kind"] in ("llm_delta", "llm_retry", "tool_call_delta"):
                        produced.append(j)
                    elif e["kind"] in ("llm_response", "llm_request", "turn_end"):
                        break
                positions = iter(produced)
                entry["positions"] = [next(positions, None) if _makes_event(c) else None
                                      for c in entry["chunks"]]

    def _build_agents(self) -> dict[str, Agent]:
        specs: dict[str, Mapping[str, Any]] = dict(self.recording.header["agents"])
        specs.update({e["name"]: e["spec"] for e in self.recording.of_type("agent")})
        built: dict[str, Agent] = {}

        def build(name: str) -> Agent:
            if name in built:
                return built[name]
            spec = specs[name]
            tools: list[Tool] = [self._live_tools.get(t["name"]) or ReplayTool(self, t)
                                 for t in spec["tools"]]
            children = [build(child) for child in spec.get("subagents") or ()]
            built[name] = Agent(
                provider=ReplayProvider(self, name), name=name,
                instructions=spec["instructions"], tools=tools,
                max_iterations=spec["max_iterations"], dry_run=spec["dry_run"],
                model=spec["model"], params=spec["params"],
                context_window=spec["context_window"], subagents=children,
                description=spec.get("description") or "",
            )
            return built[name]

        for name in specs:
            build(name)
        return built

    def _build_loop(self) -> AgentLoop:
        header = self.recording.header
        self._agents = self._build_agents()
        if header["agent"] not in self._agents:
            raise RecordingError(f"the recorded loop's agent {header['agent']!r} is not a model "
                                 "agent this version can rebuild (composite roots are not "
                                 "replayed yet)")
        permissions = Permissions([(a, p) for a, p in header.get("permissions", [])])
        loop = AgentLoop(self._agents[header["agent"]], store=InMemorySessionStore(),
                         permissions=permissions)
        loop.register_hook(_InOrder(self), priority=2**62, timeout=self._stall * 2)
        for hook in self._hooks:
            loop.register_hook(hook)
        asked = {e["call_id"] for e in self._events if e["kind"] == "approval_requested"}
        denials = {e["call_id"]: e.get("detail", "") for e in self._events
                   if e["kind"] == "tool_exec_skipped" and e["reason"] == "denied"
                   and e["call_id"] not in asked}
        if denials and not self._hooks:
            loop.register_hook(_RecordedDenials(denials))
        if any(e["kind"] == "approval_requested" for e in self._events):
            loop.register_hook(HumanApprover())  # the recorded run asked someone: so do we
        return loop

    # -- what the stand-ins ask ---------------------------------------------------------------

    def _fail(self, message: str, **details: Any) -> ReplayDivergence:
        if self._failure is None:
            self._failure = ReplayDivergence(message, **details)
            self._tick.set()
        return self._failure

    def take_llm(self, agent: str, request: LLMRequest) -> dict[str, Any]:
        calls = self._llm[agent]
        n = self._llm_used[agent]
        if self._failure is not None:
            raise self._failure
        if n >= len(calls):
            raise self._fail(f"replay diverged: agent {agent!r} made LLM call #{n + 1}, but the "
                             f"recording has only {len(calls)} for it")
        self._llm_used[agent] = n + 1
        entry = calls[n]
        actual = self._ids.apply(request_to_json(request))
        diff = first_request_difference(entry["request"], actual)
        if diff is not None:
            raise self._fail(f"replay diverged at LLM call #{n + 1} of agent {agent!r}: {diff}",
                             expected=entry["request"], actual=actual)
        return entry

    def tool_result(self, call_id: str) -> dict[str, Any] | None:
        return self._tools.get(call_id)

    def progress_of(self, call_id: str) -> list[tuple[int, dict[str, Any]]]:
        return self._progress.get(call_id, [])

    async def _wait_for(self, ready: Callable[[], bool]) -> None:
        while self._failure is None and not ready():
            self._tick.clear()
            await self._tick.wait()
        if self._failure is not None:
            raise self._failure

    async def gate(self) -> None:
        """Wait until every event emitted so far has been checked (and its controls made)."""
        await self._wait_for(lambda: self._matched >= self._emitted())

    async def until_index(self, index: int) -> None:
        await self._wait_for(lambda: self._matched >= index)

    async def until_ready(self, call_id: str) -> None:
        """Wait until what happened before ``call_id`` ended in the recording has happened."""
        await self.until_index(self._ready_at.get(call_id, 0))

    async def wait_cancelled(self) -> None:
        """Block until cancelled (the recorded abort is on its way); else the stall check fails."""
        await asyncio.get_running_loop().create_future()

    def _emitted(self) -> int:
        return self.loop.statistics().events_emitted - self._base - self._passed_over

    # -- the driver ---------------------------------------------------------------------------

    def _check(self, event: Event) -> None:
        if self._legacy and event.kind is EventKind.MESSAGE_STATE:
            self._passed_over += 1
            return
        actual = event_to_dict(event)
        i = self._matched
        if i >= len(self._events):
            self._fail(f"replay diverged: event #{i} ({actual['kind']}) comes after the last "
                       "recorded event", index=i, actual=actual)
            return
        expected = self._events[i]
        self._ids.learn(actual, expected)
        mapped = self._ids.apply(actual)
        diff = first_difference(expected, mapped)
        if diff is not None:
            self._fail(f"replay diverged at event #{i} ({expected['kind']}, recorded seq "
                       f"{expected.get('seq')}): {diff}", index=i, expected=expected,
                       actual=mapped)
            return
        self._matched = i + 1
        self._seen.append(event)
        self._apply_due()
        self._tick.set()

    def _apply_due(self) -> None:
        while self._failure is None and self._actions and \
                int(self._actions[0]["after"]) <= self._matched:
            entry = self._actions.pop(0)
            if entry["type"] == "turn":
                if not entry.get("by_send"):  # the replayed send starts those itself
                    self._start(entry)
            else:
                self._control(entry)

    def _start(self, entry: Mapping[str, Any]) -> None:
        sid = str(entry["session_id"])
        history = messages_from_json(entry.get("history") or [])
        if history:
            self.loop.store.replace(sid, history)
        agent = self._agents.get(str(entry["agent"]))
        try:
            handle = self.loop.start_turn(str(entry["input"]), sid, agent=agent)
        except Exception as exc:
            self._fail(f"replay diverged: the recorded turn {entry['input']!r} could not start "
                       f"after event #{entry['after']}: {exc}")
            return
        self._handles.append(handle)
        self._own(self._wait_turn(handle))

    def _own(self, work: Coroutine[Any, Any, None]) -> None:
        self._idle.clear()
        waiter = asyncio.ensure_future(work)
        self._waiters.add(waiter)
        waiter.add_done_callback(self._waiter_done)

    def _waiter_done(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.discard(waiter)
        if not self._waiters:
            self._idle.set()

    async def _wait_turn(self, handle: TurnHandle) -> None:
        await handle

    def _send(self, entry: Mapping[str, Any]) -> bool:
        sid = str(entry["session_id"])
        history = messages_from_json(entry.get("history") or [])
        if history and not self.loop.busy(sid):
            self.loop.store.replace(sid, history)
        agent = self._agents.get(str(entry["agent"])) if entry.get("agent") else None
        try:
            self.loop.send(str(entry["text"]), sid, entry.get("policy"), agent=agent)
        except Exception as exc:
            self._fail(f"replay diverged: the recorded send after event #{entry['after']} "
                       f"failed in the replay: {exc}")
            return True
        self._sent_sessions[sid] = None
        self._own(self._wait_sent(sid))
        return True

    async def _wait_sent(self, sid: str) -> None:
        # Until the session's lane is empty: the turn the message got, and any follow-ups.
        result = await self.loop.wait_session(sid)
        if result is not None and all(result.turn_id != r.turn_id for r in self._sent_results):
            self._sent_results.append(result)

    def _control(self, entry: Mapping[str, Any]) -> None:
        """Make a recorded command again: decoded by the one table of verbs (``from_wire``),
        with the ids of messages and approvals mapped to the replay's own."""
        verb, sid = str(entry["verb"]), entry.get("session_id")
        if verb == "send":
            done = self._send(entry)
        else:
            fields = {k: v for k, v in entry.items() if k not in ("type", "after", "verb")}
            for key in ("message_id", "request_id"):
                if key in fields:
                    fields[key] = self._ids.replayed_id(str(fields[key])) or str(fields[key])
            try:
                command = from_wire(verb, fields)
            except (ValueError, TypeError) as exc:
                raise RecordingError(f"unknown recorded control {verb!r}: {exc}") from None
            done = bool(self.loop.submit(command))
        if not done:
            self._fail(f"replay diverged: the recorded {verb} after event #{entry['after']} "
                       f"changed nothing in the replay (session {sid!r})")

    async def run(self) -> ReplayResult:
        sub = self.loop.subscribe(None, buffer=len(self._events) + 4096)
        self._base = self.loop.statistics().events_emitted
        try:
            self._apply_due()
            await self._drive(sub)
        finally:
            sub.close()
            if self._failure is not None:
                for handle in self._handles:
                    handle.interrupt_hard()
            await self.loop.aclose()
        if self._failure is not None:
            raise self._failure
        return self._result()

    async def _drive(self, sub: Any) -> None:
        reader: asyncio.Future[Event] | None = None
        idle: asyncio.Future[Any] = asyncio.ensure_future(self._idle.wait())
        try:
            while self._failure is None:
                if reader is None:
                    reader = asyncio.ensure_future(sub.__anext__())
                done, _ = await asyncio.wait({reader, idle}, timeout=self._stall,
                                             return_when=asyncio.FIRST_COMPLETED)
                if reader in done:
                    event, reader = reader.result(), None
                    self._check(event)
                    for event in sub.drain_nowait():  # one wake-up for all that is buffered
                        if self._failure is not None:
                            break
                        self._check(event)
                elif idle in done:
                    for event in sub.drain_nowait():
                        self._check(event)
                    if self._failure is None and self._idle.is_set() \
                            and self._matched < len(self._events):
                        self._ended_early()
                    if self._idle.is_set():
                        return
                    idle = asyncio.ensure_future(self._idle.wait())
                else:
                    self._stalled()
        finally:
            for waiting in (reader, idle):
                if waiting is not None:
                    waiting.cancel()

    def _next_expected(self) -> str:
        if self._matched >= len(self._events):
            return "nothing more"
        event = self._events[self._matched]
        return f"event #{self._matched} ({event['kind']})"

    def _ended_early(self) -> None:
        self._fail(f"replay diverged: the replayed run ended after {self._matched} events; the "
                   f"recording goes on with {self._next_expected()}", index=self._matched,
                   expected=self._events[self._matched])

    def _stalled(self) -> None:
        self._fail(f"replay stalled: no event for {self._stall:g} s; the recording expected "
                   f"{self._next_expected()}", index=self._matched)

    def _result(self) -> ReplayResult:
        sids = [*(h.session_id for h in self._handles), *self._sent_sessions]
        sessions = {sid: self.loop.session_messages(sid) for sid in sids}
        for entry in self.recording.of_type("session"):
            sid = str(entry["session_id"])
            replayed = messages_to_json(sessions.get(sid, []))
            if self._ids.apply(replayed) != entry["messages"]:
                raise ReplayDivergence(f"replay diverged: session {sid!r} ended with different "
                                       "messages than recorded", expected=entry["messages"],
                                       actual=replayed)
        results = (*(h.result() for h in self._handles), *self._sent_results)
        return ReplayResult(tuple(results), tuple(self._seen), sessions)


async def replay(recording: str | Path | Recording, *, tools: Sequence[Tool] = (),
                 hooks: Sequence[Any] = (), stall_timeout: float = 10.0) -> ReplayResult:
    """Replay ``recording`` (a path or a loaded ``Recording``) with no model and no network.

    Tools answer with their recorded results unless real ones are given in ``tools`` (by name:
    their results must then match). ``hooks`` are registered on the replay's loop, so a test can
    check that a hook still behaves as it did. Raises ``ReplayDivergence`` at the first
    difference, ``RecordingError`` for a file that is not a recording.
    """
    rec = recording if isinstance(recording, Recording) else load_recording(recording)
    for entry in rec.of_type("unsupported"):
        raise RecordingError(f"this recording cannot be replayed: it holds a turn started by "
                             f"{entry.get('what')} (session {entry.get('session_id')!r}), which "
                             "continues from a checkpoint the recording does not have")
    return await Player(rec, tools=tools, hooks=hooks, stall_timeout=stall_timeout).run()
