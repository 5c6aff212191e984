"""``steerable sessions``: list, show, export (Markdown or JSON), fork and rm."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from steerable import Message
from steerable.cli._app import existing_session, make_store, new_session_id
from steerable.cli._args import UsageError
from steerable.cli._settings import Settings
from steerable.cli._undo_setup import data_folder
from steerable.coding import remove_session_snapshots
from steerable.errors import ConfigurationError
from steerable.storage import JSONLSessionStore
from steerable.storage._records import message_to_record

__all__ = ["export_json", "export_markdown", "sessions_command", "show_messages"]


def _fence(text: str) -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}\n{text}\n{ticks}"


def export_markdown(session_id: str, messages: Sequence[Message]) -> str:
    out = [f"# Session {session_id}", ""]
    for m in messages:
        if m.role == "tool":
            status = " (error)" if m.is_error else ""
            out += [f"**Result of `{m.name}`{status}:**", "", _fence(m.text), ""]
            continue
        out += [f"## {m.role.capitalize()}", ""]
        if m.text:
            out += [m.text, ""]
        for call in m.tool_calls:
            args = json.dumps(dict(call.arguments), ensure_ascii=False, indent=2)
            out += [f"**Tool call `{call.name}`** (`{call.id}`):", "", _fence(args), ""]
    return "\n".join(out)


def export_json(session_id: str, messages: Sequence[Message]) -> str:
    return json.dumps({"session_id": session_id,
                       "messages": [message_to_record(m) for m in messages]},
                      ensure_ascii=False, indent=2)


def _list(store: JSONLSessionStore, as_json: bool) -> int:
    infos = store.list_sessions()
    if as_json:
        print(json.dumps([{"session_id": i.session_id, "messages": i.message_count,
                           "updated": i.updated, "title": i.title} for i in infos], indent=2))
        return 0
    if not infos:
        print(f"no sessions in {store.directory}")
        return 0
    for i in infos:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(i.updated))
        print(f"{i.session_id:<28} {when}  {i.message_count:>5} msgs  {i.title[:60]}")
    return 0


def _pending(store: JSONLSessionStore, session_id: str) -> str | None:
    """The paragraph on a pending turn (or on an unreadable checkpoint), None if none."""
    from steerable.cli._pending import describe_pending
    from steerable.errors import CheckpointError

    try:
        cp = store.load_checkpoint(session_id)
    except CheckpointError as exc:
        return f"its pending turn cannot be read: {exc}"
    if cp is None:
        return None
    return describe_pending(session_id, cp, f"'steerable run --session {session_id} --resume'",
                            "'--discard-pending' on the next run")


def show_messages(session_id: str, messages: Sequence[Message], pending: str | None = None) -> int:
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.text import Text

    console = Console(highlight=False)
    console.print(Text(f"session {session_id} · {len(messages)} messages", style="bold"))
    for m in messages:
        if m.role == "user":
            console.print(Text(f"\n> {m.text}", style="bold cyan"))
        elif m.role == "assistant":
            if m.text.strip():
                console.print(Markdown(m.text))
            for call in m.tool_calls:
                args = json.dumps(dict(call.arguments), ensure_ascii=False)
                console.print(Text(f"  ▶ {call.name} {args[:150]}", style="magenta"))
        elif m.role == "tool":
            lines = m.text.splitlines()
            shown = "\n".join(f"    {ln}" for ln in lines[:8])
            more = f"\n    … {len(lines) - 8} more lines" if len(lines) > 8 else ""
            console.print(Text(shown + more, style="red" if m.is_error else "dim"))
    if pending is not None:
        console.print(Text(f"\n{pending}", style="yellow"))
    return 0


def sessions_command(args: argparse.Namespace, settings: Settings) -> int:
    store = make_store(settings)
    action = args.action
    if action == "list":
        return _list(store, args.json)
    if action == "rm":
        for sid in args.ids:
            existing_session(store, sid)
        for sid in args.ids:
            store.delete(sid)
            stores = remove_session_snapshots(data_folder(settings), sid)
            print(f"deleted {sid}" + (" and its undo snapshots" if stores else ""))
        return 0
    messages = existing_session(store, args.id)
    if action == "show":
        return show_messages(args.id, messages, _pending(store, args.id))
    if action == "export":
        text = export_markdown(args.id, messages) if args.format == "markdown" \
            else export_json(args.id, messages)
        if args.output:
            Path(args.output).write_text(text + "\n", encoding="utf-8")
            print(f"wrote {args.output}", file=sys.stderr)
        else:
            print(text)
        return 0
    if action == "fork":
        new_id = args.to or new_session_id()
        try:
            kept = store.fork(args.id, new_id, args.at)
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
        print(f"forked {args.id} into {new_id} ({kept} messages)")
        return 0
    raise UsageError(f"unknown action {action!r}")
