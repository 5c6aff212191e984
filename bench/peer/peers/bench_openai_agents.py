"""Peer benchmark: OpenAI Agents SDK (package `openai-agents`, import `agents`).

Fake model: a minimal `agents.models.interface.Model` subclass that returns
prepared responses in-process (no HTTP, no API key). Tracing is disabled
(`set_tracing_disabled(True)`), since with no API key the default exporter only
logs and drops spans; see README for the tracing-on variant.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import contextlib

import harness as C
import steering as S
from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

PEER = "openai-agents"
TRACING = os.environ.get("PEERBENCH_OA_TRACING", "0") == "1"
set_tracing_disabled(not TRACING)
RUN_CONFIG = RunConfig(tracing_disabled=not TRACING)


# ------------------------------------------------------------------ fake model
def text(t: str):
    return ResponseOutputMessage(
        id="msg",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(text=t, type="output_text", annotations=[], logprobs=[])],
    )


def call(name: str, args: dict, call_id: str):
    return ResponseFunctionToolCall(
        id=call_id, call_id=call_id, type="function_call", name=name, arguments=json.dumps(args)
    )


Script = Callable[[Any], Awaitable[list]]


class FakeModel(Model):
    """Returns whatever `script(input)` returns; no network, no token counting."""

    def __init__(self, script: Script):
        self.script = script

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema,
                           handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                           prompt=None, **kw):
        return ModelResponse(output=await self.script(input), usage=Usage(), response_id=None)

    async def stream_response(self, system_instructions, input, model_settings, tools, output_schema,
                              handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                              prompt=None, **kw):
        output = await self.script(input)
        resp = Response(
            id="resp", created_at=0, model="fake", object="response", output=output,
            tool_choice="auto", tools=[], top_p=None, parallel_tool_calls=True, status="completed",
        )
        yield ResponseCompletedEvent(type="response.completed", response=resp, sequence_number=0)


def _last_tool_output(input) -> str | None:
    if isinstance(input, str) or not input:
        return None
    last = input[-1]
    get = last.get if isinstance(last, dict) else (lambda k, d=None: getattr(last, k, d))
    if get("type") == "function_call_output":
        return get("output")
    return None


# ------------------------------------------------------------------ tools
@function_tool
async def step(i: int) -> int:
    """Instant tool: returns i + 1."""
    return i + 1


@function_tool
async def slow(i: int) -> str:
    """Sleeps 0.2 s."""
    await asyncio.sleep(C.TOOL_SLEEP_S)
    return f"slow {i}"


# ------------------------------------------------------------------ scenarios
def _overhead_runner():
    def script_for(n: int) -> Script:
        async def script(input):
            out = _last_tool_output(input)
            k = 0 if out is None else int(out)
            if k >= n:
                return [text("done")]
            return [call("step", {"i": k}, f"c{k}")]
        return script

    agents_by_n: dict[int, Agent] = {}

    async def one_run(n: int):
        agent = agents_by_n.get(n)
        if agent is None:
            agent = agents_by_n[n] = Agent(name="a", instructions="x", model=FakeModel(script_for(n)), tools=[step])
        res = await Runner.run(agent, "go", max_turns=n + 10, run_config=RUN_CONFIG)
        assert res.final_output == "done", res.final_output

    return one_run


async def s_overhead() -> dict:
    out = await C.run_overhead(_overhead_runner())
    out["tracing"] = TRACING
    return out


async def s_scaling() -> dict:
    out = await C.run_scaling(_overhead_runner())
    out["tracing"] = TRACING
    return out


async def s_parallel() -> dict:
    async def script(input):
        if _last_tool_output(input) is None:
            return [call("slow", {"i": i}, f"p{i}") for i in range(C.N_PARALLEL_TOOLS)]
        return [text("done")]

    agent = Agent(name="a", instructions="x", model=FakeModel(script), tools=[slow])

    async def one_run():
        res = await Runner.run(agent, "go", run_config=RUN_CONFIG)
        assert res.final_output == "done"

    return await C.run_parallel(one_run)


def _hang_agent(probe: C.ToolProbe) -> Agent:
    @function_tool
    async def hang() -> str:
        """Sleeps 10 s."""
        return await probe.hang()

    async def script(input):
        if _last_tool_output(input) is None:
            return [call("hang", {}, "h0")]
        return [text("done")]

    return Agent(name="a", instructions="x", model=FakeModel(script), tools=[hang])


async def s_cancel() -> dict:
    """Documented mechanism: Runner.run_streamed(...).cancel() (mode='immediate')."""

    async def one_cancel() -> dict:
        probe = C.ToolProbe()
        result = Runner.run_streamed(_hang_agent(probe), "go", run_config=RUN_CONFIG)

        async def consume():
            async for _ in result.stream_events():
                pass

        consumer = asyncio.create_task(consume())
        await asyncio.sleep(C.CANCEL_AFTER_S)
        assert probe.started_at is not None, "tool did not start within 0.3 s"
        t0 = C.now()
        result.cancel()
        await consumer  # the user-facing awaitable: stream_events() ends
        t1 = C.now()
        # also wait for the background run loop task to really finish
        if result.run_loop_task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(result.run_loop_task), 15)
        t2 = C.now()
        return {
            "latency_s": t1 - t0,
            "tool_cancel_s": None if probe.cancelled_at is None else probe.cancelled_at - t0,
            "run_loop_done_ms": round((t2 - t0) * 1000, 2),
        }

    out = await C.run_cancel(one_cancel)
    out["mechanism"] = "Runner.run_streamed(...).cancel(); time until stream_events() loop ends"

    # secondary: cancelling the asyncio task running Runner.run(...)
    async def one_task_cancel() -> dict:
        probe = C.ToolProbe()
        return await C.cancel_task_once(probe, Runner.run(_hang_agent(probe), "go", run_config=RUN_CONFIG))

    sec = await C.run_cancel(one_task_cancel)
    out["task_cancel_latency_ms"] = sec["cancel_latency_ms"]
    out["task_cancel_tool_saw_cancel_ms"] = sec["tool_saw_cancel_ms"]
    return out


async def _sleepy_script(input):
    await asyncio.sleep(C.MODEL_SLEEP_S)
    return [text("done")]


async def s_concurrent() -> dict:
    """One shared Agent object for all runs (the usual module-level-agent pattern)."""
    agent = Agent(name="a", instructions="x", model=FakeModel(_sleepy_script))

    async def one_run():
        res = await Runner.run(agent, "go", run_config=RUN_CONFIG)
        assert res.final_output == "done"

    out = await C.run_concurrent(one_run)
    out["agent"] = "one Agent shared by all runs"
    return out


async def s_concurrent_agent_per_run() -> dict:
    """Same, but each run gets its own Agent via agent.clone() (the SDK's advice for concurrent runs)."""
    agent = Agent(name="a", instructions="x", model=FakeModel(_sleepy_script))

    async def one_run():
        res = await Runner.run(agent.clone(), "go", run_config=RUN_CONFIG)
        assert res.final_output == "done"

    out = await C.run_concurrent(one_run)
    out["agent"] = "agent.clone() per run"
    return out


# ------------------------------------------------------------------ steering (bench/peer/steering.py)
class SteerRuntime:
    """The SDK has no call that gives a running run a message. What its users do: run it
    streamed; when a message arrives keep it and ``cancel(mode="after_turn")`` (the model's
    answer and its tool calls finish, no further model call starts), then run again with
    ``result.to_input_list()`` plus the kept messages."""

    def __init__(self, brain: S.Brain) -> None:
        ids = iter(range(1 << 30))

        @function_tool
        async def work(us: int) -> str:
            """Works for ``us`` microseconds."""
            return await brain.work(us)

        def field(item, key):
            return item.get(key) if isinstance(item, dict) else getattr(item, key, None)

        async def script(input):
            texts = [field(i, "content") for i in input if field(i, "role") == "user"]
            decision = await brain.decide(texts, field(input[-1], "role") == "user")
            if isinstance(decision, str):
                return [text(decision)]
            return [call("work", {"us": decision[1]}, f"w{next(ids)}")]

        self.agent = Agent(name="a", instructions="x", model=FakeModel(script), tools=[work])
        self.history: list = []
        self.pending: list[str] = []
        self.left: list[str] = []
        self.stopped = False
        self.result = None
        self.task: asyncio.Task | None = None

    def start(self, prompt: str) -> None:
        self.stopped = False
        self.task = asyncio.ensure_future(self._run([prompt]))

    def stop(self) -> None:
        self.stopped = True
        if self.result is not None:
            self.result.cancel(mode="immediate")

    def returned(self) -> list[str]:
        left, self.left = self.left, []
        return left

    async def _run(self, inputs: list[str]) -> None:
        while inputs:
            self.result = Runner.run_streamed(
                self.agent, self.history + [{"role": "user", "content": t} for t in inputs],
                max_turns=1_000_000, run_config=RUN_CONFIG)
            if self.pending:  # arrived while the run was being set up
                self.result.cancel(mode="after_turn")
            async for _ in self.result.stream_events():
                pass
            self.history = self.result.to_input_list()
            if self.stopped:  # the messages kept are the caller's again
                self.left, self.pending = self.pending, []
                return
            inputs, self.pending = self.pending, []  # no await between this and the end

    def steer(self, text: str) -> bool:
        if not self.running:
            return False
        self.pending.append(text)
        if self.result is not None:
            self.result.cancel(mode="after_turn")
        return True

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    async def wait(self) -> None:
        if self.task is not None:
            await self.task


_MECHANISM = "run_streamed; cancel(mode='after_turn'); re-run with to_input_list() + the messages"


async def s_steer_latency() -> dict:
    out = await S.run_steer_latency(SteerRuntime)
    out["mechanism"] = _MECHANISM
    return out


async def s_steer_share() -> dict:
    out = await S.run_steer_share(SteerRuntime)
    out["mechanism"] = _MECHANISM
    return out


async def s_steer_races() -> dict:
    out = await S.run_steer_races(SteerRuntime)
    out["mechanism"] = _MECHANISM
    return out


async def s_steer_races_stopped() -> dict:
    out = await S.run_steer_races(SteerRuntime, stop_share=0.1)
    out["mechanism"] = _MECHANISM + "; stop: cancel(mode='immediate'); the kept messages are the driver's"
    return out


if __name__ == "__main__":
    C.main(
        PEER,
        {"overhead": s_overhead, "scaling": s_scaling, "parallel_tools": s_parallel, "cancel": s_cancel, "concurrent": s_concurrent,
         "concurrent_agent_per_run": s_concurrent_agent_per_run,
         "steer_latency": s_steer_latency, "steer_share": s_steer_share, "steer_races": s_steer_races,
         "steer_races_stopped": s_steer_races_stopped},
        {"import agents": "import agents"},
        ["openai-agents", "openai", "pydantic", "anyio"],
    )
