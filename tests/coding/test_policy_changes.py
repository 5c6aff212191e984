"""The tool policy's judgement of the model's own work after a right reading: a run runs, a
change is judged by the workspace, is done when the named files changed, is never applied
twice, gets one last required change; a command's changes are shown; an echo is restated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from steerable import EventKind, Reply, TurnStatus
from steerable.coding._sandbox import bwrap_usable
from steerable.coding.policy import BROKEN_MARK, NOTHING_CHANGED_MARK
from steerable.providers.profiles import tool_result_as_user

from .test_policy import _requests, _run, change, kind, sent


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "report.py").write_text("print('total', 41 + 1)\n")
    (tmp_path / "shopping.txt").write_text("milk\nbread\n")
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return tmp_path


NO_WRITE = ("read", "edit", "bash", "grep", "ls", "find")
"""A required call of a change of files that exist: a whole write is not offered."""


def _choices(events: list[Any]) -> list[tuple[str, tuple[str, ...] | None]]:
    return [(r.tool_choice, r.may_call) for r in _requests(events) if not r.purpose]


async def test_a_run_request_must_run_a_command_first(ws):
    _, events, *_ = await _run(
        ws, "lance report.py stp", kind("run"),
        Reply(tool_calls=[("read", {"path": "report.py"})]),  # reading is not running: denied
        Reply(tool_calls=[("bash", {"command": "python3 report.py"})]),
        Reply(text="It prints: total 42"))
    choices = _choices(events)
    assert choices[0] == ("required", ("bash",)) and choices[1] == ("required", ("bash",))
    assert choices[2][0] == "auto" and "bash" in (choices[2][1] or ())
    skipped = [e.tool_name for e in events if e.kind is EventKind.TOOL_EXEC_SKIPPED]
    assert skipped == ["read"]


async def test_the_same_change_is_never_applied_twice(ws):
    append = {"path": "shopping.txt", "old_text": "bread\n", "new_text": "bread\neggs\n"}
    result, events, _, hook = await _run(
        ws, "mets eggs à la fin de la liste", *change(),
        Reply(tool_calls=[("edit", append)]), Reply(tool_calls=[("edit", append)]),
        Reply(text="eggs is at the end."))
    assert (ws / "shopping.txt").read_text() == "milk\nbread\neggs\n"
    skipped = [e for e in events if e.kind is EventKind.TOOL_EXEC_SKIPPED]
    assert [e.tool_name for e in skipped] == ["edit"]
    assert _choices(events)[-1][0] == "none"  # a repeated call: answer now
    verdict = hook.verdict(result.turn_id)
    assert verdict is not None and verdict.changed


async def test_a_change_is_done_once_every_named_file_changed(ws):
    fix = {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}
    _, events, *_ = await _run(
        ws, "calc.py: add shuld retrun the sum", *change(),
        Reply(tool_calls=[("read", {"path": "calc.py"})]),
        Reply(tool_calls=[("edit", fix)]), Reply(text="add now returns a + b."))
    assert _choices(events) == [("required", NO_WRITE), ("required", NO_WRITE), ("none", None)]
    assert "a + b" in (ws / "calc.py").read_text()


async def test_a_command_that_succeeds_is_no_change_and_the_last_chance_is_a_file_change(ws):
    result, events, _, hook = await _run(
        ws, "fix calc.py", *change(),
        Reply(tool_calls=[("bash", {"command": "cat calc.py"})]),
        Reply(tool_calls=[("bash", {"command": "cat calc.py"})]),  # a repeat: no change yet
        Reply(tool_calls=[("edit", {"path": "calc.py", "old_text": "a - b",
                                    "new_text": "a + b"})]),
        Reply(text="Fixed: add returns a + b."))
    choices = _choices(events)
    assert choices[2] == ("required", ("edit",))  # calc.py exists: no whole write
    assert "last chance" in _requests(events)[3].reason
    assert choices[3] == ("none", None)
    assert "a + b" in (ws / "calc.py").read_text()
    verdict = hook.verdict(result.turn_id)
    assert verdict is not None and verdict.changed and NOTHING_CHANGED_MARK not in result.text


async def test_instructions_instead_of_a_change_do_not_end_green(ws):
    result, _, _, hook = await _run(
        ws, "fix calc.py", *change(),
        Reply(tool_calls=[("read", {"path": "calc.py"})]),
        Reply(tool_calls=[("read", {"path": "calc.py"})]),
        Reply(tool_calls=[("edit", {"path": "calc.py", "old_text": "nope", "new_text": "x"})]),
        Reply(text="Replace `a - b` with `a + b` in calc.py."))
    assert result.status is TurnStatus.COMPLETED and NOTHING_CHANGED_MARK in result.text
    verdict = hook.verdict(result.turn_id)
    assert verdict is not None and verdict.change_missing
    assert (ws / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"


@pytest.mark.skipif(bwrap_usable() is None, reason="bubblewrap is not usable here")
async def test_a_command_that_rewrites_a_file_says_so_in_its_result(ws):
    _, events, *_ = await _run(
        ws, "fix calc.py", *change(),
        Reply(tool_calls=[("bash", {"command": "sed -i 's/.*//' calc.py"})]),
        Reply(text="Done."))
    end = next(e for e in events if e.kind is EventKind.TOOL_EXEC_END)
    assert "files this command changed in the workspace: calc.py (" in end.content
    assert "-    return a - b" in end.content  # the diff of a named file


async def test_a_raw_tool_result_given_as_the_answer_is_restated(ws):
    (ws / "a.txt").write_text("x\n")
    (ws / "b.txt").write_text("y\n")
    result, events, provider, _ = await _run(
        ws, "combien de .txt ?", kind("workspace"),
        Reply(tool_calls=[("find", {"pattern": "*.txt"})]),
        Reply(text="a.txt\nb.txt\nshopping.txt"), Reply(text="3 .txt files."))
    purposes = [r.purpose for r in _requests(events)]
    assert purposes == ["classify", "", "", "answer"]
    assert sent(provider)[-1].tool_choice.mode == "none"
    assert result.text == "3 .txt files.\n\na.txt\nb.txt\nshopping.txt"  # words, then output


@pytest.mark.skipif(bwrap_usable() is None, reason="bubblewrap is not usable here")
async def test_a_command_that_changed_nothing_may_run_again_after_a_fix(ws):
    check = {"command": "python3 -B -c 'import calc; assert calc.add(1, 2) == 3'"}
    fix = {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}
    _, events, *_ = await _run(
        ws, "fix the add function", *change(),
        Reply(tool_calls=[("bash", check)]), Reply(tool_calls=[("edit", fix)]),
        Reply(tool_calls=[("bash", check)]), Reply(text="Fixed: the check passes."))
    ends = [e for e in events if e.kind is EventKind.TOOL_EXEC_END]
    assert [(e.tool_name, e.is_error) for e in ends] == [
        ("bash", True), ("edit", False), ("bash", False)]  # the check ran again, and passed


@pytest.mark.skipif(bwrap_usable() is None, reason="bubblewrap is not usable here")
async def test_a_command_that_changed_files_is_not_run_twice(ws):
    append = {"command": "echo eggs >> shopping.txt"}
    _, events, *_ = await _run(
        ws, "add eggs to the list", *change(),
        Reply(tool_calls=[("bash", append)]), Reply(tool_calls=[("bash", append)]),
        Reply(text="eggs added."))
    assert (ws / "shopping.txt").read_text() == "milk\nbread\neggs\n"
    skipped = [e for e in events if e.kind is EventKind.TOOL_EXEC_SKIPPED]
    assert [(e.tool_name, e.reason) for e in skipped] == [("bash", "denied")]


async def test_an_echo_restated_as_an_echo_stays_as_it_was(ws):
    listing = "calc.py\nreport.py"
    result, events, *_ = await _run(
        ws, "py?", kind("workspace"), Reply(tool_calls=[("find", {"pattern": "*.py"})]),
        Reply(text=listing), Reply(text="report.py\ncalc.py"))
    assert [r.purpose for r in _requests(events)].count("answer") == 1
    assert result.text == listing


@pytest.mark.skipif(bwrap_usable() is None, reason="bubblewrap is not usable here")
async def test_a_sed_that_broke_a_named_file_must_be_fixed_before_the_change_is_done(ws):
    (ws / "config.py").write_text("DEBUG = False\nTIMEOUT = 30\n")
    _, events, _, hook = await _run(
        ws, "In config.py, change TIMEOUT from 30 to 60.", *change(),
        Reply(tool_calls=[("bash", {"command": "sed -i 's/TIMEOUT/60/' config.py"})]),
        Reply(tool_calls=[("edit", {"path": "config.py", "old_text": "60 = 30",
                                    "new_text": "TIMEOUT = 60"})]),
        Reply(text="TIMEOUT is now 60."))
    assert (ws / "config.py").read_text() == "DEBUG = False\nTIMEOUT = 60\n"
    broke = next(e for e in events if e.kind is EventKind.TOOL_EXEC_END)
    assert broke.is_error and "[this left config.py unparsable: SyntaxError at line 2" in \
        broke.content
    assert "-TIMEOUT = 30" in broke.content and "+60 = 30" in broke.content
    choices = _choices(events)
    assert choices[1][0] == "required" and choices[2] == ("none", None)  # fixed: done
    assert "config.py no longer parses" in _requests(events)[2].reason


async def test_a_change_that_leaves_a_file_broken_says_so(ws):
    (ws / "settings.json").write_text('{"debug": false}\n')
    result, _, _, hook = await _run(
        ws, "debug on in settings.json", *change(),
        Reply(tool_calls=[("edit", {"path": "settings.json", "old_text": "false",
                                    "new_text": "true,"})]),
        Reply(tool_calls=[("read", {"path": "settings.json"})]),
        Reply(text="debug is on."), max_rounds=2)
    verdict = hook.verdict(result.turn_id)
    assert verdict is not None and verdict.changed and verdict.broken == ("settings.json",)
    assert f"{BROKEN_MARK}: settings.json" in result.text


async def test_a_search_that_found_nothing_or_failed_is_no_look(ws):
    (ws / "notes.txt").write_text("Sync on Thursday in room A589.\n")
    _, events, *_ = await _run(
        ws, "waht does notse.txt say", kind("workspace"),
        Reply(tool_calls=[("grep", {"pattern": "notse"})]),
        Reply(tool_calls=[("read", {"path": "notse.txt"})]),
        Reply(tool_calls=[("find", {"pattern": "*notse*"})]),
        Reply(tool_calls=[("ls", {"path": "."})]),
        Reply(tool_calls=[("read", {"path": "notes.txt"})]),
        Reply(text="Sync on Thursday in room A589."), max_rounds=6)
    assert _choices(events)[:4] == [
        ("required", ("read", "grep", "ls", "find")), ("required", ("read", "ls", "find")),
        ("required", ("ls", "find")), ("required", ("ls",))]
    assert _choices(events)[4][0] == "auto"


async def test_a_search_repeated_after_it_found_nothing_is_offered_the_other_looks(ws):
    (ws / "app.py").write_text("# TODO: handle the amber case\n")
    pattern = {"pattern": "*TODO*"}
    result, events, *_ = await _run(
        ws, "Find the TODO comments", kind("workspace"),
        Reply(tool_calls=[("find", pattern)]), Reply(tool_calls=[("find", pattern)]),
        Reply(tool_calls=[("grep", {"pattern": "TODO"})]),
        Reply(text="app.py:1: TODO: handle the amber case"))
    choices = _choices(events)
    assert choices[1] == ("required", ("read", "grep", "ls")) == choices[2]
    assert choices[3][0] == "auto"


async def test_a_tool_result_repeated_as_the_model_was_shown_it_is_an_echo(ws):
    def echo(request: Any) -> Reply:  # the grep's result, as a text-calls profile shows it
        calls = {c.id: c for m in request.messages for c in m.tool_calls}
        return Reply(text=tool_result_as_user(request.messages[-1], calls))

    result, events, *_ = await _run(
        ws, "port?", kind("workspace"), Reply(tool_calls=[("grep", {"pattern": "listen"})]),
        Reply(tool_calls=[("read", {"path": "report.py"})]),
        echo, Reply(text="No port is set in these files."))  # type: ignore[arg-type]
    assert [r.purpose for r in _requests(events)][-1] == "answer"
    assert result.text.startswith("No port is set in these files.")


async def test_a_file_is_written_whole_only_after_it_was_read(ws):
    whole = {"path": "calc.py", "content": "def hello(name):\n    return 'Hello, ' + name\n"}
    _, events, *_ = await _run(
        ws, "add hello(name) to calc.py and create new.py", *change(),
        Reply(tool_calls=[("write", whole)]),  # would drop add(): denied
        Reply(tool_calls=[("read", {"path": "calc.py"})]),  # the one call offered next
        Reply(tool_calls=[("write", {"path": "new.py", "content": "x = 1\n"})]),
        Reply(tool_calls=[("write", {"path": "new.py", "content": "x = 2\n"})]),  # its own
        Reply(tool_calls=[("write", {**whole, "content": "def add(a, b):\n    return a + b\n"
                                     "\n\ndef hello(name):\n    return 'Hello, ' + name\n"})]),
        Reply(text="Added hello."), max_rounds=8)
    skipped = [e for e in events if e.kind is EventKind.TOOL_EXEC_SKIPPED]
    assert [e.tool_name for e in skipped] == ["write"]
    assert _choices(events)[1] == ("required", ("read",))
    assert "read calc.py before changing it" in _requests(events)[2].reason
    assert "def add" in (ws / "calc.py").read_text() and "def hello" in (ws / "calc.py").read_text()
    assert (ws / "new.py").read_text() == "x = 2\n"


async def test_a_failed_edit_of_a_file_not_read_is_followed_by_a_read_of_it(ws):
    # The 1.5B quoted a line calc.py never had, twice, and ended with nothing changed.
    invented = {"path": "calc.py", "old_text": "print('Hello, world!')", "new_text": "x"}
    _, events, *_ = await _run(
        ws, "fix the bug in calc.py", *change(),
        Reply(tool_calls=[("edit", invented)]),  # fails: the text is not in the file
        Reply(tool_calls=[("read", {"path": "calc.py"})]),  # the one call offered next
        Reply(tool_calls=[("edit", {"path": "calc.py", "old_text": "a - b",
                                    "new_text": "a + b"})]),
        Reply(text="Fixed add."), max_rounds=8)
    choices = _choices(events)
    assert choices[1] == ("required", ("read",))
    assert "read calc.py before changing it" in _requests(events)[2].reason
    assert choices[2] == ("required", NO_WRITE)  # read: any tool again (but a whole write)
    assert "a + b" in (ws / "calc.py").read_text()


async def test_a_last_chance_spent_on_a_file_never_read_is_given_again_after_the_read(ws):
    invented = {"path": "calc.py", "old_text": "debug: false", "new_text": "debug: true"}
    _, events, *_ = await _run(
        ws, "fix the bug in calc.py", *change(),
        Reply(tool_calls=[("bash", {"command": "true"})]),  # changes nothing
        Reply(tool_calls=[("bash", {"command": "true"})]),  # the same call: the limit
        Reply(tool_calls=[("edit", invented)]),  # the last chance, quoting unseen text
        Reply(tool_calls=[("read", {"path": "calc.py"})]),
        Reply(tool_calls=[("edit", {"path": "calc.py", "old_text": "a - b",
                                    "new_text": "a + b"})]),
        Reply(text="Fixed add."))  # four rounds, as the CLI runs it
    choices = _choices(events)
    assert choices[2] == ("required", ("edit",))  # the last chance
    assert choices[3] == ("required", ("read",))
    assert choices[4] == ("required", ("edit",))  # given again, once
    assert "a + b" in (ws / "calc.py").read_text()


@pytest.mark.skipif(bwrap_usable() is None, reason="bubblewrap is not usable here")
@pytest.mark.parametrize("read_first", [False, True])
async def test_a_file_a_command_broke_is_read_before_it_is_repaired(ws, read_first):
    # The 1.5B's `sed` replaced the name, not the value; it then quoted the line as it was
    # before the `sed`, twice. Whether or not it read the file before the command, its text
    # now is unseen: the failed edit is followed by a read, before the repair.
    (ws / "config.py").write_text("DEBUG = False\nTIMEOUT = 30\n")
    stale = {"path": "config.py", "old_text": "TIMEOUT = 30", "new_text": "TIMEOUT = 60"}
    first = [Reply(tool_calls=[("read", {"path": "config.py"})])] if read_first else []
    _, events, *_ = await _run(
        ws, "config.py: TIMEOUT 30 -> 60", *change(), *first,
        Reply(tool_calls=[("bash", {"command": "sed -i 's/TIMEOUT/60/' config.py"})]),
        Reply(tool_calls=[("edit", stale)]),  # fails: the sed replaced that text
        Reply(tool_calls=[("read", {"path": "config.py"})]),  # the one call offered next
        Reply(tool_calls=[("edit", {"path": "config.py", "old_text": "60 = 30",
                                    "new_text": "TIMEOUT = 60"})]),
        Reply(text="TIMEOUT is now 60."), max_rounds=8)
    choices = _choices(events)[len(first):]
    assert choices[1][0] == "required" and "no longer parses" in \
        _requests(events)[2 + len(first)].reason
    assert choices[2] == ("required", ("read",))
    assert (ws / "config.py").read_text() == "DEBUG = False\nTIMEOUT = 60\n"


async def test_a_required_edit_of_a_known_file_quotes_one_of_its_own_lines(ws):
    # The 1.5B quoted `print('Hello, world!')` in a calc.py that never had it, and again after
    # reading it: the quote is held to the lines of the file that occur once.
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n"
                                "    return a - b\n    pass\n")
    fix = {"path": "calc.py", "old_text": "def add(a, b):\n    return a - b",
           "new_text": "def add(a, b):\n    return a + b"}
    _, _, provider, _ = await _run(
        ws, "fix calc.py, add should return the sum", *change(),
        Reply(tool_calls=[("read", {"path": "report.py"})]),
        Reply(tool_calls=[("edit", fix)]), Reply(text="add returns the sum."))
    first, second = (r.tool_choice for r in sent(provider)[1:3])
    edits = [dict(held) for tool, held in first.values if tool == "edit"]
    lines = ("def add(a, b):", "def mul(a, b):", "    pass")  # `return a - b` is there twice
    others = ("report.py", "shopping.txt")
    assert edits == [{"path": ("calc.py",), "old_text": lines}, {"path": others}]
    # A file read since is known too.
    edits = [dict(held) for tool, held in second.values if tool == "edit"]
    assert edits == [{"path": ("calc.py",), "old_text": lines},
                     {"path": ("report.py",), "old_text": ("print('total', 41 + 1)",)},
                     {"path": ("shopping.txt",)}]


async def test_a_required_write_may_only_create_a_file_the_request_names(ws):
    # The 1.5B rewrote greet.py with hello() alone after reading shout() in it: a file that
    # exists changes by edit; a whole write is for the new files the request names.
    _, _, provider, _ = await _run(
        ws, "add hello() to calc.py and put its tests in test_calc.py", *change(),
        Reply(tool_calls=[("write", {"path": "test_calc.py", "content": "import calc\n"})]),
        Reply(tool_calls=[("edit", {"path": "calc.py", "old_text": "    return a - b",
                                    "new_text": "    return a - b\n\ndef hello():\n"
                                                "    return 1\n"})]),
        Reply(text="Done."))
    first = sent(provider)[1].tool_choice
    assert first.only is None and ("write", (("path", ("test_calc.py",)),)) in first.values
    _, _, provider, _ = await _run(
        ws, "add hello() to calc.py", *change(),
        Reply(tool_calls=[("edit", {"path": "calc.py", "old_text": "    return a - b",
                                    "new_text": "    return a - b\n\ndef hello():\n"
                                                "    return 1\n"})]),
        Reply(text="Done."))
    first = sent(provider)[1].tool_choice
    assert first.only == NO_WRITE and not [v for v in first.values if v[0] == "write"]
    # A request that names no file may still ask for one: a whole write stays offered.
    _, _, provider, _ = await _run(
        ws, "write a script that prints hi", *change(),
        Reply(tool_calls=[("write", {"path": "hi.py", "content": "print('hi')\n"})]),
        Reply(text="Done."))
    first = sent(provider)[1].tool_choice
    assert first.only is None and not [v for v in first.values if v[0] == "write"]


async def test_a_repeat_while_files_are_broken_reads_them_and_repairs(ws):
    # The 1.5B broke greet.py and main.py, then sent the same calls again; the repeat ended
    # the request with both broken. It now reads them (held to those files), then repairs.
    (ws / "greet.py").write_text("def shout(s):\n    return s.upper()\n")
    (ws / "main.py").write_text("import greet\n\nprint(greet.shout('hi'))\n")
    breaks = [("edit", {"path": "greet.py", "old_text": "    return s.upper()",
                        "new_text": "    return s.upper()\nHello, Ada."}),
              ("edit", {"path": "main.py", "old_text": "print(greet.shout('hi'))",
                        "new_text": "print(greet.shout('hi'))\nHello, Ada."})]
    result, events, provider, hook = await _run(
        ws, "Add hello(name) to greet.py and print greet.hello('Ada') in main.py",
        *change(), Reply(tool_calls=breaks), Reply(tool_calls=breaks),
        Reply(tool_calls=[("read", {"path": "greet.py"}), ("read", {"path": "main.py"})]),
        Reply(tool_calls=[
            ("edit", {"path": "greet.py", "old_text": "Hello, Ada.",
                      "new_text": "def hello(name):\n    return 'Hello, ' + name"}),
            ("edit", {"path": "main.py", "old_text": "Hello, Ada.",
                      "new_text": "print(greet.hello('Ada'))"})]),
        Reply(text="Added hello and its call."))
    choices = _choices(events)
    assert choices[2] == ("required", ("read",)) and choices[3][0] == "required"
    assert sent(provider)[3].tool_choice.values == (
        ("read", (("path", ("greet.py", "main.py")),)),)
    assert "def hello(name)" in (ws / "greet.py").read_text()
    verdict = hook.verdict(result.turn_id)
    assert verdict is not None and verdict.changed and not verdict.broken
    assert BROKEN_MARK not in result.text


async def test_the_same_calls_after_the_repair_read_get_a_required_edit_of_the_broken_lines(ws):
    # Having read both broken files, the 1.5B sent the same calls a third time (an edit of a
    # line to itself, the appends), and the repeat ended the request with both still broken.
    (ws / "greet.py").write_text("def shout(s):\n    return s.upper()\n")
    (ws / "main.py").write_text("import greet\n\nprint(greet.shout('hi'))\n")
    breaks = [("edit", {"path": "main.py", "old_text": "print(greet.shout('hi'))",
                        "new_text": "print(greet.shout('hi'))\nHello, Ada."})]
    fix = ("edit", {"path": "main.py", "old_text": "Hello, Ada.",
                    "new_text": "print('Hello, Ada')"})
    result, events, provider, hook = await _run(
        ws, "At the end of main.py print 'Hello, Ada'", *change(),
        Reply(tool_calls=breaks), Reply(tool_calls=breaks),
        Reply(tool_calls=[("read", {"path": "main.py"})]), Reply(tool_calls=breaks),
        Reply(tool_calls=[fix]), Reply(text="Done."))
    choices = _choices(events)
    assert choices[2] == ("required", ("read",)) and choices[4] == ("required", ("edit",))
    held = {dict(v)["path"]: dict(v)["old_text"] for t, v in provider.requests[6].tool_choice.values
            if t == "edit" and "old_text" in dict(v)}
    assert "Hello, Ada." in held[("main.py",)]
    assert (ws / "main.py").read_text().endswith("print('Hello, Ada')\n")
    verdict = hook.verdict(result.turn_id)
    assert verdict is not None and verdict.changed and not verdict.broken
