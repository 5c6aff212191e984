"""The debug recorder: every event of a loop as one JSON line in a file (opt-in).

It is an ordinary subscriber, so it never slows the loop: with a large buffer it drops nothing
in practice, and if it ever does, the drop counts say so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO

from steerable._core._bus import Subscription
from steerable._events import event_to_dict

__all__ = ["record_events"]


async def record_events(sub: Subscription, path: Path) -> None:
    """Write every event from ``sub`` to ``path`` until the subscription closes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    out: IO[str] = path.open("a", encoding="utf-8")
    try:
        async for event in sub:
            out.write(json.dumps(event_to_dict(event), ensure_ascii=False))
            out.write("\n")
            if not len(sub):  # caught up: make what was written visible now
                out.flush()
    finally:
        out.close()
