"""What redaction by construction costs: the stream guard per streamed chunk, and blanking an
event's values before it is encoded.

    python bench/bench_redaction.py

Prints microseconds per chunk for a provider stream read raw and through ``guard_secrets``
(word-sized chunks, as models stream), and per event for ``json.dumps(event_to_dict(e))`` with
and without ``redacted`` first, for a delta and for a tool result of 4 KB.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, os.environ.get("STEERABLE_SRC") or str(Path(__file__).resolve().parent.parent / "src"))

from steerable._events import LLMDelta, ToolExecEnd, event_to_dict
from steerable._secrets import Redactor, known_secrets, redacted
from steerable.providers._base import Chunk, StreamEnd, TextDelta, guard_secrets

WORDS = ["The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".\n"]
CHUNKS = 20_000


async def _stream() -> AsyncIterator[Chunk]:
    for i in range(CHUNKS):
        yield TextDelta(WORDS[i % len(WORDS)])
    yield StreamEnd(None, "stop")


async def _read(guarded: bool) -> float:
    stream = _stream()
    source = guard_secrets(stream, known_secrets()) if guarded else stream
    t0 = time.perf_counter()
    async for _ in source:
        pass
    return (time.perf_counter() - t0) / CHUNKS * 1e6


def _encode(event: object, redactor: Redactor | None, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        json.dumps(redacted(event_to_dict(event), redactor), ensure_ascii=False)  # type: ignore[arg-type]
    return (time.perf_counter() - t0) / n * 1e6


def main() -> None:
    raw = min(asyncio.run(_read(False)) for _ in range(3))
    guarded = min(asyncio.run(_read(True)) for _ in range(3))
    print(f"stream read: {raw:.2f} us/chunk raw, {guarded:.2f} us/chunk through the guard "
          f"(+{guarded - raw:.2f})")
    common = {"turn_id": "turn_0123456789ab", "parent_turn_id": None, "session_id": "s",
              "seq": 1, "time": 0.0}
    delta = LLMDelta(**common, iteration=1, text=" quick")
    result = ToolExecEnd(**common, call_id="c1", tool_name="bash", is_error=False,
                         content="line of output\n" * 270)
    redactor = Redactor()
    for name, event, n in (("llm_delta", delta, 50_000), ("tool_exec_end 4 KB", result, 5_000)):
        plain = min(_encode(event, None, n) for _ in range(3))
        blanked = min(_encode(event, redactor, n) for _ in range(3))
        print(f"encode {name}: {plain:.2f} us plain, {blanked:.2f} us redacted first "
              f"(+{blanked - plain:.2f})")


if __name__ == "__main__":
    main()
