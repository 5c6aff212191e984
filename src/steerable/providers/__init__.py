"""LLM providers behind one narrow seam (see ``steerable.providers._base``).

``FallbackProvider``, the provider selection (``select_provider``...) and the HTTP providers'
settings (``RetryPolicy``, ``ProviderTimeouts``) are loaded on first use: a loop with a
provider of its own needs none of them, and every turn imports this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from steerable._lazy import lazy_attributes
from steerable.providers._base import (
    Chunk,
    LLMRequest,
    LLMResponse,
    Provider,
    RetryNotice,
    StreamEnd,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    ToolCallChunk,
    ToolSpec,
)
from steerable.providers.scripted import Reply, ScriptedProvider, ScriptStep

__all__ = [
    "PROVIDER_NAMES",
    "Chunk",
    "FallbackProvider",
    "LLMRequest",
    "LLMResponse",
    "Provider",
    "ProviderTimeouts",
    "Reply",
    "RetryNotice",
    "RetryPolicy",
    "ScriptStep",
    "ScriptedProvider",
    "StreamEnd",
    "TextDelta",
    "ThinkingDelta",
    "ToolArgsDelta",
    "ToolCallChunk",
    "ToolSpec",
    "choose_provider_name",
    "load_script",
    "select_provider",
]

if TYPE_CHECKING:
    from steerable.providers._fallback import FallbackProvider
    from steerable.providers._retry import RetryPolicy
    from steerable.providers._select import (
        PROVIDER_NAMES,
        choose_provider_name,
        load_script,
        select_provider,
    )
    from steerable.providers._timeouts import ProviderTimeouts

_LAZY = {"FallbackProvider": "steerable.providers._fallback",
         "PROVIDER_NAMES": "steerable.providers._select",
         "ProviderTimeouts": "steerable.providers._timeouts",
         "RetryPolicy": "steerable.providers._retry",
         "choose_provider_name": "steerable.providers._select",
         "load_script": "steerable.providers._select",
         "select_provider": "steerable.providers._select"}


__getattr__ = lazy_attributes(__name__, _LAZY, globals())
