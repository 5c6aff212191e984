"""Secrets: recognising them by name and by shape, blanking them in text, keeping them out of
the environment of commands the model runs.

One place for the rules so every output agrees: the CLI's rendering and session files, the
debug recorder, provider error messages and the bash tool's environment all use this module.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Mapping

__all__ = ["SECRET_NAME_PATTERNS", "Redactor", "is_secret_name", "looks_secret", "scrub_env"]

SECRET_NAME_PATTERNS: tuple[str, ...] = (
    "*API_KEY*", "*APIKEY*", "*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*_PASS",
    "*CREDENTIAL*", "*PRIVATE_KEY*", "*ACCESS_KEY*", "*_AUTH", "*SESSION_KEY*", "*_DSN",
    "DATABASE_URL", "*_DATABASE_URL", "*CONNECTION_STRING*", "*WEBHOOK_URL*",
)
"""Environment variable names (shell globs, any case) taken to hold secrets: the providers'
``*_API_KEY``, cloud and forge tokens (``AWS_SECRET_ACCESS_KEY``, ``GITHUB_TOKEN``,
``GH_TOKEN``, ``GITLAB_TOKEN``, ``NPM_TOKEN``, ``HF_TOKEN``...), passwords, connection strings."""

# Shapes of well-known credentials, so a secret under an innocent name is still caught.
_VALUE_SHAPES = re.compile(
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
_MIN_SECRET = 8  # shorter values are not worth blanking (and would blank common words)


def is_secret_name(name: str, patterns: Iterable[str] = SECRET_NAME_PATTERNS) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, p.upper()) for p in patterns)


def looks_secret(value: str) -> bool:
    """Whether ``value`` has the shape of a well-known credential."""
    return _VALUE_SHAPES.search(value) is not None


class Redactor:
    """Blanks secrets in text: the values of secret-named environment variables (and any
    ``extra`` values such as an API key given in code), and anything shaped like a credential."""

    def __init__(self, environ: Mapping[str, str] | None = None,
                 extra: Iterable[str | None] = ()) -> None:
        env = os.environ if environ is None else environ
        values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= _MIN_SECRET}
        values |= {v for v in extra if v and len(v) >= _MIN_SECRET}
        ordered = sorted(values, key=len, reverse=True)  # longest first: no partial blanking
        alternatives = [*map(re.escape, ordered), _VALUE_SHAPES.pattern]
        self._pattern = re.compile("|".join(alternatives))

    def __call__(self, text: str) -> str:
        return self._pattern.sub("[redacted]", text)


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
