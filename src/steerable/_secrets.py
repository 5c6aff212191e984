"""Secrets: recognising them by name and by shape, blanking them in values, keeping them out
of the environment of commands the model runs, and never cutting one across streamed pieces.

One place for the rules so every output agrees: the CLI's rendering, the stores, the event
streams, the recordings, provider error messages and the bash tool's environment all use this
module. Secrets are values: an output blanks them with ``redacted`` on the value it is about to
encode (every string in it, keys included), never by pattern over encoded text, where a secret
next to an escape (``\t`` in JSON) or holding a quote or backslash would either be missed or
cut the escape in half and corrupt the line (structlog's processors work on the event dict,
not the rendered line, for the same reason). Streamed text is the other way to leak: a secret
sent in several ``LLM_DELTA`` pieces is whole in none of them. ``StreamGuard`` holds back the
tail of the text that could still grow into a secret and releases it once it cannot, so every
piece an output sees holds a secret whole or not at all.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = [
    "SECRET_NAME_PATTERNS",
    "Opaque",
    "Redactor",
    "StreamGuard",
    "is_secret_name",
    "json_forms",
    "known_secrets",
    "looks_secret",
    "redacted",
    "redacted_json",
    "remember_secret",
    "scrub_env",
]

SECRET_NAME_PATTERNS: tuple[str, ...] = (
    "*API_KEY*", "*APIKEY*", "*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*_PASS",
    "*CREDENTIAL*", "*PRIVATE_KEY*", "*ACCESS_KEY*", "*_AUTH", "*SESSION_KEY*", "*_DSN",
    "DATABASE_URL", "*_DATABASE_URL", "*CONNECTION_STRING*", "*WEBHOOK_URL*",
)
"""Environment variable names (shell globs, any case) taken to hold secrets: the providers'
``*_API_KEY``, cloud and forge tokens (``AWS_SECRET_ACCESS_KEY``, ``GITHUB_TOKEN``,
``GH_TOKEN``, ``GITLAB_TOKEN``, ``NPM_TOKEN``, ``HF_TOKEN``...), passwords, connection strings."""

# Shapes of well-known credentials, so a secret under an innocent name is still caught. Kept as
# text, compiled when first used (``re`` keeps it): compiling it costs ~1 ms of the import.
_VALUE_SHAPES = (
    r"sk-[A-Za-z0-9_-]{16,}"                       # OpenAI, Anthropic (sk-ant-...)
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"  # GitHub
    r"|glpat-[A-Za-z0-9_-]{16,}"                   # GitLab
    r"|xox[abpors]-[A-Za-z0-9-]{10,}"              # Slack
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"                  # AWS access key ids
    r"|AIza[0-9A-Za-z_-]{35}"                      # Google API keys
    r"|hf_[A-Za-z0-9]{30,}"                        # Hugging Face
    r"|npm_[A-Za-z0-9]{30,}"                       # npm
    r"|eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"  # JWTs
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|[a-z][a-z0-9+.-]*://[^\s/:@]+:[^\s/@]+@"     # URLs with a password
)
# A text holding none of these (nor a known value) cannot match a shape: the common case costs
# a few substring scans instead of a regex trying every alternative at every position.
_SHAPE_MARKS = ("sk-", "gh", "github_pat_", "glpat-", "xox", "AKIA", "ASIA", "AIza", "hf_",
                "npm_", "eyJ", "-----BEGIN ", "://")
_MIN_SECRET = 8  # shorter values are not worth blanking (and would blank common words)
_SPACE = re.compile(r"\s")
_REMEMBERED: set[str] = set()
"""Secrets this process was handed in code (an API key given to a provider): blanked by every
``Redactor`` made afterwards, like the environment's."""


def remember_secret(value: str | None) -> None:
    """Treat ``value`` as a secret in every output of this process from now on."""
    if value and len(value) >= _MIN_SECRET and value not in _REMEMBERED:
        _REMEMBERED.add(value)


def is_secret_name(name: str, patterns: Iterable[str] = SECRET_NAME_PATTERNS) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, p.upper()) for p in patterns)


@functools.lru_cache(maxsize=4096)
def _default_secret_name(name: str) -> bool:
    return is_secret_name(name)


def _environ_store() -> Mapping[Any, Any]:
    """The environment as ``os.environ`` stores it (bytes on POSIX): comparing it with a copy
    costs ~1 us where decoding every name and value takes ~60 us, and an equal copy means an
    unchanged environment."""
    data = getattr(os.environ, "_data", None)
    return data if isinstance(data, dict) else os.environ


_known: tuple[dict[Any, Any] | None, int, tuple[str, ...]] = (None, -1, ())


def known_secrets() -> tuple[str, ...]:
    """The secret values this process knows now: the environment's (by name) and the ones
    remembered with ``remember_secret``; what a default ``Redactor()`` blanks, shapes aside.

    Asked before every model call, so the answer is kept until the environment or the
    remembered set changes (``_REMEMBERED`` only grows: its size is its version). The check is
    a dict comparison with a copy kept from the last change (in C, no allocation)."""
    global _known
    store, remembered = _environ_store(), len(_REMEMBERED)
    if _known[0] == store and _known[1] == remembered:
        return _known[2]
    values = {v for k, v in os.environ.items()
              if len(v) >= _MIN_SECRET and _default_secret_name(k)}
    _known = (dict(store), remembered, tuple(values | _REMEMBERED))
    return _known[2]


def json_forms(values: Iterable[str]) -> set[str]:
    """``values`` and the way each is written inside a JSON string (quotes, backslashes and
    control characters escaped, non-ASCII kept or as ``\\u`` escapes): tool-call arguments
    stream as JSON text, where a secret holding such characters appears only escaped."""
    out = set(values)
    for value in tuple(out):
        out.add(json.dumps(value, ensure_ascii=False)[1:-1])
        out.add(json.dumps(value)[1:-1])
    return out


def looks_secret(value: str) -> bool:
    """Whether ``value`` has the shape of a well-known credential."""
    return re.search(_VALUE_SHAPES, value) is not None


class Redactor:
    """Blanks secrets in values: the values of secret-named environment variables (and any
    ``extra`` values such as an API key given in code), and anything shaped like a credential.

    ``extra`` values are remembered for the whole process (``remember_secret``): the loop's
    stream guard, which knows no redactor, keeps them whole in streamed text too. A mapping
    given as ``environ`` stands for the environment and is not remembered."""

    def __init__(self, environ: Mapping[str, str] | None = None,
                 extra: Iterable[str | None] = ()) -> None:
        env = os.environ if environ is None else environ
        self._own = {v for k, v in env.items() if is_secret_name(k) and len(v) >= _MIN_SECRET}
        for value in extra:  # given in code: the loop's stream guard must know them too
            remember_secret(value)
            if value and len(value) >= _MIN_SECRET:
                self._own.add(value)
        # The default one also blanks what the process remembers, even after it was made.
        self._remembered: set[str] | None = _REMEMBERED if environ is None else None
        self._compile()

    def _compile(self) -> None:
        # Escaped forms too: streamed tool arguments are JSON text (see ``json_forms``).
        values = json_forms(self._own | (self._remembered or set()))
        self._known = len(self._remembered or ())
        ordered = sorted(values, key=len, reverse=True)  # longest first: no partial blanking
        self.values: tuple[str, ...] = tuple(ordered)
        """The secret values it knows (shapes aside), longest first."""
        alternatives = [*map(re.escape, ordered), _VALUE_SHAPES]
        self._pattern = re.compile("|".join(alternatives))
        self._short: dict[str, str] = {}
        """Answers for short strings (field names, kinds, ids come again and again)."""

    def __call__(self, text: str) -> str:
        """``text`` (a value, never encoded text) with each secret in it blanked."""
        if self._remembered is not None and len(self._remembered) != self._known:
            self._compile()  # the set only grows: a new size is a new secret
        if len(text) < 64:
            known = self._short.get(text)
            if known is None:
                if len(self._short) >= 4096:
                    self._short.clear()
                known = self._short[text] = self._blank(text)
            return known
        return self._blank(text)

    def _blank(self, text: str) -> str:
        if not any(m in text for m in _SHAPE_MARKS) and not any(v in text for v in self.values):
            return text
        # Again until nothing changes: a blank next to the text around it could spell a secret
        # anew (one holding "]", say). Past a few rounds only a contrived secret is left.
        for _ in range(4):
            blanked = self._pattern.sub("[redacted]", text)
            if blanked == text:
                return text
            text = blanked
        return "[redacted]" if self._pattern.search(text) else text

    def guard(self) -> StreamGuard:
        """A guard for one stream of text pieces that keeps this redactor's secrets whole."""
        return StreamGuard(self.values)

    def leaves_unchanged(self, encoded: str) -> bool:
        """True when no string inside the JSON text ``encoded`` (written with
        ``ensure_ascii=False``) holds anything this redactor blanks, so redacting the value
        before encoding would give the same text. Sound because a string's secret appears in
        the encoded text in one of its ``json_forms`` and the shapes hold no character JSON
        escapes; a match that only the encoding makes (across two strings) merely sends the
        caller the slow way."""
        if self._remembered is not None and len(self._remembered) != self._known:
            self._compile()
        if not any(m in encoded for m in _SHAPE_MARKS) and not any(v in encoded for v in self.values):
            return True
        return self._pattern.search(encoded) is None


def redacted_json(value: Any, redact: Callable[[str], str] | None) -> str:
    """``value`` redacted (see ``redacted``) and encoded as JSON (``ensure_ascii=False``).

    With a ``Redactor`` the value is encoded first and walked only when the text shows that
    something in it may be a secret: the walk costs ~10 us on an event, the check ~1 us."""
    if redact is None:
        return _ENCODE(value)
    if isinstance(redact, Redactor):
        encoded = _ENCODE(value)
        if redact.leaves_unchanged(encoded):
            return encoded
    return _ENCODE(redacted(value, redact))


# ``json.dumps`` with any option builds a new encoder per call; one kept encoder saves that.
_ENCODE = json.JSONEncoder(ensure_ascii=False).encode


class Opaque(str):
    """A string that is data, not text: binary content written as base64. ``redacted``
    passes it by, since blanking a piece that happens to look like a key would corrupt the
    data (an image or a file is sent to the model as it is, and kept as it is)."""

    __slots__ = ()


def redacted(value: Any, redact: Callable[[str], str] | None) -> Any:
    """``value`` (JSON-like: dicts, lists, tuples, strings, numbers...) with ``redact`` applied
    to every string in it, dictionary keys included, ``Opaque`` strings excepted; the one step
    every output takes before it encodes. Nothing is changed in place."""
    if redact is None:
        return value
    kind = type(value)  # exact types first: this runs on every event every output writes
    if kind is str:
        return redact(value)
    if kind is dict:
        return {redact(k) if type(k) is str else k: redacted(v, redact)
                for k, v in value.items()}
    if kind is list or kind is tuple:
        return [redacted(v, redact) for v in value]
    if value is None or kind is int or kind is float or kind is bool or kind is Opaque:
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {redact(k) if isinstance(k, str) else k: redacted(v, redact)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redacted(v, redact) for v in value]
    return value


@functools.lru_cache(maxsize=16)
def _spaced(secrets: tuple[str, ...]) -> tuple[str, ...]:
    """The secrets holding whitespace. Kept: two guards are made for every model call, nearly
    always with the same ``known_secrets()``."""
    return tuple(s for s in secrets if _SPACE.search(s))


class StreamGuard:
    """Regroups a stream of text pieces so that no secret is ever split between two pieces.

    ``feed`` returns what may go out now and holds back the rest; ``flush`` gives the held
    text at the end of the stream. Text is released only up to the start of its last word
    (every credential shape is one word, so none is ever cut), and further back while the held
    text could still begin, or ends inside, one of the known ``secrets`` that contain
    whitespace. Released text can therefore never join what comes later into a secret: an
    output that blanks each piece's secrets blanks every secret of the stream."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._spaced = _spaced(secrets if isinstance(secrets, tuple) else tuple(secrets))
        self._held = ""

    def feed(self, text: str) -> str:
        """Add ``text``; returns the text that can be released now (maybe "")."""
        buffer = self._held + text
        cut = self._cut(buffer)
        self._held = buffer[cut:]
        return buffer[:cut]

    def flush(self) -> str:
        """The stream ended: everything held, which is now final."""
        held, self._held = self._held, ""
        return held

    def reset(self) -> None:
        """The stream starts over (a retried model call): what was held is void."""
        self._held = ""

    def _cut(self, text: str) -> int:
        cut = len(text)
        while True:
            start = _word_start(text, cut)
            for secret in self._spaced:
                start = min(start, _secret_start(text, secret, start))
            if start == cut:
                return cut
            cut = start


def _word_start(text: str, cut: int) -> int:
    """The start of the word that ``cut`` falls in or ends (``cut`` itself after a space)."""
    while cut > 0 and not text[cut - 1].isspace():
        cut -= 1
    return cut


def _secret_start(text: str, secret: str, cut: int) -> int:
    """The earliest position before ``cut`` where ``secret`` starts and does not end before
    ``cut``: a whole occurrence across ``cut``, or a beginning of it at the end of ``text``."""
    first = max(0, cut - len(secret) + 1)
    found = text.find(secret, first)
    if 0 <= found < cut:
        return found
    for k in range(min(len(secret) - 1, len(text) - first), 0, -1):
        if text.endswith(secret[:k]) and len(text) - k < cut:
            return len(text) - k
    return cut


def scrub_env(env: Mapping[str, str], hidden: Iterable[str] = SECRET_NAME_PATTERNS) -> dict[str, str]:
    """``env`` without secrets: names matching ``hidden``, values shaped like credentials, and
    any value equal to (or containing) a hidden one, whatever its name."""
    patterns = tuple(hidden)
    secret_values = {v for k, v in env.items()
                     if is_secret_name(k, patterns) and len(v) >= _MIN_SECRET}
    out: dict[str, str] = {}
    for key, value in env.items():
        if is_secret_name(key, patterns) or looks_secret(value):
            continue
        if any(s in value for s in secret_values):
            continue
        out[key] = value
    return out
