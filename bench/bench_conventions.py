"""Start-up cost of reading a project's conventions (AGENTS.md / CLAUDE.md, nested files and
their ``@`` imports) on a 10,000-file repository: median and p95 wall-clock and CPU time of
``load_conventions`` over repeated runs (warm page cache, as on a second start-up), plus one
cold-ish first run. The repository has 200 folders of source-like files, a .gitignore'd build
folder of 2,000 more files, a root AGENTS.md importing two documents, and 20 nested files.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from steerable.coding import load_conventions


def make_repo(root: Path, files: int) -> None:
    (root / ".gitignore").write_text("build/\n")
    for i in range(files):
        folder = root / f"pkg{i % 20}" / f"mod{i % 200}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"file{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    build = root / "build"
    build.mkdir()
    for i in range(files // 5):
        (build / f"out{i}.o").write_text("x")
    (root / "docs").mkdir()
    (root / "docs" / "style.md").write_text("# Style\n" + "Use four spaces.\n" * 40)
    (root / "docs" / "testing.md").write_text("# Tests\n" + "Run make check.\n" * 40)
    (root / "AGENTS.md").write_text("# Project\nSee @docs/style.md and @docs/testing.md.\n")
    for i in range(20):
        (root / f"pkg{i}" / "AGENTS.md").write_text(f"Package {i}: keep the API stable.\n")


def timed(root: Path) -> tuple[float, float, int]:
    wall, cpu = time.perf_counter(), time.process_time()
    found = load_conventions(root)
    return time.perf_counter() - wall, time.process_time() - cpu, len(found.files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=30)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_repo(root, opts.files)
        first_wall, first_cpu, count = timed(root)
        walls, cpus = [], []
        for _ in range(opts.runs):
            wall, cpu, _ = timed(root)
            walls.append(wall)
            cpus.append(cpu)
    walls.sort()
    cpus.sort()
    p95 = max(0, int(len(walls) * 0.95) - 1)
    print(f"conventions on {opts.files:,} files (+{opts.files // 5:,} ignored), "
          f"{count} instruction files read")
    print(f"  first run: {first_wall * 1000:.1f} ms wall, {first_cpu * 1000:.1f} ms CPU")
    print(f"  {opts.runs} runs: median {statistics.median(walls) * 1000:.1f} ms wall "
          f"(p95 {walls[p95] * 1000:.1f} ms), median {statistics.median(cpus) * 1000:.1f} ms CPU")


if __name__ == "__main__":
    main()
