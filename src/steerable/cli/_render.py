"""Showing a turn in the terminal with rich: streamed markdown, tool cards, a status line.

``TurnView`` keeps what is in flight (the text being streamed, the tools running, with their
last lines of output) and turns finished things into printable blocks. Sub-turns are shown as a
tree: a child's output is indented under the turn that spawned it, between a ``┌ agent: task``
line and a ``└ agent status`` line; each turn streams its own text. ``LiveRenderer`` shows
the in-flight part in a ``rich.live.Live`` region under the printed blocks (``run``);
the chat prints the blocks and shows the in-flight part in its prompt's toolbar instead, since
a live region and an editable prompt cannot share the bottom of the screen.
"""

from __future__ import annotations

import json
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.markdown import Markdown
from rich.padding import Padding
from rich.spinner import Spinner
from rich.text import Text

from steerable import EventKind, Usage, event_to_dict
from steerable._secrets import redacted
from steerable.cli._app import Redactor
from steerable.cli._diff_view import coloured_diff

__all__ = ["LiveRenderer", "TurnView", "describe_call", "status_line"]

TAIL_LINES = 6
_PLAN_MARKS = {"done": ("☑", "green strike"), "in_progress": ("◐", "bold yellow"),
               "pending": ("☐", "")}
_HEAD = 400  # how much of a call's arguments is kept to find its path or command
_MAIN_ARG = re.compile(r'"(?:path|command|pattern)"\s*:\s*"((?:[^"\\]|\\.){1,200})"')


def describe_call(name: str, arguments: Any, width: int = 70) -> str:
    """A one-line summary of a tool call: its main argument, shortened."""
    args = dict(arguments) if isinstance(arguments, dict) else {}
    if name == "todo" and isinstance(args.get("items"), list):
        return f"{len(args['items'])} steps"  # the plan itself is drawn from PLAN_UPDATED
    main = args.get("command") or args.get("path") or args.get("pattern")
    text = str(main) if main is not None else json.dumps(args, ensure_ascii=False)
    if name == "grep" and args.get("path") not in (None, "."):
        text += f"  in {args['path']}"
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def usage_text(usage: Usage | None) -> str:
    """Tokens (the cached part of the input too) and the cost when it is known ("" for none)."""
    if usage is None or not (usage.input_tokens or usage.output_tokens):
        return ""
    cached = f" ({usage.cached_tokens:,} cached)" if usage.cached_tokens else ""
    text = f"{usage.input_tokens:,} tokens in{cached} / {usage.output_tokens:,} out"
    if usage.cost_usd is not None:
        text += f" · ${usage.cost_usd:.4f}" if usage.cost_usd < 1 else f" · ${usage.cost_usd:.2f}"
    return text


def status_line(status: str, iterations: int, usage: Usage | None, seconds: float) -> str:
    parts = [status, f"{iterations} iteration{'s' if iterations != 1 else ''}"]
    if used := usage_text(usage):
        parts.append(used)
    parts.append(f"{seconds:.1f}s")
    return " · ".join(parts)


@dataclass
class _Card:
    name: str
    summary: str
    started: float
    depth: int
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    partial: str = ""
    diff: str = ""
    """What an edit or write changed, shown under its line once it ends."""

    def feed(self, text: str) -> None:
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()
        self.tail.extend(line for line in lines)


@dataclass
class _Writing:
    """A tool call the model is writing (from its ``TOOL_CALL_DELTA`` events)."""

    name: str
    started: float
    depth: int
    size: int = 0
    """Characters of arguments so far."""
    lines: int = 0
    """Escaped newlines (``\\n``) in the arguments so far: about the lines of a file's text."""
    head: str = ""
    last: str = ""

    def feed(self, text: str) -> None:
        self.size += len(text)
        self.lines += (self.last + text).count("\\n") - self.last.count("\\n")
        self.last = text[-1:]
        if len(self.head) < _HEAD:
            self.head += text[: _HEAD - len(self.head)]

    def describe(self, now: float) -> str:
        found = _MAIN_ARG.search(self.head)
        target = f" {found.group(1)}" if found else ""
        size = f"{self.size / 1000:.1f} kB" if self.size >= 1000 else f"{self.size} B"
        lines = f", {self.lines} line{'s' if self.lines != 1 else ''}" if self.lines else ""
        return f"writing {self.name or 'a tool call'}{target}: {size}{lines} ({now - self.started:.0f}s)"


class TurnView:
    """The state of the turns being shown, updated event by event."""

    def __init__(self, redact: Redactor) -> None:
        self.redact = redact
        self.streams: dict[str, str] = {}
        """Text being streamed, per turn (sub-turns may stream at the same time)."""
        self.cards: dict[str, _Card] = {}
        self.depth: dict[str, int] = {}
        self.agents: dict[str, str] = {}
        """Agent name per turn id, for the sub-turn lines."""
        self.background: set[str] = set()
        """Sub-turns started with spawn (their results arrive later)."""
        self.spinner = Spinner("dots")
        self.activity = ""
        self.asked_at: float | None = None
        """When the model was asked, until its first token: the wait a spinner covers."""
        self.approval: str | None = None
        """The tool call waiting for the user's approval, if any."""
        self.writing: dict[tuple[str, int], _Writing] = {}
        """Tool calls the model is writing, per (turn, call index), until its reply ends."""
        self.used: Usage | None = None
        """What the running turn used so far (shown while it waits; its end line says it)."""

    def _depth(self, event: Any) -> int:
        if event.turn_id not in self.depth:
            parent = event.parent_turn_id
            self.depth[event.turn_id] = self.depth.get(parent, 0) + 1 if parent else 0
        return self.depth[event.turn_id]

    def handle(self, event: Any) -> list[RenderableType]:
        """Apply ``event``; return the blocks to print now (finished things)."""
        kind, depth = event.kind, self._depth(event)
        if event.parent_turn_id and kind in (EventKind.TURN_START, EventKind.TURN_END):
            depth -= 1  # a sub-turn's opening and closing lines sit at its parent's level
        out: list[RenderableType] = []
        if kind is EventKind.LLM_DELTA and not event.thinking:
            self.streams[event.turn_id] = self.streams.get(event.turn_id, "") + event.text
            self.activity, self.asked_at = "writing", None
        elif kind is EventKind.TOOL_CALL_DELTA:
            self._wrote(event, depth)
        elif kind is EventKind.LLM_RETRY:
            self._written(event.turn_id)  # the call starts over: what was written is void
            out += self._notice(event)
        elif kind is EventKind.LLM_REQUEST:
            self.activity, self.asked_at = "thinking", time.monotonic()
        elif kind is EventKind.APPROVAL_REQUESTED:
            self.approval = f"{event.tool_name} {describe_call(event.tool_name, event.arguments)}"
        elif kind is EventKind.APPROVAL_RESOLVED:
            self.approval = None
        elif kind is EventKind.LLM_RESPONSE:
            self.asked_at = None
            self.streams.pop(event.turn_id, None)
            self._written(event.turn_id)
            if event.usage is not None:  # every call of the turn, sub-turns' too, so far
                self.used = event.usage if self.used is None else self.used + event.usage
            if event.text.strip():
                out.append(Markdown(self.redact(event.text)))
        elif kind is EventKind.TOOL_EXEC_START:
            self.cards[event.call_id] = _Card(event.tool_name, self.redact(
                describe_call(event.tool_name, event.arguments)), time.monotonic(), depth)
        elif kind is EventKind.TOOL_EXEC_PROGRESS and event.call_id in self.cards:
            card = self.cards[event.call_id]
            card.feed(self.redact(event.text))
            if isinstance(event.data.get("diff"), str):
                card.diff = self.redact(event.data["diff"])
        elif kind is EventKind.TOOL_EXEC_END:
            out.append(self._ended(event))
        elif kind is EventKind.TOOL_EXEC_SKIPPED:
            detail = f": {event.detail}" if event.detail else ""
            out.append(Text(f"⊘ {event.tool_name} {event.reason}{detail}", style="yellow"))
        else:
            out += self._notice(event)
        return [Padding(block, (0, 0, 0, 2 * depth)) if depth else block for block in out]

    def _wrote(self, event: Any, depth: int) -> None:
        key = (event.turn_id, event.call_index)
        call = self.writing.get(key)
        if call is None:
            call = self.writing[key] = _Writing(event.tool_name, time.monotonic(), depth)
        call.name = event.tool_name or call.name
        call.feed(event.arguments_delta)
        self.activity, self.asked_at = "writing", None

    def _written(self, turn_id: str) -> None:
        for key in [k for k in self.writing if k[0] == turn_id]:
            del self.writing[key]

    def _ended(self, event: Any) -> RenderableType:
        card = self.cards.pop(event.call_id, None)
        summary = card.summary if card else ""
        first = next((ln for ln in event.content.splitlines() if ln.strip()), "")
        lines = event.content.count("\n") + 1 if event.content else 0
        mark, style = ("✗", "red") if event.is_error else ("✓", "green")
        # Previews (dry-run) start with "[dry-run]": mark them, nothing really ran.
        dry = not event.is_error and event.content.startswith("[dry-run]")
        if dry:
            mark, style = "◇", "cyan"
        text = Text(f"{mark} {event.tool_name} ", style=style)
        text.append(summary, style="bold")
        text.append("  [dry-run: previewed, not done]" if dry else
                    f"  ({event.duration:.1f}s, {lines} line{'s' if lines != 1 else ''})",
                    style="dim" if not dry else "cyan")
        if event.is_error:
            text.append("\n  " + self.redact(first[:200]), style="red")
            return text
        # A dry run's preview carries its diff after the first line; a real change reported it.
        diff = self.redact(event.content.partition("\n")[2]) if dry else (card.diff if card else "")
        if diff.strip() and event.tool_name in ("edit", "write"):
            return Group(text, coloured_diff(diff))
        return text

    def _interrupting(self, event: Any) -> str:
        """What a graceful interrupt will do now, which depends on what is running."""
        if event.mode == "hard":
            return "aborting now"
        if event.mode != "graceful":
            return f"interrupt ({event.mode})"
        if self.cards:
            return "interrupting: finishing the running tool, then a summary"
        if self.streams.get(event.turn_id, "").strip():
            return "interrupting: stopping the reply"
        return "interrupting: a summary once the model answers"

    def _plan(self, event: Any) -> RenderableType:
        """The agent's plan as a checklist: done struck through, the current step bold."""
        done = sum(item["status"] == "done" for item in event.items)
        out = Text(f"Plan ({done}/{len(event.items)} done)", style="bold")
        for item in event.items:
            mark, style = _PLAN_MARKS.get(item["status"], ("☐", ""))
            out.append(f"\n  {mark} ", style=style)
            out.append(self.redact(item["content"]), style=style)
        return Padding(out, (0, 0, 0, 2 * self._depth(event)))

    def _notice(self, event: Any) -> list[RenderableType]:
        kind = event.kind
        if kind is EventKind.PLAN_UPDATED:
            return [self._plan(event)]
        if kind is EventKind.STEERING_INJECTED:
            return [Text(f"↳ steering delivered: {self.redact(event.text)}", style="cyan")]
        if kind is EventKind.FOLLOW_UP_QUEUED:
            return [Text(f"↳ follow-up queued: {self.redact(event.text)}", style="cyan")]
        if kind is EventKind.INTERRUPT_RECEIVED:
            return [Text(f"⏸ {self._interrupting(event)}", style="yellow")]
        if kind is EventKind.ERROR:
            if event.source == "turn" and not event.parent_turn_id:
                return []  # the turn's own error: the front end prints it once, from the result
            return [Text(f"error: {self.redact(event.message)}", style="red")]
        if kind is EventKind.LLM_RETRY:
            return [Text(f"retrying in {event.delay:.1f}s (attempt {event.attempt}): "
                         f"{event.reason}", style="dim")]
        if kind is EventKind.SUBTURN_SPAWN:
            if event.is_async:
                self.background.add(event.child_turn_id)
            return []  # the child's own TURN_START, right after, opens its branch
        if kind is EventKind.TURN_START:
            self.agents[event.turn_id] = event.agent
            if not event.parent_turn_id:
                self.used = None
                return []
            how = " (background)" if event.turn_id in self.background else ""
            task = " ".join(event.input.split())
            task = task if len(task) <= 80 else task[:79] + "…"
            return [Text(f"┌ {event.agent}{how}: {self.redact(task)}", style="magenta")]
        if kind in (EventKind.SUBTURN_RESULT_DELIVERED, EventKind.SUBTURN_ORPHAN):
            who = self.agents.get(event.child_turn_id, "sub-agent")
            where = ("reached the model" if kind is EventKind.SUBTURN_RESULT_DELIVERED
                     else "saved to the session (the turn had ended)")
            return [Text(f"↳ result of {who} {where}", style="magenta")]
        if kind is EventKind.TURN_END:
            self._written(event.turn_id)  # a reply cut short (an abort) leaves no LLM_RESPONSE
            # The turn's own usage: its sub-turns' included, with the cost when it is known.
            style = "green" if event.status.value == "completed" else "yellow"
            line = status_line(event.status.value, event.iterations, event.usage,
                               event.duration)
            if event.parent_turn_id:
                self.background.discard(event.turn_id)
                self.streams.pop(event.turn_id, None)
                line = f"└ {self.agents.get(event.turn_id, 'sub-agent')} {line}"
            return [Text(line, style=f"bold {style}")]
        return []

    def waiting(self) -> str:
        """What the turn waits for when nothing streams and no tool runs ("" if it does not)."""
        if self.approval is not None:
            return f"waiting for approval: {self.approval}"
        if self.asked_at is not None and not self.cards:
            so_far = f" · {used}" if (used := usage_text(self.used)) else ""
            return f"waiting for the model ({time.monotonic() - self.asked_at:.0f}s){so_far}"
        return ""

    def live(self) -> RenderableType:
        """The in-flight part: streamed text as markdown, a line per tool call being written
        (its size growing), then one card per running tool; a spinner line while the turn
        waits for the model's first token or for an approval."""
        parts: list[RenderableType] = []
        if waiting := self.waiting():
            frame = self.spinner.render(time.monotonic())
            parts.append(Text.assemble(frame if isinstance(frame, Text) else Text("*"),
                                       (f" {waiting}", "dim")))
        for turn_id, text in self.streams.items():
            if text.strip():
                depth = self.depth.get(turn_id, 0)
                shown = Markdown(self.redact(text))
                parts.append(Padding(shown, (0, 0, 0, 2 * depth)) if depth else shown)
        now = time.monotonic()
        for call in self.writing.values():
            line = Text("✎ " + self.redact(call.describe(now)), style="dim")
            parts.append(Padding(line, (0, 0, 0, 2 * call.depth)) if call.depth else line)
        for card in self.cards.values():
            head = Text.assemble(" ", (card.name, "bold"), " ", card.summary,
                                 (f"  {now - card.started:.1f}s", "dim"))
            frame = self.spinner.render(now)
            rows: list[RenderableType] = [
                Text.assemble(frame if isinstance(frame, Text) else Text("*"), head)]
            tail = [*card.tail, card.partial] if card.partial else list(card.tail)
            rows += [Text("    " + line[:160], style="dim") for line in tail[-TAIL_LINES:]]
            block = Group(*rows)
            parts.append(Padding(block, (0, 0, 0, 2 * card.depth)) if card.depth else block)
        return Group(*parts)

    def toolbar(self) -> str:
        """One line for the chat's toolbar: what runs now, for how long, its last output."""
        now = time.monotonic()
        if self.approval is not None:
            return self.waiting()
        if self.cards:
            card = next(reversed(self.cards.values()))
            last = card.partial or (card.tail[-1] if card.tail else "")
            return f"{card.name}: {card.summary} ({now - card.started:.0f}s)  {last[:60]}"
        if self.writing:
            return self.redact(next(reversed(self.writing.values())).describe(now))
        stream = next(reversed(self.streams.values()), "")
        if self.activity == "writing" and stream:
            return "writing: " + " ".join(stream[-70:].split())
        return self.waiting() or self.activity


class LiveRenderer:
    """``run``'s renderer: printed blocks above, the live region below (when on a terminal)."""

    def __init__(self, console: Console, view: TurnView) -> None:
        from rich.live import Live

        self.console = console
        self.view = view
        self._live = Live(_Proxy(view), console=console, refresh_per_second=10,
                          transient=True) if console.is_terminal else None

    def __enter__(self) -> LiveRenderer:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()

    def pause(self) -> None:
        if self._live is not None:
            self._live.stop()

    def resume(self) -> None:
        if self._live is not None:
            self._live.start()

    def handle(self, event: Any) -> None:
        for block in self.view.handle(event):
            self.console.print(block)


class _Proxy:
    def __init__(self, view: TurnView) -> None:
        self.view = view

    def __rich__(self) -> RenderableType:
        return self.view.live()


def event_json(event: Any, redact: Redactor) -> str:
    return json.dumps(redacted(event_to_dict(event), redact), ensure_ascii=False)
