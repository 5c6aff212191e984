"""Project instructions: AGENTS.md / CLAUDE.md, nested files, @imports, through config show."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from steerable.coding import load_conventions
from steerable.coding._conventions import MAX_IMPORT_DEPTH, MAX_TOTAL_CHARS, import_targets


def steerable(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "steerable", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def write(root: Path, rel: str, text: str) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)


def test_agents_md_wins_over_claude_md_per_folder_and_nested_files_say_their_scope(
        tmp_path: Path) -> None:
    write(tmp_path, "AGENTS.md", "Use tabs.")
    write(tmp_path, "CLAUDE.md", "Use spaces.")  # shadowed by AGENTS.md in the same folder
    write(tmp_path, "pkg/CLAUDE.md", "pkg rule")  # no AGENTS.md here: CLAUDE.md is read
    write(tmp_path, "pkg/deep/AGENTS.md", "deep rule")
    write(tmp_path, "ignored/AGENTS.md", "never")
    write(tmp_path, ".gitignore", "ignored/\n")
    found = load_conventions(tmp_path)
    assert [(f.path, f.scope) for f in found.files] == [
        ("AGENTS.md", "."), ("pkg/CLAUDE.md", "pkg"), ("pkg/deep/AGENTS.md", "pkg/deep")]
    assert "Use tabs." in found.text and "Use spaces." not in found.text
    assert "## pkg/deep/AGENTS.md (applies to files under pkg/deep/)" in found.text
    assert "never" not in found.text


def test_imports_nest_read_cycles_once_and_never_leave_the_workspace(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("TOP SECRET")
    root = tmp_path / "ws"
    write(root, "AGENTS.md", "See @docs/style.md and @../secret.txt, mail a@b.org, ask @alice.\n"
                             "`@docs/not-an-import.md`\n```\n@docs/fenced.md\n```\n")
    write(root, "docs/style.md", "Style: @more.md")
    write(root, "docs/more.md", "More; back to @../AGENTS.md and @style.md")  # a cycle
    write(root, "docs/fenced.md", "FENCED")
    os.symlink(outside, root / "docs" / "link.md")
    write(root, "sub/AGENTS.md", "@../docs/link.md @missing/file.md")
    found = load_conventions(root)
    assert [(f.path, f.imported_by) for f in found.files] == [
        ("AGENTS.md", None), ("docs/style.md", "AGENTS.md"), ("docs/more.md", "docs/style.md"),
        ("sub/AGENTS.md", None)]
    assert "TOP SECRET" not in found.text and "FENCED" not in found.text
    assert found.text.count("Style: @more.md") == 1
    skipped = dict(found.skipped)
    assert "outside the workspace" in skipped["../secret.txt"]
    assert "outside the workspace" in skipped["../docs/link.md"]
    assert "no such file" in skipped["missing/file.md"]
    assert "alice" not in skipped


def test_import_depth_and_prompt_budget_are_capped(tmp_path: Path) -> None:
    for i in range(MAX_IMPORT_DEPTH + 2):
        write(tmp_path, f"d{i}.md", f"level {i} @d{i + 1}.md")
    write(tmp_path, "AGENTS.md", "@d0.md")
    found = load_conventions(tmp_path)
    assert len(found.files) == MAX_IMPORT_DEPTH + 1
    assert "nest deeper" in dict(found.skipped)[f"d{MAX_IMPORT_DEPTH}.md"]
    big = tmp_path / "big"
    write(big, "AGENTS.md", "x" * (MAX_TOTAL_CHARS - 10))
    write(big, "a/AGENTS.md", "y" * 100)
    found = load_conventions(big)
    assert [f.path for f in found.files] == ["AGENTS.md"]
    assert "over the" in dict(found.skipped)["a/AGENTS.md"]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="@ab./`-\n ~x", max_size=60))
def test_import_targets_never_start_inside_a_word_or_code(text: str) -> None:
    for target in import_targets(text):
        assert target and not target.endswith((".", ",")) and "`" not in target
        assert any(line.startswith("@" + target) or f" @{target}" in line or f"\t@{target}"
                   in line for line in text.splitlines())


def test_config_show_lists_what_was_read_and_run_puts_it_in_the_prompt(
        cli_env: dict[str, str], tmp_path: Path) -> None:
    ws = tmp_path / "project"
    write(ws, "AGENTS.md", "Run tests with make check. @docs/rules.md")
    write(ws, "docs/rules.md", "No tabs.")
    write(ws, "lib/CLAUDE.md", "lib rule")
    res = steerable(cli_env, "config", "show", "--json", cwd=ws)
    assert res.returncode == 0, res.stderr
    read = json.loads(res.stdout)["project_instructions"]["read"]
    assert [(r["path"], r["imported_by"]) for r in read] == [
        ("AGENTS.md", None), ("docs/rules.md", "AGENTS.md"), ("lib/CLAUDE.md", None)]
    text = steerable(cli_env, "config", "show", cwd=ws).stdout
    assert "instructions docs/rules.md    # imported by AGENTS.md" in text
    assert "instructions lib/CLAUDE.md    # applies under lib/" in text


def test_the_agent_built_for_a_run_has_the_instructions_in_its_prompt(
        cli_env: dict[str, str], tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from steerable.cli._app import BASE_INSTRUCTIONS, build_app
    from steerable.cli._args import build_parser
    from steerable.cli._settings import load_settings

    for key in ("XDG_CONFIG_HOME", "HOME", "STEERABLE_DATA_DIR"):
        monkeypatch.setenv(key, cli_env[key])
    ws = tmp_path / "project"
    write(ws, "CLAUDE.md", "Always answer in French. @notes.md")
    write(ws, "notes.md", "The build is `make`.")
    args = build_parser().parse_args(["run", "hi", "--workspace", str(ws), "--provider",
                                      "scripted", "--script", str(tmp_path / "none.json")])
    (tmp_path / "none.json").write_text("[]")
    app = build_app(load_settings(args, cwd=ws), session=None, can_ask=False,
                    script=str(tmp_path / "none.json"))
    assert app.agent.instructions.startswith(BASE_INSTRUCTIONS)  # the cached prefix stays
    assert "## CLAUDE.md (applies everywhere)\n\nAlways answer in French." in app.agent.instructions
    assert "## notes.md (imported by CLAUDE.md)\n\nThe build is `make`." in app.agent.instructions
    assert [f.path for f in app.conventions.files] == ["CLAUDE.md", "notes.md"]
