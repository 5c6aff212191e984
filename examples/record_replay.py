"""Record a run (model streams, tool results, steering and its timing) and replay it offline.

A replay gives the same events in the same order, the same text and the same session, with no
model and no network; any difference raises ``ReplayDivergence`` naming the first one. Replaying
with your real tools turns a recording into a regression test of them.
"""

import asyncio
import pathlib
import tempfile

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider, tool
from steerable.replay import Recorder, ReplayDivergence, replay


@tool(read_only=True)
async def word_count(text: str) -> int:
    """Count the words of a text.

    Args:
        text: The text to count.
    """
    await asyncio.sleep(0.05)
    return len(text.split())


@tool(name="word_count", read_only=True)  # the next version of the same tool
async def word_count_v2(text: str) -> int:
    """Count the words of a text.

    Args:
        text: The text to count.
    """
    return len(text.split()) + 1  # a regression


async def record(path: pathlib.Path) -> None:
    provider = ScriptedProvider([
        Reply(tool_calls=[("word_count", {"text": "steer me while I run"})]),
        Reply(text="Five words."),
    ])
    agent = Agent(name="counter", provider=provider, tools=[word_count])
    async with AgentLoop(agent) as loop, Recorder(loop, path):
        with loop.subscribe(kinds=[EventKind.TOOL_EXEC_START]) as events:
            turn = loop.start_turn("How many words?", session_id="s1")
            await anext(aiter(events))
            loop.inject_steering("Answer in two words.", session_id="s1")
        print("recorded:", (await turn).text)


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder, "run.jsonl")
        await record(path)
        out = await replay(path)
        print("replayed:", out.text, f"({len(out.events)} events, same order)")
        try:
            await replay(path, tools=[word_count_v2])
        except ReplayDivergence as error:
            print("with the changed tool:", str(error).splitlines()[0][:100])


asyncio.run(main())
