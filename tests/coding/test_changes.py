"""What a change request changed, read off the workspace; and what counts as an echoed result."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from steerable.coding._changes import (
    Snapshot,
    broken_files,
    change_report,
    changed_paths,
    named_targets,
)
from steerable.coding._evidence import echoes

_NAMES = st.sampled_from(["a.txt", "b.py", "sub/c.md", "sub/deeper/d.json", "e.cfg"])
_STAMPS = st.dictionaries(_NAMES, st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=5)


@given(before=_STAMPS, after=_STAMPS)
def test_changed_paths_is_symmetric_and_empty_only_for_equal_stamps(before, after):
    assert changed_paths(before, after) == changed_paths(after, before)
    assert (changed_paths(before, after) == []) == (before == after)


@settings(max_examples=60, deadline=None)
@given(files=st.dictionaries(_NAMES, st.text("xyz\n", max_size=8), min_size=1, max_size=5),
       data=st.data())
def test_every_kind_of_change_to_a_named_file_is_seen_and_only_it(files, data):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        target = data.draw(st.sampled_from(sorted(files)))
        start = Snapshot.take(root, [target])
        op = data.draw(st.sampled_from(["same-size edit", "remove", "append", "rewrite"]))
        path = root / target
        if op == "remove":
            path.unlink()
        elif op == "rewrite":  # the same bytes, a new mtime (sed -i whose pattern matched nothing)
            mtime = path.stat().st_mtime_ns
            path.write_text(files[target])
            os.utime(path, ns=(mtime + 10**9, mtime + 10**9))
        elif op == "append":
            path.write_text(files[target] + "!")
        else:  # same size, and the same mtime: only the kept text can tell
            st_before = path.stat()
            path.write_text("".join("q" if c != "\n" else c for c in files[target]) or "")
            os.utime(path, ns=(st_before.st_atime_ns, st_before.st_mtime_ns))
        now = Snapshot.take(root, [target])
        changed = files[target] != path.read_text() if path.exists() else True
        assert start.changed(now) == ([target] if changed else [])
        assert start.targets_done(now) == changed
        assert (change_report(start, now) != "") == changed


@given(text=st.text(st.sampled_from("ab./_-x ~\\:"), max_size=30))
def test_a_named_target_never_leaves_the_workspace(text):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        for rel in named_targets(f"change {text}.py and ../../etc/passwd.txt", root):
            assert rel != ".." and not rel.startswith("../") and not os.path.isabs(rel)
            assert (root / rel).resolve().is_relative_to(root.resolve())


def test_names_in_any_language_are_targets():
    root = Path(tempfile.gettempdir())
    assert named_targets("Ändere in config.py TIMEOUT, puis src/app.js.", root) == (
        "config.py", "src/app.js")


_LINES = st.lists(st.text("abc123 .:", min_size=3, max_size=12).filter(str.strip),
                  min_size=2, max_size=6, unique=True)


@given(lines=_LINES, data=st.data())
def test_an_answer_made_only_of_result_lines_is_an_echo(lines, data):
    picked = data.draw(st.lists(st.sampled_from(lines), min_size=2, max_size=4))
    assert echoes("\n".join(picked), ["\n".join(lines)])


@given(lines=_LINES, extra=st.text("DEFG ", min_size=1, max_size=10).filter(str.strip))
def test_an_answer_with_a_line_of_its_own_is_no_echo(lines, extra):
    assert not echoes("\n".join([*lines[:2], extra]), ["\n".join(lines)])
    assert not echoes(lines[0], ["\n".join(lines)])  # one line of a longer result: an answer


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=8)


@settings(max_examples=60, deadline=None)
@given(old=_JSON, new=_JSON, cut=st.integers(1, 5), was_broken=st.booleans())
def test_only_a_change_that_broke_a_file_that_parsed_is_reported(old, new, cut, was_broken):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / "c.json"
        before_text = json.dumps(old)[:-1] if was_broken and json.dumps(old)[-1] in "]}" \
            else json.dumps(old)
        path.write_text(before_text)
        before = Snapshot.take(root, ["c.json"])
        text = json.dumps([new])
        path.write_text(text[:-cut])  # a cut list is never valid JSON
        broken = broken_files(before, Snapshot.take(root, ["c.json"]))
        parsed_before = before_text == json.dumps(old)
        assert (("c.json" in broken) == (parsed_before and text[:-cut] != before_text))
