"""The debug recorder: every event of a loop as one JSON line in a file (opt-in).

It is an ordinary subscriber, so it never slows the loop: with a large buffer it drops nothing
in practice, and if it ever does, the drop counts say so. Events can carry secrets (a tool's
output of ``env``, a provider error echoing a key), so every event is redacted (by value, before
it is encoded) like the CLI's output and the file is readable by its owner only (created 0600, tightened if it exists).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO

from steerable._core._bus import Subscription
from steerable._events import event_to_dict
from steerable._secrets import Redactor, redacted

__all__ = ["record_events"]


async def record_events(sub: Subscription, path: str | os.PathLike[str]) -> None:
    """Write every event from ``sub`` to ``path`` until the subscription closes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    os.fchmod(fd, 0o600)  # an existing file made by someone's umask is tightened too
    out: IO[str] = os.fdopen(fd, "a", encoding="utf-8")
    redact = Redactor()
    try:
        async for event in sub:
            out.write(json.dumps(redacted(event_to_dict(event), redact), ensure_ascii=False))
            out.write("\n")
            if not len(sub):  # caught up: make what was written visible now
                out.flush()
    finally:
        out.close()
