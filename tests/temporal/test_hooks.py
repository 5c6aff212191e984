"""Loop hooks on the local engine and on Temporal alike: a hook that decides runs in the
workflow (its own model call an activity), a hook with side effects runs in an activity on
the worker; their decisions change the turn as they do locally."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from steerable import (
    Agent,
    EventKind,
    HookAction,
    HookDecision,
    Reply,
    ScriptedProvider,
    tool,
)
from steerable._hooks import (
    LLMRequestContext,
    LLMResponseContext,
    ToolCallContext,
    ToolResultContext,
)
from steerable.providers._base import ToolChoice
from steerable.temporal import WorkerHook, workflow_read
from tests.temporal._drivers import Event, Make
from tests.temporal._harness import events_until, running


def end(e: Event) -> bool:
    return e["kind"] == "turn_end" and e["parent_turn_id"] is None


class Decider:
    """Decides only (a workflow hook): classifies the request with a model call of its own,
    narrows the tools, refuses ``rm``; its sync method is called inline."""

    def __init__(self) -> None:
        self.kinds: dict[str, str] = {}

    async def before_llm(self, ctx: LLMRequestContext) -> HookDecision | None:
        if ctx.turn_id not in self.kinds:
            reply = await ctx.ask(ctx.request, "classify")
            self.kinds[ctx.turn_id] = reply.text
        return HookDecision(HookAction.MODIFY, tool_choice=ToolChoice(
            "auto", ("note", "rm"), reason=f"kind {self.kinds[ctx.turn_id]}"))

    def before_tool(self, ctx: ToolCallContext) -> HookDecision | None:
        if ctx.call.name == "rm":
            return HookDecision(HookAction.DENY_TOOL, reason="never rm")
        return None


class SideEffects:
    """Acts on the worker (an activity hook): logs each call before and after it runs, on
    its own thread as the loop runs sync hooks, rewrites arguments and results."""

    event_kinds = (EventKind.TURN_END,)

    def __init__(self) -> None:
        self.log: list[str] = []
        self.threads: set[int] = set()

    def before_tool(self, ctx: ToolCallContext) -> HookDecision | None:
        self.threads.add(threading.get_ident())
        self.log.append(f"before {ctx.call.name} {dict(ctx.call.arguments)}")
        return HookDecision(HookAction.MODIFY, arguments={"text": "rewritten"})

    def after_tool(self, ctx: ToolResultContext) -> HookDecision | None:
        self.log.append(f"after {ctx.result.content}")
        return HookDecision(HookAction.MODIFY, result=ctx.result.content + " (checked)")

    async def after_llm(self, ctx: LLMResponseContext) -> HookDecision | None:
        if ctx.response.tool_calls:
            return None
        return HookDecision(HookAction.MODIFY, text=ctx.response.text.upper())

    def on_event(self, event: Any) -> None:
        self.log.append(f"end {event.status.value}")


async def test_hooks_decide_in_the_workflow_and_act_on_the_worker(make: Make) -> None:
    noted: list[str] = []

    @tool
    async def note(text: str) -> str:
        """Note.

        Args:
            text: What.
        """
        noted.append(text)
        return f"noted {text}"

    @tool
    async def rm(path: str) -> str:
        """Remove.

        Args:
            path: What.
        """
        raise AssertionError("denied calls never run")

    provider = ScriptedProvider([
        Reply(text="change"),  # the decider's own call
        Reply(tool_calls=[("note", {"text": "hello"}), ("rm", {"path": "x"})]),
        Reply(text="done")])
    agent = Agent(name="h", instructions="x", provider=provider, tools=[note, rm])
    effects = SideEffects()
    hooks = [WorkerHook(Decider, priority=10, in_workflow=True), WorkerHook(effects)]
    async with make(agent, hooks=hooks) as d:
        sent = await d.send("go", "s")
        assert (await d.result("s", sent))[:2] == ("completed", "DONE")
        events = await d.events("s", end)
        requests = [e for e in events if e["kind"] == "llm_request"]
        assert [r.get("purpose") for r in requests][:1] == ["classify"]
        assert (requests[-1]["reason"], requests[-1]["may_call"]) == ("kind change", ["note", "rm"])
        skipped = [(e["tool_name"], e["reason"]) for e in events
                   if e["kind"] == "tool_exec_skipped"]
        assert skipped == [("rm", "denied")]
        assert noted == ["rewritten"]
        tool_results = [m.content for m in await d.messages("s") if m.role == "tool"]
        assert tool_results[0] == "noted rewritten (checked)"
        for _ in range(100):  # the observer is fed after the turn's end
            if effects.log[-1:] == ["end completed"]:
                break
            await asyncio.sleep(0.05)
        assert effects.log == ["before note {'text': 'hello'}", "after noted rewritten",
                               "end completed"]
        assert threading.get_ident() not in effects.threads  # sync hooks: off the loop


async def test_a_workflow_hook_reads_the_world_through_a_recorded_read(
        temporal_target: str, events_url: str, task_queue: str) -> None:
    calls: list[int] = []

    def read_counter(step: int) -> int:  # a different answer each time: the world moves
        calls.append(step)
        return len(calls) * step

    class Reader:
        async def before_llm(self, ctx: LLMRequestContext) -> HookDecision | None:
            seen = await workflow_read("counter")(10)
            return HookDecision(HookAction.MODIFY, tool_choice=ToolChoice(
                "auto", reason=f"read {seen}"))

    provider = ScriptedProvider([Reply(text="one"), Reply(text="two")])
    agent = Agent(name="r", instructions="x", provider=provider)
    sid = f"{task_queue}-reads"
    # The harness replays the session's history when done: a read made again would answer
    # 30, and the replay would decide differently; it reads the recorded 10 and 20 instead.
    async with running(agent, temporal_target, task_queue, events_url,
                       hooks=[WorkerHook(Reader, in_workflow=True)],
                       reads={"counter": read_counter}) as client:
        for text in ("a", "b"):
            await client.result(sid, (await client.send(text, sid)).message_id)
        events = await events_until(client, sid, _nth_end(2))
        assert [e["reason"] for e in events if e["kind"] == "llm_request"] == [
            "read 10", "read 20"]
    assert calls == [10, 10]


def _nth_end(n: int) -> Any:
    seen = 0

    def done(e: Event) -> bool:
        nonlocal seen
        seen += end(e)
        return seen == n

    return done
