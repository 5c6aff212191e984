"""What the worker's parts (the control handler, the event publisher) need of the worker.

A protocol, so ``_control`` and ``_events`` never import ``_worker`` (which builds them):
the worker satisfies it, and a test can hand them something smaller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from steerable.drivers._handle import TurnHandle
from steerable.drivers._loop import AgentLoop
from steerable.scale._keys import Keys
from steerable.scale._protocol import Scripts

__all__ = ["WorkerHost"]


class WorkerHost(Protocol):
    keys: Keys
    worker_id: str
    loop: AgentLoop
    scripts: Scripts
    running: dict[str, TurnHandle]
    """The turn each held session runs now."""
    turn_tokens: dict[str, str]
    """Top-level turn id -> the lease token it runs under."""
    events_maxlen: int
    events_ttl: int
    redact: Callable[[str], str]
    _redis: Any
    _errors: tuple[type[BaseException], ...]

    @property
    def tokens(self) -> dict[str, str]:
        """Lease tokens of the sessions the worker holds."""
        ...

    def turn_published(self, turn_id: str) -> None: ...
