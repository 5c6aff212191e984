"""``steerable undo [N]``, ``redo`` and ``rewind TURN``: taking back what the agent did.

The session is the one named by ``--session``, else the latest one that changed files in this
workspace. ``rewind`` counts turns as ``undo --list`` numbers them: the turns saved in the
session's conversation, 1 the first. The same texts serve the chat's ``/undo`` and ``/redo``.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

from steerable.cli._app import existing_session, make_store
from steerable.cli._args import UsageError
from steerable.cli._settings import Settings
from steerable.cli._undo_setup import snapshots_for
from steerable.coding import NothingToUndoError, Snapshots, StepInfo, UndoResult
from steerable.storage import JSONLSessionStore
from steerable.storage.jsonl import TurnMark

__all__ = ["describe", "redo_command", "rewind_command", "undo_command"]


def describe(result: UndoResult, verb: str, limit: int = 20) -> str:
    """What undo (``verb`` "undid") or redo ("redid") did, for a person."""
    turns = ", ".join(result.turns)
    lines = [f"{verb} {len(result.turns)} turn(s) ({turns}): {len(result.paths)} path(s) "
             f"written or removed"]
    lines += [f"  {p}" for p in result.paths[:limit]]
    if len(result.paths) > limit:
        lines.append(f"  ... {len(result.paths) - limit} more")
    if result.forced_over:
        lines.append(f"overwrote changes made since: {', '.join(result.forced_over)}")
    return "\n".join(lines)


def _snapshots(settings: Settings, args: argparse.Namespace) -> Snapshots:
    root = Path(settings["workspace"]).expanduser()
    if not root.is_dir():
        raise UsageError(f"workspace {str(root)!r} does not exist or is not a folder")
    return snapshots_for(settings, root)


def _session(snaps: Snapshots, requested: str | None) -> str:
    if requested:
        return requested
    recent = snaps.sessions()
    if not recent:
        raise UsageError(f"no agent changes were recorded in {snaps.workspace}")
    return recent[0]


def undo_command(args: argparse.Namespace, settings: Settings) -> int:
    snaps = _snapshots(settings, args)
    session = _session(snaps, args.session)
    if args.list:
        return _list(snaps, make_store(settings), session, args.json)
    if args.n < 1:
        raise UsageError("N must be 1 or more")
    result = snaps.undo(session, args.n, force=args.force)
    print(describe(result, "undid"))
    print(f"redo with 'steerable redo --session {session}'")
    return 0


def redo_command(args: argparse.Namespace, settings: Settings) -> int:
    snaps = _snapshots(settings, args)
    result = snaps.redo(_session(snaps, args.session), force=args.force)
    print(describe(result, "redid"))
    return 0


@dataclass(frozen=True, slots=True)
class _Turn:
    number: int | None
    """Its place in the conversation (1 the first); None for a turn that is not in it (one
    that was aborted and rolled back)."""
    turn_id: str
    time: float
    prompt: str
    step: StepInfo | None


def _turns(snaps: Snapshots, store: JSONLSessionStore, session: str) -> list[_Turn]:
    marks: list[TurnMark] = store.turns(session) if store.exists(session) else []
    messages = store.load(session) if marks else []
    steps = {s.turn_id: s for s in snaps.steps(session)}
    out = []
    for number, mark in enumerate(marks, 1):
        first = messages[mark.start] if mark.start < len(messages) else None
        prompt = " ".join(first.text.split())[:60] if first and first.role == "user" else ""
        out.append(_Turn(number, mark.turn_id, mark.time, prompt, steps.pop(mark.turn_id, None)))
    out += [_Turn(None, s.turn_id, s.time, "", s) for s in steps.values()]
    return sorted(out, key=lambda t: t.step.time if t.step else t.time)


def _list(snaps: Snapshots, store: JSONLSessionStore, session: str, as_json: bool) -> int:
    turns = _turns(snaps, store, session)
    if as_json:
        print(json.dumps({"session_id": session, "workspace": str(snaps.workspace), "turns": [
            {"number": t.number, "turn_id": t.turn_id, "prompt": t.prompt,
             "files": list(t.step.files) if t.step else [],
             "undone": bool(t.step and t.step.undone)} for t in turns]}, indent=2))
        return 0
    print(f"session {session} in {snaps.workspace}")
    for t in turns:
        when = time.strftime("%H:%M:%S", time.localtime(t.step.time if t.step else t.time))
        number = f"{t.number:>3}" if t.number is not None else "  -"
        if t.step is None:
            change = "no file changed"
        else:
            shown = ", ".join(t.step.files[:4]) + (" ..." if len(t.step.files) > 4 else "")
            change = f"{len(t.step.files)} path(s): {shown}" + (
                " [undone]" if t.step.undone else "")
        prompt = f'"{t.prompt}"' if t.prompt else "(not in the conversation)"
        print(f"{number} {when} {t.turn_id}  {prompt}  {change}")
    return 0


def rewind_command(args: argparse.Namespace, settings: Settings) -> int:
    """Take the code, the conversation or both back to how they were before turn TURN."""
    snaps = _snapshots(settings, args)
    store = make_store(settings)
    session = _session(snaps, args.session)
    code, conversation = args.code or args.both, args.conversation or args.both
    if not (code or conversation):
        raise UsageError("rewind needs --code, --conversation or --both")
    turns = [t for t in _turns(snaps, store, session) if t.number is not None]
    index = _find(turns, args.turn)
    since = turns[index - 1].time if index > 0 else 0.0
    if code:
        try:
            print(describe(snaps.undo_since(session, since, force=args.force), "undid"))
        except NothingToUndoError:
            print(f"no file changed since turn {args.turn}")
    if conversation:
        messages = existing_session(store, session)
        kept = messages[:_start(store, session, turns[index].turn_id)]
        store.replace(session, kept)
        print(f"conversation of {session} rewound to {len(kept)} message(s), before turn "
              f"{turns[index].number}")
    return 0


def _find(turns: list[_Turn], wanted: str) -> int:
    for i, t in enumerate(turns):
        if wanted in (t.turn_id, str(t.number)):
            return i
    raise UsageError(f"no turn {wanted!r} in this session's conversation; "
                     "'steerable undo --list' shows them")


def _start(store: JSONLSessionStore, session: str, turn_id: str) -> int:
    return next(m.start for m in store.turns(session) if m.turn_id == turn_id)
