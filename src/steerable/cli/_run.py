"""``steerable run``: one prompt, rendered live (or as JSON lines), then exit with its status.

A thin front end over ``SessionDriver``: Ctrl+C interrupts gracefully (the running tool
finishes, then the model sums up); a second Ctrl+C aborts at once. Follow-ups the turn hands
back run as turns of their own (through ``AgentLoop.send``).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from steerable import Event, EventKind, TurnHandle, TurnResult, TurnStatus
from steerable._parts import Part
from steerable.cli._app import App
from steerable.cli._approve import (
    always_rules,
    describe_request,
    discard_typed_ahead,
    parse_answer,
    read_line,
    uncoverable,
)
from steerable.cli._diff_view import coloured_diff
from steerable.cli._requests import ask_inline, how_to_answer
from steerable.drivers._session_driver import DOUBLE_PRESS, SessionDriver

__all__ = ["DENIED", "NOT_CHANGED", "WAITING", "exit_code", "on_ctrl_c", "run_prompt",
           "session_line"]


DENIED = 4
"""Exit code of a run whose turn completed, but every action it asked for was denied."""

NOT_CHANGED = 6
"""Exit code of a run asked for a change (the policy's reading) whose turn changed nothing, or
left a file it changed unparsable."""

WAITING = 5
"""Exit code of a run whose turn waits for an answer (parked: ``steerable answer``,
``steerable approve``/``deny`` resume it, from any process)."""


class _Tally:
    """What the run's tool calls came to: the denied ones, and whether anything acted
    (a tool that is not read-only started)."""

    def __init__(self, app: App) -> None:
        self.tools = app.agent.tools_by_name
        self.denied: list[str] = []
        self.acted = False

    def see(self, event: Event) -> None:
        if event.kind is EventKind.TOOL_EXEC_SKIPPED and event.reason == "denied":
            self.denied.append(f"{event.tool_name} ({event.detail or 'denied'})")
        elif event.kind is EventKind.TOOL_EXEC_START:
            tool = self.tools.get(event.tool_name)
            self.acted = self.acted or (tool is not None and not tool.read_only)

    @property
    def only_denied(self) -> bool:
        return bool(self.denied) and not self.acted


def exit_code(result: TurnResult) -> int:
    if result.status is TurnStatus.COMPLETED:
        return 0
    if result.status is TurnStatus.WAITING:
        return WAITING
    if result.status in (TurnStatus.INTERRUPTED, TurnStatus.ABORTED, TurnStatus.CANCELLED,
                         TurnStatus.BUDGET_EXCEEDED):
        return 3
    return 1


def _errors() -> Any:
    """A rich console on stderr, where run asks its questions (stdout may be piped)."""
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def on_ctrl_c(driver: SessionDriver, say: Callable[[str], None]) -> None:
    """Ctrl+C in run and chat: the driver decides; ``say`` (which redacts) tells the user."""
    press = driver.press_interrupt()
    if press.action in ("graceful", "armed"):
        say(f"Ctrl+C again within {DOUBLE_PRESS:g} s to abort at once")
    elif press.action == "idle":
        say("(nothing is running; Ctrl+D or /quit to leave)")
    for text in press.dropped:
        say(f"not delivered (queued): {text}")


async def _approve(app: App, driver: SessionDriver, event: Any, pause: Any, resume: Any) -> None:
    pause()
    try:
        discard_typed_ahead()
        _errors().print(coloured_diff(describe_request(app, event.tool_name, event.arguments),
                                      indent=""))
        while True:
            line = await read_line("allow? [y]es / [n]o / [a]lways: ")
            answer = "n" if line is None else parse_answer(line)
            if answer is not None:
                break
        rules = always_rules(event.tool_name, event.arguments) if answer == "a" else []
        if rules and uncoverable(app, event.tool_name, event.arguments):
            sys.stderr.write("allowed this once: no rule can cover this line (redirections or "
                             "other parts the permission reader cannot check); it will be "
                             "asked again\n")
            rules = []
        for pattern in rules:
            sys.stderr.write(f"added rule for this session: allow: {pattern}\n")
        driver.answer(answer in ("y", "a"), request_id=event.request_id, allow=rules,
                      reason="the user said no" if answer == "n" else "")
    finally:
        resume()


async def _consume(app: App, driver: SessionDriver, events: AsyncIterator[Event],
                   as_json: bool, tally: _Tally) -> None:
    from steerable.cli._render import LiveRenderer, TurnView, event_json

    asks = app.interactive_approvals
    if as_json:
        async for event in events:
            tally.see(event)
            sys.stdout.write(event_json(event, app.redact) + "\n")
            sys.stdout.flush()
            if event.kind is EventKind.APPROVAL_REQUESTED and asks:
                await _approve(app, driver, event, lambda: None, lambda: None)
            elif event.kind is EventKind.QUESTION_ASKED and asks:
                await ask_inline(app.loop, event, lambda: None, lambda: None, app.redact)
        return
    from rich.console import Console

    console = Console(highlight=False)
    view = TurnView(app.redact)
    with LiveRenderer(console, view) as renderer:
        async for event in events:
            tally.see(event)
            renderer.handle(event)
            if event.kind is EventKind.APPROVAL_REQUESTED and asks:
                await _approve(app, driver, event, renderer.pause, renderer.resume)
            elif event.kind is EventKind.QUESTION_ASKED and asks:
                await ask_inline(app.loop, event, renderer.pause, renderer.resume, app.redact)


def _first_turn(app: App, prompt: str | list[Part] | None,
                discard_pending: bool) -> TurnHandle:
    """The resumed pending turn (``prompt`` None), or a new turn of ``prompt``."""
    from steerable.cli._args import UsageError
    from steerable.cli._pending import describe_pending
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


async def run_prompt(app: App, prompt: str | list[Part] | None, *, as_json: bool,
                     debug: bool = False, discard_pending: bool = False,
                     start: Callable[[], Awaitable[TurnResult]] | None = None) -> int:
    """Run ``prompt`` (text or content parts; None: resume the session's pending turn;
    ``start``: the turn it gives, as an answer that resumes a parked turn) and its follow-ups."""
    loop = asyncio.get_running_loop()
    driver = SessionDriver(app.loop, app.session_id)
    tally = _Tally(app)
    consumer = asyncio.ensure_future(_consume(app, driver, driver.events(), as_json, tally))

    def say(text: str) -> None:
        sys.stderr.write(app.redact(text) + "\n")

    loop.add_signal_handler(signal.SIGINT, on_ctrl_c, driver, say)
    try:
        result: TurnResult = await (start() if start is not None
                                    else _first_turn(app, prompt, discard_pending))
        if result.status in (TurnStatus.COMPLETED, TurnStatus.MAX_ITERATIONS) and result.follow_ups:
            # The follow-ups run through send: in order, each after the one before was saved.
            for text in result.follow_ups:
                driver.send(text, "follow_up")
            result = await driver.wait_idle() or result
        await _end_background(app, driver)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        await app.shells.aclose()
        driver.close()
        await consumer
        await app.loop.aclose()
    return await _report(app, result, tally, as_json=as_json, debug=debug)


async def _report(app: App, result: TurnResult, tally: _Tally, *, as_json: bool,
                  debug: bool) -> int:
    """Say on stderr how the run ended (what was put back, not delivered, or waits; the error
    or the session to continue with) and choose its exit code."""
    if result.status is TurnStatus.ABORTED and app.undo is not None:
        # Before exiting: the observer may still be putting the aborted turn's files back.
        restored = await asyncio.to_thread(app.undo.restore_aborted, app.session_id,
                                           result.turn_id)
        if restored is not None:
            sys.stderr.write(f"put back {len(restored.paths)} path(s) the aborted turn "
                             "changed (undo_on_abort)\n")
    lines = [f"not delivered ({item.kind}): {item.text}" for item in result.unprocessed]
    lines += how_to_answer(result.pending) if result.status is TurnStatus.WAITING else []
    sys.stderr.writelines(app.redact(line) + "\n" for line in lines)
    # stderr gets one line: the error (naming the session, which keeps the turn's consistent
    # prefix), or else the session id to continue with.
    if result.status is TurnStatus.ERROR and result.error is not None:
        if debug:
            import traceback

            traceback.print_exception(result.error, file=sys.stderr)
        sys.stderr.write(f"steerable: error: {app.redact(str(result.error))} "
                         f"(session {app.session_id})\n")
    elif not as_json:
        sys.stderr.write(session_line(app) + "\n")
    code = exit_code(result)
    verdict = app.policy.verdict(result.turn_id) if app.policy is not None else None
    if code == 0 and verdict is not None and verdict.change_missing:
        sys.stderr.write("steerable: nothing was changed: the request asked for a change and "
                         "no tool changed a file\n")
        return NOT_CHANGED
    if code == 0 and verdict is not None and verdict.held:
        sys.stderr.write("steerable: nothing was changed: the request was not read as asking "
                         "for a change for certain (two readings disagreed), so "
                         f"{', '.join(verdict.held)} {'was' if len(verdict.held) == 1 else 'were'}"
                         " refused; if you meant a change, ask "
                         "for it again plainly: what to change, and in which file\n")
        return NOT_CHANGED
    if code == 0 and verdict is not None and verdict.broken:
        sys.stderr.write(f"steerable: the change left {', '.join(verdict.broken)} unparsable\n")
        return NOT_CHANGED
    asked_nothing = verdict is not None and verdict.intent != "change"
    if code == 0 and tally.only_denied and not asked_nothing:
        sys.stderr.write(app.redact(f"steerable: nothing was done: denied {'; '.join(tally.denied)}")
                         + "\n")
        return DENIED
    return code


async def _end_background(app: App, driver: SessionDriver) -> None:
    """The run ends with its prompt's turns: the turns that tell of background commands
    which ended meanwhile run first; the commands still running are stopped (and said)."""
    await driver.wait_idle()
    for shell in await app.shells.aclose():
        sys.stderr.write(app.redact(f"stopped background command {shell.shell_id} "
                                    f"({shell.command}): the run ended") + "\n")
    await driver.wait_idle()  # a command that ended just before: its turn runs too


def session_line(app: App) -> str:
    """The session to continue with, or why there is none (a first turn that was aborted is
    rolled back: nothing was saved, so an id printed then could not be continued)."""
    sid = app.session_id
    if app.store.exists(sid) or app.store.checkpoint_path(sid).exists():
        return f"session {sid}"
    return "nothing was saved, so there is no session to continue"
