"""``Limits.active_turns``: how many turns (top-level and sub-turns) may run at once.

A top-level turn waits for a slot (first come, first served) before it does any work; a
sub-turn is refused at once instead, since its parent holds a slot while it waits and waiting
could then deadlock. With no limit every call is a no-op.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["TurnSlots"]


class TurnSlots:
    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.in_use = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    def try_take(self) -> bool:
        if self.limit is None:
            return True
        if self.in_use >= self.limit or self._waiters:
            return False
        self.in_use += 1
        return True

    async def take(self) -> None:
        """Wait for a slot. Cancelled while waiting, it takes none."""
        if self.try_take():
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give_back()  # handed a slot in the same instant: pass it on
            else:
                self._waiters.remove(waiter)
            raise

    def give_back(self) -> None:
        if self.limit is None:
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot moves to the waiter: in_use is unchanged
                return
        self.in_use -= 1
