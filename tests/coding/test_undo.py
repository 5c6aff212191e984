"""Undo's store: conflicts, ignore rules, the size cap, big files, the index cache, pruning."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from steerable.coding import (
    NothingToUndoError,
    SnapshotLimits,
    Snapshots,
    SnapshotStoreError,
    UndoConflictError,
    _snap_scan,
    remove_session_snapshots,
)
from steerable.coding._snap_scan import RACY_NS
from tests.coding.undo_helpers import fingerprint


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one\n")
    (ws / "b.txt").write_text("two\n")
    return ws


def turn(snaps: Snapshots, turn_id: str, change: object, session: str = "s") -> None:
    """One turn with one call: snapshot, change the tree, snapshot."""
    snaps.snapshot(session, turn_id, f"{turn_id}-c", "bash", "before")
    assert callable(change)
    change()
    snaps.snapshot(session, turn_id, f"{turn_id}-c", "bash", "after")


def settle() -> None:
    time.sleep(RACY_NS / 1e9 + 0.02)  # past the racy window: the index's signatures are trusted


def test_a_users_edit_of_the_same_file_is_refused_and_named(root: Path, tmp_path: Path) -> None:
    snaps = Snapshots(root, tmp_path / "data")
    turn(snaps, "t1", lambda: (root / "a.txt").write_text("agent\n"))
    (root / "a.txt").write_text("mine\n")
    with pytest.raises(UndoConflictError, match=r"a\.txt") as caught:
        snaps.undo("s")
    assert caught.value.paths == ("a.txt",)
    assert (root / "a.txt").read_text() == "mine\n"  # refused: nothing touched
    result = snaps.undo("s", force=True)
    assert result.forced_over == ("a.txt",)
    assert (root / "a.txt").read_text() == "one\n"


def test_undo_never_writes_through_a_folder_now_a_symlink(root: Path, tmp_path: Path) -> None:
    (root / "sub").mkdir()
    (root / "sub" / "keep.txt").write_text("kept\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    snaps = Snapshots(root, tmp_path / "data")
    turn(snaps, "t1", lambda: (root / "sub" / "keep.txt").unlink())
    # The user then swaps the folder for a link to somewhere else: putting keep.txt back
    # would write it there.
    (root / "sub").rmdir()
    (root / "sub").symlink_to(outside)
    with pytest.raises(UndoConflictError, match="symlink sub"):
        snaps.undo("s", force=True)
    assert list(outside.iterdir()) == []
    (root / "sub").unlink()  # with the folder back, undo works
    (root / "sub").mkdir()
    snaps.undo("s")
    assert (root / "sub" / "keep.txt").read_text() == "kept\n"


def test_a_users_edit_elsewhere_is_kept(root: Path, tmp_path: Path) -> None:
    snaps = Snapshots(root, tmp_path / "data")
    turn(snaps, "t1", lambda: (root / "a.txt").write_text("agent\n"))
    (root / "b.txt").write_text("mine\n")
    assert snaps.undo("s").paths == ("a.txt",)
    assert (root / "a.txt").read_text() == "one\n"
    assert (root / "b.txt").read_text() == "mine\n"


def test_redo_refuses_over_a_change_made_after_the_undo(root: Path, tmp_path: Path) -> None:
    snaps = Snapshots(root, tmp_path / "data")
    turn(snaps, "t1", lambda: (root / "a.txt").write_text("agent\n"))
    snaps.undo("s")
    (root / "a.txt").write_text("mine\n")
    with pytest.raises(UndoConflictError, match="cannot redo"):
        snaps.redo("s")
    assert (root / "a.txt").read_text() == "mine\n"


def test_nothing_to_undo_and_nothing_to_redo_say_so(root: Path, tmp_path: Path) -> None:
    snaps = Snapshots(root, tmp_path / "data")
    with pytest.raises(NothingToUndoError):
        snaps.undo("s")
    turn(snaps, "t1", lambda: None)  # a turn that changed nothing is no step
    with pytest.raises(NothingToUndoError):
        snaps.undo("s")
    with pytest.raises(NothingToUndoError, match="redo"):
        snaps.redo("s")


def test_a_new_change_after_an_undo_clears_redo(root: Path, tmp_path: Path) -> None:
    snaps = Snapshots(root, tmp_path / "data")
    turn(snaps, "t1", lambda: (root / "a.txt").write_text("first\n"))
    snaps.undo("s")
    turn(snaps, "t2", lambda: (root / "b.txt").write_text("second\n"))
    with pytest.raises(NothingToUndoError):
        snaps.redo("s")


def test_sessions_undo_only_their_own_turns(root: Path, tmp_path: Path) -> None:
    snaps = Snapshots(root, tmp_path / "data")
    turn(snaps, "t1", lambda: (root / "a.txt").write_text("from s1\n"), session="s1")
    turn(snaps, "t2", lambda: (root / "b.txt").write_text("from s2\n"), session="s2")
    snaps.undo("s1")
    assert (root / "a.txt").read_text() == "one\n"
    assert (root / "b.txt").read_text() == "from s2\n"
    assert snaps.sessions()[0] == "s1"


def test_undo_of_one_turn_among_others(root: Path, tmp_path: Path) -> None:
    snaps = Snapshots(root, tmp_path / "data")
    turn(snaps, "t1", lambda: (root / "a.txt").write_text("t1\n"))
    turn(snaps, "t2", lambda: (root / "b.txt").write_text("t2\n"))
    snaps.undo_turns("s", ["t1"])
    assert (root / "a.txt").read_text() == "one\n"
    assert (root / "b.txt").read_text() == "t2\n"
    assert [(s.turn_id, s.undone) for s in snaps.steps("s")] == [("t1", True), ("t2", False)]


def test_ignored_files_git_and_files_over_the_cap_are_left_alone(root: Path,
                                                                 tmp_path: Path) -> None:
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    snaps = Snapshots(root, tmp_path / "data", limits=SnapshotLimits(max_file_size=1000))

    def agent() -> None:
        (root / "build").mkdir()
        (root / "build" / "out.o").write_bytes(b"\0" * 10)
        (root / "run.log").write_text("log\n")
        (root / "big.bin").write_bytes(os.urandom(2000))
        (root / ".git" / "HEAD").write_text("ref: refs/heads/other\n")
        (root / "a.txt").write_text("agent\n")

    turn(snaps, "t1", agent)
    assert snaps.skipped == ("big.bin",)
    assert snaps.undo("s").paths == ("a.txt",)
    assert (root / "build" / "out.o").exists() and (root / "run.log").exists()
    assert (root / "big.bin").stat().st_size == 2000
    assert (root / ".git" / "HEAD").read_text() == "ref: refs/heads/other\n"
    assert not any(p.name == ".git" for p in (tmp_path / "data").rglob("*"))


def test_the_repositorys_exclude_file_counts_too(root: Path, tmp_path: Path) -> None:
    (root / ".git" / "info").mkdir(parents=True)
    (root / ".git" / "info" / "exclude").write_text("*.local\n")
    (root / ".gitignore").write_text("!keep.local\n")  # the .gitignore wins over exclude
    snaps = Snapshots(root, tmp_path / "data")

    def agent() -> None:
        (root / "notes.local").write_text("mine\n")
        (root / "keep.local").write_text("tracked\n")

    turn(snaps, "t1", agent)
    assert snaps.undo("s").paths == ("keep.local",)
    assert (root / "notes.local").exists()


def test_a_changed_gitignore_is_seen_by_the_next_snapshot(root: Path, tmp_path: Path) -> None:
    (root / ".gitignore").write_text("*.txt\n")
    snaps = Snapshots(root, tmp_path / "data")
    snaps.snapshot("s", "t0", "c0", "bash")
    settle()
    turn(snaps, "t1", lambda: (root / ".gitignore").write_text("# nothing ignored\n"))
    assert snaps.steps("s")[0].files == (".gitignore", "a.txt", "b.txt")


def test_big_binary_files_round_trip_in_pieces(root: Path, tmp_path: Path) -> None:
    blob = os.urandom(3 * (1 << 20) + 17)  # over the piece size: streamed, never read whole
    (root / "data.bin").write_bytes(blob)
    snaps = Snapshots(root, tmp_path / "data")
    turn(snaps, "t1", lambda: (root / "data.bin").write_bytes(blob[::-1]))
    snaps.undo("s")
    assert (root / "data.bin").read_bytes() == blob


def test_settled_files_come_from_the_index_and_changes_are_still_seen(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(30):
        (root / f"f{i}.txt").write_text(f"{i}\n")
    # The first snapshot's clock is the moment of the first write, however long the writes
    # took on a loaded machine (the moment after the last one left the first files outside
    # the racy window): every file is inside it, so no signature is trusted yet.
    written = min(max(st.st_mtime_ns, st.st_ctime_ns)
                  for st in (f.stat() for f in root.iterdir() if f.is_file()))
    snaps = Snapshots(root, tmp_path / "data")
    monkeypatch.setattr(_snap_scan, "time", SimpleNamespace(time_ns=lambda: written))
    first = snaps.snapshot("s", "t0", "c0", "bash")
    monkeypatch.undo()
    settle()
    reads: list[str] = []
    original = snaps.objects.put_file
    snaps.objects.put_file = lambda path, size: reads.append(path) or original(path, size)  # type: ignore[method-assign]
    # The first snapshot saw the files fresh (racy): the next one reads them again, once.
    assert snaps.snapshot("s", "t0", "c1", "bash") == first
    assert len(reads) == 32
    reads.clear()
    assert snaps.snapshot("s", "t0", "c3", "bash") == first
    assert reads == []  # every signature settled: no file read again
    (root / "f3.txt").write_text("X\n")  # same size, in place: mtime and ctime move
    assert snaps.snapshot("s", "t0", "c4", "bash") != first
    assert [os.path.basename(p) for p in reads] == ["f3.txt"]


def test_a_damaged_object_is_an_error_not_wrong_bytes(root: Path, tmp_path: Path) -> None:
    snaps = Snapshots(root, tmp_path / "data")
    turn(snaps, "t1", lambda: (root / "a.txt").write_text("agent\n"))
    for _digest, path in snaps.objects.all_objects():
        path.write_bytes(b"garbage")
    with pytest.raises(SnapshotStoreError, match="damaged"):
        snaps.undo("s")
    assert (root / "a.txt").read_text() == "agent\n"


def test_prune_by_age_drops_old_steps_and_their_objects(root: Path, tmp_path: Path) -> None:
    snaps = Snapshots(root, tmp_path / "data", limits=SnapshotLimits(max_age=3600))
    turn(snaps, "old", lambda: (root / "a.txt").write_text("old " * 100 + "\n"))
    before = sum(1 for _ in snaps.objects.all_objects())
    removed = snaps.prune(now=time.time() + 7200)
    assert removed > 0 and sum(1 for _ in snaps.objects.all_objects()) < before
    with pytest.raises(NothingToUndoError):
        snaps.undo("s")
    assert (root / "a.txt").read_text().startswith("old ")  # pruning never touches the tree


def test_prune_by_size_keeps_the_newest_steps(root: Path, tmp_path: Path) -> None:
    snaps = Snapshots(root, tmp_path / "data",
                      limits=SnapshotLimits(max_store_size=60_000))
    for i in range(8):
        turn(snaps, f"t{i}", lambda i=i: (root / "a.txt").write_bytes(os.urandom(20_000)))
    snaps.prune()
    assert snaps.objects.size() <= 60_000
    kept = [s.turn_id for s in snaps.steps("s")]
    assert kept and kept == [f"t{i}" for i in range(8 - len(kept), 8)]
    snaps.undo("s")  # what is kept still works


def test_removing_a_session_removes_its_snapshots(root: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    snaps = Snapshots(root, data)
    turn(snaps, "t1", lambda: (root / "a.txt").write_text("s1 " * 50), session="s1")
    turn(snaps, "t2", lambda: (root / "b.txt").write_text("s2 " * 50), session="s2")
    count = sum(1 for _ in snaps.objects.all_objects())
    assert remove_session_snapshots(data, "s1") == 1
    assert remove_session_snapshots(data, "s1") == 0
    assert snaps.sessions() == ["s2"]
    assert sum(1 for _ in snaps.objects.all_objects()) < count
    snaps.undo("s2")
    assert (root / "b.txt").read_text() == "two\n"


def test_bad_arguments_are_refused(root: Path, tmp_path: Path) -> None:
    snaps = Snapshots(root, tmp_path / "data")
    with pytest.raises(ValueError, match="session id"):
        snaps.snapshot("../x", "t", "c", "bash")
    with pytest.raises(ValueError, match="phase"):
        snaps.snapshot("s", "t", "c", "bash", "during")
    with pytest.raises(ValueError, match="positive"):
        snaps.undo("s", 0)
    with pytest.raises(ValueError, match="max_age"):
        SnapshotLimits(max_age=0)
    with pytest.raises(ValueError, match="not a folder"):
        Snapshots(root / "a.txt", tmp_path / "data")


def test_a_data_folder_inside_the_workspace_is_not_snapshotted(root: Path) -> None:
    snaps = Snapshots(root, root / ".data")
    turn(snaps, "t1", lambda: (root / "a.txt").write_text("agent\n"))
    assert snaps.steps("s")[0].files == ("a.txt",)
    snaps.undo("s")
    assert fingerprint(root, skip=frozenset({".data"})) == {
        "a.txt": ("f", 0o644 & ~_umask(), b"one\n"), "b.txt": ("f", 0o644 & ~_umask(), b"two\n")}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_pruning_runs_at_most_once_a_day_and_not_on_a_new_store(root: Path,
                                                                 tmp_path: Path) -> None:
    snaps = Snapshots(root, tmp_path / "data")
    runs: list[float] = []
    original = snaps.prune
    snaps.prune = lambda **kw: runs.append(time.time()) or original(**kw)  # type: ignore[method-assign]
    turn(snaps, "t1", lambda: (root / "a.txt").write_text("agent\n"))
    assert runs == []  # a new store: the first pruning is a day away
    marker = snaps.root / "pruned"
    day_ago = time.time() - 25 * 3600
    os.utime(marker, (day_ago, day_ago))
    snaps._next_prune = 0.0  # as a new process would start
    turn(snaps, "t2", lambda: (root / "b.txt").write_text("agent\n"))
    assert len(runs) == 1 and marker.stat().st_mtime > day_ago + 3600
    turn(snaps, "t3", lambda: (root / "a.txt").write_text("again\n"))
    assert len(runs) == 1
