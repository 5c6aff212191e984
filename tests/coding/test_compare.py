"""Values the results show side by side, and an answer that leaves some out (``_compare``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from steerable import EventKind, Reply
from steerable._messages import Message, ToolCall
from steerable.coding._compare import located_only, side_by_side, unstated
from steerable.coding._evidence import drawn_from

from .test_policy import _run, kind


def _look(cid: str, name: str, result: str, **args: object) -> list[Message]:
    return [Message("assistant", "", tool_calls=(ToolCall(id=cid, name=name, arguments=args),)),
            Message("tool", result, tool_call_id=cid, name=name)]


GREP = "a.cfg:2: timeout = 21\nb.cfg:2: timeout = 57\n2 matches in 2 files"


def test_the_same_line_in_two_files_with_other_values_is_a_comparison():
    groups = side_by_side(_look("c1", "grep", GREP, pattern="timeout"))
    assert groups == [[("a.cfg", "timeout = 21", ("21",)), ("b.cfg", "timeout = 57", ("57",))]]
    assert unstated("Yes, both set the same timeout.", groups) == ["21", "57"]
    assert unstated("Both set 21.", groups) == ["57"]
    assert unstated("Nein: 21 in a.cfg, 57 in b.cfg.", groups) == []


def test_reads_of_two_files_compare_too_and_equal_values_do_not():
    turn = [*_look("c1", "read", "     1\t[net]\n     2\ttimeout = 21\n     3\tretries = 3",
                   path="a.cfg"),
            *_look("c2", "read", "     1\t[net]\n     2\ttimeout = 57\n     3\tretries = 3",
                   path="b.cfg")]
    assert [[row[1] for row in g] for g in side_by_side(turn)] == [["timeout = 21",
                                                                    "timeout = 57"]]


def test_several_matching_lines_to_a_file_are_a_count_not_a_comparison():
    grep = ("part0.txt:1: the falcon flew 0\npart0.txt:2: the falcon flew 1\n"
            "part1.txt:1: the falcon flew 0\n")
    assert side_by_side(_look("c1", "grep", grep, pattern="falcon")) == []


async def _compare(ws: Path, prompt: str, *answers: str) -> tuple[Any, ...]:
    """A question about a.cfg's and b.cfg's timeouts (21 and 57), one grep, then ``answers``."""
    (ws / "a.cfg").write_text("[net]\ntimeout = 21\n")
    (ws / "b.cfg").write_text("[net]\ntimeout = 57\n")
    return await _run(ws, prompt, kind("workspace"),
                      Reply(tool_calls=[("grep", {"pattern": "timeout"})]),
                      *(Reply(text=a) for a in answers))


async def test_an_answer_that_leaves_out_compared_values_is_asked_again(tmp_path: Path):
    # The 1.5B had both timeouts in front of it and answered "Yes, both set the same timeout".
    result, _, provider, hook = await _compare(
        tmp_path, "a.cfg et b.cfg ont le même timeout ?", "Oui, le même timeout.",
        "Non : a.cfg a 21, b.cfg a 57.")
    assert result.text == "Non : a.cfg a 21, b.cfg a 57."
    note = provider.requests[-1].messages[-1].text
    assert "a.cfg: timeout = 21\nb.cfg: timeout = 57" in note and "21, 57" in note
    verdict = hook.verdict(result.turn_id)
    assert verdict is not None and verdict.rechecked and not verdict.unverified


async def test_an_answer_that_still_leaves_them_out_shows_the_lines_marked(tmp_path: Path):
    result, *_ = await _compare(tmp_path, "Do a.cfg and b.cfg set the same timeout?",
                                "Both set 21.", "The timeout is set to 21 seconds.")
    assert result.text == (
        "The timeout is set to 21 seconds.\n\n⚠ unverified: the answer leaves out 57; the "
        "results show a.cfg: timeout = 21; b.cfg: timeout = 57")


def test_an_answer_draws_on_the_results_by_a_value_a_name_or_a_word_with_digits():
    shown = ["     1\tSync on Monday in room B123.", "notes.txt  (30 B, 1 line)"]
    assert not drawn_from("The file notes.txt does not contain any lines.", shown[:1])
    assert drawn_from("Lundi, salle B123.", shown)
    assert drawn_from("It lists notes.txt.", shown)
    assert not drawn_from("The notes file contains two lines of text.", shown)


async def test_an_answer_stating_nothing_the_results_show_is_asked_again(tmp_path: Path):
    # The 1.5B read notes.txt for a typo'd request and answered that it has no lines.
    (tmp_path / "notes.txt").write_text("Sync on Monday in room B123.\n")
    result, _, provider, _ = await _run(
        tmp_path, "waht does notse.txt say? i mean notes.txt", kind("workspace"),
        Reply(tool_calls=[("read", {"path": "notes.txt"})]),
        Reply(text="The file notes.txt does not contain any lines."),
        Reply(text="Sync on Monday in room B123."))
    assert result.text == "Sync on Monday in room B123."
    assert provider.requests[-1].messages[-1].text.startswith("Your answer states nothing")
    assert "The last result shows:\n1\tSync on Monday in room B123.\n" in \
        provider.requests[-1].messages[-1].text
    # Asked again, an answer that still states nothing from them: the first one stays, the
    # last result under it, marked.
    result, *_ = await _run(
        tmp_path, "what's in notes", kind("workspace"),
        Reply(tool_calls=[("read", {"path": "notes.txt"})]),
        Reply(text="It has two lines of text."), Reply(text="It is a notes file."))
    assert result.text == ("It has two lines of text.\n\n⚠ unverified: the answer states "
                           "nothing the results show; the last one shows:\n1\tSync on Monday "
                           "in room B123.")


TODOS = ("app.py:2:     # TODO: handle the zephyr case\nlib/util.py:2: # TODO: rename juniper\n"
         "2 matches in 2 files")


def test_an_answer_naming_the_matched_files_but_nothing_they_say_only_locates():
    turn = [Message("user", "Trouve les commentaires TODO."),
            *_look("c1", "grep", TODOS, pattern="TODO")]
    rows = TODOS.splitlines()[:2]
    assert located_only("Ils sont dans `app.py` et `lib/util.py`, ligne 2.", turn) == rows
    assert located_only("app.py: handle the zephyr case; util.py: rename juniper", turn) == []
    assert located_only("app.py: zephyr; also lib/util.py.", turn) == rows[1:]
    assert located_only("Two of them.", turn) == []  # names no file: not a location
    found = _look("c2", "grep", "src/stock.py:1: class Inventory:\n1 match in 1 file",
                  pattern="class Inventory")
    assert located_only("In src/stock.py.", [Message("user", "Inventory?"), *found]) == []


async def test_an_answer_that_only_locates_the_matches_is_asked_what_they_say(tmp_path: Path):
    # Asked for the TODO comments, the 1.5B answered with their files and line numbers.
    (tmp_path / "app.py").write_text("def main():\n    # TODO: handle the zephyr case\n")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "util.py").write_text("X = 1\n# TODO: rename juniper\n")
    result, _, provider, hook = await _run(
        tmp_path, "Find the TODO comments in this project.", kind("workspace"),
        Reply(tool_calls=[("grep", {"pattern": "TODO"})]),
        Reply(text="The TODO comments are in `app.py` and `lib/util.py`, at lines 2."),
        Reply(text="app.py: handle the zephyr case; lib/util.py: rename juniper."))
    assert result.text == "app.py: handle the zephyr case; lib/util.py: rename juniper."
    note = provider.requests[-1].messages[-1].text
    assert note.startswith("Your answer says where") and "lib/util.py:2: # TODO: rename" in note
    verdict = hook.verdict(result.turn_id)
    assert verdict is not None and verdict.rechecked and not verdict.unverified


async def test_a_misread_of_the_file_the_request_names_reads_no_other_file(tmp_path: Path):
    # Sent to read README.md after a misread of notes.txt, the 1.5B answered what README.md
    # says: once a file the request names was shown, the answer is asked again from it.
    (tmp_path / "notes.txt").write_text("Sync on Monday in room B123.\n")
    (tmp_path / "README.md").write_text("# demo\n")
    result, *_ = await _run(
        tmp_path, "waht does notse.txt say? i mean notes.txt", kind("workspace"),
        Reply(tool_calls=[("read", {"path": "notes.txt"})]),
        Reply(text="The file notes.txt does not contain any lines."),
        Reply(text="Sync on Monday in room B123."))
    assert result.text == "Sync on Monday in room B123."


async def test_an_answer_that_a_named_file_is_missing_reads_no_other_file(tmp_path: Path):
    # Sent to read README.md after "secrets.txt does not exist", the 1.5B answered what
    # README.md says, for a question about secrets.txt.
    (tmp_path / "README.md").write_text("# scratch\n")
    # Asked again from the listing, it described the listing: the failed look is the answer's
    # evidence, so it is neither sent to another file nor asked again.
    result, events, *_ = await _run(
        tmp_path, "What does secrets.txt say?", kind("workspace"),
        Reply(tool_calls=[("read", {"path": "secrets.txt"})]),
        Reply(tool_calls=[("ls", {"path": "."})]),
        Reply(text="secrets.txt does not exist."))
    ends = [e.tool_name for e in events if e.kind is EventKind.TOOL_EXEC_END]
    assert ends == ["read", "ls"] and result.text == "secrets.txt does not exist."
