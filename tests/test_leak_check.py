"""The leak check itself: a test that leaves a process behind fails, one that stops it passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LEAKY = '''
import subprocess, sys

def test_leaves_a_sleeper() -> None:
    subprocess.Popen(["sleep", "30"])

def test_never_waits() -> None:
    subprocess.Popen([sys.executable, "-c", "pass"])  # exits, but nobody reaps it

def test_cleans_up() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    proc.kill()
    proc.wait()
'''


def test_a_test_that_leaves_a_process_running_fails(tmp_path: Path) -> None:
    (tmp_path / "test_leaky.py").write_text(LEAKY)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests._leaks", "-p", "no:cacheprovider",
         "-o", "asyncio_default_fixture_loop_scope=function", "--rootdir", str(tmp_path),
         "-c", "/dev/null", str(tmp_path / "test_leaky.py")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "3 passed, 2 errors" in out, out
    assert "ERROR at teardown of test_leaves_a_sleeper" in out and "sleep 30" in out
    assert "ERROR at teardown of test_never_waits" in out and "zombie" in out
