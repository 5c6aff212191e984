"""Secrets are recognised by name, by shape and by value, and blanked everywhere."""

from __future__ import annotations

import pytest

from steerable._secrets import Redactor, scrub_env


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
