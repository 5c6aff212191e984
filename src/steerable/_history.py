"""``MessageView``: the messages of one LLM request, built in O(1) whatever the history.

Copying the whole history into a new tuple for every model call made each call O(history): at
40,000 messages that copy was half of a turn's cost. A request now holds, for each part of the
conversation (system message, session history, the turn's messages, extra messages), the list
itself and its length at that moment. The turn's lists only ever grow at the end (compression
replaces them, it never edits them in place), so the first ``length`` items of each never change:
the view is as immutable as a tuple, and compares equal to the tuple with the same messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice
from typing import Any, TypeVar, overload

__all__ = ["MessageView"]

T = TypeVar("T")


class MessageView(Sequence[T]):
    """A read-only sequence over append-only parts (see the module docstring). Checkpoints use
    it for their messages and for the names of the tools run, which grow the same way."""

    # One part (the common case: a checkpoint's view of one list) is kept as itself, with
    # ``_lens`` None; several as a tuple of the parts beside a tuple of their lengths. Not a
    # tuple of (part, length) pairs: each pair, and the tuple around them, was an object the
    # collector tracks, and a live turn holds several views (its request's, its checkpoint's);
    # a tuple of ints is left untracked. A leading tuple (a request's system message, one
    # tuple per agent) is kept apart in ``_head`` (a tuple never changes, so its length is
    # its own): a request over it and the turn's list then needs no tuple of parts.
    __slots__ = ("_head", "_len", "_lens", "_parts")

    _head: tuple[Any, ...]
    _parts: Sequence[Any]
    _lens: tuple[int, ...] | None

    def __init__(self, *parts: Sequence[T]) -> None:
        # A plain loop: this runs several times per iteration (requests, checkpoints).
        kept = []
        lens = []
        for part in parts:
            n = len(part)
            if n:
                kept.append(part)
                lens.append(n)
        head: tuple[Any, ...] = ()
        if len(kept) > 1 and type(kept[0]) is tuple:
            head = kept.pop(0)  # type: ignore[assignment]
            del lens[0]
        self._head = head
        if len(kept) > 1:
            self._parts, self._lens = tuple(kept), tuple(lens)
        else:
            self._parts, self._lens = kept[0] if kept else (), None
        self._len = len(head) + sum(lens)

    @classmethod
    def of(cls, part: Sequence[T]) -> MessageView[T]:
        """The view of one list (what checkpoints take twice per iteration): no loop."""
        n = len(part)
        if not n and cls is MessageView:
            return _EMPTY  # (immutable: one for every empty view)
        view = cls.__new__(cls)
        view._head, view._parts, view._lens, view._len = (), part, None, n
        return view

    def _pairs(self) -> Iterable[tuple[Sequence[T], int]]:
        """Each part with its length when the view was made."""
        head = self._head
        if self._lens is None:
            rest: Iterable[tuple[Sequence[T], int]] = ((self._parts, self._len - len(head)),)
        else:
            rest = zip(self._parts, self._lens, strict=True)
        return chain(((head, len(head)),), rest) if head else rest

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            return self._slice(index)
        i = index.__index__()
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError("message index out of range")
        head = self._head
        if head:
            if i < len(head):
                return head[i]  # type: ignore[no-any-return]
            i -= len(head)
        if self._lens is None:
            return self._parts[i]  # type: ignore[no-any-return]
        for part, n in zip(self._parts, self._lens, strict=True):
            if i < n:
                return part[i]  # type: ignore[no-any-return]
            i -= n
        raise AssertionError("unreachable: lengths are checked above")

    def _slice(self, index: slice) -> tuple[T, ...]:
        start, stop, step = index.indices(self._len)
        if step != 1:
            return tuple(self)[index]
        # Part by part, so a tail (``messages[done:]``) costs its own length, not the whole.
        out: list[T] = []
        offset = 0
        for part, n in self._pairs():
            lo, hi = max(start - offset, 0), min(stop - offset, n)
            if lo < hi:
                out.extend(part[lo:hi])
            offset += n
        return tuple(out)

    def __iter__(self) -> Iterator[T]:
        # islice bounds each part to its length when the view was made
        head = self._head
        if self._lens is None:
            rest = islice(self._parts, self._len - len(head))
            return chain(head, rest) if head else rest
        return chain.from_iterable(islice(p, n) for p, n in self._pairs())

    def __reversed__(self) -> Iterator[T]:
        for part, n in reversed(tuple(self._pairs())):
            for i in range(n - 1, -1, -1):
                yield part[i]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageView | tuple):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: Sequence[Any]) -> tuple[Any, ...]:
        return (*self, *other)

    def __radd__(self, other: Sequence[Any]) -> tuple[Any, ...]:
        return (*other, *self)

    def __repr__(self) -> str:
        return f"MessageView({tuple(self)!r})"


_EMPTY: MessageView[Any] = MessageView()
