"""The README's main-job command runs the demo: it must keep working."""

from __future__ import annotations

import io

from steerable import demo


async def test_demo_runs_and_shows_every_feature() -> None:
    out = io.StringIO()
    assert await demo.main(out) == 0
    text = out.getvalue()
    for expected in ("skipped (steering)", "steering reached the model", "interrupt (graceful)",
                     "skipped (interrupted)", "turn aborted", "as before the aborted turn"):
        assert expected in text, expected
