"""``steerable run``: one prompt, rendered live (or as JSON lines), then exit with its status.

Ctrl+C interrupts gracefully (the running tool finishes, then the model sums up); a second
Ctrl+C within 2 s aborts at once. Follow-ups the turn hands back run as turns of their own.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from typing import Any

from steerable import EventKind, TurnHandle, TurnResult, TurnStatus
from steerable.cli._app import App
from steerable.cli._approve import always_rules, describe_request, parse_answer, read_line

__all__ = ["exit_code", "run_prompt"]

DOUBLE_PRESS = 2.0


def exit_code(result: TurnResult) -> int:
    if result.status is TurnStatus.COMPLETED:
        return 0
    if result.status in (TurnStatus.INTERRUPTED, TurnStatus.ABORTED, TurnStatus.CANCELLED):
        return 3
    return 1


class _CtrlC:
    """First press: graceful interrupt; a second within ``DOUBLE_PRESS`` seconds: hard abort."""

    def __init__(self, app: App, say: Any) -> None:
        self.app = app
        self.say = say
        self.last = 0.0

    def __call__(self) -> None:
        now = time.monotonic()
        sid = self.app.session_id
        if now - self.last <= DOUBLE_PRESS:
            self.app.loop.interrupt_hard(sid)
        elif self.app.loop.interrupt_graceful(sid):
            self.say("Ctrl+C again within 2 s to abort at once")
        else:
            self.app.loop.interrupt_hard(sid)
        self.last = now


async def _approve(app: App, event: Any, pause: Any, resume: Any) -> None:
    pause()
    try:
        sys.stderr.write(describe_request(app, event.tool_name, event.arguments) + "\n")
        while True:
            line = await read_line("allow? [y]es / [n]o / [a]lways: ")
            answer = "n" if line is None else parse_answer(line)
            if answer is not None:
                break
        if answer == "a":
            for pattern in always_rules(event.tool_name, event.arguments):
                rule = app.loop.permissions.add("allow", pattern)
                sys.stderr.write(f"added rule for this session: {rule}\n")
        app.loop.resolve_approval(event.request_id, answer in ("y", "a"),
                                  "" if answer != "n" else "the user said no")
    finally:
        resume()


async def _consume(app: App, sub: Any, as_json: bool) -> None:
    from steerable.cli._render import LiveRenderer, TurnView, event_json

    if as_json:
        async for event in sub:
            sys.stdout.write(event_json(event, app.redact) + "\n")
            sys.stdout.flush()
            if event.kind is EventKind.APPROVAL_REQUESTED and app.interactive_approvals:
                await _approve(app, event, lambda: None, lambda: None)
        return
    from rich.console import Console

    console = Console(highlight=False)
    view = TurnView(app.redact)
    with LiveRenderer(console, view) as renderer:
        async for event in sub:
            renderer.handle(event)
            if event.kind is EventKind.APPROVAL_REQUESTED and app.interactive_approvals:
                await _approve(app, event, renderer.pause, renderer.resume)


def _first_turn(app: App, prompt: str | None, discard_pending: bool) -> TurnHandle:
    """The resumed pending turn (``prompt`` None), or a new turn of ``prompt``."""
    from steerable.cli._args import UsageError
    from steerable.cli._chat import describe_pending
    from steerable.errors import CheckpointError

    sid = app.session_id
    try:
        if prompt is None:
            handle = app.loop.resume(sid)
            if handle is None:
                raise UsageError(f"session {sid} has no pending turn to resume")
            return handle
        return app.loop.start_turn(prompt, sid, discard_checkpoint=discard_pending)
    except CheckpointError as exc:
        pending = None if prompt is None else app.loop.checkpoint(sid)
        if pending is None:
            raise UsageError(str(exc)) from None
        run = f"'steerable run --session {sid} --resume'"
        drop = "--discard-pending (with your prompt)"
        raise UsageError(describe_pending(sid, pending, run, drop)) from None


async def run_prompt(app: App, prompt: str | None, *, as_json: bool, debug: bool = False,
                     discard_pending: bool = False) -> int:
    """Run ``prompt`` (None: resume the session's pending turn) and its follow-ups."""
    loop = asyncio.get_running_loop()
    sub = app.loop.subscribe(buffer=65536)
    consumer = asyncio.ensure_future(_consume(app, sub, as_json))
    ctrl_c = _CtrlC(app, lambda text: sys.stderr.write(text + "\n"))
    loop.add_signal_handler(signal.SIGINT, ctrl_c)
    try:
        pending: list[str] = []
        result: TurnResult = await _first_turn(app, prompt, discard_pending)
        while True:
            if result.status in (TurnStatus.COMPLETED, TurnStatus.MAX_ITERATIONS):
                pending += result.follow_ups
            else:
                for item in result.unprocessed:
                    sys.stderr.write(f"not delivered ({item.kind}): {app.redact(item.text)}\n")
            if not pending:
                break
            result = await app.loop.run_turn(pending.pop(0), app.session_id)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        sub.close()
        await consumer
        await app.loop.aclose()
    # stderr gets one line: the error (naming the session, which keeps the turn's consistent
    # prefix), or else the session id to continue with.
    if result.status is TurnStatus.ERROR and result.error is not None:
        if debug:
            import traceback

            traceback.print_exception(result.error, file=sys.stderr)
        sys.stderr.write(f"steerable: error: {app.redact(str(result.error))} "
                         f"(session {app.session_id})\n")
    elif not as_json:
        sys.stderr.write(f"session {app.session_id}\n")
    return exit_code(result)
