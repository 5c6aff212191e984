"""A push-based inbox: items arrive at any time, each turn takes what has arrived, and an
urgent item preempts the running turn (whose items are handed back, not dropped).
"""

import asyncio

from steerable import (
    Agent,
    CancelMode,
    EventKind,
    Reply,
    ScriptedProvider,
    TurnLoop,
    TurnResult,
    TurnStatus,
)


async def main() -> None:
    provider = ScriptedProvider([
        Reply(text="(slow answer to the first batch)", delay=1.0),   # preempted mid-answer
        Reply(text="Handled all three: the two notes and the urgent one."),
    ])
    answered = asyncio.Event()

    def on_result(result: TurnResult, items: list[str]) -> None:
        print(f"  turn {result.status.value}: {len(items)} item(s) {result.text!r}")
        if result.status is TurnStatus.COMPLETED:
            answered.set()

    inbox = TurnLoop(Agent(name="inbox", provider=provider), session_id="inbox", on_result=on_result)
    asking = inbox.loop.subscribe(kinds=[EventKind.LLM_REQUEST])
    inbox.push("note: the build is red")
    inbox.push("note: flaky test in CI")
    inbox.run()                                   # consumes in a task
    await anext(aiter(asking))                    # the first turn is answering
    asking.close()
    accepted, ack = inbox.push("URGENT: production is down", preempt=CancelMode.IMMEDIATE)
    await ack                                     # the running turn's cancel has started
    await answered.wait()
    inbox.stop()
    state = await inbox.wait()
    print("urgent accepted:", accepted, "| inbox ended:", state.reason)
    print("the last turn saw:", provider.requests[-1].messages[-1].content.replace("\n\n", " | "))


asyncio.run(main())
