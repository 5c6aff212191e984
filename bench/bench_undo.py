"""Undo's snapshots: the cost of one snapshot on a 10,000-file repository after a small change
(median and p95 over 100 turns of two snapshots each), the first (cold) snapshot, an undo, and
the store's size after the 100 turns. Prints the figures; on a machine shared with other work
the wall-clock times stretch with the load, the CPU time much less.

Each turn snapshots before its tool call, changes one to three files (now and then a new file
or a new folder, as an agent's edit or bash would), and snapshots after it; turns are spaced a
little apart, as model calls space them in real use (``--gap`` seconds, default 0.1).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from steerable.coding import Snapshots


def make_repo(root: Path, files: int, rng: random.Random) -> None:
    """``files`` source-like files in 200 folders of two levels, plus ignored build output."""
    words = [f"name{i}" for i in range(300)]
    (root / ".gitignore").write_text("build/\n*.pyc\n__pycache__/\n")
    for i in range(files):
        folder = root / f"pkg{i % 20}" / f"mod{i % 200}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = [" ".join(rng.choices(words, k=8)) for _ in range(rng.randint(5, 80))]
        (folder / f"file{i}.py").write_text("\n".join(lines) + "\n")
    (root / "build").mkdir()
    for i in range(500):
        (root / "build" / f"out{i}.o").write_bytes(os.urandom(256))


def small_change(root: Path, turn: int, rng: random.Random, files: int) -> None:
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(files)
        path = root / f"pkg{i % 20}" / f"mod{i % 200}" / f"file{i}.py"
        with path.open("a") as fh:
            fh.write(f"# turn {turn}: {rng.random()}\n")
    if turn % 10 == 0:
        (root / "pkg0" / f"new{turn}").mkdir()
        (root / "pkg0" / f"new{turn}" / "added.py").write_text(f"added in turn {turn}\n")


def store_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--gap", type=float, default=0.1,
                        help="seconds between a turn's change and the next snapshot")
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        root, data = Path(tmp) / "repo", Path(tmp) / "data"
        root.mkdir()
        make_repo(root, args.files, rng)
        repo_bytes = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        snaps = Snapshots(root, data)
        t0 = time.perf_counter()
        snaps.snapshot("bench", "seed", "c0", "bash", "before")
        cold = time.perf_counter() - t0
        time.sleep(0.1)  # past the racy window, as the first model call would be
        snaps.snapshot("bench", "seed", "c0", "bash", "after")
        cold_size = store_size(data)
        times: list[float] = []
        cpu: list[float] = []

        def timed(turn: int, phase: str) -> None:
            t0, c0 = time.perf_counter(), time.process_time()
            snaps.snapshot("bench", f"t{turn}", f"c{turn}", "bash", phase)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)

        for turn in range(args.turns):
            time.sleep(args.gap)
            timed(turn, "before")
            small_change(root, turn, rng, args.files)
            timed(turn, "after")
        size = store_size(data)
        t0 = time.perf_counter()
        undone = snaps.undo("bench")
        undo_time = time.perf_counter() - t0
    ms = sorted(t * 1000 for t in times)
    p95 = ms[int(len(ms) * 0.95) - 1]
    print(f"repository: {args.files} files, {repo_bytes / 1e6:.1f} MB (+500 ignored files), "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print(f"first snapshot (cold, reads every file): {cold * 1000:.0f} ms; "
          f"store {cold_size / 1e6:.1f} MB")
    print(f"snapshot after a small change, {len(ms)} calls: median {statistics.median(ms):.1f} "
          f"ms, p95 {p95:.1f} ms, max {ms[-1]:.1f} ms (CPU time: median "
          f"{statistics.median(cpu) * 1000:.1f} ms, the part a busy machine stretches)")
    print(f"store after {args.turns} turns: {size / 1e6:.2f} MB "
          f"(+{(size - cold_size) / 1e3:.0f} kB for the turns, "
          f"{(size - cold_size) / args.turns / 1e3:.1f} kB per turn)")
    print(f"undo of the last turn ({len(undone.paths)} paths): {undo_time * 1000:.0f} ms")


if __name__ == "__main__":
    main()
