"""Real agent processes for the protocol tests: ``steerable serve`` with the scripted provider
in an isolated environment (its own config, data and workspace folders, no keys)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


def env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.endswith("_API_KEY") and not k.startswith(("OPENAI_", "STEERABLE_"))}
    env.update(PYTHONPATH=str(SRC), STEERABLE_DATA_DIR=str(tmp_path / "data"),
               XDG_CONFIG_HOME=str(tmp_path / "config"), HOME=str(tmp_path / "home"))
    return env


def agent_args(tmp_path: Path, script: list[dict[str, Any]]) -> list[str]:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "a.txt").write_text("hello from disk\n")
    return ["--provider", "scripted", "--script", str(path), "--workspace", str(ws)]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Start ``steerable serve`` with a script (and ``config``, the user config.toml's text;
    ``extra_env``, more environment variables); yields a function that makes the process and
    gives its URL."""
    procs: list[subprocess.Popen[str]] = []

    def start(script: list[dict[str, Any]], config: str = "",
              extra_env: dict[str, str] | None = None) -> str:
        if config:
            folder = tmp_path / "config" / "steerable"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "config.toml").write_text(config)
        proc = subprocess.Popen([sys.executable, "-m", "steerable", "serve", "--port", "0",
                                 *agent_args(tmp_path, script)],
                                env={**env(tmp_path), **(extra_env or {})},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on http://127.0.0.1:"), (line, proc.stderr)
        return line.split()[-1]

    yield start
    for proc in procs:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        assert "Traceback" not in err, err


