"""Background summarisation of long sessions (``SESSION_SUMMARIZE``).

Runs after a turn was saved, outside any turn: the older exchanges are rendered as a transcript
and the agent's model is asked for a summary, which then replaces them in the store as one
message. The replacement happens only if the session is idle and unchanged since the summary
was started; otherwise the summary is written again from the new history once it is idle.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import aclosing

from steerable._config import SummaryPolicy
from steerable._core._compaction import estimate_tokens
from steerable._core._engine import Engine
from steerable._core._turn_state import TurnState
from steerable._events import SessionSummarize
from steerable._messages import Message
from steerable.providers._base import LLMRequest, TextDelta

__all__ = ["SUMMARY_HEADER", "needs_summary", "summarize_session"]

SUMMARY_HEADER = "[Summary of the earlier conversation]"


def needs_summary(messages: list[Message], policy: SummaryPolicy) -> bool:
    return estimate_tokens(messages) > policy.at_tokens


def _cut(messages: list[Message], keep: int) -> int:
    starts = [i for i, m in enumerate(messages) if m.role == "user"]
    if len(starts) <= keep:
        return 0
    return starts[-keep]


def _transcript(messages: list[Message]) -> str:
    lines = []
    for m in messages:
        if m.role == "tool":
            lines.append(f"tool result ({m.name}): {m.text}")
            continue
        if m.text:
            lines.append(f"{m.role}: {m.text}")
        for call in m.tool_calls:
            lines.append(f"assistant called {call.name}({json.dumps(call.arguments, default=str)})")
    return "\n".join(lines)


async def _ask_for_summary(engine: Engine, st: TurnState, policy: SummaryPolicy,
                           older: list[Message]) -> str | None:
    request = LLMRequest(
        messages=(Message("system", policy.prompt),
                  Message("user", f"<conversation>\n{_transcript(older)}\n</conversation>")),
        model=st.model_agent.model, params=st.model_agent.params,
    )
    parts: list[str] = []
    try:
        stream_of = st.model_agent.provider.stream  # an async generator in every provider
        async with aclosing(stream_of(request)) as stream:
            async for chunk in stream:
                if isinstance(chunk, TextDelta):
                    parts.append(chunk.text)
    except Exception as exc:
        engine.error(st, f"summarising session {st.session_id!r} failed: {exc}", "summarize")
        return None
    return "".join(parts).strip() or None


async def _swap(engine: Engine, session_id: str, seen: list[Message],
                new: list[Message]) -> bool:
    """Replace ``seen`` (still the stored history) by ``new``; False if it changed meanwhile.

    File and database stores are called off the event loop. A turn that starts and saves
    while this runs is not lost: the store keeps what was appended after ``seen``.
    """
    def swap() -> bool:
        if engine.store.load(session_id) != seen:
            return False
        engine.store.replace(session_id, new, base=len(seen))
        return True

    return await asyncio.to_thread(swap) if engine.store.blocking else swap()


async def summarize_session(engine: Engine, st: TurnState, policy: SummaryPolicy,
                            tries: int = 3) -> bool:
    """Summarise ``st.session_id``; True when the store was rewritten.

    A session that moved on while the model was writing is summarised afresh once it is idle
    (a turn that ended meanwhile left the summary to this task), at most ``tries`` times.
    """
    for _ in range(tries):
        messages = await engine.load(st.session_id)
        cut = _cut(messages, policy.keep_exchanges)
        if cut == 0 or not needs_summary(messages, policy):
            return False
        summary = await _ask_for_summary(engine, st, policy, messages[:cut])
        if summary is None:
            return False
        running = engine.active.get(st.session_id)
        if running is None and await _swap(engine, st.session_id, messages, [
                Message("user", f"{SUMMARY_HEADER}\n{summary}"), *messages[cut:]]):
            engine.emit(st, SessionSummarize, messages_summarized=cut, summary=summary)
            return True
        if running is not None and running.control.task is not None:
            await asyncio.wait([running.control.task])  # let that turn end and be saved, then retry
    return False
