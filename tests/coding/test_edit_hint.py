"""A failed edit shows the text its old_text most likely meant, so the model can copy it."""

from __future__ import annotations

import difflib

from hypothesis import given
from hypothesis import strategies as st

from steerable.coding.edit import closest_text
from tests.coding.conftest import call

_LINE = st.text("abcdefgh =:'\"", min_size=12, max_size=30).filter(lambda s: s.strip())


@given(lines=st.lists(_LINE, min_size=1, max_size=30, unique=True), data=st.data())
def test_a_line_one_character_off_is_found_with_its_line_number(lines, data):
    i = data.draw(st.integers(0, len(lines) - 1))
    line = lines[i]
    j = data.draw(st.integers(0, len(line) - 1))
    wanted = line[:j] + line[j + 1:]  # a quote or a space left out
    near = closest_text("\n".join(lines), wanted)
    assert near is not None
    number, text = near
    assert lines[number - 1] == text
    # that line, or another line at least as close to what was asked for
    def ratio(s: str) -> float:
        return difflib.SequenceMatcher(None, s, wanted, autojunk=False).ratio()
    assert ratio(text) >= ratio(line)


def test_nothing_alike_or_a_huge_file_gives_no_hint():
    assert closest_text("alpha = 1\nbeta = 2\n", "zzzzzzzzzzzz") is None
    assert closest_text("x = 1\n" * 6000, "x = 2") is None


async def test_the_failed_edit_names_the_closest_text(ws, tools):
    (ws.root / "settings.json").write_text('{\n  "name": "svc",\n  "debug": false\n}\n')
    res = await call(tools["edit"], path="settings.json", old_text="debug: false",
                     new_text="debug: true")
    assert res.is_error
    assert 'the closest text, at line 3, is:\n  "debug": false' in res.content
