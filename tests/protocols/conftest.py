"""Fixtures of the protocol tests: an isolated environment for agent subprocesses."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """Environment for ``steerable`` subprocesses: own config and data dirs, no keys."""
    env = {k: v for k, v in os.environ.items()
           if not k.endswith("_API_KEY") and not k.startswith(("OPENAI_", "STEERABLE_"))}
    env["PYTHONPATH"] = str(SRC)
    env["STEERABLE_DATA_DIR"] = str(tmp_path / "data")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["HOME"] = str(tmp_path / "home")
    return env


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.txt").write_text("hello from disk\n")
    return root
