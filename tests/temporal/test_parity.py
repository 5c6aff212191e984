"""The local engine's behaviour, on the local engine and on Temporal: steering mid-tool,
graceful and hard interrupts, cancel modes, busy policies, approvals."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from steerable import (
    Agent,
    Permissions,
    Reply,
    ScriptedProvider,
    SessionBusyError,
    SummaryPolicy,
    tool,
)
from steerable.errors import InvalidAnswerError, RequestError
from steerable.tools import ToolContext
from tests.temporal._drivers import Event, Make


class Gate:
    """A tool that says it started and waits to be let go (or cancelled)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.go = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.runs = 0

        @tool(name="gate")
        async def gate() -> str:
            """Wait for the test."""
            self.runs += 1
            self.started.set()
            try:
                await self.go.wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
            return "opened"

        self.tool = gate


def agent_of(script: list[Any], *tools: Any) -> tuple[Agent, ScriptedProvider]:
    provider = ScriptedProvider(script)
    return Agent(name="p", instructions="x", provider=provider, tools=list(tools)), provider


def kind(k: str) -> Any:
    return lambda e: e["kind"] == k


def end(e: Event) -> bool:
    return e["kind"] == "turn_end" and e["parent_turn_id"] is None


async def started(gate: Gate) -> None:
    await asyncio.wait_for(gate.started.wait(), 20)


async def test_steering_mid_tool_reaches_the_next_call(make: Make) -> None:
    gate = Gate()
    agent, provider = agent_of([Reply(tool_calls=[("gate", {})]), Reply(text="ok")], gate.tool)
    async with make(agent) as d:
        sent = await d.send("start", "s")
        await started(gate)
        steer = await d.steer("turn left", "s")
        assert steer and steer.state == "queued"
        gate.go.set()
        assert (await d.result("s", sent))[:2] == ("completed", "ok")
        events = await d.events("s", end)
        assert [e["text"] for e in events if e["kind"] == "steering_injected"] == ["turn left"]
        last = provider.requests[1].messages
        assert (last[-2].role, last[-1].content) == ("tool", "turn left")


async def test_graceful_interrupt_finishes_the_tool_and_summarises(make: Make) -> None:
    gate = Gate()
    agent, provider = agent_of([Reply(tool_calls=[("gate", {}), ("gate", {})]),
                                Reply(text="summary")], gate.tool)
    async with make(agent) as d:
        sent = await d.send("start", "s")
        await started(gate)
        assert await d.interrupt("s", "graceful")
        gate.go.set()
        assert (await d.result("s", sent))[:2] == ("interrupted", "summary")
        events = await d.events("s", end)
        skipped = [e["reason"] for e in events if e["kind"] == "tool_exec_skipped"]
        assert skipped == ["interrupted"] and gate.runs == 1
        assert provider.requests[-1].tool_choice.mode == "none"


async def test_hard_interrupt_cancels_the_tool_and_rolls_back(make: Make) -> None:
    gate = Gate()
    agent, _ = agent_of([Reply(tool_calls=[("gate", {})])], gate.tool)
    async with make(agent) as d:
        sent = await d.send("start", "s")
        await started(gate)
        assert await d.interrupt("s", "hard")
        assert (await d.result("s", sent))[0] == "aborted"
        await asyncio.wait_for(gate.cancelled.wait(), 20)  # the call itself was stopped
        assert await d.messages("s") == []


async def test_cancel_after_tools_stops_before_the_next_call(make: Make) -> None:
    gate = Gate()
    agent, provider = agent_of([Reply(tool_calls=[("gate", {})]), Reply(text="never")],
                               gate.tool)
    async with make(agent) as d:
        sent = await d.send("start", "s")
        await started(gate)
        assert await d.cancel("s", "after_tools")
        gate.go.set()
        assert (await d.result("s", sent))[0] == "cancelled"
        assert len(provider.requests) == 1


async def test_cancel_after_model_stops_before_its_tools(make: Make) -> None:
    gate = Gate()
    agent, provider = agent_of([Reply(tool_calls=[("gate", {})], delay=1.0)], gate.tool)
    async with make(agent) as d:
        sent = await d.send("start", "s")
        await d.events("s", kind("llm_request"))
        assert await d.cancel("s", "after_model")
        assert (await d.result("s", sent))[0] == "cancelled"
        assert gate.runs == 0 and len(provider.requests) == 1


async def test_cancel_immediate_aborts(make: Make) -> None:
    gate = Gate()
    agent, _ = agent_of([Reply(tool_calls=[("gate", {})])], gate.tool)
    async with make(agent) as d:
        sent = await d.send("start", "s")
        await started(gate)
        assert await d.cancel("s", "immediate")
        assert (await d.result("s", sent))[0] == "aborted"


@pytest.mark.parametrize(("policy", "first"), [("follow_up", "completed"),
                                              ("interrupt", "interrupted"),
                                              ("rollback", "aborted")])
async def test_busy_policies_run_the_message_as_the_next_turn(make: Make, policy: str,
                                                              first: str) -> None:
    gate = Gate()
    agent, provider = agent_of([Reply(tool_calls=[("gate", {})]), Reply(text="one"),
                                Reply(text="two")], gate.tool)
    if policy == "rollback":  # an aborted turn makes no summary call
        provider = ScriptedProvider([Reply(tool_calls=[("gate", {})]), Reply(text="two")])
        agent = Agent(name="p", instructions="x", provider=provider, tools=[gate.tool])
    async with make(agent) as d:
        sent = await d.send("start", "s")
        await started(gate)
        second = await d.send("next", "s", policy)
        assert second and second.message_id != sent.message_id
        gate.go.set()
        status, _, turn = await d.result("s", sent)
        assert status == first
        status2, text2, turn2 = await d.result("s", second)
        assert (status2, text2) == ("completed", "two") and turn2 != turn
        assert provider.requests[-1].messages[-1].content == "next"


async def test_reject_policy_refuses_a_busy_session(make: Make) -> None:
    gate = Gate()
    agent, _ = agent_of([Reply(tool_calls=[("gate", {})]), Reply(text="one")], gate.tool)
    async with make(agent) as d:
        sent = await d.send("start", "s")
        await started(gate)
        with pytest.raises(SessionBusyError):
            await d.send("next", "s", "reject")
        gate.go.set()
        assert (await d.result("s", sent))[0] == "completed"


@pytest.mark.parametrize("approved", [True, False])
async def test_an_approval_waits_for_its_answer(make: Make, approved: bool) -> None:
    ran: list[str] = []

    @tool
    async def write(path: str) -> str:
        """Write.

        Args:
            path: Where.
        """
        ran.append(path)
        return "written"

    agent, _ = agent_of([Reply(tool_calls=[("write", {"path": "a"})]), Reply(text="ok")], write)
    async with make(agent, permissions=Permissions([("ask", "write")]),
                    human_approval=True) as d:
        sent = await d.send("start", "s")
        asked = (await d.events("s", kind("approval_requested")))[-1]
        await asyncio.sleep(0.5)
        assert ran == []  # waiting, not denied by any timer
        assert await d.approve(asked["request_id"], approved)
        assert (await d.result("s", sent))[0] == "completed"
        events = await d.events("s", end)
        assert ran == (["a"] if approved else [])
        if not approved:
            assert [e["reason"] for e in events if e["kind"] == "tool_exec_skipped"] == ["denied"]


async def test_a_background_summary_calls_the_model_outside_a_turn(make: Make) -> None:
    provider = ScriptedProvider([Reply(text="a"), Reply(text="b"), Reply(text="SUMMARY")])
    agent = Agent(name="p", instructions="x", provider=provider,
                  summary=SummaryPolicy(at_tokens=1, keep_exchanges=1))
    async with make(agent) as d:
        for text, reply in (("one", "a"), ("two", "b")):
            assert (await d.result("s", await d.send(text, "s")))[:2] == ("completed", reply)
        await d.events("s", kind("session_summarize"))
        contents = [m.content for m in await d.messages("s")]
        assert any("SUMMARY" in c for c in contents) and contents[-1] == "b"


async def test_a_queued_follow_up_withdrawn_by_its_id_never_runs(make: Make) -> None:
    gate = Gate()
    agent, provider = agent_of([Reply(tool_calls=[("gate", {})]), Reply(text="one")],
                               gate.tool)
    async with make(agent) as d:
        sent = await d.send("start", "s")
        await started(gate)
        later = await d.follow_up("and then this", "s")
        assert later and later.state == "queued"
        assert await d.revoke(later.message_id)
        assert not await d.revoke(later.message_id)  # once only
        gate.go.set()
        assert (await d.result("s", sent))[:2] == ("completed", "one")
        events = await d.events("s", end)
        states = [e["state"] for e in events if e["kind"] == "message_state"
                  and e["message_id"] == later.message_id]
        assert states == ["queued", "revoked"] and len(provider.requests) == 2


async def test_a_tool_past_its_timeout_is_cancelled_and_the_model_reads_why(make: Make) -> None:
    cancelled = asyncio.Event()

    @tool(read_only=True, timeout=0.5)
    async def stuck() -> str:
        """Never ends."""
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    agent, provider = agent_of([Reply(tool_calls=[("stuck", {})]), Reply(text="gave up")],
                               stuck)
    async with make(agent) as d:
        sent = await d.send("start", "s")
        assert (await d.result("s", sent))[:2] == ("completed", "gave up")
        await asyncio.wait_for(cancelled.wait(), 20)
        assert "timed out" in provider.requests[1].messages[-1].content


async def test_a_hard_interrupt_cancels_the_model_call(make: Make) -> None:
    agent, provider = agent_of([Reply(text="too late", delay=30.0)])
    async with make(agent) as d:
        sent = await d.send("start", "s")
        await d.events("s", kind("llm_request"))
        began = asyncio.get_running_loop().time()
        assert await d.interrupt("s", "hard")
        assert (await d.result("s", sent))[0] == "aborted"
        assert asyncio.get_running_loop().time() - began < 10


async def test_a_tool_asks_and_reads_the_answer_checked_against_the_choices(make: Make) -> None:
    resumed: list[bool] = []

    @tool(read_only=True)
    async def pick(ctx: ToolContext) -> str:
        """Ask for a colour."""
        resumed.append(ctx.resumed)
        colour = await ctx.ask("Which colour?", choices=["red", "blue"])
        size = await ctx.ask("How many?", schema={"type": "integer", "minimum": 1})
        return f"picked {size} {colour}"

    agent, provider = agent_of([Reply(tool_calls=[("pick", {})]), Reply(text="ok")], pick)
    async with make(agent) as d:
        sent = await d.send("start", "s")
        first = (await d.events("s", kind("question_asked")))[-1]
        assert (first["question"], first["choices"]) == ("Which colour?", ["red", "blue"])
        assert await d.pending("s") == [first["request_id"]]
        with pytest.raises(InvalidAnswerError, match="not one of the choices"):
            await d.answer(first["request_id"], "green")  # refused; the question stays open
        await d.answer(first["request_id"], "blue")
        second = (await d.events("s", lambda e: e["kind"] == "question_asked"
                                 and e["request_id"] != first["request_id"]))[-1]
        with pytest.raises(InvalidAnswerError):
            await d.answer(second["request_id"], 0)
        await d.answer(second["request_id"], 3)
        with pytest.raises(RequestError):  # a second answer, or the request is gone
            await d.answer(second["request_id"], 4)
        assert (await d.result("s", sent))[:2] == ("completed", "ok")
        assert provider.requests[1].messages[-1].content == "picked 3 blue"
        events = await d.events("s", end)
        answered = [e["value"] for e in events if e["kind"] == "question_answered"]
        assert answered == ["blue", 3]
        # Locally the tool waited; on Temporal it ran again with the answers so far.
        assert resumed[0] is False and all(resumed[1:]) and len(resumed) <= 3
