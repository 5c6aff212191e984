"""``record``: a frozen, slotted, keyword-only dataclass defined without compiling anything at
import. It must behave like ``@dataclass(frozen=True, slots=True, kw_only=True)`` from outside."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from steerable._records import Record, record, state


@record
class Base(Record):
    """A base with the common fields."""

    kind: ClassVar[str] = "base"
    a: int
    b: str | None


@record
class Child(Base):
    """A record over a record."""

    c: float = 1.5
    d: Mapping[str, Any] = field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Twin:
    """What Child is meant to be equal to, field for field."""

    a: int
    b: str | None
    c: float = 1.5
    d: Mapping[str, Any] = field(default_factory=dict)


def test_fields_params_and_slots_are_those_of_a_frozen_slotted_kw_only_dataclass() -> None:
    assert dataclasses.is_dataclass(Child)
    ours = [(f.name, f.default, f.default_factory, f.kw_only) for f in dataclasses.fields(Child)]
    twin = [(f.name, f.default, f.default_factory, f.kw_only) for f in dataclasses.fields(Twin)]
    assert ours == twin
    assert repr(Child.__dataclass_params__) == repr(Twin.__dataclass_params__)  # type: ignore[attr-defined]
    assert Base.__slots__ == ("a", "b") and Child.__slots__ == ("c", "d")
    assert Child.__match_args__ == () and Child.kind == "base"
    assert not hasattr(Child(a=1, b=None), "__dict__")


def test_init_is_keyword_only_with_defaults_and_fresh_factories() -> None:
    x, y = Child(a=1, b="x"), Child(a=2, b=None, c=2.0, d={"k": 1})
    assert (x.a, x.b, x.c, x.d, y.c, y.d) == (1, "x", 1.5, {}, 2.0, {"k": 1})
    assert Child(a=1, b=None).d is not x.d
    with pytest.raises(TypeError):
        Child(1, "x")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Child(a=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Child(a=1, b=None, e=3)  # type: ignore[call-arg]
    assert Base(a=7, b=None).a == 7  # the base has its own __init__, not the child's


def test_frozen_equal_hash_repr_like_the_dataclass() -> None:
    x = Child(a=1, b="x", d={})
    with pytest.raises(dataclasses.FrozenInstanceError):
        x.a = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del x.a
    assert x == Child(a=1, b="x") and x != Child(a=2, b="x") and x != Base(a=1, b="x")
    assert repr(x) == repr(Twin(a=1, b="x")).replace("Twin", "Child")
    assert hash(Base(a=1, b="x")) == hash(Base(a=1, b="x"))


def test_replace_asdict_copy_and_pickle() -> None:
    x = Child(a=1, b="x", d={"k": [1]})
    assert dataclasses.replace(x, c=3.0) == Child(a=1, b="x", c=3.0, d={"k": [1]})
    assert dataclasses.asdict(x) == {"a": 1, "b": "x", "c": 1.5, "d": {"k": [1]}}
    assert copy.copy(x) == x and copy.deepcopy(x) == x
    assert pickle.loads(pickle.dumps(x)) == x


def test_a_dataclass_may_extend_a_record() -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class More(Child):
        e: int = 0

    m = More(a=1, b=None, e=4)
    assert (m.a, m.c, m.e) == (1, 1.5, 4)
    assert [f.name for f in dataclasses.fields(More)] == ["a", "b", "c", "d", "e"]


def test_a_record_needs_the_base_and_a_docstring() -> None:
    with pytest.raises(TypeError, match="docstring"):
        @record
        class NoDoc(Record):
            a: int

    with pytest.raises(TypeError, match="derives from Record"):
        @record
        class NotARecord:
            """Doc."""


def test_a_type_checker_sees_a_frozen_keyword_only_dataclass(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api", reason="mypy is in the dev extra")
    program = tmp_path / "frozen.py"
    program.write_text(textwrap.dedent("""
        from steerable import TurnStart
        e = TurnStart(turn_id="t", parent_turn_id=None, session_id="s", seq=1, time=0.0,
                      input="x", agent="a")
        e.input = "y"
        TurnStart("t", None, "s", 1, 0.0, "x", "a")
    """))
    root = Path(__file__).resolve().parents[1]
    out, _, status = api.run([
        "--strict", "--no-error-summary", "--cache-dir", str(root / ".mypy_cache"),
        "--python-executable", sys.executable, str(program),
    ])
    assert status == 1
    assert "read-only" in out or "frozen" in out, out
    assert "Too many positional arguments" in out, out


@record(kw_only=False)
class Point(Record):
    """Positional, with a check after init and a field outside repr, equality and hash."""

    x: int
    y: int = 0
    note: str = field(default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.x < 0:
            raise ValueError("x must be >= 0")


def test_positional_records_run_post_init_and_honour_field_flags() -> None:
    p = Point(1, 2, note="a")
    assert (p.x, p.y, p.note) == (1, 2, "a") and Point.__match_args__ == ("x", "y", "note")
    assert repr(p) == "Point(x=1, y=2)"
    assert p == Point(1, 2, note="b") and hash(p) == hash(Point(1, 2))
    with pytest.raises(ValueError, match="x must be"):
        Point(-1)
    assert pickle.loads(pickle.dumps(p)) == p and pickle.loads(pickle.dumps(p)).note == "a"
    match p:
        case Point(1, y):
            assert y == 2
        case _:
            pytest.fail("positional match")


# -- ``state``: the same for mutable, slotted dataclasses ------------------------------------


@dataclasses.dataclass(slots=True)
class RefPart:
    """What ``state`` must look like from outside (``@dataclass(slots=True)``)."""

    a: int
    b: list[int] = field(default_factory=list)
    c: str = "x"
    d: float = field(init=False, default=1.5)


@state
class Part:
    """Its twin."""

    a: int
    b: list[int] = field(default_factory=list)
    c: str = "x"
    d: float = field(init=False, default=1.5)


@state(kw_only=True, eq=False)
class Ctx:
    """A keyword-only base, compared by identity."""

    turn_id: str
    iteration: int = 0


@state(kw_only=True, eq=False)
class ToolCtx(Ctx):
    """A keyword-only subclass, with a field set after ``__init__``."""

    name: str
    later: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.later = self.name.upper()


def test_a_state_is_what_a_slotted_dataclass_is_from_outside() -> None:
    ref, part = RefPart(1), Part(1)
    assert [(f.name, f.init, f.kw_only) for f in dataclasses.fields(part)] == [
        (f.name, f.init, f.kw_only) for f in dataclasses.fields(ref)]
    assert Part.__slots__ == RefPart.__slots__ and not hasattr(part, "__dict__")
    assert repr(part) == repr(ref).replace("RefPart", "Part")
    assert Part.__match_args__ == RefPart.__match_args__  # type: ignore[attr-defined]
    assert part == Part(1) and part != Part(2) and Part.__hash__ is None
    assert Part(1).b is not part.b  # a fresh list each
    part.a = 5  # mutable
    assert dataclasses.replace(part, c="y") == Part(5, [], "y")
    assert dataclasses.asdict(part) == {"a": 5, "b": [], "c": "x", "d": 1.5}
    assert copy.deepcopy(part) == part and pickle.loads(pickle.dumps(part)) == part
    with pytest.raises(TypeError):
        Part(1, [], "x", 2.0)  # type: ignore[call-arg]  # d is not a parameter


def test_keyword_only_state_inherits_fields_and_runs_post_init() -> None:
    ctx = ToolCtx(turn_id="t", name="n")
    assert (ctx.turn_id, ctx.iteration, ctx.name, ctx.later) == ("t", 0, "n", "N")
    assert repr(ctx) == "ToolCtx(turn_id='t', iteration=0, name='n')"
    assert ctx != ToolCtx(turn_id="t", name="n")
    assert {ctx: 1}[ctx] == 1  # eq=False: hashable by identity
    with pytest.raises(TypeError):
        ToolCtx("t", name="n")  # type: ignore[misc]
    with pytest.raises(TypeError, match="docstring"):
        state(type("NoDoc", (), {"__annotations__": {"a": "int"}}))


# -- the fields are read from the class body; ``dataclasses.Field`` objects on first request --


def test_the_dataclass_fields_are_made_at_their_first_read_and_match_the_dataclass() -> None:
    @record
    class Late(Record):
        """Defined without any ``dataclasses.Field`` being made."""

        a: int
        b: list[int] = field(default_factory=list, repr=False, metadata={"m": 1})

    @record
    class Later(Late):
        """Redefines ``a``'s default: the field keeps its place."""

        c: str = ""
        a: int = 3

    assert not isinstance(vars(Late)["__dataclass_fields__"], dict)
    assert Later(b=[1]).a == 3 and repr(Later()).endswith(".Later(a=3, c='')")
    assert not isinstance(vars(Later)["__dataclass_fields__"], dict)  # __init__ needs none
    assert [(f.name, f.default, f.repr, dict(f.metadata)) for f in dataclasses.fields(Later)] \
        == [("a", 3, True, {}), ("b", dataclasses.MISSING, False, {"m": 1}),
            ("c", "", True, {})]
    assert isinstance(vars(Later)["__dataclass_fields__"], dict)
    assert not isinstance(vars(Late)["__dataclass_fields__"], dict)  # each class its own
    assert dataclasses.fields(Late)[1].default_factory is list


def test_a_state_over_a_dataclass_base_takes_its_fields_with_their_own_flags() -> None:
    @dataclasses.dataclass(kw_only=True)
    class Plain:
        """A base made by ``dataclass`` itself, keyword-only."""

        k: int = 1

    @state
    class Over(Plain):
        """Positional fields of its own after the base's keyword-only one."""

        p: int

    over = Over(5, k=2)
    assert (over.p, over.k) == (5, 2) and Over.__match_args__ == ("p",)  # type: ignore[attr-defined]
    assert [(f.name, f.kw_only) for f in dataclasses.fields(over)] == [("k", True), ("p", False)]


def test_what_dataclass_refuses_is_refused_when_the_class_is_made() -> None:
    with pytest.raises(ValueError, match="mutable default"):
        @record
        class Shared(Record):
            """A list shared by every instance."""

            items: list[int] = []  # noqa: RUF012

    with pytest.raises(TypeError, match="not support"):
        @state
        class WithInitVar:
            """An init-only variable."""

            x: dataclasses.InitVar[int]


def test_the_dataclass_parameters_are_made_at_their_first_read() -> None:
    program = ("from steerable import Agent, AgentLoop, Reply, ScriptedProvider, TurnStart, tool\n"
               "from steerable._records import _Params\n"
               "made = len(_Params.made)\n"
               "frozen = TurnStart.__dataclass_params__.frozen\n"
               "print(made, len(_Params.made), frozen)")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.split() == ["0", "1", "True"]
