"""Secrets are recognised by name, by shape and by value, and blanked everywhere."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import steerable._secrets as secrets_module
from steerable._secrets import Redactor, is_secret_name, known_secrets, remember_secret, scrub_env


@pytest.mark.parametrize("name", [
    "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "GITHUB_TOKEN", "GH_TOKEN",
    "GITLAB_TOKEN", "CI_JOB_TOKEN", "NPM_TOKEN", "HF_TOKEN", "AZURE_CLIENT_SECRET",
    "DOCKER_PASSWORD", "DATABASE_URL", "SENTRY_DSN", "GOOGLE_APPLICATION_CREDENTIALS",
    "SLACK_WEBHOOK_URL", "my_api_key",
])
def test_secret_names_are_scrubbed(name: str) -> None:
    env = scrub_env({name: "some-value-123456", "HOME": "/home/me", "PATH": "/bin"})
    assert name not in env and env == {"HOME": "/home/me", "PATH": "/bin"}


@pytest.mark.parametrize("value", [
    "sk-proj-abcdefghijklmnop1234", "sk-ant-api03-abcdefghijklmnopqrst",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "github_pat_11ABCDEFG0123456789_abcdefghij",
    "glpat-abcdefghij0123456789", "xoxb-1234567890-abcdefghij", "AKIAABCDEFGHIJKLMNOP",
    "AIzaSyA-abcdefghijklmnopqrstuvwxyz012345", "hf_abcdefghijklmnopqrstuvwxyzABCDEF",
    "https://user:hunter2@db.example.com/x", "-----BEGIN OPENSSH PRIVATE KEY-----",
])
def test_secret_shapes_are_scrubbed_under_any_name(value: str) -> None:
    assert scrub_env({"INNOCENT": value, "OTHER": "fine"}) == {"OTHER": "fine"}
    assert value not in Redactor({})(f"error: bad key {value} given")


def test_a_copy_of_a_hidden_value_is_scrubbed_by_value() -> None:
    env = {"MY_TOKEN": "plain-but-secret-value", "COPY": "plain-but-secret-value",
           "WITHIN": "x=plain-but-secret-value;y", "OK": "plain"}
    assert scrub_env(env) == {"OK": "plain"}


def test_redactor_blanks_values_longest_first() -> None:
    redact = Redactor({"A_TOKEN": "abcdefgh", "B_TOKEN": "abcdefghijkl", "HOME": "/root"},
                      extra=["given-in-code-key"])
    assert redact("abcdefghijkl abcdefgh given-in-code-key /root") == \
        "[redacted] [redacted] [redacted] /root"


# known_secrets() is asked before every model call and keeps its answer while nothing changed:
# whatever happens to the environment, the kept answer must be the one computed afresh.
_NAMES = st.sampled_from(["STEERABLE_T_API_KEY", "STEERABLE_T_TOKEN", "STEERABLE_T_PLAIN",
                          "STEERABLE_T_PASSWORD", "STEERABLE_T_OTHER"])
_VALUES = st.text(alphabet="abcdefghij0123456789-_", min_size=0, max_size=14)
_ACTIONS = st.lists(st.tuples(st.sampled_from(["set", "del", "remember", "ask"]), _NAMES, _VALUES),
                    max_size=25)


def _fresh() -> set[str]:
    return {v for k, v in os.environ.items() if len(v) >= 8 and is_secret_name(k)} | set(
        secrets_module._REMEMBERED)


@settings(max_examples=200, deadline=None)
@given(_ACTIONS)
def test_known_secrets_follows_every_change_of_the_environment(actions: list[tuple[str, str, str]]) -> None:
    saved = dict(os.environ)
    try:
        for action, name, value in actions:
            if action == "set":
                os.environ[name] = value
            elif action == "del":
                os.environ.pop(name, None)
            elif action == "remember":
                remember_secret("steerable-test-remembered-" + value)  # stays: the set only grows
            assert set(known_secrets()) == _fresh()
    finally:
        os.environ.clear()
        os.environ.update(saved)
