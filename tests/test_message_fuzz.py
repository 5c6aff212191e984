"""A seeded share of the randomized message interleavings (``tests/_message_fuzz.py``).

The full 10,000 run by ``python bench/bench_messages.py``; ``STEERABLE_FUZZ_SEEDS=N`` runs N
here.
"""

from __future__ import annotations

import os

import pytest

from tests._message_fuzz import many


@pytest.mark.timeout(300)
async def test_no_message_is_lost_or_delivered_twice_in_random_interleavings() -> None:
    seeds = int(os.environ.get("STEERABLE_FUZZ_SEEDS", "400"))
    tally = await many(range(seeds))
    assert tally.wrong == []
    assert tally.lost == 0 and tally.duplicated == 0
    # The mix reached every path it is meant to: not a run of refusals.
    assert tally.crashes > seeds // 10 and tally.accepted > seeds and tally.refused > 0
    assert set(tally.states) == {"delivered", "returned", "revoked", "rejected"}
    for action in ("send", "steer", "follow_up", "revoke", "edit", "graceful", "hard",
                   "cancel", "resume", "crash", "resumed", "closed_busy"):
        assert tally.actions[action] > 0, action
