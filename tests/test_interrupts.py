"""Graceful interrupt and hard abort, including the races between them."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

from steerable import EventKind, Reply, ToolContext, TurnHandle, TurnStatus, tool
from tests.conftest import (
    assert_history_consistent,
    assert_one_terminal_per_call,
    held_tool,
    kinds,
    make_loop,
    of,
    wait_for,
)

K = EventKind


def gated_tools() -> tuple[list, asyncio.Event, list[str]]:
    """A read-only `wait` tool blocked on a gate, and a mutating `mark` tool that logs."""
    gate = asyncio.Event()
    ran: list[str] = []

    @tool(read_only=True)
    async def wait(name: str) -> str:
        """Wait for the gate."""
        ran.append(name)
        await gate.wait()
        return f"{name} done"

    @tool
    async def mark(name: str) -> str:
        """Mark."""
        ran.append(name)
        return f"{name} marked"

    return [wait, mark], gate, ran


async def test_graceful_skips_unstarted_tools_and_summarises_without_tools() -> None:
    tools, gate, ran = gated_tools()
    script = [Reply(tool_calls=[("mark", {"name": "m0"})]),
              Reply(tool_calls=[("wait", {"name": "w"}), ("mark", {"name": "m1"}), ("mark", {"name": "m2"})]),
              Reply(text="Summary: waited once.")]
    loop, provider, sub = make_loop(script, tools=tools)
    handle = loop.start_turn("go", session_id="s")
    seen: list = []
    await wait_for(sub, K.TOOL_EXEC_START, seen=seen)
    assert loop.interrupt_graceful("s", hint="Wrap up now.") is True
    assert loop.interrupt_graceful("s") is False  # repeated call changes nothing
    gate.set()
    result = await handle
    assert result.status is TurnStatus.INTERRUPTED
    assert result.text == "Summary: waited once."
    assert ran == ["m0", "w"]  # the running tool finished, the others never started
    events = seen + sub.drain_nowait()
    skipped = of(events, K.TOOL_EXEC_SKIPPED)
    assert [(s.tool_name, s.reason) for s in skipped] == [("mark", "interrupted"), ("mark", "interrupted")]
    last = provider.requests[-1]
    # the summary call is told which tools really ran (so it claims none that did not)
    assert last.tool_choice.mode == "none" and last.tools and last.messages[-1].content == (
        "Wrap up now.\n(Tools that ran in this turn: mark, wait; no other tool ran.)")
    saved = loop.session_messages("s")
    assert all(not m.content.startswith("Wrap up now.") for m in saved)  # the hint is not saved
    assert saved[-1].content == "Summary: waited once."
    assert_history_consistent(saved)
    assert_one_terminal_per_call(events)


async def test_tool_calls_in_the_summary_of_a_graceful_interrupt_are_closed_unrun() -> None:
    """The summary call offers no tools, but a model may call one anyway: the calls get a
    skip (``interrupted``) and the saved history stays whole."""
    tools, gate, ran = gated_tools()
    script = [Reply(tool_calls=[("wait", {"name": "w"})]),
              Reply(text="Summary.", tool_calls=[("mark", {"name": "late"})])]
    loop, _, sub = make_loop(script, tools=tools)
    handle = loop.start_turn("go", session_id="s")
    seen: list = []
    await wait_for(sub, K.TOOL_EXEC_START, seen=seen)
    assert loop.interrupt_graceful("s") is True
    gate.set()
    result = await handle
    assert result.status is TurnStatus.INTERRUPTED and result.text == "Summary."
    assert ran == ["w"]
    events = seen + sub.drain_nowait()
    assert [(e.tool_name, e.reason) for e in of(events, K.TOOL_EXEC_SKIPPED)] == [
        ("mark", "interrupted")]
    saved = loop.session_messages("s")
    assert_history_consistent(saved)
    assert [m.role for m in saved[-2:]] == ["assistant", "tool"]
    assert_one_terminal_per_call(events)
    await loop.aclose()


async def test_graceful_during_llm_call_with_tool_reply_skips_them_all() -> None:
    loop, provider, sub = make_loop(
        [Reply(tool_calls=[("mark", {"name": "a"})], delay=0.2), Reply(text="stopped")],
        tools=gated_tools()[0])
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.LLM_REQUEST)
    assert loop.interrupt_graceful("s")
    result = await handle
    assert result.status is TurnStatus.INTERRUPTED and result.iterations == 2
    assert [s.reason for s in of(sub.drain_nowait(), K.TOOL_EXEC_SKIPPED)] == ["interrupted"]
    # The hint the model reads says no tool ran (the declared call was skipped, never run).
    assert provider.requests[-1].messages[-1].content == \
        "The user interrupted you. Stop here: do not call tools. In a few sentences, say what " \
        "you did, what you found, and what is left undone.\n(No tool ran in this turn.)"


async def test_graceful_before_first_call_makes_that_call_the_summary() -> None:
    loop, provider, _ = make_loop([Reply(text="nothing done")], tools=gated_tools()[0])
    handle = loop.start_turn("go", session_id="s")
    assert loop.interrupt_graceful("s")
    result = await handle
    assert result.status is TurnStatus.INTERRUPTED and result.iterations == 1
    assert provider.requests[0].tool_choice.mode == "none" and provider.requests[0].tools


async def test_graceful_during_the_final_call_is_a_noop() -> None:
    loop, _, sub = make_loop([Reply(text="summary", delay=0.1)], max_iterations=1)
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.LLM_REQUEST)
    assert loop.interrupt_graceful("s") is False
    assert (await handle).status is TurnStatus.COMPLETED


async def test_graceful_does_not_save_follow_ups_as_runnable() -> None:
    loop, _, sub = make_loop([Reply(text="x", delay=0.1), Reply(text="summary")])
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.LLM_REQUEST)
    assert loop.inject_follow_up("later", session_id="s")
    assert loop.interrupt_graceful("s")
    result = await handle
    assert result.follow_ups == ()
    assert [(q.kind, q.text) for q in result.unprocessed] == [("follow_up", "later")]


async def test_hard_abort_during_llm_stream_rolls_back_within_50ms() -> None:
    loop, _, sub = make_loop([Reply(text="first"), Reply(text="never", delay=10)])
    await loop.run_turn("one", session_id="s")
    before = loop.session_messages("s")
    handle = loop.start_turn("two", session_id="s")
    await wait_for(sub, K.LLM_REQUEST)
    await wait_for(sub, K.LLM_REQUEST)
    t0 = time.perf_counter()
    assert loop.interrupt_hard("s") is True
    result = await handle
    elapsed = time.perf_counter() - t0
    assert elapsed < 0.05
    assert result.status is TurnStatus.ABORTED and result.text == ""
    assert loop.session_messages("s") == before  # nothing of the aborted turn persisted
    events = sub.drain_nowait()
    assert events[-1].kind is K.TURN_END and events[-1].status is TurnStatus.ABORTED
    assert of(events, K.INTERRUPT_RECEIVED)[0].mode == "hard"
    assert loop.interrupt_hard("s") is False  # nothing left to abort
    assert loop.active_turn("s") is None


async def test_hard_abort_during_parallel_group_closes_every_call() -> None:
    tools, gate, ran = gated_tools()
    calls = [("wait", {"name": "a"}), ("wait", {"name": "b"}), ("mark", {"name": "m"}), ("wait", {"name": "c"})]
    loop, _, sub = make_loop([Reply(tool_calls=calls)], tools=tools)
    handle = loop.start_turn("go", session_id="s")
    seen: list = []
    await wait_for(sub, K.TOOL_EXEC_START, seen=seen)
    await wait_for(sub, K.TOOL_EXEC_START, seen=seen)
    assert loop.interrupt_hard("s")
    result = await handle
    assert result.status is TurnStatus.ABORTED
    assert result.tools_run == ("wait", "wait")  # the side effects that may have happened
    events = seen + sub.drain_nowait()
    (abort,) = of(events, K.INTERRUPT_RECEIVED)
    assert (abort.mode, abort.hint) == ("hard", None)
    ends = of(events, K.TOOL_EXEC_END)
    assert sorted(e.call_id for e in ends) == ["call_1", "call_2"] and all(e.is_error for e in ends)
    # The turn unwinds in the same loop pass as its tools see their cancel: it closes the
    # running calls itself, as a single call's abort does.
    assert {e.content for e in ends} == {"Tool 'wait' was cancelled: the turn was aborted."}
    assert [(s.tool_name, s.reason, s.detail) for s in of(events, K.TOOL_EXEC_SKIPPED)] == [
        ("mark", "aborted", "the turn was aborted"), ("wait", "aborted", "the turn was aborted")]
    assert_one_terminal_per_call(events)
    assert loop.session_messages("s") == []
    assert ran == ["a", "b"]


async def test_hard_abort_with_a_tool_that_ignores_cancellation() -> None:
    stubborn_done = asyncio.Event()

    @tool
    async def stubborn() -> str:
        """Ignores cancellation once."""
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            await asyncio.sleep(0.2)  # keeps going as if nothing happened
            stubborn_done.set()
        return "finished anyway"

    loop, _, sub = make_loop([Reply(tool_calls=[("stubborn", {})])], tools=[stubborn])
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    t0 = time.perf_counter()
    loop.interrupt_hard("s")
    result = await handle
    assert time.perf_counter() - t0 < 0.05
    assert result.status is TurnStatus.ABORTED
    assert not stubborn_done.is_set()
    await loop.aclose()  # the loop still owns the stubborn task and ends it


async def test_hard_abort_with_a_sync_tool_blocked_in_a_thread() -> None:
    release = threading.Event()

    @tool
    def blocking() -> str:
        """Blocks its thread."""
        release.wait(5)
        return "late"

    loop, _, sub = make_loop([Reply(tool_calls=[("blocking", {})])], tools=[blocking])
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    t0 = time.perf_counter()
    loop.interrupt_hard("s")
    result = await handle
    assert time.perf_counter() - t0 < 0.05 and result.status is TurnStatus.ABORTED
    release.set()


async def test_graceful_then_hard_hard_wins() -> None:
    tools, gate, _ = gated_tools()
    loop, _, sub = make_loop([Reply(tool_calls=[("wait", {"name": "a"})]), Reply(text="summary")], tools=tools)
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    assert loop.interrupt_graceful("s")
    assert loop.interrupt_hard("s")
    assert loop.interrupt_graceful("s") is False
    result = await handle
    assert result.status is TurnStatus.ABORTED


async def test_hard_abort_right_after_start_still_emits_start_and_end() -> None:
    loop, provider, sub = make_loop([Reply(text="never")])
    handle = loop.start_turn("go", session_id="s")
    assert loop.interrupt_hard("s")
    result = await handle
    assert result.status is TurnStatus.ABORTED
    assert kinds(sub.drain_nowait()) == [K.TURN_START, K.INTERRUPT_RECEIVED, K.TURN_END]
    assert provider.requests == []


async def test_interrupt_from_another_thread() -> None:
    loop, _, sub = make_loop([Reply(text="never", delay=10)])
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.LLM_REQUEST)
    answer: list[bool] = []
    thread = threading.Thread(target=lambda: answer.append(loop.interrupt_hard("s")))
    thread.start()
    result = await handle
    await asyncio.to_thread(thread.join)
    assert answer == [True] and result.status is TurnStatus.ABORTED


async def test_steering_from_another_thread_reaches_the_next_call() -> None:
    tools, gate, _ = gated_tools()
    loop, provider, sub = make_loop([Reply(tool_calls=[("wait", {"name": "a"})]), Reply(text="ok")], tools=tools)
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    ok = await asyncio.to_thread(loop.inject_steering, "from a thread", "s")
    gate.set()
    await handle
    assert ok and provider.requests[1].messages[-1].content == "from a thread"


async def test_interrupts_with_nothing_running_return_false() -> None:
    loop, _, _ = make_loop([Reply(text="done")])
    assert loop.interrupt_hard() is False and loop.interrupt_graceful() is False
    handle = loop.start_turn("go", session_id="s")
    await handle
    assert loop.interrupt_hard("s") is False  # cancel after completion
    assert handle.interrupt_hard() is False and handle.interrupt_graceful() is False
    assert not loop.inject_steering("too late", "s")


async def test_cancelling_run_turn_caller_aborts_the_turn() -> None:
    loop, _, sub = make_loop([Reply(text="never", delay=10)])
    task = asyncio.create_task(loop.run_turn("go", session_id="s"))
    await wait_for(sub, K.LLM_REQUEST)
    task.cancel()
    end = await wait_for(sub, K.TURN_END)
    assert end.status is TurnStatus.ABORTED
    assert task.cancelled()


async def test_awaiting_a_handle_with_timeout_does_not_cancel_the_turn() -> None:
    loop, _, _ = make_loop([Reply(text="slow", delay=0.1)])
    handle = loop.start_turn("go", session_id="s")
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.ensure_future(_await(handle)), 0.01)
    result = await handle
    assert result.status is TurnStatus.COMPLETED


async def _await(handle):
    return await handle


async def test_interrupts_while_the_turn_is_saving_change_nothing() -> None:
    """A turn whose result is being written can no longer be interrupted: the save completes
    and the result stands (never half saved, never aborted after the fact)."""
    from steerable import Agent, AgentLoop, InMemorySessionStore, ScriptedProvider

    saving, release = threading.Event(), threading.Event()

    class SlowStore(InMemorySessionStore):
        blocking = True  # called from a worker thread, like a file store

        def append(self, session_id, messages, turn):
            saving.set()
            release.wait(5)
            super().append(session_id, messages, turn)

    loop = AgentLoop(Agent(provider=ScriptedProvider([Reply(text="done")])), store=SlowStore())
    handle = loop.start_turn("go", session_id="s")
    await asyncio.to_thread(saving.wait, 5)
    assert loop.interrupt_hard("s") is False
    assert loop.interrupt_graceful("s") is False
    assert not loop.inject_steering("too late", "s")
    release.set()
    result = await handle
    assert result.status is TurnStatus.COMPLETED and result.text == "done"
    assert [m.content for m in loop.session_messages("s")] == ["go", "done"]


async def test_hard_abort_cancels_a_running_tool_before_the_turn_ends() -> None:
    seen: list[tuple[bool, bool]] = []  # (turn done?, ctx.cancelled set?) when the tool is cancelled
    holder: dict[str, object] = {}

    @tool
    async def hang(ctx: ToolContext) -> str:
        """Sleeps until cancelled."""
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            handle = holder["handle"]
            assert isinstance(handle, TurnHandle)
            seen.append((handle.done(), ctx.cancelled.is_set()))
            raise
        return "never"

    loop, _, sub = make_loop([Reply(tool_calls=[("hang", {})])], tools=[hang])
    handle = loop.start_turn("go", session_id="s")
    holder["handle"] = handle
    await wait_for(sub, K.TOOL_EXEC_START)
    loop.interrupt_hard("s")
    result = await handle
    assert result.status is TurnStatus.ABORTED
    # The tool got its cancel in the same loop cycle as the turn, not after the turn ended.
    assert seen == [(False, True)]
    assert [e.kind for e in sub.drain_nowait()][-1] is K.TURN_END


async def _abort_in_a_tool(intercepted: bool) -> tuple[list[Any], list[str], list[bool]]:
    """A hard abort while a tool runs, with or without an interceptor on the commands: the
    events (with their states), the session afterwards, and what later controls answered."""
    hold, _gate = held_tool()
    loop, _, sub = make_loop([Reply(text="before"), Reply(tool_calls=[("hold", {})])],
                             tools=[hold])
    await loop.run_turn("first", session_id="s")
    if intercepted:
        loop.intercept_commands(lambda command, *, proceed: proceed(command))
    handle = loop.start_turn("go", session_id="s")
    seen: list[Any] = []
    await wait_for(sub, K.TOOL_EXEC_START, seen=seen)
    answers = [loop.interrupt_hard("s"), loop.interrupt_hard("s"), loop.interrupt_graceful("s")]
    result = await handle
    assert result.status is TurnStatus.ABORTED and result.tools_run == ("hold",)
    events = [(e.kind, getattr(e, "new", None)) for e in [*seen, *sub.drain_nowait()]
              if e.kind is not K.LLM_DELTA]
    return events, [m.content for m in loop.session_messages("s")], answers


async def test_the_dedicated_abort_path_does_what_the_verb_table_does() -> None:
    # No interceptor: AgentLoop.interrupt_hard cancels the tool first and the rest follows a
    # callback later; with one, the command goes through the verb table. Same outcome.
    direct, intercepted = await _abort_in_a_tool(False), await _abort_in_a_tool(True)
    assert direct == intercepted
    events, history, answers = direct
    assert answers == [True, False, False]  # refused from the first call on
    assert history == ["first", "before"]  # rolled back
    order = [kind for kind, _ in events]
    tail = order[order.index(K.TOOL_EXEC_START):]
    assert [k for k in tail if k is not K.STATE_CHANGED and k is not K.MESSAGE_STATE] == [
        K.TOOL_EXEC_START, K.INTERRUPT_RECEIVED, K.TOOL_EXEC_END, K.TURN_END]


async def test_a_summary_that_echoes_the_hint_is_replaced_by_what_ran() -> None:
    tools, gate, ran = gated_tools()
    echo = ("The user interrupted you. Stop here: do not call tools. In a few sentences, say "
            "what you did, what you found, and what is left undone.")
    loop, _, sub = make_loop([Reply(tool_calls=[("wait", {"name": "w"})]), Reply(text=echo)],
                             tools=tools)
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    assert loop.interrupt_graceful("s")
    gate.set()
    result = await handle
    assert result.status is TurnStatus.INTERRUPTED
    assert result.text == "Interrupted after 1 tool call (wait)."
    assert loop.session_messages("s")[-1].content == result.text  # the echo is never saved


async def test_an_empty_or_echoed_custom_hint_falls_back_but_a_real_summary_stays() -> None:
    from steerable._core._interrupt_text import fallback_summary, is_echo

    hint = "Wrap up now and list what is left."
    assert is_echo("", hint) and is_echo("wrap up now, and list what is left!", hint)
    assert is_echo("OK. Wrap up now and list what is left. Done", hint)
    assert not is_echo("I read notes.txt; it says the sync moved. Left: nothing.", hint)
    assert fallback_summary([]) == "Interrupted before any tool ran."
    assert fallback_summary(["read", "read", "bash"]) == \
        "Interrupted after 3 tool calls (read, read, bash)."
    loop, _, _ = make_loop([Reply(text="")])
    handle = loop.start_turn("go", session_id="s")
    assert loop.interrupt_graceful("s", hint=hint)
    assert (await handle).text == "Interrupted before any tool ran."


class _Chatty:
    """A provider that writes a long reply slowly, and notes when its stream was closed."""

    def __init__(self) -> None:
        self.sent = 0
        self.closed = False
        self.requests = 0

    async def stream(self, request):
        from steerable.providers._base import StreamEnd, TextDelta

        self.requests += 1
        try:
            for _ in range(400):
                self.sent += 1
                yield TextDelta("word ")
                await asyncio.sleep(0.01)
            yield StreamEnd(finish_reason="stop")
        finally:
            self.closed = True

    async def aclose(self) -> None:
        pass


async def test_graceful_while_text_streams_stops_the_reply_at_once() -> None:
    from steerable import Agent, AgentLoop

    provider = _Chatty()
    loop = AgentLoop(Agent(provider=provider))
    sub = loop.subscribe()
    handle = loop.start_turn("talk", session_id="s")
    await wait_for(sub, K.LLM_DELTA)
    assert loop.interrupt_graceful("s")
    result = await handle
    assert result.status is TurnStatus.INTERRUPTED
    assert provider.closed and provider.sent < 400 and provider.requests == 1  # no summary call
    assert result.text.startswith("word word") and result.text.endswith("[…interrupted]")
    assert loop.session_messages("s")[-1].content == result.text
    await loop.aclose()
