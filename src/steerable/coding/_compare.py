"""An answer held to the results: the values they show side by side, and any fact at all.

A comparison ("do a.cfg and b.cfg set the same timeout?") is answered with words that state no
value ("yes, both the same") or with one of the values ("both set 21"), and neither is caught by
the evidence check: "21" is in the results, "the same" is no fact. The results themselves show
the comparison, in every language: the same line in two files but for a value
(``timeout = 21`` in a.cfg, ``timeout = 57`` in b.cfg). When such lines hold different values
and the answer to a question does not state them all, the model is shown those lines together
and asked once more to answer stating the values (measured with the 1.5B, 2026-12-07: two grep
lines with 21 and 57 were answered "both set 21", and "Yes, both set the same timeout"); an
answer that still leaves some out is shown with those lines under it, marked unverified.

Lines are read off ``grep`` rows (``path:line: text``) and ``read`` results (the file of the
call, its numbered rows); a line's shape is its text with numbers and quoted text masked. A
shape counts when it occurs exactly once in each of two or more files (a count of matching
lines, several to a file, is no comparison).

An answer that states no fact any result shows (no value, name, quote or word with a digit of
theirs), while one showed something, is asked once more too (``from_results``): the 1.5B read
notes.txt for "waht does notse.txt say? i mean notes.txt" and answered "The file notes.txt
does not contain any lines", and listed "notes" with its text and answered "two lines of text".
The note repeats the last result; an answer that still states none of it is shown with that
result under it, marked unverified. It reads no words, so it holds in every language.
"""

from __future__ import annotations

import re
from collections.abc import Sequence, Set

from steerable._hooks import LLMResponseContext
from steerable._messages import Message
from steerable.coding._evidence import drawn_from, path_names
from steerable.coding._paths import failed_paths
from steerable.coding._verdict import UNVERIFIED_MARK
from steerable.providers._base import LLMRequest, ToolChoice

__all__ = ["bare", "compared", "from_results", "located_only", "shown_files", "side_by_side",
           "unshown", "unstated"]

_GREP_ROW = re.compile(r"^(?P<path>[^\s:][^:]*):\d+: (?P<text>.*)$")
_READ_ROW = re.compile(r"^\s*\d+\t(?P<text>.*)$")
_VALUE = re.compile(r"\"[^\"\n]*\"|'[^'\n]*'|(?<![\w.])\d+(?:[.:,]\d+)*(?![\w])")
_NOTE = ("The results show these lines side by side:\n{lines}\nYour answer does not state "
         "{values}. Answer my request again in plain words, stating the values these lines "
         "hold.")
_BARE = ("Your answer states nothing the tool results show. The last result shows:\n{shown}\n"
         "Answer my request again in plain words from the results: give the values, names or "
         "lines they show that answer it.")
_LOCATED = ("Your answer says where the results matched, not what they show there. The "
            "matching lines are:\n{rows}\nAnswer my request again in plain words, stating what "
            "these lines say.")
_WORD = re.compile(r"[^\W\d_]{4,}")
SHOWN_LIMIT = 600
"""The most characters of the last result a note or a mark repeats."""
MAX_FILES = 6
"""The most files a group of lines may span (more is a search, not a comparison)."""
MAX_ROWS = 10
"""The most matching lines an answer is asked to state (more is a listing to point at)."""


def _file_lines(turn: Sequence[Message]) -> list[tuple[str, str]]:
    """(file, line text) for every line a ``grep`` or ``read`` result of ``turn`` showed."""
    paths = {c.id: c.arguments.get("path") for m in turn if m.role == "assistant"
             for c in m.tool_calls if c.name == "read"}
    out: list[tuple[str, str]] = []
    for m in turn:
        if m.role != "tool" or m.is_error:
            continue
        path = paths.get(m.tool_call_id or "")
        for row in m.text.splitlines():
            read = _READ_ROW.match(row) if isinstance(path, str) else None
            grep = None if read else _GREP_ROW.match(row)
            if read and isinstance(path, str):
                out.append((path, read.group("text").strip()))
            elif grep and m.name == "grep":
                out.append((grep.group("path"), grep.group("text").strip()))
    return out


def shown_files(turn: Sequence[Message]) -> set[str]:
    """The files whose lines a ``grep`` or ``read`` result of ``turn`` showed."""
    return {path for path, _ in _file_lines(turn)}


def unshown(files: Sequence[str], read: Set[str], turn: Sequence[Message],
            asked: Sequence[str]) -> tuple[str, ...]:
    """The ``files`` no ``read`` (``read``: the relative paths read) or grep row of ``turn``
    showed; none once a file the request (``asked``) names was shown or a look at it failed
    (the 1.5B, told to read README.md after "secrets.txt does not exist", answered what
    README.md says): an answer that states
    nothing of it misread it (the 1.5B read notes.txt and said it "does not contain any
    lines"), and another file's text only leads it away (asked to read README.md instead, it
    answered what README.md says)."""
    seen = shown_files(turn) | set(read)
    if (seen | failed_paths(turn)) & set(path_names(" ".join(asked))):
        return ()  # a named file shown, or looked for and not there ("it does not exist")
    return tuple(f for f in files if f not in seen)


def side_by_side(turn: Sequence[Message]) -> list[list[tuple[str, str, tuple[str, ...]]]]:
    """Groups of (file, line, values): lines of one shape, once in each of 2 to ``MAX_FILES``
    files, whose values differ."""
    shapes: dict[str, dict[str, list[tuple[str, tuple[str, ...]]]]] = {}
    for path, text in dict.fromkeys(_file_lines(turn)):
        values = tuple(v.strip("\"'") for v in _VALUE.findall(text))
        shape = _VALUE.sub("\0", text)
        if values and shape.strip("\0 "):
            shapes.setdefault(shape, {}).setdefault(path, []).append((text, values))
    groups = []
    for by_file in shapes.values():
        if not 2 <= len(by_file) <= MAX_FILES or any(len(v) != 1 for v in by_file.values()):
            continue
        group = [(path, rows[0][0], rows[0][1]) for path, rows in by_file.items()]
        if len({values for _, _, values in group}) > 1:
            groups.append(group)
    return groups


def unstated(answer: str, groups: Sequence[Sequence[tuple[str, str, tuple[str, ...]]]]
             ) -> list[str]:
    """The differing values of ``groups`` that ``answer`` does not state."""
    missing: list[str] = []
    for group in groups:
        columns = zip(*(values for _, _, values in group), strict=False)
        for column in columns:
            if len(set(column)) < 2:
                continue  # the same in every file: not what the comparison turns on
            missing += [v for v in dict.fromkeys(column) if not re.search(
                rf"(?<![\w.]){re.escape(v)}(?![\w])", answer) and v not in missing]
    return missing


async def _again(ctx: LLMResponseContext, answer: str, note: str, reason: str,
                 max_tokens: int) -> str:
    """The model's answer once more after ``answer`` and ``note`` (no tools); "" on a failure."""
    request = ctx.request
    again = LLMRequest(
        messages=(*request.messages, Message("assistant", answer), Message("user", note)),
        tools=request.tools, model=request.model, params=request.params,
        tool_choice=ToolChoice("none", max_tokens=max_tokens, reason=reason))
    try:
        return (await ctx.ask(again, "evidence")).text
    except Exception:  # any failure of the call: the caller keeps what it had
        return ""


async def compared(ctx: LLMResponseContext, answer: str, turn: Sequence[Message],
                   max_tokens: int) -> str | None:
    """The answer again, when ``answer`` leaves out values the results show side by side (one
    call, no tools), with the lines it still leaves out shown under it, marked; None when it
    states them all."""
    groups = side_by_side(turn)
    missing = unstated(answer, groups)
    if not missing:
        return None
    lines = "\n".join(f"{path}: {text}" for group in groups for path, text, _ in group)
    reply = await _again(ctx, answer, _NOTE.format(lines=lines, values=", ".join(missing)),
                         "the answer leaves out values the results compare", max_tokens)
    text = reply if reply.strip() else answer
    still = unstated(text, groups)
    if not still:
        return text
    # Asked again, the 1.5B still answered "set to 21 seconds" with 57 in front of it: the
    # user is shown the lines it left out, not an answer that reads as the whole comparison.
    shown = "; ".join(f"{path}: {line}" for group in groups for path, line, _ in group)
    return (f"{text.rstrip()}\n\n{UNVERIFIED_MARK}: the answer leaves out {', '.join(still)}; "
            f"the results show {shown}")


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def located_only(answer: str, turn: Sequence[Message]) -> list[str]:
    """The ``grep`` rows (``path:line: text``) whose file ``answer`` names while stating no
    word of what the row says past the pattern's match (words of four letters or more, not
    the request's own): it says where, not what. [] when it states some of each row it names,
    or the rows say nothing past the match (``class Inventory:`` for "class Inventory"), or
    there are more than ``MAX_ROWS``."""
    patterns = {c.id: c.arguments.get("pattern") for m in turn if m.role == "assistant"
                for c in m.tool_calls if c.name == "grep"}
    asked = _words(" ".join(m.text for m in turn if m.role == "user"))
    said = _words(answer)
    rows: list[str] = []
    for m in turn:
        pattern = patterns.get(m.tool_call_id or "")
        if m.role != "tool" or m.is_error or not isinstance(pattern, str):
            continue
        for row in m.text.splitlines():
            grep = _GREP_ROW.match(row)
            if grep is None or grep.group("path").rsplit("/", 1)[-1] not in answer:
                continue
            try:
                past = re.sub(pattern, " ", grep.group("text"), flags=re.IGNORECASE)
            except re.error:
                past = grep.group("text")
            words = _words(past) - asked - _words(grep.group("path"))
            if words and not words & said:
                rows.append(row)
    return rows if len(rows) <= MAX_ROWS else []


def _shown(turn: Sequence[Message]) -> list[str]:
    """The texts of the results of ``turn`` that showed something (no error, not empty)."""
    return [m.text for m in turn if m.role == "tool" and not m.is_error and m.text.strip()]


def bare(answer: str, turn: Sequence[Message]) -> bool:
    """Whether ``answer`` states no fact any result of ``turn`` shows, while one showed
    something (``drawn_from``: no value, name, quote or word with a digit of theirs)."""
    results = _shown(turn)
    return bool(results) and not drawn_from(answer, results)


async def from_results(ctx: LLMResponseContext, answer: str, turn: Sequence[Message],
                       max_tokens: int) -> str | None:
    """The answer again from the results: when ``answer`` leaves out values they compare
    (``compared``), or states no fact any of them shows while one showed something (the
    1.5B read notes.txt and answered "notes.txt does not contain any lines"; it ran report.py
    and answered "it printed the total number of lines"), the last result repeated in the
    note; an answer that still states none is kept with that result under it, marked. None:
    the answer stays as it was."""
    fuller = await compared(ctx, answer, turn, max_tokens)
    if fuller is not None:
        return fuller
    named = set(path_names(" ".join(m.text for m in turn if m.role == "user")))
    if named & failed_paths(turn):
        return None  # "secrets.txt does not exist" rests on the failed look, asked again it
        # described the listing instead (missing_file, 2026-12-08)
    located = located_only(answer, turn)
    if located:
        # Asked for the TODO comments, the 1.5B answered with their files and line numbers;
        # the comments' text, what was asked for, was in front of it.
        reply = await _again(ctx, answer, _LOCATED.format(rows="\n".join(located)),
                             "the answer says where the results matched, not what", max_tokens)
        return reply if reply.strip() and len(located_only(reply, turn)) < len(located) \
            and drawn_from(reply, _shown(turn)) else None
    if not bare(answer, turn):
        return None
    results = _shown(turn)
    last = results[-1].strip()
    shown = last if len(last) <= SHOWN_LIMIT else f"{last[:SHOWN_LIMIT]} [...]"
    reply = await _again(ctx, answer, _BARE.format(shown=shown),
                         "the answer states nothing the results show", max_tokens)
    if drawn_from(reply, results):
        return reply
    # Asked again with the file's lines in the note, the 1.5B still answered that notes.txt
    # "does not contain any lines": the user sees what the last result showed, marked.
    return (f"{answer.rstrip()}\n\n{UNVERIFIED_MARK}: the answer states nothing the results "
            f"show; the last one shows:\n{shown}")
