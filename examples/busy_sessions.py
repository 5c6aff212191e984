"""Messages to a busy session: policies, receipts, and a queued message edited and revoked.

Every message gets an id and exactly one terminal state (delivered, returned, rejected or
revoked), visible as ``MESSAGE_STATE`` events and through ``queued_messages``.
"""

import asyncio

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider, tool


@tool(read_only=True)
async def run_tests() -> str:
    """Run the test suite."""
    await asyncio.sleep(0.3)
    return "3 passed"


async def main() -> None:
    provider = ScriptedProvider([
        Reply(tool_calls=[("run_tests", {})]),
        Reply(text="Tests pass; using -x as you asked."),
        Reply(text="Docs updated."),           # the follow-up's own turn
    ])
    agent = Agent(name="dev", provider=provider, tools=[run_tests])
    async with AgentLoop(agent, busy_policy="steer") as loop:
        states = loop.subscribe(kinds=[EventKind.MESSAGE_STATE])
        running = loop.subscribe(kinds=[EventKind.TOOL_EXEC_START])
        first = loop.send("Run the tests.", session_id="s1")        # idle: starts a turn
        await anext(aiter(running))                                  # the tool is running now
        loop.send("Use -x.", session_id="s1")                        # busy: steers the turn
        later = loop.send("Then update the docs.", "s1", policy="follow_up")
        spare = loop.send("And the changelog.", "s1", policy="follow_up")
        print("queued:", [(m.text, m.state.value) for m in loop.queued_messages("s1")])
        loop.edit_message(later.message_id, "Then update the README.")
        loop.revoke_message(spare.message_id)
        print("first turn:", (await first).text)
        print("follow-up turn:", (await later).text)
        await loop.wait_idle()
        for event in states.drain_nowait():
            print(f"  {event.message_id[:12]} {event.state.value:9} {event.detail or ''}")
        print("the follow-up turn was asked:", provider.requests[-1].messages[-1].content)


asyncio.run(main())
