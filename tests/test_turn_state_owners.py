"""Each part of a turn's state is written only by the modules that own it (``OWNERS``).

The check reads every module of ``src/steerable``; the tests below it plant writes of every
kind, to every field of every part, and show each one is caught outside the owners and let
through inside them.
"""

from __future__ import annotations

import dataclasses

import pytest

from steerable._core import _turn_state
from steerable._core._turn_state import OWNERS, TurnState
from tests._owners import (
    SRC,
    Layout,
    all_modules,
    module_name,
    read_layout,
    writes_outside_owners,
)

LAYOUT = read_layout()
OUTSIDER = "server._hub"  # owns no part


def test_the_checker_reads_the_layout_the_runtime_has() -> None:
    names = [f.name for f in dataclasses.fields(TurnState)]
    declared = [name for cls in LAYOUT.parts.values() for name in LAYOUT.fields[cls]]
    assert len(declared) == len(set(declared)), "two parts declare a field of the same name"
    assert sorted(names) == sorted([*declared, *LAYOUT.identity])
    st = TurnState(turn_id="t", session_id="s", input="i", agent=None)  # type: ignore[arg-type]
    for part, cls in LAYOUT.parts.items():
        runtime = getattr(_turn_state, cls)
        assert {f.name for f in dataclasses.fields(runtime)} == LAYOUT.fields[cls], part
        # One object per live turn (docs/performance.md): a part is the state itself, and
        # neither has a ``__dict__``.
        assert vars(runtime)["__slots__"] == (), f"{cls} must declare fields, not a layout"
        assert getattr(st, part) is st, part
    assert not hasattr(st, "__dict__")


def test_every_part_has_owners_and_its_docstring_names_them() -> None:
    assert set(OWNERS) == set(LAYOUT.parts)
    for part, owners in OWNERS.items():
        doc = getattr(_turn_state, LAYOUT.parts[part]).__doc__ or ""
        for owner in owners:
            assert owner.rsplit(".", 1)[-1] in doc, f"{part}: {owner} missing from the docstring"


def test_no_module_writes_a_part_it_does_not_own() -> None:
    found = [w for module, source in all_modules()
             for w in writes_outside_owners(source, module, OWNERS, LAYOUT)]
    assert not found, "writes outside the owners declared in _turn_state.OWNERS:\n" + "\n".join(
        map(str, found))


def test_module_names_follow_the_package() -> None:
    assert module_name(SRC / "_core" / "_turn.py") == "_core._turn"
    assert module_name(SRC / "server" / "__init__.py") == "server"


# -- the checker itself: planted writes ---------------------------------------------------------

def _forms(part: str, field: str, cls: str) -> dict[str, str]:
    """One planted write of each kind to ``<part>.<field>``, as a module's source."""
    return {
        "assign": f"def f(st: TurnState) -> None:\n    st.{part}.{field} = 1\n",
        "augmented": f"def f(st):\n    st.{part}.{field} += 1\n",
        "delete": f"def f(st):\n    del st.{part}.{field}\n",
        "item store": f"def f(st):\n    st.{part}.{field}['k'] = 1\n",
        "item delete": f"def f(st):\n    del st.{part}.{field}['k']\n",
        "mutator": f"def f(st):\n    st.{part}.{field}.append(1)\n",
        "tuple target": f"def f(st):\n    a, st.{part}.{field} = 1, 2\n",
        "alias": f"def f(st):\n    p = st.{part}\n    p.{field} = 1\n",
        "tuple alias": f"def f(st):\n    x, p = st.{part}, st.{part}\n    p.{field}.clear()\n",
        "walrus alias": f"def f(st):\n    if (p := st.{part}) is not None:\n        p.{field} = 1\n",
        "annotated": f"def f(p: {cls}) -> None:\n    p.{field} = 1\n",
        "quoted annotation": f"def f(p: '{cls}') -> None:\n    p.{field}.update()\n",
        "closure": f"def f(st):\n    p = st.{part}\n    def g():\n        p.{field} = 1\n",
        "deep receiver": f"def f(self):\n    self.item.parent.{part}.{field} = 1\n",
        "on the state": f"def f(st: TurnState) -> None:\n    st.{field} = 1\n",
    }


CASES = [(part, field, form, source)
         for part, cls in LAYOUT.parts.items()
         for field in sorted(LAYOUT.fields[cls])
         for form, source in _forms(part, field, cls).items()]


@pytest.mark.parametrize(("part", "field", "form", "source"), CASES,
                         ids=[f"{p}.{f}-{k}" for p, f, k, _ in CASES])
def test_a_planted_write_is_caught_outside_the_owners(part: str, field: str, form: str,
                                                      source: str) -> None:
    found = writes_outside_owners(source, OUTSIDER, OWNERS, LAYOUT)
    assert [w.target for w in found] == [f"{part}.{field}"], form
    owner = OWNERS[part][0]
    assert writes_outside_owners(source, owner, OWNERS, LAYOUT) == []
    # a module inside an owning package owns it too; a module merely named alike does not
    assert writes_outside_owners(source, owner + ".inner", OWNERS, LAYOUT) == []
    assert writes_outside_owners(source, owner + "_x", OWNERS, LAYOUT) != []


@pytest.mark.parametrize("source", [
    "def f(st: TurnState):\n    st.turn_id = 'x'\n",
    "def f(st: 'TurnState | None'):\n    st.session_id += 'x'\n",
    "def f():\n    st = TurnState(turn_id='a', session_id='b', input='c', agent=None)\n"
    "    st.agent = None\n",
    "def f(st):\n    st.control = None\n",
    "def f(st):\n    st.tree, other = None, 1\n",
])
def test_identity_and_the_parts_themselves_are_written_by_no_module(source: str) -> None:
    assert len(writes_outside_owners(source, "_core._turn", OWNERS, LAYOUT)) == 1
    assert writes_outside_owners(source, "_core._turn_state", OWNERS, LAYOUT) == []


@pytest.mark.parametrize("source", [
    "def f(st):\n    print(st.control.phase, st.inbound.steering[0])\n",  # reads
    "def f(st):\n    p = st.control\n    p = other\n    p.phase = 1\n",  # alias rebound
    "def f(r):\n    r.turn_id = 'x'\n",  # a receipt's turn_id, not a turn's
    "def f(self):\n    self.held.append(1)\n",  # another object's field of the same name
    "def f(st):\n    st.control.cancel.request(1)\n",  # a method of the field's own object
])
def test_what_is_not_a_write_to_a_part_is_not_reported(source: str) -> None:
    assert writes_outside_owners(source, OUTSIDER, OWNERS, LAYOUT) == []


def test_a_layout_with_a_new_part_is_checked_too() -> None:
    source = ("from dataclasses import dataclass\n@dataclass\nclass Extra:\n    flag: bool\n"
              "@dataclass\nclass TurnState(Extra):\n    turn_id: str\n"
              "    extra = _Part[Extra]()\n")
    layout = read_layout(source)
    assert layout == Layout(parts={"extra": "Extra"}, fields={"Extra": frozenset({"flag"})},
                            identity=frozenset({"turn_id"}))
    planted = "def f(st):\n    st.extra.flag = True\n"
    assert len(writes_outside_owners(planted, "_loop", {}, layout)) == 1
    assert writes_outside_owners(planted, "_loop", {"extra": ("_loop",)}, layout) == []
    direct = "def f(st: TurnState):\n    st.flag = True\n"  # the field on the state itself
    assert [w.target for w in writes_outside_owners(direct, "_loop", {}, layout)] == ["extra.flag"]
