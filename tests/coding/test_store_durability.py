"""The JSONL store never loses or corrupts a saved turn: torn lines of any length, failed
writes (an injected failure at every byte, and a real full disk), rewrites racing appends."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from steerable import Message, TurnRecord
from steerable.storage import JSONLSessionStore
from steerable.storage import jsonl as jsonl_module

SRC = Path(__file__).resolve().parents[2] / "src"


def turn(store: JSONLSessionStore, i: int, size: int = 0, sid: str = "s") -> None:
    store.append(sid, [Message("user", f"q{i} " + "x" * size), Message("assistant", f"a{i}")],
                 TurnRecord(f"turn_{i}", "completed", 1))


def texts(store: JSONLSessionStore, sid: str = "s") -> list[str]:
    return [m.content.split(" ")[0] for m in store.load(sid)]


@pytest.mark.parametrize("torn_size", [10, 70_000, 1_000_000])
def test_a_torn_line_of_any_length_is_cut_before_the_next_turn(tmp_path: Path, torn_size: int) -> None:
    store = JSONLSessionStore(tmp_path)
    turn(store, 1)
    with store.path("s").open("ab") as fh:  # a writer killed mid-line: no newline after it
        fh.write(b'{"v":1,"type":"message","turn":"t","message":{"role":"user","content":"'
                 + b"y" * torn_size)
    assert texts(store) == ["q1", "a1"]
    turn(store, 2)
    assert texts(store) == ["q1", "a1", "q2", "a2"]
    assert store.path("s").read_bytes().count(b"y" * 10) == 0


def test_a_file_that_is_one_torn_line_is_emptied(tmp_path: Path) -> None:
    store = JSONLSessionStore(tmp_path)
    store.path("s").parent.mkdir(parents=True, exist_ok=True)
    store.path("s").write_bytes(b'{"v":1,"type":"session"' + b"z" * 200_000)
    turn(store, 1)
    assert texts(store) == ["q1", "a1"]


def failing_after(limit: int):
    """An os.write that lets ``limit`` bytes through in total, then fails like a full disk."""
    left = [limit]

    def write(fd: int, data) -> int:
        if left[0] <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = min(len(data), left[0])
        left[0] -= n
        return os.write(fd, bytes(data[:n]))

    return write


@pytest.mark.parametrize("size", [0, 1_000_000])
def test_a_write_failing_at_any_byte_leaves_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    store = JSONLSessionStore(tmp_path)
    turn(store, 1)
    before = store.path("s").read_bytes()
    seen: list[int] = []

    def measure(fd: int, data) -> int:
        seen.append(len(data))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(jsonl_module, "_os_write", measure)
    with pytest.raises(OSError):
        turn(store, 2, size)
    # The marker's timestamp may print a byte or two shorter next time: stop short of it.
    length = seen[0] - 4
    # Every byte of a small turn; for the 1 MB turn a spread of offsets and both ends.
    offsets = range(length) if length < 5000 else sorted(
        {*range(0, length, 65_521), *range(length - 300, length), *range(300)})
    for k in offsets:
        monkeypatch.setattr(jsonl_module, "_os_write", failing_after(k))
        with pytest.raises(OSError, match="No space left"):
            turn(store, 2, size)
        assert store.path("s").read_bytes() == before, f"failed at byte {k}"
    monkeypatch.setattr(jsonl_module, "_os_write", os.write)
    turn(store, 2, size)
    assert texts(store) == ["q1", "a1", "q2", "a2"]


@pytest.fixture
def full_disk(tmp_path: Path):
    """A 256 KiB tmpfs, so writes really fail with ENOSPC (needs root, as in CI)."""
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for the full-disk test needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"cannot mount a tmpfs in CI: {done.stderr.strip()}")
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_real_full_disk_loses_nothing(full_disk: Path) -> None:
    filler = full_disk / "filler"
    filler.write_bytes(b"f" * 64 * 1024)  # room to give back later
    store = JSONLSessionStore(full_disk)
    done = 0
    failures = 0
    for i in range(1, 400):
        before = store.path("s").read_bytes() if store.path("s").exists() else b""
        try:
            turn(store, i, 3_000)
            done = i
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
            failures += 1
            assert store.path("s").read_bytes() == before  # the failed save left no trace
            if failures == 3:
                break
    assert failures == 3 and done > 10
    expected = [w for i in range(1, done + 1) for w in (f"q{i}", f"a{i}")]
    assert texts(store) == expected
    # A rewrite needs room for a second copy: on the full disk it fails and changes nothing.
    before = store.path("s").read_bytes()
    with pytest.raises(OSError):
        store.replace("s", store.load("s"), base=len(expected))
    assert store.path("s").read_bytes() == before
    assert not list(full_disk.glob(".*.tmp"))
    # Space comes back: the next turn lands on a clean file, every earlier turn still there.
    filler.unlink()
    turn(store, done + 1, 10)
    assert texts(store) == [*expected, f"q{done + 1}", f"a{done + 1}"]


REWRITER = """
import sys
from steerable.storage import JSONLSessionStore
store = JSONLSessionStore(sys.argv[1])
for _ in range(int(sys.argv[2])):
    seen = store.load("s")
    store.replace("s", seen, base=len(seen))  # a rewrite (as a summary does) racing appends
"""

WRITER = """
import sys
from steerable import Message, TurnRecord
from steerable.storage import JSONLSessionStore
store = JSONLSessionStore(sys.argv[1])
name = sys.argv[2]
for i in range(int(sys.argv[3])):
    store.append("s", [Message("user", f"{name}-{i}")], TurnRecord(f"{name}_{i}", "completed", 1))
"""


def test_rewrites_racing_appends_from_other_processes_drop_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    per_writer, writers = 150, 4
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), f"w{n}",
                               str(per_writer)], env=env) for n in range(writers)]
    procs.append(subprocess.Popen([sys.executable, "-c", REWRITER, str(tmp_path), "60"], env=env))
    for p in procs:
        assert p.wait(timeout=120) == 0
    saved = [m.content for m in JSONLSessionStore(tmp_path).load("s")]
    assert sorted(saved) == sorted(f"w{n}-{i}" for n in range(writers) for i in range(per_writer))
    for n in range(writers):  # each writer's turns stay in its order
        mine = [s for s in saved if s.startswith(f"w{n}-")]
        assert mine == [f"w{n}-{i}" for i in range(per_writer)]
    assert not list(tmp_path.glob(".*.tmp")), "a rewrite left its temporary file"


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite"])
def test_a_rewrite_keeps_what_was_appended_after_its_base(tmp_path: Path, kind: str) -> None:
    from steerable import InMemorySessionStore
    from steerable.storage import SQLiteSessionStore

    store = {"memory": lambda: InMemorySessionStore(), "jsonl": lambda: JSONLSessionStore(tmp_path),
             "sqlite": lambda: SQLiteSessionStore(tmp_path / "s.db")}[kind]()
    turn(store, 1)  # type: ignore[arg-type]
    turn(store, 2)  # type: ignore[arg-type]
    seen = store.load("s")
    turn(store, 3)  # type: ignore[arg-type]  # saved while the summary was being written
    store.replace("s", [Message("user", "summary"), *seen[2:]], base=len(seen))
    assert texts(store) == ["summary", "q2", "a2", "q3", "a3"]  # type: ignore[arg-type]
    store.replace("s", [Message("user", "all")])
    assert texts(store) == ["all"]  # type: ignore[arg-type]
