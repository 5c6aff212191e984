"""read, write, edit, ls, find and grep: behaviour and edge cases, called directly."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from steerable import FilePart, ImagePart
from steerable.coding import Workspace, coding_tools
from steerable.coding import read as read_module
from steerable.coding._walk import IgnoreRules, glob_to_regex
from steerable.coding.ls import INLINE_FILE_BYTES, INLINE_TOTAL
from tests._components import missing
from tests.coding.conftest import call


async def test_read_numbers_lines_and_windows(ws: Workspace, tools) -> None:
    (ws.root / "a.txt").write_text("one\ntwo\nthree\nfour\n")
    res = await call(tools["read"], path="a.txt")
    assert res.content == "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour"
    res = await call(tools["read"], path="a.txt", offset=2, limit=2)
    assert res.content == "     2\ttwo\n     3\tthree\n[more lines follow; continue with offset=4]"
    res = await call(tools["read"], path="a.txt", offset=9)
    assert res.is_error and "fewer than 9 lines" in res.content


async def test_read_refuses_binary_and_directories(ws: Workspace, tools) -> None:
    (ws.root / "blob.bin").write_bytes(b"\x00\x01\x02PNG\x00" * 10)
    res = await call(tools["read"], path="blob.bin")
    assert res.is_error and "binary file (70 bytes)" in res.content and not res.parts
    (ws.root / "sub").mkdir()
    res = await call(tools["read"], path="sub")
    assert res.is_error and "is a directory" in res.content
    res = await call(tools["read"], path="missing.txt")
    assert res.is_error and "does not exist" in res.content


@pytest.mark.parametrize("name, head, media", [
    ("img.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "image/png"),
    ("photo.jpg", b"\xff\xd8\xff\xe0\x00\x10JFIF", "image/jpeg"),
    ("anim.gif", b"GIF89a\x01\x00", "image/gif"),
    ("pic.webp", b"RIFF\x24\x00\x00\x00WEBPVP8 ", "image/webp"),
    ("renamed.txt", b"\x89PNG\r\n\x1a\n\x00", "image/png"),  # the bytes decide, not the name
])
async def test_read_returns_an_image_as_a_part(ws: Workspace, tools, name: str, head: bytes,
                                               media: str) -> None:
    data = head + bytes(range(256)) * 4
    (ws.root / name).write_bytes(data)
    res = await call(tools["read"], path=name)
    assert not res.is_error and res.content == f"{name} is an image ({media}, 1.0 KB), attached."
    (part,) = res.parts
    assert isinstance(part, ImagePart) and part.media_type == media and part.data == data


async def test_read_returns_a_pdf_as_a_file_part(ws: Workspace, tools) -> None:
    data = b"%PDF-1.7\n" + b"\x00\xff" * 100
    (ws.root / "doc").mkdir()
    (ws.root / "doc" / "report.pdf").write_bytes(data)
    res = await call(tools["read"], path="doc/report.pdf")
    (part,) = res.parts
    assert isinstance(part, FilePart) and part.name == "report.pdf" and part.data == data
    assert "is a PDF (application/pdf, 209 B)" in res.content


async def test_read_refuses_an_image_over_the_cap(ws: Workspace, tools,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read_module, "MAX_MEDIA", 100)
    (ws.root / "big.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    res = await call(tools["read"], path="big.png")
    assert res.is_error and "image/png of 208 B" in res.content and "up to 100 B" in res.content
    assert not res.parts


async def test_read_caps_huge_file_and_says_how_to_continue(ws: Workspace, tools) -> None:
    line = "x" * 100
    (ws.root / "big.txt").write_text((line + "\n") * 50_000)
    res = await call(tools["read"], path="big.txt")
    assert not res.is_error
    assert len(res.content) < 61_000
    assert "output capped at 60000 characters" in res.content
    last = int(res.content.rsplit("offset=", 1)[1].rstrip("]"))
    assert f"{last - 1:>6}\t{line}" in res.content and 500 < last < 2000


async def test_read_cuts_very_long_lines(ws: Workspace, tools) -> None:
    (ws.root / "min.js").write_text("y" * 10_000)
    res = await call(tools["read"], path="min.js")
    assert "line cut at 2000 characters" in res.content and len(res.content) < 2100


@pytest.mark.parametrize("path", ["../outside.txt", "sub/../../outside.txt", "/etc/passwd"])
async def test_paths_outside_the_workspace_are_refused(ws: Workspace, tools, path: str) -> None:
    (ws.root / "sub").mkdir()
    (ws.root.parent / "outside.txt").write_text("secret")
    for name, args in [("read", {"path": path}), ("write", {"path": path, "content": "x"}),
                       ("ls", {"path": path}), ("grep", {"pattern": "s", "path": path})]:
        res = await call(tools[name], **args)
        assert res.is_error, name
        assert "outside the workspace" in res.content, name
    assert (ws.root.parent / "outside.txt").read_text() == "secret"


async def test_symlink_escape_is_refused(ws: Workspace, tools, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    os.symlink(outside, ws.root / "link")
    os.symlink(outside / "secret.txt", ws.root / "file-link")
    for args in [{"path": "link/secret.txt"}, {"path": "file-link"}]:
        res = await call(tools["read"], **args)
        assert res.is_error and "outside the workspace" in res.content
    res = await call(tools["write"], path="link/new.txt", content="x")
    assert res.is_error and not (outside / "new.txt").exists()
    # walking tools do not follow links out of the workspace either
    res = await call(tools["grep"], pattern="secret")
    assert "top secret" not in res.content
    res = await call(tools["find"], pattern="*.txt")
    assert "secret" not in res.content


async def test_symlink_inside_and_extra_roots_are_allowed(ws: Workspace, tmp_path: Path) -> None:
    (ws.root / "real.txt").write_text("hello\n")
    os.symlink(ws.root / "real.txt", ws.root / "alias.txt")
    extra = tmp_path / "shared"
    extra.mkdir()
    (extra / "notes.md").write_text("shared notes\n")
    tools = {t.name: t for t in coding_tools(Workspace(ws.root, [extra]), use_ripgrep=False)}
    assert (await call(tools["read"], path="alias.txt")).content == "     1\thello"
    res = await call(tools["read"], path=str(extra / "notes.md"))
    assert res.content == "     1\tshared notes"
    res = await call(tools["read"], path=str(tmp_path / "elsewhere.txt"))
    assert res.is_error and "extra root" in res.content


async def test_write_creates_folders_and_reports_created_or_overwritten(ws: Workspace, tools) -> None:
    res = await call(tools["write"], path="deep/er/new.py", content="a\nb\n")
    assert res.content == "Created deep/er/new.py (2 lines, 4 bytes)."
    os.chmod(ws.root / "deep/er/new.py", 0o755)
    res = await call(tools["write"], path="deep/er/new.py", content="c")
    assert res.content == "Overwrote deep/er/new.py (1 line, 1 byte)."
    assert (ws.root / "deep/er/new.py").read_text() == "c"
    assert (ws.root / "deep/er/new.py").stat().st_mode & 0o777 == 0o755
    assert [p.name for p in (ws.root / "deep/er").iterdir()] == ["new.py"]  # no temp left


async def test_write_preview_is_a_diff_and_changes_nothing(ws: Workspace, tools) -> None:
    (ws.root / "f.txt").write_text("old line\n")
    text = tools["write"].preview({"path": "f.txt", "content": "new line\n"}, None)  # type: ignore[arg-type]
    assert "[dry-run] write would overwrite f.txt" in text
    assert "--- a/f.txt\n+++ b/f.txt" in text and "-old line\n+new line\n" in text
    assert (ws.root / "f.txt").read_text() == "old line\n"


async def test_edit_replaces_exactly_one_occurrence(ws: Workspace, tools) -> None:
    (ws.root / "m.py").write_text("def f():\n    return 1\n")
    res = await call(tools["edit"], path="m.py", old_text="return 1", new_text="return 2")
    assert res.content == "Edited m.py: replaced 1 occurrence (first at line 2)."
    assert (ws.root / "m.py").read_text() == "def f():\n    return 2\n"


async def test_edit_non_unique_and_missing_text_fail_clearly(ws: Workspace, tools) -> None:
    (ws.root / "m.py").write_text("x = 1\ny = 2\nx = 1\n")
    res = await call(tools["edit"], path="m.py", old_text="x = 1", new_text="x = 3")
    assert res.is_error and "occurs 2 times in m.py (at lines 1, 3)" in res.content
    assert (ws.root / "m.py").read_text() == "x = 1\ny = 2\nx = 1\n"
    res = await call(tools["edit"], path="m.py", old_text="z = 9", new_text="z = 0")
    assert res.is_error and "not found" in res.content
    res = await call(tools["edit"], path="m.py", old_text="x = 1", new_text="x = 3",
                     replace_all=True)
    assert res.content == "Edited m.py: replaced 2 occurrences (first at line 1)."
    assert (ws.root / "m.py").read_text() == "x = 3\ny = 2\nx = 3\n"
    res = await call(tools["edit"], path="nope.py", old_text="a", new_text="b")
    assert res.is_error and "does not exist" in res.content


async def test_edit_preview_shows_diff_without_writing(ws: Workspace, tools) -> None:
    (ws.root / "m.py").write_text("a = 1\n")
    text = tools["edit"].preview({"path": "m.py", "old_text": "a = 1", "new_text": "a = 2",
                                  "replace_all": False}, None)  # type: ignore[arg-type]
    assert "-a = 1\n+a = 2\n" in text and (ws.root / "m.py").read_text() == "a = 1\n"


async def test_ls_lists_folders_first_with_sizes(ws: Workspace, tools) -> None:
    (ws.root / "b.txt").write_text("12345")
    (ws.root / "a").mkdir()
    os.symlink("b.txt", ws.root / "c")
    res = await call(tools["ls"])
    assert res.content == ("a/\nb.txt  (5 B, 1 line)\n    | 12345\nc -> b.txt\n"
                           "1 file (1 .txt), 1 folder")
    assert (await call(tools["ls"], path="a")).content == "a is empty."


async def test_ls_states_line_counts_and_files_by_kind(ws: Workspace, tools) -> None:
    # small models miscount a listing: the tool gives the numbers
    (ws.root / "one.py").write_text("a\nb\nc\n")
    (ws.root / "two.py").write_text("x\ny")  # no newline at the end: still 2 lines
    (ws.root / "n.txt").write_text("")
    (ws.root / "img.bin").write_bytes(b"\0\1\2\n")
    res = await call(tools["ls"])
    assert res.content.splitlines() == [
        "img.bin  (4 B)", "n.txt  (0 B, 0 lines)", "one.py  (6 B, 3 lines)", "    | a",
        "    | b", "    | c", "two.py  (3 B, 2 lines)", "    | x", "    | y",
        "4 files (2 .py, 1 .bin, 1 .txt), 0 folders"]
    assert (await call(tools["ls"], path="b.txt")).is_error


async def test_ls_shows_the_text_of_small_files_while_the_listing_stays_short(
        ws: Workspace, tools) -> None:
    # The 1.5B answered "port?" from a listing naming server.py: "the port is not specified".
    (ws.root / "app.py").write_text("import http.server\nPORT = 6839\n")
    (ws.root / "big.txt").write_text("x" * (INLINE_FILE_BYTES + 1))
    for i in range(INLINE_TOTAL // INLINE_FILE_BYTES + 1):
        (ws.root / f"n{i}.md").write_text("y" * INLINE_FILE_BYTES)
    rows = (await call(tools["ls"])).content.splitlines()
    assert rows[:4] == ["app.py  (31 B, 2 lines)", "    | import http.server",
                        "    | PORT = 6839", f"big.txt  ({INLINE_FILE_BYTES + 1} B, 1 line)"]
    shown = [r for r in rows if r.startswith("    | ")]
    assert sum(len(r) - len("    | ") for r in shown) <= INLINE_TOTAL
    assert rows[-2].startswith("n4.md") and rows[-1].startswith("7 files")  # over the budget


def _tree(root: Path) -> None:
    (root / ".gitignore").write_text("build/\n*.log\n!keep.log\n/top.txt\n")
    for rel, text in {"src/app.py": "import os\nTODO: fix\n", "src/util/helpers.py": "todo\n",
                      "build/out.py": "TODO built\n", "debug.log": "TODO log\n",
                      "keep.log": "TODO keep\n", "top.txt": "TODO top\n",
                      "src/top.txt": "TODO nested top\n", ".git/config": "TODO git\n",
                      "src/.gitignore": "helpers.py\n", "img.bin": "TODO\x00\x01"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


async def test_find_respects_gitignore_and_globs(ws: Workspace, tools) -> None:
    _tree(ws.root)
    assert (await call(tools["find"], pattern="*.py")).content == "src/app.py"
    res = await call(tools["find"], pattern="*.log")
    assert res.content == "keep.log"
    res = await call(tools["find"], pattern="**/top.txt")
    assert res.content == "src/top.txt"
    res = await call(tools["find"], pattern="*.nothing")
    assert res.content.startswith("No files match")


async def test_python_grep_respects_gitignore_and_skips_binary(ws: Workspace, tools) -> None:
    _tree(ws.root)
    res = await call(tools["grep"], pattern="TODO")
    assert res.content.splitlines() == [
        "keep.log:1: TODO keep", "src/app.py:2: TODO: fix", "src/top.txt:1: TODO nested top",
        "3 matches in 3 files, of which:", "in the .log files only: 1 match (keep.log 1)",
        "in the .py files only: 1 match (src/app.py 1)",
        "in the .txt files only: 1 match (src/top.txt 1)"]
    res = await call(tools["grep"], pattern="todo", ignore_case=True, glob="*.py")
    assert res.content == "src/app.py:2: TODO: fix\n1 match in 1 file"
    res = await call(tools["grep"], pattern="(", path="src")
    assert res.is_error and "invalid regular expression" in res.content


async def test_ripgrep_and_python_grep_agree(ws: Workspace) -> None:
    if shutil.which("rg") is None:
        missing("RG", "ripgrep (rg) is not installed")
    _tree(ws.root)
    with_rg = {t.name: t for t in coding_tools(ws, use_ripgrep=True)}["grep"]
    without = {t.name: t for t in coding_tools(ws, use_ripgrep=False)}["grep"]
    for args in [{"pattern": "TODO"}, {"pattern": "todo", "ignore_case": True, "glob": "*.py"}]:
        assert (await call(with_rg, **args)).content == (await call(without, **args)).content


async def test_grep_counts_its_matches_in_all_by_kind_and_by_file(ws: Workspace, tools) -> None:
    # The 1.5B had the matching lines in front of it and answered with the steps of a count;
    # with the kinds' figures on the whole's line, asked about the .txt files, it gave the whole.
    for name, text in {"a.txt": "falcon\nfalcon falcon\nno\n", "b.txt": "the falcon\n",
                       "c.md": "falcon\n"}.items():
        (ws.root / name).write_text(text)
    res = await call(tools["grep"], pattern="falcon")
    assert res.content.splitlines()[-3:] == [
        "5 matches on 4 lines in 3 files, of which:",
        "in the .txt files only: 4 matches (a.txt 3, b.txt 1)",
        "in the .md files only: 1 match (c.md 1)"]
    res = await call(tools["grep"], pattern="falcon", glob="*.txt")
    assert res.content.splitlines()[-1] == "matches by file: a.txt 3, b.txt 1; in all: 4 " \
        "matches on 3 lines in 2 files"


def test_gitignore_rules() -> None:
    rules = IgnoreRules()
    rules.load("", "# c\n*.pyc\n/dist\ndocs/**/*.tmp\nlogs/\n!logs/x\n")
    assert rules.ignored("a/b/c.pyc", False)
    assert rules.ignored("dist", True) and not rules.ignored("src/dist", True)
    assert rules.ignored("docs/a/b/c.tmp", False) and rules.ignored("docs/c.tmp", False)
    assert rules.ignored("logs", True) and not rules.ignored("logs", False)
    assert glob_to_regex("a?[!b].py") == r"a[^/][^b]\.py"


@pytest.mark.parametrize("tool, args", [
    ("read", {"path": "notes"}), ("ls", {"path": "notes"}),
    ("grep", {"pattern": "x", "path": "notes"}), ("find", {"pattern": "*", "path": "notes"}),
])
async def test_a_missing_path_names_what_is_there_the_closest_first(ws: Workspace, tools,
                                                                     tool, args) -> None:
    # The 1.5B looked for "notes" four times, each error naming only what was missing.
    for name in ("README.md", "a.py", "notes.txt"):
        (ws.root / name).write_text("x\n")
    (ws.root / "src").mkdir()
    res = await call(tools[tool], **args)
    assert res.is_error
    assert res.content == "notes does not exist; . holds: notes.txt, README.md, a.py, src/"


async def test_a_missing_path_names_the_nearest_folder_and_hides_refused_entries(
        ws: Workspace, tools) -> None:
    from steerable.tools import ToolContext

    (ws.root / "svc").mkdir()
    for name in ("quota.py", "secret.key"):
        (ws.root / "svc" / name).write_text("x\n")
    ctx = ToolContext(call_id="c1", tool_name="read", turn_id="t", session_id="s",
                      _refuses=lambda subject: subject == "svc/secret.key")
    res = await call(tools["read"], ctx, path="svc/sub/qouta.py")
    assert res.content == "svc/sub/qouta.py does not exist; svc holds: quota.py"
    (ws.root / "svc" / "quota.py").unlink()
    (ws.root / "svc" / "secret.key").unlink()
    res = await call(tools["read"], path="svc/qouta.py")
    assert res.content == "svc/qouta.py does not exist; svc is empty"


async def test_grep_counts_no_empty_match(ws: Workspace, tools) -> None:
    # `.*` also matches the empty string after each line: counted, one.py's 2 lines were
    # "one.py 4" (the 1.5B, asked for each .py file's lines, answered with steps instead).
    (ws.root / "one.py").write_text("x0 = 0\nx1 = 1\n")
    (ws.root / "two.py").write_text("y0 = 0\n")
    res = await call(tools["grep"], pattern=".*", glob="*.py")
    assert res.content.splitlines()[-1] == "matches by file: one.py 2, two.py 1; in all: 3 " \
        "matches in 2 files"
