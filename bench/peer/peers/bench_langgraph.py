"""Peer benchmark: LangGraph (`langgraph` + `langchain-core`), prebuilt ReAct agent.

Agent: langgraph.prebuilt.create_react_agent (still shipped in langgraph 1.x but
marked deprecated in favour of langchain.agents.create_agent, which needs the
separate `langchain` package). Fake model: a custom langchain-core
BaseChatModel whose `_agenerate` returns prepared AIMessages (no HTTP, no API
key); `bind_tools` binds OpenAI-format tool schemas like a real chat model.
No checkpointer. LangSmith tracing is off unless LANGSMITH_TRACING is set.
"""

from __future__ import annotations

import asyncio
import os
import sys
import warnings
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import harness as C
import steering as S

warnings.filterwarnings("ignore")  # create_react_agent deprecation warning

from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402
from langgraph.prebuilt import create_react_agent  # noqa: E402

# PEERBENCH_LG_AGENT=create_react_agent (default) | create_agent (langchain.agents, needs `langchain`)
AGENT_KIND = os.environ.get("PEERBENCH_LG_AGENT", "create_react_agent")
PEER = "langgraph" if AGENT_KIND == "create_react_agent" else "langgraph+langchain.create_agent"


def build(model, tools, checkpointer=None):
    if AGENT_KIND == "create_agent":
        from langchain.agents import create_agent

        return create_agent(model, tools, system_prompt="x", checkpointer=checkpointer)
    return create_react_agent(model, tools, prompt="x", checkpointer=checkpointer)


class FakeChat(BaseChatModel):
    """Calls `script(messages)` (async) and returns its AIMessage."""

    script: Any

    @property
    def _llm_type(self) -> str:
        return "fake-scripted"

    def bind_tools(self, tools, **kwargs):
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        raise NotImplementedError("async only")

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        msg = await self.script(messages)
        return ChatResult(generations=[ChatGeneration(message=msg)])


def text(t: str) -> AIMessage:
    return AIMessage(content=t)


def calls(*tcs: tuple[str, dict, str]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i, "type": "tool_call"} for n, a, i in tcs])


def _last_tool_output(messages):
    last = messages[-1]
    return last.content if isinstance(last, ToolMessage) else None


def _input():
    return {"messages": [HumanMessage("go")]}


def _final(res) -> str:
    return res["messages"][-1].content


# ------------------------------------------------------------------ tools
@tool
async def step(i: int) -> int:
    """Instant tool: returns i + 1."""
    return i + 1


@tool
async def slow(i: int) -> str:
    """Sleeps 0.2 s."""
    await asyncio.sleep(C.TOOL_SLEEP_S)
    return f"slow {i}"


# ------------------------------------------------------------------ scenarios
def _overhead_runner():
    def script_for(n: int):
        async def script(messages):
            out = _last_tool_output(messages)
            k = 0 if out is None else int(out)
            if k >= n:
                return text("done")
            return calls(("step", {"i": k}, f"c{k}"))
        return script

    graphs = {}

    async def one_run(n: int):
        g = graphs.get(n)
        if g is None:
            g = graphs[n] = build(FakeChat(script=script_for(n)), [step])
        res = await g.ainvoke(_input(), {"recursion_limit": 2 * n + 10})
        assert _final(res) == "done", _final(res)

    return one_run


async def s_overhead() -> dict:
    out = await C.run_overhead(_overhead_runner())
    out["agent"] = f"{AGENT_KIND}, no checkpointer"
    return out


async def s_scaling() -> dict:
    return await C.run_scaling(_overhead_runner())


async def s_parallel() -> dict:
    async def script(messages):
        if _last_tool_output(messages) is None:
            return calls(*(("slow", {"i": i}, f"p{i}") for i in range(C.N_PARALLEL_TOOLS)))
        return text("done")

    g = build(FakeChat(script=script), [slow])

    async def one_run():
        res = await g.ainvoke(_input())
        assert _final(res) == "done"

    return await C.run_parallel(one_run)


async def s_cancel() -> dict:
    """No run-cancel API in the OSS library: cancel the asyncio task running graph.ainvoke()."""

    async def one_cancel() -> dict:
        probe = C.ToolProbe()

        @tool
        async def hang() -> str:
            """Sleeps 10 s."""
            return await probe.hang()

        async def script(messages):
            if _last_tool_output(messages) is None:
                return calls(("hang", {}, "h0"))
            return text("done")

        g = build(FakeChat(script=script), [hang])
        return await C.cancel_task_once(probe, g.ainvoke(_input()))

    out = await C.run_cancel(one_cancel)
    out["mechanism"] = "asyncio Task.cancel() on graph.ainvoke(); time until the task raises"
    return out


async def s_concurrent() -> dict:
    async def script(messages):
        await asyncio.sleep(C.MODEL_SLEEP_S)
        return text("done")

    g = build(FakeChat(script=script), [])

    async def one_run():
        res = await g.ainvoke(_input())
        assert _final(res) == "done"

    out = await C.run_concurrent(one_run)
    out["agent"] = "one compiled graph shared by all runs"
    return out


# ------------------------------------------------------------------ steering (bench/peer/steering.py)
class SteerRuntime:
    """LangGraph has no call that gives a running graph a message. What its users do: stream
    the run (``astream``, updates) with a checkpointer; a message that arrives is kept and the
    run is stopped at the next boundary where that is safe (after the tools node: a model
    answer's tool calls must get their results first), then re-run on the same thread with the
    kept messages as input (the checkpointer holds what went before)."""

    def __init__(self, brain: S.Brain) -> None:
        from langgraph.checkpoint.memory import InMemorySaver

        ids = iter(range(1 << 30))

        @tool
        async def work(us: int) -> str:
            """Works for ``us`` microseconds."""
            return await brain.work(us)

        async def script(messages):
            texts = [m.content for m in messages if isinstance(m, HumanMessage)]
            decision = await brain.decide(texts, isinstance(messages[-1], HumanMessage))
            if isinstance(decision, str):
                return text(decision)
            return calls(("work", {"us": decision[1]}, f"w{next(ids)}"))

        self.graph = build(FakeChat(script=script), [work], checkpointer=InMemorySaver())
        self.config = {"configurable": {"thread_id": "b"}, "recursion_limit": 1_000_000}
        self.pending: list[str] = []
        self.left: list[str] = []
        self.task: asyncio.Task | None = None
        self.inner: asyncio.Task | None = None

    def start(self, prompt: str) -> None:
        self.task = asyncio.ensure_future(self._run([prompt]))

    async def _consume(self, inputs: list[str]) -> None:
        stream = self.graph.astream({"messages": [HumanMessage(t) for t in inputs]},
                                    self.config, stream_mode="updates")
        try:
            async for update in stream:
                if self.pending and "tools" in update:
                    break  # the tools' results are saved: re-run with the new messages
        finally:
            await stream.aclose()

    async def _run(self, inputs: list[str]) -> None:
        while inputs:
            self.inner = asyncio.ensure_future(self._consume(inputs))
            await asyncio.wait([self.inner])
            if self.inner.cancelled():  # stopped: the messages kept are the caller's again
                self.left, self.pending = self.pending, []
                return
            self.inner.result()
            inputs, self.pending = self.pending, []  # no await between this and the end

    def stop(self) -> None:
        """No stop that keeps the work done: cancel the task (the checkpointer keeps the
        finished steps)."""
        if self.inner is not None:
            self.inner.cancel()

    def returned(self) -> list[str]:
        left, self.left = self.left, []
        return left

    def steer(self, text: str) -> bool:
        if not self.running:
            return False
        self.pending.append(text)
        return True

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    async def wait(self) -> None:
        if self.task is not None:
            await self.task


_MECHANISM = "astream with a checkpointer; stop after the tools node; re-run with the messages"


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
    out["mechanism"] = _MECHANISM + "; stop: Task.cancel(); the kept messages are the driver's"
    return out


if __name__ == "__main__":
    C.main(
        PEER,
        {"overhead": s_overhead, "scaling": s_scaling, "parallel_tools": s_parallel, "cancel": s_cancel, "concurrent": s_concurrent,
         "steer_latency": s_steer_latency, "steer_share": s_steer_share, "steer_races": s_steer_races,
         "steer_races_stopped": s_steer_races_stopped},
        {"import langchain.agents": "import langchain.agents"} if AGENT_KIND == "create_agent" else {
            "import langgraph.prebuilt": "import langgraph.prebuilt",
            "import langgraph": "import langgraph",
        },
        ["langgraph", "langgraph-prebuilt", "langchain-core", "langchain", "langgraph-checkpoint", "langsmith",
         "pydantic"],
    )
