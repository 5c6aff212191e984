"""The snapshot store under a kill -9 mid-snapshot and under two sessions writing at once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from steerable.coding import Snapshots, UndoConflictError
from steerable.coding._snap_scan import read_listing
from tests.coding.conftest import SRC
from tests.coding.undo_helpers import fingerprint

WRITER = Path(__file__).with_name("_snapshot_writer.py")


def _writer(ws: Path, data: Path, session: str, prefix: str, turns: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{Path(__file__).parents[2]}"}
    return subprocess.Popen([sys.executable, str(WRITER), str(ws), str(data), session, prefix,
                             str(turns)], stdout=subprocess.PIPE, text=True, env=env)


def _check_store(snaps: Snapshots, session: str) -> None:
    """Every tree the journal names can be read whole, every object checks against its hash."""
    state = snaps._journal(session).state()
    for tree in state.trees():
        for _name, (kind, _mode, digest) in read_listing(snaps.objects, tree).items():
            if kind != "d":
                snaps.objects.get(digest)
        snaps._scanner.reachable_from(iter([tree]))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    for i in range(200):
        (root / f"seed{i}.txt").write_text(f"seed {i}\n" * 20)
    return root


def test_a_kill_during_snapshots_leaves_a_usable_store(ws: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    rng = random.Random(20)
    for round_ in range(4):
        proc = _writer(ws, data, "s", f"r{round_}-", 0)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            time.sleep(rng.uniform(0.0, 0.4))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        snaps = Snapshots(ws, data)
        _check_store(snaps, "s")
    # The store still takes snapshots, undoes and redoes, and collects what the killed writers
    # left half-made.
    before = fingerprint(ws)
    snaps.snapshot("s", "after-crash", "c", "bash", "before")
    (ws / "seed0.txt").write_text("changed after the crashes\n")
    snaps.snapshot("s", "after-crash", "c", "bash", "after")
    snaps.undo("s")
    assert fingerprint(ws) == before
    snaps.redo("s")
    assert (ws / "seed0.txt").read_text() == "changed after the crashes\n"
    snaps.prune()
    assert list(snaps.objects.stray_temporaries()) == []
    _check_store(snaps, "s")
    snaps.undo("s")
    assert fingerprint(ws) == before


def test_two_sessions_snapshot_one_workspace_at_once(ws: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    start = fingerprint(ws)
    procs = [_writer(ws, data, "sa", "a-", 6), _writer(ws, data, "sb", "b-", 6)]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
        if proc.stdout is not None:
            proc.stdout.close()
    snaps = Snapshots(ws, data)
    for session in ("sa", "sb"):
        _check_store(snaps, session)
    assert len(snaps.steps("sa")) == len(snaps.steps("sb")) == 6
    # Session b wrote while session a's calls ran, so a's steps may include b's files: undo
    # must then refuse, naming only those, rather than take back b's work.
    after_both = fingerprint(ws)
    try:
        snaps.undo("sa", 6)
    except UndoConflictError as exc:
        assert exc.paths and all(p.startswith("b-") for p in exc.paths)
        assert fingerprint(ws) == after_both
        snaps.undo("sa", 6, force=True)
    # Either way, session a's undo puts each path its steps changed back as it was before the
    # first of them: a's own files (only a wrote them) are gone.
    assert not any(p.name.startswith("a-") for p in ws.iterdir())
    # Forced undos only write paths their steps changed: files neither session touched were
    # never written.
    snaps.undo("sb", 6, force=True)
    now = fingerprint(ws)
    assert {p: e for p, e in now.items() if p.startswith("seed")} == start
