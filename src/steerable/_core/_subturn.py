"""Sub-turns: child turns spawned inside a turn, run by the same engine as any turn.

One entry point, ``spawn``, serves the synchronous case (the caller awaits the child) and the
asynchronous one (the child's result reaches the parent later). A child is an ordinary
``TurnState`` with ``parent_turn_id`` set and an ephemeral session (nothing of its own history
is stored), registered in ``engine.turns`` and in its parent's ``children``; its task belongs to
the engine (``engine.subturn_tasks``) until it ends.

Delivery of an async child's result, and the races around it, are decided in one synchronous
step on the loop's thread when the child ends:
- the parent still runs (has not started finishing): the result waits in ``parent.tree.results``
  and
  is drained into the parent's context before its next LLM call (``SUBTURN_RESULT_DELIVERED``);
- the parent is finishing or gone: the result is an orphan (``SUBTURN_ORPHAN``), appended to the
  session. While a top-level turn runs on that session it is held on that turn and written right
  after the turn's own save, so a rollback or a compression cannot lose it.
``parent.control.finishing`` flips once, in the same step that takes the results left over, so
a result is delivered or orphaned, never both, never neither. A child's concurrency slot is
freed before its result is delivered, so a parent waiting for a slot can never wait on its own
delivery.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Generator
from typing import Any

from steerable._core._engine import Engine
from steerable._core._queues import follow_up, steer
from steerable._core._turn_state import Delivery, Interrupt, TurnState
from steerable._events import (
    SubturnEnd,
    SubturnOrphan,
    SubturnResultDelivered,
    SubturnSpawn,
    TurnStart,
    TurnStatus,
)
from steerable._ids import random_hex
from steerable._receipts import MessageReceipt
from steerable.errors import SubturnError, SubturnLimitError
from steerable.tools._base import Subturns as SpawnScope

__all__ = [
    "SubturnHandle",
    "Subturns",
    "close_results",
    "deliver_results",
    "spawn",
    "subturns_of",
    "wait_children",
]

CASCADE_WAIT = 1.0
"""How long an aborted parent waits for its aborted children to end (they normally take <1 ms;
a child stuck past this is left to the engine, which still owns its task)."""


def _new_turn_id() -> str:
    return f"turn_{random_hex(6)}"


def _check_limits(engine: Engine, parent: TurnState, turn_id: str) -> None:
    limits = engine.limits
    if parent.depth + 1 > limits.subturn_depth:
        raise SubturnLimitError(
            f"Sub-turn refused: nesting depth limit reached (Limits.subturn_depth="
            f"{limits.subturn_depth}); do the task yourself.", limit="subturn_depth")
    if len(parent.tree.children) >= limits.subturns_per_turn:
        raise SubturnLimitError(
            f"Sub-turn refused: {len(parent.tree.children)} sub-turns of this turn are already "
            f"running (Limits.subturns_per_turn={limits.subturns_per_turn}); wait for one to "
            "finish.", limit="subturns_per_turn")
    if not engine.slots.try_take(turn_id):
        raise SubturnLimitError(
            f"Sub-turn refused: {engine.limits.active_turns} turns are running "
            f"(Limits.active_turns={engine.limits.active_turns}).", limit="active_turns")


def spawn(engine: Engine, parent: TurnState, agent: Any, task: str, *, is_async: bool,
          deliver: bool) -> SubturnHandle:
    """Start ``agent`` on ``task`` as a child of ``parent``; raise ``SubturnError`` instead
    when it cannot start (nothing is started then)."""
    if parent.control.finishing or parent.control.interrupt is Interrupt.HARD:
        raise SubturnError("Sub-turn refused: the turn that asked for it is ending.")
    turn_id = _new_turn_id()
    _check_limits(engine, parent, turn_id)  # takes an active-turn slot when it passes
    dry = parent.dry_run or getattr(parent.agent, "dry_run", False) is True
    if dry and getattr(agent, "dry_run", True) is False:
        # A dry run stays dry all the way down: the child runs as a dry copy of its agent.
        agent = copy.copy(agent)
        agent.dry_run = True
    child = TurnState(turn_id=turn_id, session_id=parent.session_id, input=task,
                      agent=agent, parent_turn_id=parent.turn_id, depth=parent.depth + 1,
                      ephemeral=True, dry_run=dry, parent=parent)
    engine.turns[child.turn_id] = child
    parent.tree.children[child.turn_id] = child
    engine.emit(parent, SubturnSpawn, child_turn_id=child.turn_id, agent=agent.name,
                is_async=is_async)
    # The child's TURN_START now, as begin_turn does for a top-level turn: anything said to
    # the child through its handle comes after it.
    engine.emit(child, TurnStart, input=task, agent=agent.name)
    child_task = asyncio.get_running_loop().create_task(
        _run_child(engine, parent, child, is_async and deliver))
    child.control.task = child_task
    engine.subturn_tasks.add(child_task)
    child_task.add_done_callback(engine.subturn_tasks.discard)
    return SubturnHandle(engine, child, child_task)


async def _run_child(engine: Engine, parent: TurnState, child: TurnState, deliver: bool) -> Any:
    assert engine.runner is not None
    try:
        result = await engine.runner(child)
    finally:
        # Free the slots first (run_turn gave back the active-turn one): whatever happens to
        # the result, the parent may spawn again.
        engine.turns.pop(child.turn_id, None)
        parent.tree.children.pop(child.turn_id, None)
    engine.emit(parent, SubturnEnd, child_turn_id=child.turn_id, status=result.status,
                text=result.text)
    if deliver and result.status is not TurnStatus.ABORTED:
        await _deliver(engine, Delivery(parent, child.turn_id, child.agent.name, child.input,
                                        result.status, result.text))
    return result


async def _deliver(engine: Engine, item: Delivery) -> None:
    parent = item.parent
    if not parent.control.finishing:
        tree = parent.tree
        tree.results = (*tree.results, item)  # drained before the parent's next LLM call
        return
    await _orphan(engine, [item])


async def _orphan(engine: Engine, items: list[Delivery]) -> None:
    """Append results no turn can take any more to the session, now or after its running
    top-level turn has saved."""
    if not items:
        return
    sid = items[0].parent.session_id
    holder = engine.active.get(sid)
    if holder is not None and not holder.tree.orphans_closed:
        holder.tree.orphans = (*holder.tree.orphans, *items)
        return
    await _write_orphans(engine, items)


async def _write_orphans(engine: Engine, items: list[Delivery]) -> None:
    sid = items[0].parent.session_id
    messages = [item.message() for item in items]
    try:
        if engine.store.blocking:
            await asyncio.shield(asyncio.to_thread(engine.store.append, sid, messages, None))
        else:
            engine.store.append(sid, messages, None)
    except Exception as exc:
        for item in items:
            engine.error(item.parent, f"saving the result of sub-turn {item.child_turn_id} to "
                         f"session {sid!r} failed: {exc}", "store")
        return
    for item in items:
        engine.emit(item.parent, SubturnOrphan, child_turn_id=item.child_turn_id, text=item.text)


def deliver_results(engine: Engine, st: TurnState) -> None:
    """Checkpoint before an LLM call: add finished children's results to the context."""
    tree = st.tree
    while tree.results:
        item, tree.results = tree.results[0], tree.results[1:]
        st.new.append(item.message())
        engine.emit(st, SubturnResultDelivered, child_turn_id=item.child_turn_id, text=item.text)


async def wait_children(st: TurnState) -> None:
    """After a hard abort: wait until every aborted child has ended (its TURN_END emitted),
    so that the parent's own TURN_END and rollback come last."""
    tasks = [c.control.task for c in list(st.children.values()) if c.control.task is not None]
    if not tasks:
        return
    me = asyncio.current_task()
    deadline = asyncio.get_running_loop().time() + CASCADE_WAIT
    pending = {t for t in tasks if not t.done()}
    while pending:
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            return
        try:
            _, pending = await asyncio.wait(pending, timeout=left)
        except asyncio.CancelledError:
            # Aborted again while waiting: this is already the abort path, keep waiting.
            if me is not None:
                me.uncancel()


async def close_results(engine: Engine, st: TurnState) -> None:
    """At turn end (after the save): results that arrived too late become orphans; a top-level
    turn then writes the orphans it held back while it ran."""
    leftovers, st.results = list(st.results), ()
    if st.ephemeral:
        await _orphan(engine, leftovers)
        return
    held, st.orphans = [*st.orphans, *leftovers], ()
    st.orphans_closed = True
    if held:
        await _write_orphans(engine, held)


class SubturnHandle:
    """A running sub-turn. Await it for its ``TurnResult`` (awaiting never cancels it)."""

    def __init__(self, engine: Engine, st: TurnState, task: asyncio.Task[Any]) -> None:
        self._engine = engine
        self._state = st
        self._task = task

    @property
    def turn_id(self) -> str:
        return self._state.turn_id

    @property
    def agent_name(self) -> str:
        name: str = self._state.agent.name
        return name

    @property
    def task(self) -> asyncio.Task[Any]:
        """The child's task (it resolves to the child's ``TurnResult``)."""
        return self._task

    def done(self) -> bool:
        return self._task.done()

    def inject_steering(self, text: str) -> MessageReceipt:
        return steer(self._engine, self._state, text)

    def inject_follow_up(self, text: str) -> MessageReceipt:
        return follow_up(self._engine, self._state, text)

    def interrupt_graceful(self, hint: str | None = None) -> bool:
        return self._engine.interrupt_graceful(self._state, hint)

    def interrupt_hard(self) -> bool:
        return self._engine.interrupt_hard(self._state)

    def __await__(self) -> Generator[Any, None, Any]:
        return asyncio.shield(self._task).__await__()

    def __repr__(self) -> str:
        return f"<SubturnHandle {self.turn_id} agent={self.agent_name} done={self.done()}>"


class Subturns:
    """What a turn's tools spawn through (``ToolContext.run_subturn`` / ``spawn_subturn``)."""

    __slots__ = ("_engine", "_state")

    def __init__(self, engine: Engine, st: TurnState) -> None:
        self._engine = engine
        self._state = st

    def _agent(self, agent: object) -> Any:
        if isinstance(agent, str):
            known = getattr(self._state.agent, "subagents_by_name", {})
            found = known.get(agent)
            if found is None:
                valid = ", ".join(known) or "none (this agent has no subagents)"
                raise SubturnError(f"Unknown agent {agent!r}. Valid agents: {valid}.")
            return found
        if not (isinstance(getattr(agent, "name", None), str)
                and isinstance(getattr(agent, "description", None), str)):
            raise TypeError(f"a sub-turn needs an agent or an agent's name, got {agent!r}")
        return agent

    def spawn(self, agent: object, task: str, deliver: bool = True) -> SubturnHandle:
        if not isinstance(task, str) or not task.strip():
            raise SubturnError("a sub-turn needs a non-empty task text")
        return spawn(self._engine, self._state, self._agent(agent), task, is_async=True,
                     deliver=deliver)

    async def run(self, agent: object, task: str) -> Any:
        if not isinstance(task, str) or not task.strip():
            raise SubturnError("a sub-turn needs a non-empty task text")
        handle = spawn(self._engine, self._state, self._agent(agent), task, is_async=False,
                       deliver=False)
        try:
            # Shielded: the child ends itself on abort and returns a result, which must not
            # swallow this waiter's own cancellation.
            return await handle
        except asyncio.CancelledError:
            # The caller stopped waiting (a tool timeout, an abort): a sync child goes with it.
            handle.interrupt_hard()
            raise


def subturns_of(engine: Engine, st: TurnState) -> SpawnScope:
    """The turn's spawn scope, made once per turn (most turns never spawn)."""
    scope = st.subturns
    if scope is None:
        scope = st.subturns = Subturns(engine, st)
    return scope
