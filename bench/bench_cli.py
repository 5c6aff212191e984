"""Wall time of `steerable --help` (a fresh interpreter each time). Prints the figures."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def wall(args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(args, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main() -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    wall([sys.executable, "-m", "steerable", "--help"], env)  # warm the .pyc cache
    runs = [wall([sys.executable, "-m", "steerable", "--help"], env) for _ in range(10)]
    base = [wall([sys.executable, "-c", "pass"], env) for _ in range(10)]
    core = [wall([sys.executable, "-c", "import steerable"], env) for _ in range(10)]
    print(f"steerable --help:           median {statistics.median(runs) * 1000:.0f} ms, "
          f"max {max(runs) * 1000:.0f} ms (10 runs)")
    print(f"  python -c pass:           median {statistics.median(base) * 1000:.0f} ms")
    print(f"  python -c 'import steerable': median {statistics.median(core) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
