"""Frozen, slotted, keyword-only dataclasses that cost next to nothing to define.

``@dataclass(frozen=True, slots=True, kw_only=True)`` compiles six generated methods per class
and builds every class twice; for the 24 event classes that was ~20 ms, the largest item of the
core's import time. ``record`` gives the same thing from the outside (``dataclasses.fields``,
``replace``, ``asdict``, ``is_dataclass``, ``__dataclass_params__.frozen``, ``__slots__``,
keyword-only ``__init__``, value equality and hash, the dataclass ``repr``, pickling, type
checkers see a frozen keyword-only dataclass), but:

- the fields are read from the class body's annotations by ``_specs`` (a few µs a class);
  ``__dataclass_fields__`` (the ``dataclasses.Field`` objects) is made at its first read, by
  ``dataclass(init=False, repr=False, eq=False)`` on a copy, which compiles nothing: reading
  the fields the way ``dataclass`` does was ~30 µs a class, ~3 ms of the core's import;
- ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__`` and pickling are
  shared methods of ``Record``, reading the class's field names;
- ``__init__`` is compiled the first time a class is instantiated (most event kinds never are in
  a given process), the same code ``dataclass`` would generate.

Every class decorated with ``record`` must derive from ``Record`` and have a docstring (else
``dataclass`` computes one from ``inspect.signature``, which costs as much as the rest).
``InitVar`` and ``KW_ONLY`` are not supported (refused when the class is made).
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from types import MemberDescriptorType
from typing import Any, ClassVar, TypeVar, dataclass_transform, overload

__all__ = ["Record", "record", "state"]

_T = TypeVar("_T", bound=type)


_MISSING = dataclasses.MISSING


class _Params:
    """A class's ``__dataclass_params__``: those of an empty dataclass made with the same
    options (they differ between Python versions, so they are taken from ``dataclass``
    itself), made at the first read. Making the four kinds at import was ~0.4 ms: each
    compiles its methods and builds its class twice."""

    __slots__ = ("options",)
    made: ClassVar[dict[tuple[tuple[str, bool], ...], Any]] = {}

    def __init__(self, **options: bool) -> None:
        self.options = tuple(sorted(options.items()))

    def __get__(self, instance: object, owner: type) -> Any:
        params = self.made.get(self.options)
        if params is None:
            donor: Any = dataclasses.dataclass(**dict(self.options))(
                type("Donor", (), {"__doc__": "Donor of the parameters."}))
            params = self.made[self.options] = donor.__dataclass_params__
        return params


_PARAMS = {True: _Params(frozen=True, slots=True, kw_only=True),
           False: _Params(frozen=True, slots=True)}


class Record:
    """Base of every ``record`` class: the methods ``dataclass`` would generate, shared."""

    __slots__ = ()
    _names: ClassVar[tuple[str, ...]] = ()
    """Every field, in order (``__init__`` and pickling)."""
    _repr: ClassVar[tuple[str, ...]] = ()
    _compare: ClassVar[tuple[str, ...]] = ()
    _hash: ClassVar[tuple[str, ...]] = ()

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._repr)
        return f"{type(self).__qualname__}({inner})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        names = self._compare
        return [getattr(self, n) for n in names] == [getattr(other, n) for n in names]

    def __hash__(self) -> int:
        return hash(tuple([getattr(self, n) for n in self._hash]))

    def __setattr__(self, name: str, value: object) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[Callable[..., Record], tuple[type[Record], dict[str, Any]]]:
        return _rebuild, (type(self), {n: getattr(self, n) for n in self._names})


def _rebuild(cls: type[Record], values: dict[str, Any]) -> Record:
    return cls(**values)


class _Spec:
    """One field as ``record`` and ``state`` read it from the class body: what ``__init__``,
    ``__repr__``, equality and hashing need (``dataclasses.Field`` objects are made from it
    only when something asks for them, see ``_Fields``)."""

    __slots__ = ("compare", "default", "default_factory", "hash", "init", "kw_only",
                 "metadata", "name", "repr", "type")

    def __init__(self, name: str, annotation: Any, value: Any, kw_only: bool) -> None:
        self.name = name
        self.type = annotation
        self.metadata: Any
        if isinstance(value, dataclasses.Field):
            self.default, self.default_factory = value.default, value.default_factory
            self.init, self.repr, self.hash = value.init, value.repr, value.hash
            self.compare, self.metadata = value.compare, value.metadata
            self.kw_only = kw_only if value.kw_only is _MISSING else value.kw_only
        else:
            if value.__class__.__hash__ is None:  # dataclass's own rule: a shared list, dict...
                raise ValueError(f"mutable default {type(value)} for field {name} is not "
                                 "allowed: use default_factory")
            self.default, self.default_factory = value, _MISSING
            self.init = self.repr = self.compare = True
            self.hash, self.metadata, self.kw_only = None, None, kw_only

    @classmethod
    def of_field(cls, f: dataclasses.Field[Any]) -> _Spec:
        """The spec of a field of a class ``dataclass`` made (a base of a ``state``)."""
        return cls(f.name, f.type, f, bool(f.kw_only))

    def as_field(self) -> Any:
        return dataclasses.field(
            default=self.default, default_factory=self.default_factory, init=self.init,
            repr=self.repr, hash=self.hash, compare=self.compare, metadata=self.metadata,
            kw_only=self.kw_only)


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):  # postponed annotations: ClassVar[...] or typing.ClassVar
        if "InitVar" in annotation or "KW_ONLY" in annotation:
            raise TypeError(f"{annotation!r}: record and state do not support it")
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    return annotation is ClassVar or getattr(annotation, "__origin__", None) is ClassVar


def _specs(cls: type, kw_only: bool) -> tuple[_Spec, ...]:
    """Every field of ``cls``, in ``dataclass``'s order: the bases' (from the most basic on),
    then the class's own annotations; a redefined field keeps its place."""
    found: dict[str, _Spec] = {}
    for base in cls.__mro__[-2:0:-1]:  # (not object)
        own = vars(base)
        if "_specs" in own:
            for s in own["_specs"]:
                found[s.name] = s
        elif "__dataclass_fields__" in own:  # a base made by dataclass itself
            for f in dataclasses.fields(base):
                found[f.name] = _Spec.of_field(f)
    own = vars(cls)
    for name, annotation in own.get("__annotations__", {}).items():
        if not _is_classvar(annotation):
            found[name] = _Spec(name, annotation, own.get(name, _MISSING), kw_only)
    return tuple(found.values())


class _Fields:
    """A ``record`` or ``state`` class's ``__dataclass_fields__``, made at the first read
    (``dataclasses.fields``, ``replace``, ``asdict``, ``is_dataclass``): ``dataclass`` reads
    the fields of a class a few times slower than ``_specs``, and most programs never ask."""

    __slots__ = ()

    def __get__(self, instance: object, owner: type) -> dict[str, dataclasses.Field[Any]]:
        cls = next(c for c in owner.__mro__ if vars(c).get("__dataclass_fields__") is self)
        specs: tuple[_Spec, ...] = vars(cls)["_specs"]
        shadow: Any = type(cls.__name__, (), {
            "__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "__doc__": cls.__doc__, "__annotations__": {s.name: s.type for s in specs},
            **{s.name: s.as_field() for s in specs}})
        fields: dict[str, dataclasses.Field[Any]] = dataclasses.dataclass(
            init=False, repr=False, eq=False)(shadow).__dataclass_fields__
        type.__setattr__(cls, "__dataclass_fields__", fields)  # later reads: a plain lookup
        return fields


_FIELDS = _Fields()


def _rebuilt(cls: type, specs: tuple[_Spec, ...], extra: dict[str, Any],
             drop: tuple[str, ...] = ()) -> Any:
    """``cls`` made again with a slot per field it adds (the class statement already made the
    class, without them, and slots cannot be added later), sharing the common parts."""
    names, shown, compared, positional = [], [], [], []
    for s in specs:  # one pass, no generator per list: ~90 classes at import
        names.append(s.name)
        if s.repr:
            shown.append(s.name)
        if s.compare:
            compared.append(s.name)
        if s.init and not s.kw_only:
            positional.append(s.name)
    inherited = {n for b in cls.__mro__[1:-1] for n in getattr(b, "__slots__", ())}
    skip = {*names, "__dict__", "__weakref__", *drop}
    body = {k: v for k, v in vars(cls).items() if k not in skip}
    body.update(extra)
    body["__slots__"] = tuple([n for n in names if n not in inherited])
    body["_specs"] = specs
    body["_names"] = tuple(names)
    body["_repr"] = tuple(shown)
    body["_compare"] = tuple(compared)
    body.setdefault("__match_args__", tuple(positional))
    body["__dataclass_fields__"] = _FIELDS
    body["__qualname__"] = cls.__qualname__
    body["__init__"] = _first_init
    return type(cls.__name__, cls.__bases__, body)


def _first_init(self: object, *args: Any, **kwargs: Any) -> None:
    """Every record's and state's ``__init__`` until the class's first instance: it puts the
    compiled one on the class (most event kinds are never made in a given process)."""
    cls = next(c for c in type(self).__mro__ if vars(c).get("__init__") is _first_init)
    init = _compile_init(cls, mutable=not issubclass(cls, Record))
    type.__setattr__(cls, "__init__", init)
    init(self, *args, **kwargs)


def _compile_init(cls: type, mutable: bool = False) -> Callable[..., None]:
    """The ``__init__`` ``dataclass`` would write for ``cls`` (then ``__post_init__``)."""
    ns: dict[str, Any] = {"_set": object.__setattr__, "_m": _MISSING}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    f: _Spec
    for f in vars(cls)["_specs"]:
        if not f.init:  # set from its default, or left for __post_init__
            if f.default is not _MISSING:
                ns[f"_d_{f.name}"] = f.default
                body.append(f"    self.{f.name} = _d_{f.name}")
            elif f.default_factory is not _MISSING:
                ns[f"_f_{f.name}"] = f.default_factory
                body.append(f"    self.{f.name} = _f_{f.name}()")
            continue
        if f.default is not _MISSING:
            ns[f"_d_{f.name}"] = f.default
            param = f"{f.name}=_d_{f.name}"
        elif f.default_factory is not _MISSING:
            ns[f"_f_{f.name}"] = f.default_factory
            param = f"{f.name}=_m"
            body.append(f"    if {f.name} is _m: {f.name} = _f_{f.name}()")
        else:
            param = f.name
        (keyword if f.kw_only else positional).append(param)
        slot = getattr(cls, f.name, None)
        if mutable:  # a plain store, as dataclass writes it
            body.append(f"    self.{f.name} = {f.name}")
        elif type(slot) is MemberDescriptorType:
            # The slot's own setter, bound once: 2.5x faster than object.__setattr__ by name
            # (records are built on every iteration: messages, checkpoints, events).
            ns[f"_s_{f.name}"] = slot.__set__
            body.append(f"    _s_{f.name}(self, {f.name})")
        else:
            body.append(f"    _set(self, {f.name!r}, {f.name})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    params = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    src = f"def __init__({params}):\n" + "\n".join(body or ["    pass"])
    exec(compile(src, f"<record {cls.__qualname__}.__init__>", "exec"), ns)
    init: Callable[..., None] = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


@overload
def record(cls: _T, /) -> _T: ...


@overload
def record(*, kw_only: bool = True) -> Callable[[_T], _T]: ...


@dataclass_transform(frozen_default=True, kw_only_default=True)
def record(cls: Any = None, /, *, kw_only: bool = True) -> Any:
    """Make ``cls`` (a ``Record`` subclass with a docstring) a frozen, slotted dataclass,
    keyword-only unless ``kw_only=False``."""
    if cls is None:
        return lambda c: _make_record(c, kw_only)
    return _make_record(cls, kw_only)


def _make_record(cls: Any, kw_only: bool) -> Any:
    if not isinstance(cls, type) or not issubclass(cls, Record) or not cls.__doc__:
        raise TypeError(f"{cls!r}: a record derives from Record and has a docstring")
    specs = _specs(cls, kw_only)
    extra: dict[str, Any] = {
        "_hash": tuple(s.name for s in specs if (s.compare if s.hash is None else s.hash)),
        "__dataclass_params__": _PARAMS[kw_only]}
    own = vars(cls)
    # Python's None for a class with its own __eq__: hash by fields, as the records' base does
    drop = ("__hash__",) if own.get("__hash__", _MISSING) is None and "__eq__" in own else ()
    return _rebuilt(cls, specs, extra, drop)


_STATE_PARAMS = {True: _Params(slots=True), False: _Params(slots=True, eq=False)}


@overload
def state(cls: _T, /) -> _T: ...


@overload
def state(*, kw_only: bool = False, eq: bool = True) -> Callable[[_T], _T]: ...


@dataclass_transform(kw_only_default=False)
def state(cls: Any = None, /, *, kw_only: bool = False, eq: bool = True) -> Any:
    """Make ``cls`` (with a docstring) what ``@dataclass(slots=True, kw_only=..., eq=...)``
    makes, for mutable state: the same fields, ``__init__`` (compiled at the first
    instantiation), ``__repr__``, field equality (unhashable) unless ``eq=False``. That
    decorator compiles three methods and builds the class twice, ~0.3 ms a class: the core's
    ~20 state classes were ~6 ms of its import."""
    if cls is None:
        return lambda c: _make_state(c, kw_only, eq)
    return _make_state(cls, kw_only, eq)


def _make_state(cls: Any, kw_only: bool, eq: bool) -> Any:
    if not isinstance(cls, type) or not cls.__doc__:
        raise TypeError(f"{cls!r}: a state class has a docstring")
    extra: dict[str, Any] = {"__dataclass_params__": _STATE_PARAMS[eq]}
    own = vars(cls)
    if "__repr__" not in own:
        extra["__repr__"] = _state_repr
    if eq and "__eq__" not in own:
        extra["__eq__"], extra["__hash__"] = Record.__eq__, None
    return _rebuilt(cls, _specs(cls, kw_only), extra)


@reprlib.recursive_repr()
def _state_repr(self: Any) -> str:  # (a turn's state reaches its children's, and back)
    inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._repr)
    return f"{type(self).__qualname__}({inner})"
