"""The tool policy's second chances for an answer: one that states what no tool result showed,
and one that only repeats a tool result (``restated``).

For the first, two forms, one note: with no call allowed, the model answers again from the
results (what they do not show, it says it does not know); with a look required
(``ToolChoice`` of the looks, its paths held), it looks for what it stated. The note names the facts, never the words of the
request, so it reads the same in every language the request came in.
"""

from __future__ import annotations

from collections.abc import Sequence

from steerable._hooks import LLMResponseContext
from steerable._messages import Message
from steerable.coding._evidence import echoes
from steerable.providers._base import LLMRequest, ToolChoice

__all__ = ["recheck_request", "restated"]

_ANSWER_AGAIN = ("Your answer states {facts}, but no tool result above shows {it}. Answer my "
                 "request again using only what the tool results say; where they do not show "
                 "something, say you do not know it.")
_RESTATE = ("That only repeats the raw tool output, and I cannot see the tool results. Answer "
            "my request itself now, in a few words of your own, using only what the results "
            "above show.")
_LOOK = ("Your answer states {facts}, but no tool result above shows {it}. Look for {it} in "
         "the files with one tool call.")
_LOOK_FURTHER = ("Your answer states nothing the tool results above show. Look for the answer "
                 "in the files with one tool call.")


def recheck_request(request: LLMRequest, answer: str, missing: Sequence[str],
                    look: ToolChoice | None = None, max_tokens: int | None = None) -> LLMRequest:
    """``request`` followed by ``answer`` and the note on ``missing``: an answer from the
    evidence, or (``look``, a required call) a look for what the answer stated, or (nothing
    ``missing``: the answer stated no fact at all) a look for the answer."""
    facts = ", ".join(f"'{m}'" for m in missing)
    note = (_ANSWER_AGAIN if look is None else _LOOK if missing else _LOOK_FURTHER).format(
        facts=facts, it="it" if len(missing) == 1 else "them")
    return LLMRequest(
        messages=(*request.messages, Message("assistant", answer), Message("user", note)),
        tools=request.tools, model=request.model, params=request.params,
        tool_choice=look or ToolChoice("none", max_tokens=max_tokens,
                                       reason="answer from the evidence"))


async def restated(ctx: LLMResponseContext, echo: str, results: Sequence[str],
                   max_tokens: int) -> str:
    """One more call for an answer that only repeated a tool result: the answer in words,
    then the output it rests on (a restatement may drop what the echo showed); the echo
    alone when the model cannot do better."""
    request = ctx.request
    again = LLMRequest(
        messages=(*request.messages, Message("assistant", echo), Message("user", _RESTATE)),
        tools=request.tools, model=request.model, params=request.params,
        tool_choice=ToolChoice("none", max_tokens=max_tokens,
                               reason="the answer repeated a tool result"))
    try:
        reply = (await ctx.ask(again, "answer")).text
    except Exception:  # any failure of the call: the echo is still checked and marked
        return echo
    if not reply.strip() or echoes(reply, results):
        return echo
    return f"{reply.rstrip()}\n\n{echo.strip()}"
