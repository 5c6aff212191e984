"""Peer benchmark: Pydantic AI (package `pydantic-ai-slim`, import `pydantic_ai`).

Fake model: pydantic_ai.models.function.FunctionModel with an async function
returning prepared ModelResponse objects (no HTTP, no API key). Each response
carries an explicit RequestUsage so FunctionModel skips its O(history) token
estimate (a test-double cost a real provider would not have).
"""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import harness as C
import steering as S
from pydantic_ai import Agent, CancellationToken
from pydantic_ai.exceptions import RunCancelled, UserError
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    repair_messages,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits

PEER = "pydantic-ai"
NO_LIMITS = UsageLimits(request_limit=None)
U = RequestUsage(input_tokens=1, output_tokens=1)


def text(t: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(t)], usage=U)


def calls(*parts: ToolCallPart) -> ModelResponse:
    return ModelResponse(parts=list(parts), usage=U)


def _last_tool_return(messages):
    last = messages[-1]
    if isinstance(last, ModelRequest):
        for p in reversed(last.parts):
            if isinstance(p, ToolReturnPart):
                return p.content
    return None


# ------------------------------------------------------------------ tools
async def step(i: int) -> int:
    """Instant tool: returns i + 1."""
    return i + 1


async def slow(i: int) -> str:
    """Sleeps 0.2 s."""
    await asyncio.sleep(C.TOOL_SLEEP_S)
    return f"slow {i}"


# ------------------------------------------------------------------ scenarios
def _overhead_runner():
    def fn_for(n: int):
        async def fn(messages, info: AgentInfo) -> ModelResponse:
            out = _last_tool_return(messages)
            k = 0 if out is None else int(out)
            if k >= n:
                return text("done")
            return calls(ToolCallPart("step", {"i": k}, tool_call_id=f"c{k}"))
        return fn

    agent = Agent(tools=[step], instructions="x")
    models = {}

    async def one_run(n: int):
        m = models.get(n)
        if m is None:
            m = models[n] = FunctionModel(fn_for(n))
        res = await agent.run("go", model=m, usage_limits=NO_LIMITS)
        assert res.output == "done", res.output

    return one_run


async def s_overhead() -> dict:
    return await C.run_overhead(_overhead_runner())


async def s_scaling() -> dict:
    return await C.run_scaling(_overhead_runner())


async def s_parallel() -> dict:
    async def fn(messages, info):
        if _last_tool_return(messages) is None:
            return calls(*(ToolCallPart("slow", {"i": i}, tool_call_id=f"p{i}") for i in range(C.N_PARALLEL_TOOLS)))
        return text("done")

    agent = Agent(FunctionModel(fn), tools=[slow], instructions="x")

    async def one_run():
        res = await agent.run("go")
        assert res.output == "done"

    return await C.run_parallel(one_run)


def _hang_agent(probe: C.ToolProbe) -> Agent:
    async def hang() -> str:
        """Sleeps 10 s."""
        return await probe.hang()

    async def fn(messages, info):
        if _last_tool_return(messages) is None:
            return calls(ToolCallPart("hang", {}, tool_call_id="h0"))
        return text("done")

    return Agent(FunctionModel(fn), tools=[hang], instructions="x")


async def s_cancel() -> dict:
    """Documented mechanism: CancellationToken passed to agent.run(); run raises RunCancelled."""

    async def one_cancel() -> dict:
        probe = C.ToolProbe()
        token = CancellationToken()
        task = asyncio.create_task(_hang_agent(probe).run("go", cancellation_token=token))
        await asyncio.sleep(C.CANCEL_AFTER_S)
        assert probe.started_at is not None, "tool did not start within 0.3 s"
        t0 = C.now()
        token.cancel()
        outcome = "returned"
        try:
            await task
        except RunCancelled:
            outcome = "RunCancelled"
        except asyncio.CancelledError:
            outcome = "CancelledError"
        t1 = C.now()
        return {"latency_s": t1 - t0,
                "tool_cancel_s": None if probe.cancelled_at is None else probe.cancelled_at - t0,
                "outcome": outcome}

    out = await C.run_cancel(one_cancel)
    out["mechanism"] = "CancellationToken.cancel() (agent.run(cancellation_token=...)); time until agent.run() raises"

    async def one_task_cancel() -> dict:
        probe = C.ToolProbe()
        return await C.cancel_task_once(probe, _hang_agent(probe).run("go"))

    sec = await C.run_cancel(one_task_cancel)
    out["task_cancel_latency_ms"] = sec["cancel_latency_ms"]
    out["task_cancel_tool_saw_cancel_ms"] = sec["tool_saw_cancel_ms"]
    return out


async def s_concurrent() -> dict:
    async def fn(messages, info):
        await asyncio.sleep(C.MODEL_SLEEP_S)
        return text("done")

    agent = Agent(FunctionModel(fn), instructions="x")

    async def one_run():
        res = await agent.run("go")
        assert res.output == "done"

    out = await C.run_concurrent(one_run)
    out["agent"] = "one Agent shared by all runs"
    return out


# ------------------------------------------------------------------ steering (bench/peer/steering.py)
class SteerRuntime:
    """``AgentRun.enqueue(text)`` (priority ``asap``) into the run that ``agent.iter()`` drives;
    each run continues the conversation (``message_history``) of the one before."""

    def __init__(self, brain: S.Brain) -> None:
        ids = iter(range(1 << 30))

        async def work(us: int) -> str:
            """Works for ``us`` microseconds."""
            return await brain.work(us)

        async def fn(messages, info):
            texts = [p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts
                     if isinstance(p, UserPromptPart) and isinstance(p.content, str)]
            last = messages[-1]
            last_is_user = isinstance(last, ModelRequest) and isinstance(last.parts[-1], UserPromptPart)
            decision = await brain.decide(texts, last_is_user)
            if isinstance(decision, str):
                return text(decision)
            return calls(ToolCallPart("work", {"us": decision[1]}, tool_call_id=f"w{next(ids)}"))

        self.agent = Agent(FunctionModel(fn), tools=[work], instructions="x")
        self.history: list = []
        self.run = None
        self.early: list[str] = []  # taken between start() and the run's first step
        self.task: asyncio.Task | None = None

    def start(self, prompt: str) -> None:
        self.task = asyncio.ensure_future(self._run(prompt))

    async def _run(self, prompt: str) -> None:
        self.left = []
        try:
            async with self.agent.iter(prompt, message_history=self.history,
                                       usage_limits=NO_LIMITS) as run:
                self.run = run
                while self.early:
                    run.enqueue(self.early.pop(0))
                async for _ in run:
                    pass
        except RunCancelled as exc:
            self.history = repair_messages(exc.all_messages())  # closes the cut-off tool call
            # What the cancelled run had queued: only AgentRun.pending_messages (documented as
            # internal, for inspection) still shows it; a careful front end reads it.
            self.left = [p.content for pm in run.pending_messages for m in pm.messages
                         if isinstance(m, ModelRequest) for p in m.parts
                         if isinstance(p, UserPromptPart)]
        else:
            self.history = run.result.all_messages()
        finally:
            self.run = None

    def stop(self) -> None:
        if self.run is not None:
            self.run.cancel()

    def returned(self) -> list[str]:
        left, self.left = self.left, []
        return left

    def steer(self, text: str) -> bool:
        if not self.running:
            return False
        if self.run is None:
            self.early.append(text)
            return True
        try:
            self.run.enqueue(text)
        except UserError:
            return False
        return True

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    async def wait(self) -> None:
        if self.task is not None:
            await self.task


async def s_steer_latency() -> dict:
    out = await S.run_steer_latency(SteerRuntime)
    out["mechanism"] = "AgentRun.enqueue() (agent.iter())"
    return out


async def s_steer_share() -> dict:
    out = await S.run_steer_share(SteerRuntime)
    out["mechanism"] = "AgentRun.enqueue() (agent.iter())"
    return out


async def s_steer_races() -> dict:
    out = await S.run_steer_races(SteerRuntime)
    out["mechanism"] = "AgentRun.enqueue(); refused after the run ended -> a new run with it"
    return out


class _DocumentedOnly(SteerRuntime):
    """A front end that keeps to the documented calls: nothing hands back what a cancelled run
    had queued."""

    def returned(self) -> list[str]:
        self.left = []
        return []


async def s_steer_races_stopped() -> dict:
    out = await S.run_steer_races(SteerRuntime, stop_share=0.1)
    out["mechanism"] = ("AgentRun.enqueue(); stop: AgentRun.cancel(); handed back: read from "
                        "AgentRun.pending_messages")
    documented = await S.run_steer_races(_DocumentedOnly, stop_share=0.1)
    out["documented_calls_only"] = {k: documented[k] for k in ("messages", "lost", "duplicated", "stops")}
    return out


if __name__ == "__main__":
    C.main(
        PEER,
        {"overhead": s_overhead, "scaling": s_scaling, "parallel_tools": s_parallel, "cancel": s_cancel, "concurrent": s_concurrent,
         "steer_latency": s_steer_latency, "steer_share": s_steer_share, "steer_races": s_steer_races,
         "steer_races_stopped": s_steer_races_stopped},
        {"import pydantic_ai": "import pydantic_ai"},
        ["pydantic-ai-slim", "pydantic-graph", "pydantic", "anyio"],
    )
