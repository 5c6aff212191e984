"""Random ids (turns, messages, approvals), from one place so a host can make them replayable.

By default an id is ``os.urandom`` hex. A durable-execution engine that replays a session's code
after a crash (Temporal) needs the replay to make the same ids as the first run, or a message id
returned to a caller, or an approval id shown to a person, would change under them: such a host
sets a seeded source for the code it runs (``id_source``). The source is a context variable, so
it holds for the tasks started inside and for nothing else in the process.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["id_source", "random_hex"]

_SOURCE: ContextVar[Callable[[int], bytes] | None] = ContextVar("steerable_id_source",
                                                                default=None)


def random_hex(nbytes: int) -> str:
    """``nbytes`` random bytes as hex, from the current source (``os.urandom`` by default)."""
    source = _SOURCE.get()
    return (os.urandom(nbytes) if source is None else source(nbytes)).hex()


@contextmanager
def id_source(source: Callable[[int], bytes]) -> Iterator[None]:
    """Make ids with ``source(nbytes)`` inside the block (and in tasks started from it)."""
    token = _SOURCE.set(source)
    try:
        yield
    finally:
        # ValueError: the block is left in another context. A suspended coroutine closed by
        # the garbage collector (a workflow a stopped Temporal worker dropped from its cache;
        # ``TemporalWorker`` now evicts those itself, this is the second guard) runs its
        # ``finally`` in whatever context is current then: another workflow's task, whose
        # source is not this block's to change (setting it drew that workflow's ids from the
        # wrong stream, a nondeterminism seen under load); this block's own context is gone.
        with contextlib.suppress(ValueError):
            _SOURCE.reset(token)
