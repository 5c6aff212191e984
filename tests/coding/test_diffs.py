"""Coloured unified diffs for edit and write: after the call, in dry-run previews, in approvals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pexpect
from hypothesis import given
from hypothesis import strategies as st

from steerable.cli._diff_view import coloured_diff
from steerable.coding._text import unified_diff


def steerable(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "steerable", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def project(tmp_path: Path, steps: list[dict[str, object]]) -> tuple[Path, str]:
    ws = tmp_path / "ws"
    ws.mkdir(parents=True)
    (ws / "a.txt").write_text("one\ntwo\nthree\n")
    (tmp_path / "s.json").write_text(json.dumps(steps))
    return ws, str(tmp_path / "s.json")


EDIT = [{"tool_calls": [["edit", {"path": "a.txt", "old_text": "two", "new_text": "TWO"}]]},
        {"tool_calls": [["write", {"path": "new.txt", "content": "fresh\n"}]]},
        {"text": "Done."}]


def test_run_shows_what_edit_and_write_changed_as_a_diff(cli_env: dict[str, str],
                                                        tmp_path: Path) -> None:
    ws, script = project(tmp_path, EDIT)
    res = steerable(cli_env, "run", "change it", "--yes", "--provider", "scripted", "--script",
                    script, "--workspace", str(ws), cwd=ws)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    edit_at, write_at = out.index("✓ edit a.txt"), out.index("✓ write new.txt")
    edit_block = out[edit_at:write_at]
    assert "--- a/a.txt" in edit_block and "  -two" in edit_block and "  +TWO" in edit_block
    assert " one" in edit_block  # context lines too
    assert "+++ b/new.txt" in out[write_at:] and "  +fresh" in out[write_at:]
    assert (ws / "a.txt").read_text() == "one\nTWO\nthree\n"
    # the model's answer stays short: the diff went to the person watching, not into the result
    events = steerable(cli_env, "run", "again", "--json", "--yes", "--provider", "scripted",
                       "--script", project(tmp_path / "j", EDIT)[1], "--workspace",
                       str(tmp_path / "j" / "ws"), cwd=ws)
    ends = [json.loads(x) for x in events.stdout.splitlines() if '"tool_exec_end"' in x]
    assert all("@@" not in e["content"] for e in ends)


def test_a_dry_run_shows_its_preview_diff(cli_env: dict[str, str], tmp_path: Path) -> None:
    ws, script = project(tmp_path, EDIT)
    res = steerable(cli_env, "run", "change it", "--dry-run", "--provider", "scripted",
                    "--script", script, "--workspace", str(ws), cwd=ws)
    assert res.returncode == 0, res.stderr
    assert "◇ edit a.txt  [dry-run: previewed, not done]" in res.stdout
    assert "  -two" in res.stdout and "  +TWO" in res.stdout and "  +fresh" in res.stdout
    assert (ws / "a.txt").read_text() == "one\ntwo\nthree\n" and not (ws / "new.txt").exists()


def test_an_approval_question_shows_the_diff_in_colour(cli_env: dict[str, str],
                                                       tmp_path: Path) -> None:
    ws, script = project(tmp_path, [*EDIT[:1], {"text": "ok"}])
    env = {k: v for k, v in cli_env.items() if k != "NO_COLOR"}
    env["TERM"] = "xterm-256color"
    child = pexpect.spawn(sys.executable, ["-m", "steerable", "run", "change", "--provider",
                                           "scripted", "--script", script, "--workspace",
                                           str(ws)], env=env, encoding="utf-8", timeout=60,
                          dimensions=(40, 160), cwd=str(ws))
    try:
        child.expect("edit wants to run:")
        child.expect("\x1b\\[31m-two")   # a removal in red
        child.expect("\x1b\\[32m\\+TWO")  # an addition in green
        child.expect("allow\\?")
        child.sendline("y")
        child.expect("completed")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert (ws / "a.txt").read_text() == "one\nTWO\nthree\n"


@given(st.lists(st.sampled_from(["a", "b", "-x", "+y", "--- z", ""]), max_size=12),
       st.lists(st.sampled_from(["a", "b", "-x", "+y", "c"]), max_size=12))
def test_every_diff_line_gets_the_colour_of_its_sign(old: list[str], new: list[str]) -> None:
    text = "edit wants to run:\n-rf looks like a removal but is the question\n" + unified_diff(
        "\n".join(old) + "\n", "\n".join(new) + "\n", "f")
    shown = coloured_diff(text, indent="", max_lines=10_000)
    lines = shown.plain.split("\n")
    assert lines == text.rstrip("\n").split("\n")
    styles: dict[int, str] = {}
    offset = 0
    for number, line in enumerate(lines):
        spans = [s for s in shown.spans if s.start <= offset < s.end]
        styles[number] = str(spans[0].style) if spans else ""
        offset += len(line) + 1
    assert styles[1] == ""  # before the diff's header nothing is coloured
    in_diff = False
    for number, line in enumerate(lines):
        in_diff = in_diff or line.startswith("--- ")
        if not in_diff:
            continue
        if line.startswith(("--- ", "+++ ")):
            assert styles[number] == "bold"
        elif line.startswith("+"):
            assert styles[number] == "green"
        elif line.startswith("-"):
            assert styles[number] == "red"
