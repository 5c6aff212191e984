"""One session's undo journal: the snapshots its tool calls took, and its undos and redos.

A JSON-lines file per session, only ever appended to (pruning rewrites it whole, atomically).
A line is written with one ``write`` after the objects it names are in place, so it is the
commit of a snapshot: a process killed before it leaves only unreferenced objects, one killed
during it at worst a torn last line, which reading ignores.

Replaying the lines gives the session's steps (one per turn that ran a tool that may change the
workspace, with each call's tree before and after it) and the redo stack.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from steerable.coding._snap_objects import SnapshotStoreError

__all__ = ["Call", "Journal", "JournalState", "Step"]

_VERSION = 1


@dataclass(slots=True)
class Call:
    call_id: str
    tool: str
    before: str
    after: str | None = None
    """The tree right after the call; when the call never reported back (an abort, a crash), the
    next snapshot taken in this session, or None: the workspace as it is now."""
    time: float = 0.0


@dataclass(slots=True, eq=False)
class Step:
    turn_id: str
    calls: list[Call] = field(default_factory=list)
    undone: bool = False

    @property
    def time(self) -> float:
        return self.calls[0].time


@dataclass(slots=True)
class JournalState:
    steps: dict[str, Step] = field(default_factory=dict)
    """By turn id, in the order the turns first snapshotted."""
    redo: list[tuple[list[str], str]] = field(default_factory=list)
    """Undone groups that redo can bring back, last on top: (turn ids, tree before the undo)."""
    undo_trees: dict[str, str] = field(default_factory=dict)
    """Turn id -> the tree just before its last undo (the after-state of a call that never
    reported one is taken from it on redo)."""

    def trees(self) -> list[str]:
        """Every tree this journal names (what pruning must keep)."""
        out = [t for s in self.steps.values() for c in s.calls
               for t in (c.before, c.after) if t is not None]
        return out + list(self.undo_trees.values())


class Journal:
    """The journal file of one session."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps({"v": _VERSION, **record}, separators=(",", ":")) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def records(self) -> list[dict[str, Any]]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        lines = data.split(b"\n")
        out = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict) or not isinstance(rec.get("op"), str):
                    raise ValueError("not a journal record")
            except ValueError as exc:
                if number == len(lines):
                    continue  # a torn last line: its writer was killed mid-write
                raise SnapshotStoreError(f"undo journal {self.path} line {number} is damaged "
                                         f"({exc}); move the file away to start afresh") from None
            out.append(rec)
        return out

    def rewrite(self, records: list[dict[str, Any]]) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
        os.replace(tmp, self.path)

    def state(self) -> JournalState:
        return replay(self.records())


def replay(records: list[dict[str, Any]]) -> JournalState:
    state = JournalState()
    calls: dict[str, Call] = {}
    waiting: list[Call] = []  # calls with no after-state yet
    for rec in records:
        op = rec["op"]
        if op == "snap":
            tree = str(rec["tree"])
            for call in waiting:  # they ended (or died) before this snapshot was taken
                call.after = tree
            waiting = []
            _snap(state, calls, waiting, rec, tree)
        elif op == "undo":
            turns = [t for t in rec["turns"] if t in state.steps]
            for turn in turns:
                state.steps[turn].undone = True
                state.undo_trees[turn] = str(rec["from"])
            if turns:
                state.redo.append((turns, str(rec["from"])))
        elif op == "redo":
            turns = [t for t in rec["turns"] if t in state.steps]
            for turn in turns:
                state.steps[turn].undone = False
            state.redo = [(g, f) for g, f in state.redo if not set(g) & set(turns)]
    return state


def _snap(state: JournalState, calls: dict[str, Call], waiting: list[Call],
          rec: dict[str, Any], tree: str) -> None:
    turn = str(rec["turn"])
    call_id = str(rec["call"])
    if rec.get("phase") == "after":
        call = calls.get(call_id)
        if call is None:
            return
        call.after = tree
        step = state.steps.get(turn)
        if step is not None and tree != call.before and not step.undone:
            state.redo.clear()  # new changes: what was undone before them cannot come back
        return
    step = state.steps.get(turn)
    if step is None:
        step = state.steps[turn] = Step(turn)
    call = Call(call_id, str(rec.get("tool", "")), tree, time=float(rec.get("time", 0.0)))
    calls[call_id] = call
    step.calls.append(call)
    waiting.append(call)
