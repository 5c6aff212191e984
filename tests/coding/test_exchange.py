"""What the tool policy reads off an exchange's messages (``coding._exchange``)."""

from __future__ import annotations

from steerable._messages import Message, ToolCall
from steerable.coding._exchange import repeated


def _call(cid: str, name: str, **args: object) -> list[Message]:
    return [Message("assistant", "", tool_calls=(ToolCall(id=cid, name=name, arguments=args),)),
            Message("tool", "ok", tool_call_id=cid, name=name)]


def test_a_call_that_was_denied_is_no_call_to_repeat():
    # The 1.5B's write was denied (the file not read yet); after the read it sent the same
    # write, which ended the request as a repeat.
    write = {"path": "greet.py", "content": "x"}
    turn = [*_call("c1", "write", **write), *_call("c2", "read", path="greet.py"),
            *_call("c3", "write", **write)]
    assert repeated(turn)
    assert not repeated(turn, skip={"c1"})


def test_a_look_after_a_change_is_no_repeat_but_the_same_change_is():
    turn = [*_call("c1", "read", path="a.py"), *_call("c2", "bash", command="sed -i x a.py"),
            *_call("c3", "read", path="a.py")]
    assert repeated(turn) and not repeated(turn, {"c2"}, frozenset({"read"}))
    again = [*turn, *_call("c4", "bash", command="sed -i x a.py")]
    assert repeated(again, {"c2"}, frozenset({"read"}))


def test_the_same_call_denied_twice_is_a_repeat():
    # The 1.5B asked a question called `bash` (never offered on one) again and again, to the
    # round limit, and answered from the denials instead of the listing it had.
    count = {"command": "ls -l *.py"}
    turn = [*_call("c1", "ls", path="."), *_call("c2", "bash", **count),
            *_call("c3", "bash", **count)]
    assert repeated(turn, skip={"c2", "c3"})
    assert not repeated(turn, skip={"c2"})  # denied, then run: it never ran before
