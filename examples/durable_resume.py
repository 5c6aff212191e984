"""A durable turn: cancelled after its tools, then resumed by a new loop over the same store.

With a store that keeps checkpoints, a turn saves itself at every safe point. A cancel at a safe
point (or a ``kill -9``) leaves its checkpoint; ``resume`` on any loop over the same store (say,
after a restart) continues it: tool results already in the checkpoint are not run again.
"""

import asyncio
import tempfile

from steerable import Agent, AgentLoop, CancelMode, EventKind, Reply, ScriptedProvider, tool
from steerable.storage import JSONLSessionStore

runs: list[str] = []


@tool()
async def deploy(target: str) -> str:
    """Deploy to a target.

    Args:
        target: Where to deploy.
    """
    runs.append(target)
    await asyncio.sleep(0.2)
    return f"deployed to {target}"


def make_agent(provider: ScriptedProvider) -> Agent:
    # The same name and tools on both sides: a checkpoint refuses to resume under another agent.
    return Agent(name="ops", provider=provider, tools=[deploy])


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = JSONLSessionStore(folder)
        first = ScriptedProvider([Reply(tool_calls=[("deploy", {"target": "staging"})])])
        async with AgentLoop(make_agent(first), store=store) as loop:
            with loop.subscribe(kinds=[EventKind.TOOL_EXEC_START]) as events:
                turn = loop.start_turn("Deploy to staging, then report.", session_id="ops-1")
                await anext(aiter(events))
                loop.cancel(session_id="ops-1", mode=CancelMode.AFTER_TOOLS)  # let deploy finish
            result = await turn
            print("first process:", result.status.value, "| pending:", loop.checkpoint("ops-1") is not None)

        # A new process, days later: a new loop over the same folder.
        second = ScriptedProvider([Reply(text="Staging is deployed.")])
        async with AgentLoop(make_agent(second), store=JSONLSessionStore(folder)) as loop:
            handle = loop.resume("ops-1")
            assert handle is not None
            result = await handle
            print("resumed:", result.status.value, "-", result.text)
            print("deploy ran", len(runs), "time(s); history:", len(loop.session_messages("ops-1")), "messages")


asyncio.run(main())
