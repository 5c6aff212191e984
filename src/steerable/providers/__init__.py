"""LLM providers behind one narrow seam (see ``steerable.providers._base``)."""

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
from steerable.providers._fallback import FallbackProvider
from steerable.providers._retry import RetryPolicy
from steerable.providers._select import (
    PROVIDER_NAMES,
    choose_provider_name,
    load_script,
    select_provider,
)
from steerable.providers._timeouts import ProviderTimeouts
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
