"""Randomized interleavings of messages and controls on one session, and their ledger.

``scenario(seed)`` drives one loop with a seeded mix of ``send`` (every busy policy),
``inject_steering``, ``inject_follow_up``, ``revoke_message``, ``edit_message``, graceful and
hard interrupts, the three cancel modes, ``resume``, and simulated crashes (the store as it is
at a random moment is handed to a new loop, which resumes the pending turn: what a ``kill -9``
leaves). The scripted model and tools yield to the event loop a random number of times, so the
actions land at every point of a turn. It then checks the promise of SPEC 10 and returns counts:

- every accepted message reaches exactly one terminal state, and its last event says which;
- ``DELIVERED``: the LLM request the event names carries the message's text;
- ``RETURNED``: exactly one turn result hands it back (``unprocessed`` / ``follow_up_ids``);
- ``REVOKED``: no request ever carried it;
- no text is in the session's history twice (nothing delivered twice);
- at a crash, every message acknowledged and not yet terminal is in the store.

Used by ``tests/test_message_fuzz.py`` (a seeded share) and ``bench/bench_messages.py`` (10,000).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from steerable import (
    Agent,
    AgentLoop,
    BusyPolicy,
    CancelMode,
    EventKind,
    InMemorySessionStore,
    Limits,
    MessageReceipt,
    MessageState,
    Reply,
    SessionBusyError,
    ToolContext,
    TurnHandle,
    TurnResult,
    tool,
)

POLICIES: tuple[BusyPolicy, ...] = ("steer", "follow_up", "interrupt", "rollback", "reject")
SID = "s"


@dataclass
class Tally:
    scenarios: int = 0
    actions: Counter[str] = field(default_factory=Counter)
    accepted: int = 0
    refused: int = 0
    states: Counter[str] = field(default_factory=Counter)
    crashes: int = 0
    lost: int = 0
    duplicated: int = 0
    wrong: list[str] = field(default_factory=list)
    """What broke the promise, one line each (empty when all held)."""

    def add(self, other: Tally) -> None:
        self.scenarios += other.scenarios
        self.actions.update(other.actions)
        self.accepted += other.accepted
        self.refused += other.refused
        self.states.update(other.states)
        self.crashes += other.crashes
        self.lost += other.lost
        self.duplicated += other.duplicated
        self.wrong += other.wrong


class _Loop(AgentLoop):
    """Keeps every turn's result: where a RETURNED message must be found. The turns are seen
    where they come in (the command seam): each answer that is a turn's handle. A result is
    read from its task as soon as the task is done (no callback a loop iteration later)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._turn_tasks: dict[asyncio.Task[TurnResult], None] = {}
        self.intercept_commands(self._keep)

    def _keep(self, command: Any, *, proceed: Any) -> Any:
        answer = proceed(command)
        if isinstance(answer, TurnHandle):
            # ``send`` answers with the handle its ``StartTurn`` made: one turn, kept once.
            self._turn_tasks[answer._task] = None
        return answer

    @property
    def results(self) -> list[TurnResult]:
        return [t.result() for t in self._turn_tasks
                if t.done() and not t.cancelled() and t.exception() is None]


async def _yield(rng: random.Random, most: int) -> None:
    for _ in range(rng.randint(0, most)):
        await asyncio.sleep(0)


def _agent(rng: random.Random) -> Agent:
    @tool
    async def work(n: int, ctx: ToolContext) -> str:
        """Work a little."""
        await _yield(rng, 4)
        return f"worked {n}"

    async def model(request: Any) -> Reply:
        await _yield(rng, 3)
        if rng.random() < 0.55:
            return Reply(tool_calls=[("work", {"n": i}) for i in range(rng.randint(1, 2))])
        return Reply(text="answer")

    from steerable import ScriptedProvider

    return Agent(name="fuzz", provider=ScriptedProvider([model] * 10_000), tools=[work],
                 max_iterations=rng.choice([2, 4, 8]))


class _Run:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.tally = Tally(scenarios=1)
        self.receipts: dict[str, Any] = {}
        """Every accepted message (receipt, TurnHandle or QueuedTurn) by id, of the live loop;
        None for one a crash left in the store (the new loop's events tell its fate)."""
        self.kinds: dict[str, str] = {}
        self.n = 0
        self.limits = Limits(steering_queue=self.rng.choice([2, 32]),
                             follow_up_queue=self.rng.choice([1, 32]))
        self.loop = self._new_loop(InMemorySessionStore())

    def _new_loop(self, store: InMemorySessionStore) -> _Loop:
        loop = _Loop(_agent(self.rng), store=store, limits=self.limits,
                     busy_policy=self.rng.choice(POLICIES))
        self.sub = loop.subscribe(buffer=1_000_000)
        return loop

    def _text(self) -> str:
        self.n += 1
        return f"m{self.seed}-{self.n}"

    def _keep(self, r: Any) -> None:
        if r is None or not getattr(r, "message_id", None):
            return
        if isinstance(r, MessageReceipt) and not r:
            self.tally.refused += 1
            return
        self.tally.accepted += 1
        self.receipts[r.message_id] = r
        self.kinds[r.message_id] = r.kind if isinstance(r, MessageReceipt) else "send"

    def _pick(self) -> str | None:
        live = [m.message_id for m in self.loop.queued_messages(SID)]
        return self.rng.choice(live) if live else None

    # -- actions ------------------------------------------------------------------------------

    async def act(self) -> None:
        kind = self.rng.choices(
            ["send", "steer", "follow_up", "revoke", "edit", "graceful", "hard", "cancel",
             "resume", "crash"], [6, 5, 3, 2, 2, 1, 1, 1, 1, 1])[0]
        self.tally.actions[kind] += 1
        loop = self.loop
        if kind == "send":
            try:
                self._keep(loop.send(self._text(), SID, self.rng.choice(POLICIES)))
            except SessionBusyError:
                self.tally.refused += 1
            except ValueError:  # CheckpointError: a cancelled turn waits for resume
                self.tally.refused += 1
        elif kind == "steer":
            self._keep(loop.inject_steering(self._text(), SID))
        elif kind == "follow_up":
            self._keep(loop.inject_follow_up(self._text(), SID))
        elif kind == "revoke":
            mid = self._pick()
            if mid is not None:
                loop.revoke_message(mid)
        elif kind == "edit":
            mid = self._pick()
            if mid is not None:
                loop.edit_message(mid, self._text())
        elif kind == "graceful":
            loop.interrupt_graceful(SID)
        elif kind == "hard":
            loop.interrupt_hard(SID)
        elif kind == "cancel":
            loop.cancel(SID, self.rng.choice(list(CancelMode)))
        elif kind == "resume":
            self._resume()
        else:
            await self._crash()

    def _resume(self) -> None:
        if self.loop.active_turn(SID) is None and self.loop.checkpoint(SID) is not None:
            try:
                handle = self.loop.resume(SID)
            except SessionBusyError:  # the checkpoint holds what its lane is about to run
                self.tally.actions["resume_refused"] += 1
                return
            if handle is not None:
                self.tally.actions["resumed"] += 1

    async def _crash(self, *, clean: bool = False) -> None:
        """What a kill -9 now leaves: the store. The old loop is abandoned (its events after
        this moment never happened); a new loop over a copy of the store resumes. ``clean``:
        the loop is closed first (a restart), and its events up to the end count."""
        if clean:
            await self.loop.aclose()
        old_store = self.loop.store
        assert isinstance(old_store, InMemorySessionStore)
        store = InMemorySessionStore()
        store._sessions = {k: list(v) for k, v in old_store._sessions.items()}
        store._checkpoints = dict(old_store._checkpoints)
        cp = store._checkpoints.get(SID)
        stored = set() if cp is None else {
            cp.input_id, *cp.steering_ids, *cp.follow_up_ids, *cp.carrying, *cp.held_ids}
        settled = self._check(final=False)
        carried: dict[str, Any] = {}
        for mid, r in self.receipts.items():
            if mid in settled or (r is not None and r.state is not MessageState.QUEUED):
                continue
            if mid in stored:
                carried[mid] = None
            elif r is not None and r.state is MessageState.QUEUED:
                self.tally.lost += 1
                self.tally.wrong.append(f"seed {self.seed}: {mid} acknowledged, not in the store")
        old = self.loop
        for turn in list(old._engine.active.values()):  # the process is gone: nothing more
            old._engine.interrupt_hard(turn)
        await old.aclose()
        self.tally.crashes += not clean
        self.receipts = carried
        self.loop = self._new_loop(store)
        self._resume()

    # -- the end and the checks ---------------------------------------------------------------

    async def close_now(self) -> None:
        """The loop closes with work under way (what waits is refused, what runs aborts; a
        cancelled turn's checkpoint keeps its messages), and a new one takes over the store."""
        self.tally.actions["closed_busy"] += 1
        await self._crash(clean=True)
        await self.finish()

    async def finish(self) -> None:
        loop = self.loop
        for _ in range(50):
            await loop.wait_session(SID)
            await loop.wait_idle()
            if loop.checkpoint(SID) is None:
                break
            self._resume()
        self._check(final=True)

    def _check(self, *, final: bool) -> set[str]:
        """Check the live loop's messages; the ids that reached a terminal state in it."""
        events = self.sub.drain_nowait()
        loop = self.loop
        requests = loop.agent.provider.requests  # type: ignore[attr-defined]
        seqs = [e.seq for e in events if e.kind is EventKind.LLM_REQUEST]
        by_seq = dict(zip(seqs, requests[len(requests) - len(seqs):], strict=True))
        terminal: dict[str, list[Any]] = {}
        for e in events:
            if e.kind is EventKind.MESSAGE_STATE and e.state is not MessageState.QUEUED:
                terminal.setdefault(e.message_id, []).append(e)
        returned = Counter(q.message_id for r in loop.results for q in r.unprocessed)
        returned.update(m for r in loop.results for m in r.follow_up_ids)
        carried = {m.content for req in by_seq.values() for m in req.messages}
        for mid, r in self.receipts.items():
            ends = terminal.get(mid, [])
            if not final and not ends:
                continue  # still queued at the crash: checked in the store above
            state = ends[-1].state.value if r is None and ends else None if r is None \
                else r.state.value
            if len(ends) != 1 or state != ends[0].state.value:
                if not ends:
                    self.tally.lost += 1
                else:
                    self.tally.duplicated += len(ends) > 1
                self.tally.wrong.append(f"seed {self.seed}: {mid} {state} ends {[e.state.value for e in ends]}")
                continue
            end = ends[0]
            self.tally.states[end.state.value] += 1
            if end.state is MessageState.DELIVERED:
                request = by_seq.get(end.request_seq)
                if request is None or end.text not in {m.content for m in request.messages}:
                    self.tally.wrong.append(f"seed {self.seed}: {mid} not in its request")
            elif end.state is MessageState.RETURNED and self.kinds.get(mid) != "send" \
                    and returned[mid] != 1:
                self.tally.lost += returned[mid] == 0
                self.tally.wrong.append(f"seed {self.seed}: {mid} returned {returned[mid]}x")
            elif end.state is MessageState.REVOKED and end.text in carried:
                self.tally.wrong.append(f"seed {self.seed}: revoked {mid} reached the model")
        if final:
            history = Counter(m.content for m in loop.session_messages(SID) if m.role == "user")
            twice = [t for t, n in history.items() if n > 1]
            self.tally.duplicated += len(twice)
            self.tally.wrong += [f"seed {self.seed}: {t!r} twice in history" for t in twice]
        return set(terminal)


async def scenario(seed: int) -> Tally:
    run = _Run(seed)
    try:
        for _ in range(run.rng.randint(4, 16)):
            await run.act()
            await _yield(run.rng, 6)
        if run.rng.random() < 0.15:
            await run.close_now()
        else:
            await run.finish()
    finally:
        await run.loop.aclose()
    return run.tally


async def many(seeds: range) -> Tally:
    total = Tally()
    for seed in seeds:
        total.add(await scenario(seed))
    return total
