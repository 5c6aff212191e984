"""ScriptedProvider: a provider that plays back a script, for tests, examples and benchmarks.

Each request consumes the next step. A step is a ``Reply`` or a callable that takes the
``LLMRequest`` and returns a ``Reply`` (or an awaitable of one), so a script can react to what the
loop sent. Running out of script raises ``ScriptExhaustedError``; ``assert_consumed()`` raises if
steps were left unused. Both failures say which request or step was involved.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from steerable._messages import ToolCall, Usage
from steerable._records import Record, record
from steerable.errors import ScriptExhaustedError
from steerable.providers._base import (
    Chunk,
    LLMRequest,
    StreamEnd,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    ToolCallChunk,
)

__all__ = ["Reply", "ScriptStep", "ScriptedProvider"]

_WORDS = re.compile(r"\S+\s*|\s+")


@record(kw_only=False)
class Reply(Record):
    """One scripted LLM answer.

    ``tool_calls`` is a list of ``(name, arguments)``; arguments may be a dict or a raw JSON
    string (an invalid string tests how the loop handles malformed calls). ``delay`` waits before
    answering and is cancelled by a hard abort. ``error`` (an exception instance or class) is
    raised instead of answering. ``argument_pieces`` > 0 streams each call's arguments first as
    that many ``ToolArgsDelta`` pieces, ``piece_delay`` seconds apart, as a model writing a long
    call does (``TOOL_CALL_DELTA`` events).
    """

    text: str = ""
    tool_calls: Sequence[tuple[str, Mapping[str, Any] | str]] = ()
    delay: float = 0.0
    error: BaseException | type[BaseException] | None = None
    thinking: str = ""
    usage: Usage | None = None
    argument_pieces: int = 0
    piece_delay: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"Reply.text must be a str, got {type(self.text).__name__}")
        if isinstance(self.delay, bool) or not isinstance(self.delay, int | float):
            raise TypeError(f"Reply.delay must be a number of seconds, got {self.delay!r}")
        if self.delay < 0:
            raise ValueError(f"Reply.delay must be >= 0, got {self.delay}")
        if not isinstance(self.argument_pieces, int) or self.argument_pieces < 0:
            raise ValueError(f"Reply.argument_pieces must be an int >= 0, got "
                             f"{self.argument_pieces!r}")
        if not isinstance(self.piece_delay, int | float) or self.piece_delay < 0:
            raise ValueError(f"Reply.piece_delay must be >= 0 seconds, got {self.piece_delay!r}")
        for item in self.tool_calls:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
                raise TypeError(
                    f"Reply.tool_calls items must be (name, arguments) tuples, got {item!r}"
                )


ScriptStep = Reply | Callable[[LLMRequest], "Reply | Awaitable[Reply]"]


def _parse_arguments(raw: Mapping[str, Any] | str) -> tuple[dict[str, Any], str | None]:
    if not isinstance(raw, str):
        return dict(raw), None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None


async def _pieces(name: str, raw: Mapping[str, Any] | str, index: int,
                  reply: Reply) -> AsyncIterator[ToolArgsDelta]:
    text = raw if isinstance(raw, str) else json.dumps(dict(raw))
    size = -(-len(text) // reply.argument_pieces)  # ceiling: at most that many pieces
    for start in range(0, len(text), size or 1):
        if start and reply.piece_delay:
            await asyncio.sleep(reply.piece_delay)
        yield ToolArgsDelta(index, name, text[start:start + size])


class ScriptedProvider:
    """Plays back ``script``, one step per request, streaming text in several deltas."""

    def __init__(self, script: Sequence[ScriptStep]) -> None:
        if isinstance(script, str | bytes) or not isinstance(script, Sequence):
            raise TypeError("ScriptedProvider takes a list of Reply objects or callables")
        for i, step in enumerate(script):
            if not (isinstance(step, Reply) or callable(step)):
                raise TypeError(
                    f"script step {i} must be a Reply or a callable, got {type(step).__name__}"
                )
        self._script: list[ScriptStep] = list(script)
        self._next = 0
        self._ids = itertools.count(1)
        self.requests: list[LLMRequest] = []
        """Every request received, in order (including ones that failed)."""

    @property
    def remaining(self) -> int:
        return len(self._script) - self._next

    def add(self, *steps: ScriptStep) -> None:
        """Append steps to the script (useful when a test reacts to events)."""
        self._script.extend(steps)

    def assert_consumed(self) -> None:
        if self._next < len(self._script):
            raise AssertionError(
                f"ScriptedProvider: {len(self._script) - self._next} of {len(self._script)} "
                f"script steps were never used (next unused: step {self._next})"
            )

    async def _take(self, request: LLMRequest) -> Reply:
        self.requests.append(request)
        if self._next >= len(self._script):
            raise ScriptExhaustedError(
                f"ScriptedProvider ran out of script: request #{len(self.requests)} arrived "
                f"but the script has only {len(self._script)} steps"
            )
        step = self._script[self._next]
        self._next += 1
        if isinstance(step, Reply):
            return step
        produced = step(request)
        if inspect.isawaitable(produced):
            produced = await produced
        if not isinstance(produced, Reply):
            raise TypeError(
                f"script step {self._next - 1} returned {type(produced).__name__}, expected Reply"
            )
        return produced

    async def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        reply = await self._take(request)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.error is not None:
            raise reply.error
        if reply.thinking:
            yield ThinkingDelta(reply.thinking)
        for piece in _WORDS.findall(reply.text):
            yield TextDelta(piece)
        for index, (name, raw) in enumerate(reply.tool_calls):
            if reply.argument_pieces:
                async for piece in _pieces(name, raw, index, reply):
                    yield piece
            arguments, error = _parse_arguments(raw)
            yield ToolCallChunk(ToolCall(f"call_{next(self._ids)}", name, arguments, error))
        yield StreamEnd(reply.usage, "tool_calls" if reply.tool_calls else "stop")

    async def aclose(self) -> None:
        return None
