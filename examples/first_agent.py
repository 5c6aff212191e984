"""A first agent: a tool, events as they happen, and a steer sent while the tool runs.

Runs offline: the scripted provider plays the model. Swap in ``OpenAIProvider`` or
``AnthropicProvider`` (see the providers guide) to talk to a real one.
"""

import asyncio
import pathlib

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider, tool


@tool(read_only=True)
async def read_file(path: str) -> str:
    """Read a text file.

    Args:
        path: The file to read.
    """
    await asyncio.sleep(0.2)  # a slow tool, so there is time to steer while it runs
    return await asyncio.to_thread(pathlib.Path(path).read_text)


async def main() -> None:
    provider = ScriptedProvider([
        Reply(tool_calls=[("read_file", {"path": __file__})]),
        Reply(text="The first example: one tool and one steer."),
    ])
    agent = Agent(name="main", instructions="Be brief.", provider=provider, tools=[read_file])
    async with AgentLoop(agent) as loop:
        with loop.subscribe() as events:
            turn = loop.start_turn("What is this file?", session_id="s1")  # returns at once
            async for event in events:
                print("event:", event.kind.value)
                if event.kind is EventKind.TOOL_EXEC_START:
                    receipt = loop.inject_steering("Answer in one line.", session_id="s1")
                    print("steer accepted:", receipt.state.value)
                if event.kind is EventKind.TURN_END:
                    break
        result = await turn
        print(result.status.value, "-", result.text)
        # The steer reached the very next model request, after the tool's result.
        print("second request:", [m.role for m in provider.requests[1].messages])
        print("its last message:", provider.requests[1].messages[-1].content)


asyncio.run(main())
