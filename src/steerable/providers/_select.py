"""Choosing a provider from flags and the environment (the CLI's and the server's rule).

With no explicit name: an OpenAI key or base URL selects ``openai``, an Anthropic key
``anthropic``, otherwise ``local`` (the embedded model). ``scripted`` plays a JSON script file
and exists for tests and demos. Provider modules are imported only when chosen, so their
optional dependencies are needed only by those who use them.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Mapping
from typing import Any

from steerable._messages import Usage
from steerable.errors import ConfigurationError
from steerable.providers._base import Provider
from steerable.providers.scripted import Reply, ScriptedProvider

__all__ = ["PROVIDER_NAMES", "choose_provider_name", "load_script", "select_provider"]

PROVIDER_NAMES = ("openai", "anthropic", "local", "scripted")

# name -> (module, class, pip extra that brings its dependencies)
_MODULES = {
    "openai": ("steerable.providers.openai", "OpenAIProvider", "openai"),
    "anthropic": ("steerable.providers.anthropic", "AnthropicProvider", "anthropic"),
    "local": ("steerable.providers.local", "LocalModelProvider", "local"),
}


def choose_provider_name(name: str | None, environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    if name is not None:
        if name not in PROVIDER_NAMES:
            raise ConfigurationError(
                f"unknown provider {name!r}; choose one of {', '.join(PROVIDER_NAMES)}"
            )
        return name
    if env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"):
        return "openai"
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    return "local"


def load_script(path: str | os.PathLike[str]) -> ScriptedProvider:
    """A ScriptedProvider from a JSON file: a list of {"text", "tool_calls": [[name, args]]}
    (and optionally "usage": [input, output, cached] tokens the step reports)."""
    from pathlib import Path  # here: the core's import does without pathlib

    p = Path(path)
    try:
        steps = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"cannot read script {p}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"script {p} is not valid JSON: {exc}") from None
    if not isinstance(steps, list):
        raise ConfigurationError(f"script {p} must hold a JSON list of replies")
    replies = []
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            raise ConfigurationError(f"script {p}: step {i} must be an object")
        try:
            replies.append(Reply(
                text=step.get("text", ""),
                tool_calls=[(str(c[0]), c[1]) for c in step.get("tool_calls", [])],
                delay=step.get("delay", 0.0),
                thinking=step.get("thinking", ""),
                usage=None if step.get("usage") is None else Usage(*step["usage"]),
                argument_pieces=step.get("argument_pieces", 0),
                piece_delay=step.get("piece_delay", 0.0),
            ))
        except (TypeError, ValueError, IndexError) as exc:
            raise ConfigurationError(f"script {p}: step {i}: {exc}") from None
    return ScriptedProvider(replies)


def select_provider(
    name: str | None = None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    script: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    **options: Any,
) -> Provider:
    """Build the provider the user asked for (or the default one), with a clear error if its
    optional dependencies are missing."""
    chosen = choose_provider_name(name, environ)
    if chosen == "scripted":
        if script is None:
            raise ConfigurationError("the scripted provider needs a script file (--script FILE)")
        return load_script(script)
    module_name, class_name, extra = _MODULES[chosen]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigurationError(
            f"the {chosen} provider needs extra packages ({exc.name} is missing): "
            f"pip install 'steerable[{extra}]'"
        ) from None
    cls = getattr(module, class_name)
    kwargs: dict[str, Any] = dict(options)
    if model is not None:
        kwargs["model"] = model
    if base_url is not None:
        kwargs["base_url"] = base_url
    if chosen == "openai" and "profile" not in kwargs:
        kwargs["profile"] = _openai_profile(kwargs, environ)
    provider: Provider = cls(**kwargs)
    return provider


def _openai_profile(kwargs: Mapping[str, Any], environ: Mapping[str, str] | None) -> Any:
    """The profile for an OpenAI-compatible server: by the model's name when it picks one,
    else by what the server says it runs (llama.cpp's server, vLLM...)."""
    from steerable.providers.openai import DEFAULT_BASE_URL, ask_server_profile
    from steerable.providers.profiles import DEFAULT_PROFILE, profile_for

    env = os.environ if environ is None else environ
    by_name = profile_for(kwargs.get("model") or env.get("OPENAI_MODEL"))
    base_url = kwargs.get("base_url") or env.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    if by_name is not DEFAULT_PROFILE or base_url == DEFAULT_BASE_URL:
        return None
    return ask_server_profile(base_url, kwargs.get("api_key") or env.get("OPENAI_API_KEY"))
