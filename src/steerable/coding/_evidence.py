"""Facts an answer states that nothing the turn saw contains.

An answer about the workspace may only state a value, a count or a name that a tool result,
a tool call or the request itself contains. The facts checked are the ones a reader can take
for something found: numbers (a port, a version, a time, a count), file and path names,
identifiers written in code style (``MAX_RETRIES``, ``get_user``, ``parseConfig``) and quoted
text. Words are not checked: they differ by language and wording, these tokens do not.

A count is also supported when it equals the number of non-empty lines of one tool result
(``find`` lists four files, the answer says "4"). Numbers that open a list item ("2. ...") are
layout, not facts.

The names of the tools the request offered and of their parameters (``read``, ``pattern``,
``old_text``) are the agent's own vocabulary, not facts about the workspace: an answer that
says it would call `read` with a `path` states nothing found. Counted as facts, they sent such
answers to a needless recheck (measured with the 1.5B, 2026-12-07: a French answer naming
`read` was rechecked into "I do not know it"). A quote that is a use of an offered tool
(`grep -r TODO`, `read(notes.txt)`) is the tool, not a fact; the names, numbers and paths in
it are still checked on their own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["drawn_from", "echoes", "evidence_counts", "path_names", "tool_vocabulary",
           "unsupported_facts"]

_QUOTED = re.compile(r"(?<!\w)\"([^\"\n]{2,80})\"(?!\w)")
_PATHLIKE = re.compile(r"(?<![\w/.-])[\w./-]*\w\.[A-Za-z][A-Za-z0-9]{0,5}(?![\w])")
_CODE_NAME = re.compile(r"(?<![\w.])(?:[A-Za-z]\w*_\w+|[a-z]+[A-Z]\w*|[A-Z][a-z0-9]+[A-Z]\w*)"
                        r"(?![\w])")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.:,]\d+)*(?![\w])")
_LIST_MARK = re.compile(r"^\s*\d+[.)]\s", re.MULTILINE)
_SPACE = re.compile(r"\s+")
_DIGIT_WORD = re.compile(r"(?<!\w)(?=\w*\d)\w{2,}(?!\w)")
_FIRST_WORD = re.compile(r"[\w.-]+")


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


def path_names(text: str) -> list[str]:
    """The file names ``text`` writes out (``notes.txt``, ``src/app.py``), in order. A name
    followed by "(" is a call in code (``greet.hello('Ada')``), not a file: taken for one, it
    led the 1.5B to create a file named greet.hello."""
    return [m.group(0).rstrip(".") for m in _PATHLIKE.finditer(text)
            if not text.startswith("(", m.end())]


def echoes(answer: str, results: Iterable[str]) -> bool:
    """Whether ``answer`` only repeats raw tool output: it is one whole result, or it has
    several lines and every one of them is a line of a result. Such an answer leaves the
    reading to the user (a listing for a count, a file for a question about it)."""
    lines = [_norm(ln) for ln in answer.splitlines() if ln.strip()]
    if not lines:
        return False
    texts = [r for r in results if r.strip()]
    if any(_norm(answer) == _norm(r) for r in texts) and len(_norm(answer)) >= 12:
        return True
    seen = {_norm(ln) for r in texts for ln in r.splitlines() if ln.strip()}
    return len(lines) >= 2 and all(ln in seen for ln in lines)


def evidence_counts(results: Iterable[str]) -> set[str]:
    """Counts one can read off tool results without a number in them: their line counts."""
    counts = set()
    for text in results:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        counts.add(str(len(lines)))
    return counts


def tool_vocabulary(tools: Sequence[tuple[str, Mapping[str, Any]]]) -> frozenset[str]:
    """The names of ``tools`` ((name, JSON schema of the parameters) pairs) and of their
    parameters, lower-cased: words an answer may use without stating a fact."""
    words: set[str] = set()
    for name, schema in tools:
        words.add(name.lower())
        props = schema.get("properties") if isinstance(schema, Mapping) else None
        if isinstance(props, Mapping):
            words.update(str(p).lower() for p in props)
    return frozenset(words)


def _vocabulary_use(kind: str, text: str, vocabulary: frozenset[str]) -> bool:
    """``text`` names a tool or a parameter, or (a quote) is a use of a tool."""
    low = text.strip().lower()
    if low.rstrip("()") in vocabulary:
        return True
    first = _FIRST_WORD.match(low)
    return kind == "quote" and first is not None and first.group(0) in vocabulary \
        and low[first.end():first.end() + 1] in ("", " ", "(")


def _number_supported(number: str, evidence: str, counts: set[str]) -> bool:
    if number in counts:
        return True
    # "1,024" and "1024", "3.10" and "3.1": the digits as the evidence writes them.
    bare = number.replace(",", "")
    return re.search(rf"(?<![\d]){re.escape(bare)}(?![\d])", evidence.replace(",", "")) \
        is not None


def _candidates(answer: str) -> list[tuple[str, str]]:
    """(kind, text) for every checkable fact in ``answer``, in order, without repeats."""
    body = _LIST_MARK.sub(" ", answer)
    found: list[tuple[str, str]] = []
    pieces = body.split("`")
    for code in pieces[1:-1:2]:  # between backticks, paired from the start
        if 2 <= len(code.strip()) <= 80 and "\n" not in code:
            found.append(("quote", code.strip()))
    for m in _QUOTED.finditer(body):
        found.append(("quote", m.group(1)))
    for m in _PATHLIKE.finditer(body):
        found.append(("name", m.group(0).rstrip(".")))
    for m in _CODE_NAME.finditer(body):
        found.append(("name", m.group(0)))
    for m in _NUMBER.finditer(body):
        found.append(("number", m.group(0).rstrip(".,:")))
    seen: set[str] = set()
    out = []
    for kind, text in found:
        if text and text not in seen:
            seen.add(text)
            out.append((kind, text))
    return out


def unsupported_facts(answer: str, evidence: str, counts: set[str], *,
                      numbers: bool = True, vocabulary: frozenset[str] = frozenset()) -> list[str]:
    """The facts ``answer`` states that ``evidence`` (request, tool calls and results) does
    not contain. ``numbers=False`` leaves numbers unchecked (an answer that needed nothing
    from the workspace: arithmetic is not a claim about it). ``vocabulary`` (``tool_vocabulary``
    of the offered tools) is no fact."""
    low = _norm(evidence)
    missing = []
    for kind, text in _candidates(answer):
        if kind != "number" and _vocabulary_use(kind, text, vocabulary):
            continue
        if kind == "number":
            if numbers and not _number_supported(text, evidence, counts):
                missing.append(text)
        elif _norm(text) not in low:
            # A path is supported by its last part too ("stock.py" for "src/a/stock.py"
            # is not enough, but "src/a/stock.py" is when a result shows "a/stock.py").
            tail = text.rsplit("/", 1)[-1]
            if kind == "name" and "/" in text and _norm(tail) in low \
                    and all(_norm(p) in low for p in text.split("/") if p):
                continue
            missing.append(text)
    # A quote holding an unsupported name reports the name once.
    return [m for m in missing if not any(m != o and m in o for o in missing)]


def drawn_from(answer: str, results: Sequence[str]) -> bool:
    """Whether ``answer`` states at least one fact (a value, a name, a quote) that one of the
    tool ``results`` shows: the request's own names do not count ("notes.txt does not contain
    any lines", after a read that showed its lines, states none)."""
    shown = "\n".join(results)
    missing = set(unsupported_facts(answer, shown, evidence_counts(results)))
    if any(text not in missing for _, text in _candidates(answer)):
        return True
    # A word with a digit in it is a value too ("room B123"), though no number on its own.
    return any(re.search(rf"(?<!\w){re.escape(word)}(?!\w)", shown)
               for word in _DIGIT_WORD.findall(answer))
