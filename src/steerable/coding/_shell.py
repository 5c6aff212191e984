"""What a shell command line runs, for permission rules: each simple command on its own.

``git status && rm -rf build`` is two commands; a rule allowing ``git *`` must not cover the
second. This reader understands a deliberately small part of bash, exactly: words with every
ordinary quoting form (``'...'``, ``"..."``, backslashes, line continuations), comments, the
control operators (``;``, ``&&``, ``||``, ``|``, ``|&``, ``&``, newlines), ``( )`` subshells,
``$( )`` and backtick substitutions (whose bodies are commands too), plain ``$NAME`` and
``${NAME}`` expansions, here-strings, input redirections, output redirections to ``/dev/null``
and file-descriptor copies such as ``2>&1``, and the bodies of ``bash -c``/``sh -c``/``eval``
when they are literal text.

Bash removes every line continuation (``\\`` then a newline) before it splits the line into
words, except inside single quotes and comments, which it reads as they are; the reader does the
same, in the same order (``_Source``): first the continuations go, then the words are read, so
``$\\<newline>(cmd)`` reads as the ``$(cmd)`` bash runs. A continuation inside a single-quoted
string or a comment makes the reading unsure (bash keeps it there, and the two readings of where
such a region ends would differ). Aliases are expanded on words as they are read, so a line that
defines one is unsure too; so is a command name that brace expansion or a glob rewrites.

Anything else (here-documents, ``$'...'`` quoting, arithmetic, ``${x:-...}`` forms, process
substitution, output redirection to a file, control structures such as ``if``/``for``/``case``
and ``{ }`` groups, a command name that is an expansion, an unclosed quote) makes the reading
*unsure*. An unsure line is never covered by an allow rule with an argument pattern: it is
asked (fail closed), whatever text follows the construct.

Subjects are the raw text of each simple command plus, when quoting changed it, the command with
quotes removed, so ``r''m -rf x`` also reads ``rm -rf x`` for a deny rule. Commands run through
wrappers (``env``, ``sudo``, ``xargs``, ``timeout``, ``nohup``, ``find -exec``...) also appear
without the wrapper.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from steerable.tools import UncoveredSubject

__all__ = ["ShellReading", "command_subjects", "read_command_line"]

_BLANKS = " \t"
_METACHARS = frozenset(" \t\n;&|()<>")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPECIAL_PARAMS = frozenset("@*#?$!-0123456789")
_REDIRECT = re.compile(r"(\d*)(<<<|<<-?|<>|<&|>&|>>|>\||&>>|&>|<|>)")
_RESERVED = frozenset({
    "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until",
    "do", "done", "function", "{", "}", "[[", "]]", "!", "time", "coproc", "((",
})
_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "busybox"})
# Commands that run another command given in their arguments (after their own options).
_WRAPPERS = frozenset({
    "env", "command", "builtin", "exec", "nohup", "nice", "timeout", "sudo", "doas",
    "xargs", "stdbuf", "setsid", "chroot", "ionice", "taskset", "unbuffer", "watch", "strace",
    "flock", "chronic", "caffeinate", "script",
})
_MAX_DEPTH = 16


class _Unsure(Exception):
    """A construct this reader does not fully understand (the reason is the message)."""


@dataclass
class ShellReading:
    """The commands a line runs, as far as they could be read, and whether that is all of it."""

    commands: list[str] = field(default_factory=list)
    unsure: str | None = None
    """Why the line was not fully understood; None when every command was read."""


@dataclass
class _Word:
    raw: str
    value: str | None  # the text after quote removal; None when it holds an expansion
    rewritten: bool = False  # unquoted glob or brace characters: may become other words


class _Source:
    """A line as bash's word reader sees it: with its line continuations removed.

    Bash drops a backslash-newline pair before reading words (so it may join ``$`` and ``(``),
    but not inside single quotes or a comment. ``text`` has every pair removed (pairing
    backslashes from the left, as bash does); ``removed_between`` says whether a pair was taken
    out of a region that bash reads as it is, where the two readings part.
    """

    def __init__(self, line: str) -> None:
        kept: list[str] = []
        removed_before: list[int] = []  # per kept character: pairs removed before it
        removed = 0
        i = 0
        while i < len(line):
            if line[i] == "\\" and i + 1 < len(line):
                if line[i + 1] == "\n":
                    removed += 1
                else:  # an escaped character: it cannot start a continuation
                    kept += line[i : i + 2]
                    removed_before += [removed, removed]
                i += 2
                continue
            kept.append(line[i])
            removed_before.append(removed)
            i += 1
        removed_before.append(removed)  # the end of the text
        self.text = "".join(kept)
        self._removed_before = removed_before

    def removed_between(self, start: int, end: int) -> bool:
        """Whether a continuation was removed between ``text[start]`` and ``text[end]``."""
        end = min(end, len(self.text))
        return self._removed_before[end] != self._removed_before[start]


class _Reader:
    def __init__(self, source: _Source, out: list[str], depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise _Unsure("commands nested too deeply")
        self.source = source
        self.s = source.text
        self.i = 0
        self.out = out
        self.depth = depth
        self.nested: list[str] = []

    # -- lists of commands -----------------------------------------------------------------

    def read_list(self, closer: str | None) -> None:
        """Commands separated by operators, up to ``closer`` (consumed) or the end."""
        s = self.s
        while True:
            self._skip_blanks()
            if self.i >= len(s):
                if closer is not None:
                    raise _Unsure(f"unclosed {'(' if closer == ')' else closer}")
                return
            ch = s[self.i]
            if closer is not None and ch == closer:
                self.i += 1
                return
            if s.startswith(";;", self.i):
                raise _Unsure("';;' outside a case statement")
            if ch in ";&|\n":
                self.i += 2 if s.startswith(("&&", "||", "|&"), self.i) else 1
                continue
            if ch == "#":
                self._skip_comment()
                continue
            if ch == "(":
                self._read_subshell()
                continue
            if ch == ")":
                raise _Unsure("unbalanced ')'")
            self._read_simple_command()

    def _skip_blanks(self) -> None:
        s = self.s
        while self.i < len(s):
            if s[self.i] in _BLANKS:
                self.i += 1
            else:
                return

    def _skip_comment(self) -> None:
        end = self.s.find("\n", self.i)
        end = len(self.s) if end < 0 else end
        if self.source.removed_between(self.i, end):
            raise _Unsure("a line continuation inside a comment (bash ends the comment there)")
        self.i = end

    def _read_subshell(self) -> None:
        start = self.i
        if self.s.startswith("((", start):
            raise _Unsure("arithmetic command '(( ))'")
        inner = _Reader(self.source, self.nested, self.depth + 1)
        inner.i = start + 1
        inner.read_list(")")
        self.nested.extend(inner.nested)
        self.i = inner.i
        self._read_redirections_after_group()
        self.out.append(self.s[start : self.i].strip())

    def _read_redirections_after_group(self) -> None:
        while True:
            self._skip_blanks()
            if self.i >= len(self.s) or self.s[self.i] in ";&|\n)":
                return
            if not self._read_redirection([]):
                raise _Unsure("text after ')'")

    # -- simple commands --------------------------------------------------------------------

    def _read_simple_command(self) -> None:
        s = self.s
        start = self.i
        words: list[_Word] = []
        end = start
        while True:
            self._skip_blanks()
            if self.i >= len(s) or s[self.i] in ";&|\n)":
                if self.i < len(s) and s[self.i] == "&" and _REDIRECT.match(s, self.i):
                    pass  # '&>' is a redirection, not the background operator
                else:
                    break
            if s[self.i] == "(":
                raise _Unsure("'(' inside a command (a function definition or a pattern)")
            if s[self.i] == "#":  # at the start of a word: a comment to the end of the line
                self._skip_comment()
                break
            if self._read_redirection(words):
                end = self.i
                continue
            words.append(self._read_word())
            end = self.i
        raw = s[start:end].strip()
        if raw:
            self._check_command(raw, words)

    def _read_redirection(self, words: list[_Word]) -> bool:
        m = _REDIRECT.match(self.s, self.i)
        if m is None:
            return False
        op = m.group(2)
        if op in ("<<", "<<-"):
            raise _Unsure("here-document")
        if op in ("<", ">") and self.s.startswith("(", m.end()):
            raise _Unsure("process substitution")
        self.i = m.end()
        self._skip_blanks()
        if self.i >= len(self.s) or self.s[self.i] in _METACHARS or self.s[self.i] == "#":
            raise _Unsure(f"redirection '{op}' without a target")
        target = self._read_word()
        if op in ("<", "<<<"):
            return True  # input: what is read is an argument like any other
        if op in (">&", "<&") and target.value is not None and re.fullmatch(r"\d+-?|-", target.value):
            return True  # a file-descriptor copy such as 2>&1
        if op != "<>" and target.value == "/dev/null":
            return True
        raise _Unsure(f"redirection '{op}' to a file")

    def _check_command(self, raw: str, words: list[_Word]) -> None:
        self.out.append(raw)
        values = [w.value if w.value is not None else w.raw for w in words]
        plain = " ".join(values)
        if plain and plain != raw:
            self.out.append(plain)
        rest = list(words)
        while rest and rest[0].value is not None and _is_assignment(rest[0].value):
            rest.pop(0)
        if not rest:
            return
        name = rest[0].value
        if name is None or rest[0].rewritten:
            raise _Unsure("the command name is an expansion")
        if name in _RESERVED or (words[0].value or "") in _RESERVED:
            raise _Unsure(f"shell keyword '{name}'")
        if name == "alias" and len(rest) > 1:
            # Aliases are replaced on words as bash reads them, before any rule could see them.
            raise _Unsure("an alias definition")
        self._read_inner_commands(name, rest[1:])

    def _read_inner_commands(self, name: str, args: list[_Word]) -> None:
        """Commands hidden in the arguments: eval and ``sh -c`` code, wrapped commands."""
        base = name.rsplit("/", 1)[-1]
        if base == "eval":
            self._read_code([*args])
        elif base in _SHELLS:
            code = _shell_c_argument(args)
            if code is not None:
                self._read_code([code])
        elif base in _WRAPPERS:
            for inner in _wrapped(base, args):
                self._add_inner(inner)
        elif base == "find":
            for i, w in enumerate(args):
                if w.value in ("-exec", "-execdir", "-ok", "-okdir"):
                    body = []
                    for rest in args[i + 1 :]:
                        if rest.value in (";", "+"):
                            break
                        body.append(rest)
                    if body:
                        self._add_inner(body)

    def _read_code(self, args: list[_Word]) -> None:
        if any(w.value is None for w in args):
            raise _Unsure("code to run (eval, sh -c) built from an expansion")
        code = " ".join(w.value or "" for w in args)
        inner = _Reader(_Source(code), self.nested, self.depth + 1)
        inner.read_list(None)
        self.nested.extend(inner.nested)

    def _add_inner(self, words: list[_Word]) -> None:
        if words[0].value is None or words[0].rewritten:
            raise _Unsure("the wrapped command name is an expansion")
        self.nested.append(" ".join(w.value if w.value is not None else w.raw for w in words))
        self._read_inner_commands(words[0].value, words[1:])

    # -- words ------------------------------------------------------------------------------

    def _read_word(self) -> _Word:
        s = self.s
        start = self.i
        value: list[str] | None = []
        rewritten = False  # an unquoted glob or brace character: pathname or brace expansion
        while self.i < len(s) and s[self.i] not in _METACHARS:
            ch = s[self.i]
            if ch == "\\":
                if self.i + 1 >= len(s):
                    raise _Unsure("a backslash at the end of the line")
                nxt = s[self.i + 1]
                if nxt != "\n" and value is not None:
                    value.append(nxt)
                self.i += 2
            elif ch == "'":
                close = s.find("'", self.i + 1)
                if close < 0:
                    raise _Unsure("unclosed single quote")
                if self.source.removed_between(self.i, close):
                    raise _Unsure("a line continuation inside single quotes (bash keeps it)")
                if value is not None:
                    value.append(s[self.i + 1 : close])
                self.i = close + 1
            elif ch == '"':
                known = self._read_double_quoted(value)
                if not known:
                    value = None
            elif ch == "$":
                if self._read_dollar(in_quotes=False):
                    value = None
                elif value is not None:
                    value.append("$")
            elif ch == "`":
                self._read_backticks()
                value = None
            elif ch == "\0":
                raise _Unsure("a NUL character")
            else:
                rewritten = rewritten or ch in "*?[{"
                if value is not None:
                    value.append(ch)
                self.i += 1
        if self.i == start:
            raise _Unsure(f"unexpected {s[self.i]!r}")
        return _Word(s[start : self.i], None if value is None else "".join(value), rewritten)

    def _read_double_quoted(self, value: list[str] | None) -> bool:
        """Read ``"..."`` from its opening quote; False when it holds an expansion."""
        s = self.s
        self.i += 1
        known = True
        while self.i < len(s):
            ch = s[self.i]
            if ch == '"':
                self.i += 1
                return known
            if ch == "\\" and self.i + 1 < len(s) and s[self.i + 1] in '$`"\\\n':
                if s[self.i + 1] != "\n" and value is not None:
                    value.append(s[self.i + 1])
                self.i += 2
            elif ch == "$":
                if self._read_dollar(in_quotes=True):
                    known = False
                elif value is not None:
                    value.append("$")
            elif ch == "`":
                self._read_backticks()
                known = False
            elif ch == "\0":
                raise _Unsure("a NUL character")
            else:
                if value is not None:
                    value.append(ch)
                self.i += 1
        raise _Unsure("unclosed double quote")

    def _read_dollar(self, *, in_quotes: bool) -> bool:
        """Read what follows a ``$``; True when it was an expansion, False for a plain '$'."""
        s = self.s
        nxt = s[self.i + 1] if self.i + 1 < len(s) else ""
        if nxt == "'" and not in_quotes:
            raise _Unsure("$'...' quoting")
        if nxt == '"' and not in_quotes:
            raise _Unsure('$"..." quoting')
        if s.startswith("$((", self.i) or s.startswith("$[", self.i):
            raise _Unsure("arithmetic expansion")
        if nxt == "(":
            inner = _Reader(self.source, self.nested, self.depth + 1)
            inner.i = self.i + 2
            inner.read_list(")")
            self.nested.extend(inner.nested)
            self.i = inner.i
            return True
        if nxt == "{":
            close = s.find("}", self.i + 2)
            body = s[self.i + 2 : close] if close >= 0 else ""
            if close < 0 or not (_NAME.fullmatch(body) or body in _SPECIAL_PARAMS
                                 or re.fullmatch(r"#?[A-Za-z_][A-Za-z0-9_]*|\d+", body)):
                raise _Unsure("a ${...} expansion other than ${NAME}")
            self.i = close + 1
            return True
        m = _NAME.match(s, self.i + 1)
        if m:
            self.i = m.end()
            return True
        if nxt and nxt in _SPECIAL_PARAMS:
            self.i += 2
            return True
        self.i += 1
        return False

    def _read_backticks(self) -> None:
        s = self.s
        body: list[str] = []
        j = self.i + 1
        while j < len(s):
            ch = s[j]
            if ch == "\\" and j + 1 < len(s) and s[j + 1] in "$`\\":
                body.append(s[j + 1])
                j += 2
                continue
            if ch == "`":
                inner = _Reader(_Source("".join(body)), self.nested, self.depth + 1)
                inner.read_list(None)
                self.nested.extend(inner.nested)
                self.i = j + 1
                return
            body.append(ch)
            j += 1
        raise _Unsure("unclosed backtick")


def _is_assignment(word: str) -> bool:
    name, eq, _ = word.partition("=")
    return bool(eq) and bool(_NAME.fullmatch(name.removesuffix("+")))


def _shell_c_argument(args: list[_Word]) -> _Word | None:
    """The code of ``bash -c CODE`` (or ``-lc``, ``-ec``...), if that is how it is called."""
    for i, w in enumerate(args):
        v = w.value
        if v is None:
            return None
        if v.startswith("-") and not v.startswith("--") and "c" in v[1:]:
            rest = [a for a in args[i + 1 :] if not (a.value or "").startswith("-")]
            return rest[0] if rest else None
        if not v.startswith(("-", "+")):
            return None  # a script file: not code this line shows
    return None


def _wrapped(wrapper: str, args: list[_Word]) -> list[list[_Word]]:
    """The commands a wrapper may run: the arguments from each of its first few operands on.

    Which options take a value differs per wrapper (``sudo -u root``, ``timeout -s KILL 5``),
    so every candidate start is a subject: deny rules see the real command, and allow rules
    must cover every reading.
    """
    starts = [
        i for i, w in enumerate(args)
        if w.value is None or not (w.value.startswith("-") or w.value == "--"
                                   or (wrapper == "env" and _is_assignment(w.value)))
    ]
    return [args[i:] for i in starts[:3]]


def read_command_line(line: str) -> ShellReading:
    """Read ``line``: its simple commands in order (nested ones after) and any doubt."""
    out: list[str] = []
    reader = _Reader(_Source(line), out, 0)
    unsure: str | None = None
    try:
        reader.read_list(None)
    except _Unsure as exc:
        unsure = str(exc)
    commands: list[str] = []
    for c in [*out, *reader.nested]:
        if c and c not in commands:
            commands.append(c)
    return ShellReading(commands, unsure)


def command_subjects(line: str) -> list[str]:
    """The subjects permission rules match for a bash call of ``line``.

    When the line is not fully understood, the whole line is added as an ``UncoveredSubject``:
    deny and ask rules still see its text, but no allow rule with an argument pattern covers it.
    """
    reading = read_command_line(line)
    if reading.unsure is None:
        return reading.commands
    return [*reading.commands, UncoveredSubject(line, reading.unsure)]
