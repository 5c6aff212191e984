"""The README's protocol snippets, run as a reader would run them: each one unchanged but for
the server's address, in its own Python process, against a real ``steerable serve``."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("ag_ui", reason="the agui extra is not installed")
pytest.importorskip("a2a", reason="the a2a extra is not installed")
pytest.importorskip("mcp", reason="the mcp extra is not installed")

from tests.protocols._serving import served  # noqa: F401 (fixture)

README = Path(__file__).resolve().parents[2] / "README.md"
ADDRESS = "http://127.0.0.1:8321"
SCRIPT = [{"tool_calls": [["read", {"path": "a.txt"}]]}, {"text": "It says: hello from disk."}]


def protocol_snippets() -> dict[str, str]:
    """The Python blocks of the README's "Protocols" section, by the protocol named in bold
    in the paragraph before each."""
    text = README.read_text()
    section = text.split("\n## Protocols\n", 1)[1].split("\n## ", 1)[0]
    snippets: dict[str, str] = {}
    for part in re.split(r"^\*\*", section, flags=re.M)[1:]:
        name = part.split("**", 1)[0]
        code = re.search(r"```python\n(.*?)```", part, flags=re.S)
        if code is not None:
            snippets[name] = code.group(1)
    return snippets


def test_the_section_has_a_snippet_for_each_served_protocol() -> None:
    assert sorted(protocol_snippets()) == ["A2A", "AG-UI", "MCP"]


@pytest.mark.parametrize(("name", "shows"), [
    ("AG-UI", ["RUN_STARTED", "TOOL_CALL_START", "TEXT_MESSAGE_CONTENT disk.", "RUN_FINISHED"]),
    ("A2A", ["TASK_STATE_WORKING", "reply: It says: hello from disk."]),
    ("MCP", ["progress: tool read", "It says: hello from disk."]),
])
def test_a_snippet_runs_as_written(served: Callable[..., str], tmp_path: Path,  # noqa: F811
                                   name: str, shows: list[str]) -> None:
    code = protocol_snippets()[name]
    assert ADDRESS in code, f"the {name} snippet names no server at {ADDRESS}"
    url = served(SCRIPT)
    script = tmp_path / "snippet.py"
    script.write_text(code.replace(ADDRESS, url))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for expected in shows:
        assert expected in done.stdout, (expected, done.stdout)
