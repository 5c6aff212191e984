"""``steerable replay FILE``: play a recording back with no model and no network, printed as
``steerable run`` prints a live run (``--json``: one event per line). A replay that leaves the
recording stops with the first difference (exit code 1)."""

from __future__ import annotations

import sys

from steerable.cli._app import Redactor
from steerable.cli._run import exit_code

__all__ = ["replay_command"]


async def replay_command(path: str, as_json: bool) -> int:
    from steerable.cli._render import LiveRenderer, TurnView, event_json
    from steerable.replay import replay

    out = await replay(path)
    redact = Redactor()
    if as_json:
        for event in out.events:
            sys.stdout.write(event_json(event, redact) + "\n")
    else:
        from rich.console import Console

        with LiveRenderer(Console(highlight=False), TurnView(redact)) as renderer:
            for event in out.events:
                renderer.handle(event)
        sys.stderr.write(f"replayed {len(out.events)} events of {path}: no divergence\n")
    sys.stdout.flush()
    return exit_code(out.results[-1]) if out.results else 0
