"""A graceful interrupt and a hard abort, side by side.

A graceful interrupt lets the running tool finish, skips the calls not started and asks the model
for one last answer without tools; the turn ends ``interrupted`` and keeps what it did. A hard
abort cancels the model call and the tools at once and rolls the session back to the turn's
start; the turn ends ``aborted``.
"""

import asyncio

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider, Subscription, tool


@tool()
async def slow_step(n: int) -> str:
    """Do one slow step of the work.

    Args:
        n: The step's number.
    """
    await asyncio.sleep(0.3)
    return f"step {n} done"


async def wait_for(events: Subscription, kind: EventKind) -> None:
    async for event in events:
        if event.kind is kind:
            return


async def main() -> None:
    provider = ScriptedProvider([
        # Graceful: two steps asked for; the first runs, the second is skipped, one summary call.
        Reply(tool_calls=[("slow_step", {"n": 1}), ("slow_step", {"n": 2})]),
        Reply(text="Step 1 is done; I stopped before step 2 as asked."),
        # Hard: the tool is cancelled mid-run and nothing of the turn is kept.
        Reply(tool_calls=[("slow_step", {"n": 3})]),
    ])
    agent = Agent(name="worker", provider=provider, tools=[slow_step])
    async with AgentLoop(agent) as loop:
        with loop.subscribe(kinds=[EventKind.TOOL_EXEC_START]) as events:
            turn = loop.start_turn("Do steps 1 and 2.", session_id="s1")
            await wait_for(events, EventKind.TOOL_EXEC_START)
            loop.interrupt_graceful(session_id="s1", hint="Stop after the current step.")
            result = await turn
            print("graceful:", result.status.value, "| tools run:", result.tools_run)
            print("  answer:", result.text)

            before = len(loop.session_messages("s1"))
            turn = loop.start_turn("Do step 3.", session_id="s1")
            await wait_for(events, EventKind.TOOL_EXEC_START)
            loop.interrupt_hard(session_id="s1")
            result = await turn
            after = len(loop.session_messages("s1"))
            print("hard:", result.status.value, "| session rolled back:", before == after)


asyncio.run(main())
