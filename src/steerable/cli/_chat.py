"""``steerable chat``: an interactive session whose prompt stays usable while the agent works.

Enter while a turn runs sends the line as steering (it reaches the model at the next
checkpoint); a line starting with ``>>`` queues a follow-up (a new turn once this one has ended
and been saved). Ctrl+C interrupts gracefully, a second Ctrl+C within 2 s aborts, Ctrl+D quits.
Finished things (answers, tool results) are printed above the prompt; what is running now is
shown in the toolbar under it. Approvals are asked in the prompt itself: y, n or a (always).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from steerable import Event, EventKind, MessageState, TurnResult, TurnStatus
from steerable.cli._app import App, build_app, existing_session, new_session_id
from steerable.cli._approve import (
    always_rules,
    describe_request,
    is_bare_answer,
    parse_answer,
    uncoverable,
)
from steerable.cli._args import UsageError
from steerable.cli._diff_view import coloured_diff
from steerable.cli._pending import describe_pending
from steerable.cli._run import on_ctrl_c, session_line
from steerable.cli._settings import Settings
from steerable.cli._slash import expand_slash, extra_help, slash_completer
from steerable.drivers._session_driver import SessionDriver

__all__ = ["chat"]


DOUBLE_PRESS = 2.0


HELP = """\
Enter          send a message; while the agent works it steers the running turn
>> text        queue a follow-up: it runs as a new turn after the current one
Ctrl+C         interrupt gracefully; twice within 2 s: abort at once (nothing is saved)
Ctrl+D, /quit  leave
/sessions      list saved sessions        /resume ID   continue another session
/new           start a new session        /export [markdown|json] [FILE]
/dry-run on|off  preview changes instead of making them
/events        show or hide the raw event stream
/resume        continue this session's pending turn (cancelled, or cut off by a crash)
/discard       drop this session's pending turn
/queue         list the messages that wait (numbered)
/revoke N      withdraw message N of the last /queue while it still waits
/edit N TEXT   change the text of message N of the last /queue while it still waits
/undo [N] [--force]  take back the files the agent's last N turns changed (bash included)
/redo [--force]      re-apply what the last /undo took back"""

KIND = {"steer": "steer", "follow_up": "follow-up", "send": "message"}


class ChatSession:
    def __init__(self, app: App) -> None:
        from rich.console import Console

        from steerable.cli._render import TurnView

        self.app = app
        self.console = Console(highlight=False)
        self.view = TurnView(app.redact)
        self.driver = SessionDriver(app.loop, app.session_id, on_result=self.on_result)
        self.approvals: deque[Any] = deque()
        self.dry_run = bool(app.settings["dry_run"])
        self.driver.agent = app.agent_for(self.dry_run)
        self.show_events = False
        self.resumed: asyncio.Future[None] | None = None
        # Messages typed while the session has a pending turn: they run, in order, once that
        # turn has been resumed or discarded (nothing typed is dropped).
        self.held: deque[str] = deque()
        # What the last /queue listed, by number: a message id, or the text of a held message.
        self.listed: list[tuple[str, str]] = []
        self.quit = False
        self.invalidate: Any = lambda: None

    @property
    def busy(self) -> bool:
        return self.driver.busy

    def say(self, text: str, style: str = "dim") -> None:
        from rich.text import Text

        self.console.print(Text(text, style=style))

    # -- what the prompt shows ----------------------------------------------------------------

    def message(self) -> str:
        if self.approvals:
            return "allow? [y]es/[n]o/[a]lways > "
        return "steer > " if self.busy else "> "

    def toolbar(self) -> str:
        waiting = len(self.app.loop.queued_messages(self.app.session_id)) + len(self.held)
        queued = f" · {waiting} queued (/queue)" if waiting else ""
        if self.busy:
            frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
            spin = frames[int(time.monotonic() * 10) % len(frames)]
            return (f" {spin} {self.view.toolbar() or 'working'}{queued}   "
                    "(Enter: steer, >>: follow-up)")
        dry = " · dry-run" if self.dry_run else ""
        return f" session {self.app.session_id}{dry}{queued} · /help · Ctrl+D quits"

    # -- events -------------------------------------------------------------------------------

    async def consume(self, events: AsyncIterator[Event]) -> None:
        from rich.text import Text

        from steerable.cli._render import describe_call, event_json

        async for event in events:
            if self.show_events:
                self.say(event_json(event, self.app.redact)[:400])
            if event.kind is EventKind.TOOL_EXEC_START:
                self.console.print(Text(f"▶ {event.tool_name} "
                                        f"{self.app.redact(describe_call(event.tool_name, event.arguments))}",
                                        style="magenta"))
            for block in self.view.handle(event):
                self.console.print(block)
            if event.kind is EventKind.APPROVAL_REQUESTED and self.app.interactive_approvals:
                self.console.print(coloured_diff(
                    describe_request(self.app, event.tool_name, event.arguments), indent="",
                    head_style="yellow"))
                self.approvals.append(event)
            elif event.kind is EventKind.APPROVAL_RESOLVED:
                self.approvals = deque(a for a in self.approvals
                                       if a.request_id != event.request_id)
            elif (event.kind is EventKind.MESSAGE_STATE
                  and event.state is MessageState.REJECTED and event.message_kind == "send"):
                self.say(f"not taken: {self.app.redact(event.text)} ({event.detail})", "red")
            self.invalidate()

    # -- input --------------------------------------------------------------------------------

    async def on_line(self, line: str) -> None:
        text = line.strip()
        if self.approvals:
            self.answer(text)
            return
        if not text:
            return
        if text.startswith("/"):
            await self.command(text)
            return
        self.message_line(text)

    def message_line(self, text: str) -> None:
        """A line that is a message: steers, follows up or starts a turn."""
        follow_up = text.startswith(">>")
        body = text[2:].strip() if follow_up else text
        if not body:
            return
        if self.busy and not follow_up and is_bare_answer(body):
            self.say(f"not sent: {body!r} looks like an answer to an approval question, and "
                     "none is open; answer at the 'allow?' prompt, or write a longer message "
                     "to steer", "yellow")
            return
        if self.busy:
            sent = self.driver.send(body, "follow_up" if follow_up else "steer")
            if sent.action == "steered":
                self.say(f"↳ steering sent: {body}", "cyan")
            elif not follow_up:  # the turn was ending: the message becomes the next turn
                self.say(f"↳ queued as the next turn: {body}", "cyan")
            return  # a follow-up's FOLLOW_UP_QUEUED is printed by the view
        self.held.append(body)
        if not self.send_held():
            self.say("this session has a pending turn: /resume continues it, /discard drops it "
                     "(your message stays queued)", "yellow")

    def send_held(self) -> bool:
        """Send the held messages in order; False while a pending turn still refuses them."""
        from steerable.errors import CheckpointError

        while self.held:
            try:
                self.driver.send(self.held[0], "follow_up")
            except CheckpointError:
                return False
            self.held.popleft()
        return True

    def drop_held(self) -> None:
        for text in self.held:
            self.say(f"not sent (it was for the previous session): {text}", "yellow")
        self.held.clear()

    def answer(self, text: str) -> None:
        choice = parse_answer(text)
        if choice is None:
            self.say("answer y (yes), n (no) or a (always allow)", "yellow")
            return
        event = self.approvals.popleft()
        rules = always_rules(event.tool_name, event.arguments) if choice == "a" else []
        if rules and uncoverable(self.app, event.tool_name, event.arguments):
            self.say("allowed this once: no rule can cover this line (redirections or other "
                     "parts the permission reader cannot check); it will be asked again")
            rules = []
        for pattern in rules:
            self.say(f"added rule for this session: allow: {pattern}")
        self.driver.answer(choice != "n", request_id=event.request_id, allow=rules,
                           reason="the user said no" if choice == "n" else "")

    def on_result(self, result: TurnResult) -> None:
        """Each finished turn: say what it could not deliver, and why it failed."""
        redact = self.app.redact
        for item in result.unprocessed:
            self.say(f"not delivered ({item.kind}: {redact(item.text)})", "yellow")
        if result.status is TurnStatus.ERROR and result.error is not None:
            self.say(f"error: {redact(str(result.error))}", "red")
        self.invalidate()

    def ctrl_c(self) -> None:
        self.approvals.clear()
        on_ctrl_c(self.driver, lambda text: self.say(self.app.redact(text), "yellow"))

    async def command(self, text: str) -> None:
        name, _, rest = text.partition(" ")
        arg = rest.strip()
        app = self.app
        if name in ("/quit", "/exit"):
            self.quit = True
        elif name == "/help":
            self.say("\n".join(filter(None, [HELP, extra_help(app.commands, app.skills)])), "")
        elif name == "/events":
            self.show_events = not self.show_events
            self.say(f"raw events {'on' if self.show_events else 'off'}")
        elif name == "/dry-run" and arg in ("on", "off"):
            self.dry_run = arg == "on"
            self.driver.agent = app.agent_for(self.dry_run)
            self.say(f"dry-run {arg}: {'changes are previewed only' if self.dry_run else 'tools act for real'}")
        elif name == "/queue":
            self.show_queue()
        elif name in ("/revoke", "/edit") and self.numbered(arg) is not None:
            n, _, new = arg.partition(" ")
            if name == "/revoke":
                self.revoke(int(n))
            elif new.strip():
                self.edit(int(n), new.strip())
            else:
                self.say("/edit N TEXT: the new text is missing", "yellow")
        elif name == "/sessions":
            from steerable.cli._sessions import _list

            _list(app.store, False)
        elif name in ("/resume", "/new", "/export", "/discard") and self.busy:
            self.say("wait for the turn to end (or Ctrl+C) first", "yellow")
        elif name == "/resume" and arg:
            self.resume(arg)
        elif name == "/resume":
            self.continue_pending()
        elif name == "/discard":
            self.say("pending turn dropped" if self.driver.discard() else "no pending turn")
            self.send_held()
        elif name == "/new":
            self.drop_held()
            app.session_id = self.driver.session_id = new_session_id()
            self.say(f"new session {app.session_id}")
        elif name == "/export":
            self.export(arg.split())
        elif name in ("/undo", "/redo"):
            await self.undo(name, arg.split())
        elif (expanded := expand_slash(app.commands, text)) is not None:
            self.message_line(expanded)  # sent as written, even if it starts with '/'
        else:
            self.say(f"unknown or incomplete command {text!r}; /help lists them", "yellow")

    # -- the messages that wait -----------------------------------------------------------------

    def show_queue(self) -> None:
        """Number what waits: the session's queued messages, then those held behind a pending
        turn; /revoke and /edit take these numbers."""
        redact = self.app.redact
        self.listed = []
        for m in self.app.loop.queued_messages(self.app.session_id):
            self.listed.append(("id", m.message_id))
            self.say(f"{len(self.listed)}. [{KIND.get(m.kind, m.kind)}] {redact(m.text)} · "
                     f"{m.state.value}", "")
        for text in self.held:
            self.listed.append(("held", text))
            self.say(f"{len(self.listed)}. [held] {redact(text)} · waits for the pending turn to "
                     "be resumed or discarded", "")
        if not self.listed:
            self.say("nothing is queued")

    def numbered(self, arg: str) -> int | None:
        n = arg.partition(" ")[0]
        return int(n) if n.isdigit() else None

    def _listed(self, n: int) -> tuple[str, str] | None:
        if 1 <= n <= len(self.listed):
            return self.listed[n - 1]
        self.say(f"no message {n} in the last /queue listing; /queue lists them", "yellow")
        return None

    def revoke(self, n: int) -> None:
        entry = self._listed(n)
        if entry is None:
            return
        what, ref = entry
        if what == "held" and ref in self.held:
            self.held.remove(ref)
            done = True
        else:
            done = what == "id" and self.app.loop.revoke_message(ref)
        self.say(f"message {n} withdrawn" if done else
                 f"too late: message {n} no longer waits (delivered, or its turn ended)",
                 "cyan" if done else "yellow")

    def edit(self, n: int, text: str) -> None:
        entry = self._listed(n)
        if entry is None:
            return
        what, ref = entry
        if what == "held" and ref in self.held:
            self.held[self.held.index(ref)] = text
            self.listed[n - 1] = ("held", text)
            done = True
        else:
            done = what == "id" and self.app.loop.edit_message(ref, text)
        self.say(f"message {n} now reads: {self.app.redact(text)}" if done else
                 f"too late: message {n} no longer waits (delivered, or its turn ended)",
                 "cyan" if done else "yellow")

    async def undo(self, name: str, args: list[str]) -> None:
        from steerable.cli._undo import describe
        from steerable.errors import SteerableError

        hook = self.app.undo
        rest = [a for a in args if a != "--force"]
        if self.busy:
            self.say("wait for the turn to end (or Ctrl+C) first: files are still changing",
                     "yellow")
        elif hook is None:
            self.say("undo is off (the 'undo' setting)", "yellow")
        elif name == "/undo" and not (len(rest) == 0 or (len(rest) == 1 and rest[0].isdigit()
                                                         and int(rest[0]) > 0)):
            self.say("usage: /undo [N] [--force]", "yellow")
        else:
            snaps, sid, force = hook.snapshots, self.app.session_id, "--force" in args
            try:
                if name == "/undo":
                    n = int(rest[0]) if rest else 1
                    result = await asyncio.to_thread(snaps.undo, sid, n, force=force)
                else:
                    result = await asyncio.to_thread(snaps.redo, sid, force=force)
            except SteerableError as exc:
                self.say(str(exc), "yellow")
            else:
                self.say(describe(result, "undid" if name == "/undo" else "redid"), "")

    def resume(self, session_id: str) -> None:
        from steerable.errors import SteerableError

        try:
            count = len(existing_session(self.app.store, session_id))
        except UsageError:
            self.say(f"no session {session_id!r}; /sessions lists them", "yellow")
            return
        except (SteerableError, ValueError) as exc:
            self.say(f"cannot resume: {exc}", "red")
            return
        self.drop_held()
        self.app.session_id = self.driver.session_id = session_id
        self.say(f"resumed {session_id} ({count} messages)")
        self.announce_pending()

    def announce_pending(self) -> None:
        from steerable.errors import CheckpointError

        sid = self.app.session_id
        try:
            pending = self.app.loop.checkpoint(sid)
        except CheckpointError as exc:
            self.say(f"this session's pending turn cannot be read: {exc}", "red")
            return
        if pending is not None:
            self.say(describe_pending(sid, pending, "/resume", "/discard"), "yellow")

    def continue_pending(self) -> None:
        from steerable.errors import SteerableError

        try:
            handle = self.driver.resume()
        except (SteerableError, ValueError) as exc:
            self.say(f"cannot continue the pending turn: {exc}", "red")
            return
        if handle is None:
            self.say("this session has no pending turn")
            return
        self.say("continuing the pending turn")
        self.resumed = asyncio.ensure_future(self.after_resume(handle))

    async def after_resume(self, handle: Any) -> None:
        """Messages typed while the turn was pending run after it and the follow-ups it hands
        back (the driver reports it and sends those)."""
        await handle
        await self.driver.wait_idle()
        self.send_held()

    def export(self, args: list[str]) -> None:
        from steerable.cli._sessions import export_json, export_markdown

        fmt = args[0] if args and args[0] in ("markdown", "json") else "markdown"
        rest = args[1:] if args and args[0] in ("markdown", "json") else args
        sid = self.app.session_id
        target = Path(rest[0] if rest else f"{sid}.{'md' if fmt == 'markdown' else 'json'}")
        messages = self.app.store.load(sid)
        text = export_markdown(sid, messages) if fmt == "markdown" else export_json(sid, messages)
        target.write_text(text + "\n", encoding="utf-8")
        self.say(f"wrote {len(messages)} messages to {target}")


async def _main(app: App) -> int:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.patch_stdout import patch_stdout

    chat = ChatSession(app)
    builtin = sorted({w.split()[0] for w in HELP.split() if w.startswith("/")} | {"/help"})
    session: PromptSession[str] = PromptSession(
        completer=slash_completer(builtin, app.commands),  # type: ignore[arg-type]
        complete_while_typing=True)
    chat.invalidate = lambda: session.app.invalidate() if session.app.is_running else None
    with patch_stdout(raw=True):
        consumer = asyncio.ensure_future(chat.consume(chat.driver.events()))
        chat.say(f"steerable chat · workspace {app.workspace.root} · session {app.session_id}"
                 " · /help for keys")
        chat.announce_pending()
        while not chat.quit:
            try:
                line = await session.prompt_async(chat.message, bottom_toolbar=chat.toolbar,
                                                  refresh_interval=0.2)
            except KeyboardInterrupt:
                chat.ctrl_c()
                continue
            except EOFError:
                break
            await chat.on_line(line)
        if chat.busy:
            chat.driver.stop()
        if chat.resumed is not None:
            await chat.resumed
        await chat.driver.wait_idle()
        chat.driver.close()
        await consumer
        await app.loop.aclose()
    print(session_line(app))
    return 0


def chat(args: argparse.Namespace, settings: Settings) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("chat needs a terminal; use 'steerable run' in scripts and pipes")
    from steerable.cli._hook_setup import ask_on_terminal
    from steerable.cli._integrations import recording, telemetry
    from steerable.cli._mcp import configured_tools

    async def go() -> int:
        async with configured_tools(settings) as mcp_tools:
            app = build_app(settings, session=args.session, can_ask=True, script=args.script,
                            record_events=args.record_events, extra_tools=mcp_tools,
                            ask_hooks=ask_on_terminal)
            telemetry(app, settings)
            async with recording(app, args.record):
                return await _main(app)

    return asyncio.run(go())
