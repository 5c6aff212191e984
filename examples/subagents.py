"""Agents that hand work to other agents: a sub-agent tool, and a composite pipeline.

Each child runs as a sub-turn on the same engine: its events carry ``parent_turn_id``, and
interrupts, limits and hooks reach it like any turn.
"""

import asyncio

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    ParallelAgent,
    Reply,
    ScriptedProvider,
    SequentialAgent,
)


async def delegation() -> None:
    researcher = Agent(name="researcher", description="finds facts and quotes them",
                       provider=ScriptedProvider([Reply(text="The spec says: steer at checkpoints.")]))
    lead_model = ScriptedProvider([
        Reply(tool_calls=[("subagent", {"agent": "researcher", "task": "When is steering read?"})]),
        Reply(text="Steering is read at checkpoints (per the researcher)."),
    ])
    lead = Agent(name="lead", provider=lead_model, subagents=[researcher])
    async with AgentLoop(lead) as loop:
        with loop.subscribe(kinds=[EventKind.SUBTURN_SPAWN, EventKind.SUBTURN_END]) as events:
            result = await loop.run_turn("When does steering reach the model?", session_id="s1")
            for event in events.drain_nowait():
                print(" ", event.kind.value, getattr(event, "agent", "") or event.status.value)
    print("lead:", result.text)


async def pipeline() -> None:
    def agent(name: str, text: str) -> Agent:
        return Agent(name=name, provider=ScriptedProvider([Reply(text=text)]))

    panel = ParallelAgent(name="panel", agents=[agent("optimist", "Ship it."),
                                                agent("pessimist", "Add a test first.")])
    flow = SequentialAgent(name="flow", agents=[panel, agent("judge", "Add one test, then ship.")])
    async with AgentLoop(flow) as loop:
        result = await loop.run_turn("Should we ship the fix?", session_id="s2")
    print("pipeline:", result.text)


asyncio.run(delegation())
asyncio.run(pipeline())
