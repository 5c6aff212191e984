"""steerable: an agent loop you can watch, intercept, interrupt and steer while it runs.

The public names are loaded on first use, so ``import steerable`` (and ``steerable --help``)
costs almost nothing until the loop is actually used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from steerable._config import (
        Limits,
        SummaryPolicy,
        Timeouts,
    )
    from steerable._core._agent import (
        Agent,
    )
    from steerable._core._approval import (
        HumanApprover,
    )
    from steerable._core._bus import (
        Subscription,
    )
    from steerable._core._cancel import (
        CancelHandle,
        CancelMode,
    )
    from steerable._core._checkpoint import (
        Checkpoint,
    )
    from steerable._core._permissions import (
        Permission,
        PermissionRule,
        Permissions,
    )
    from steerable._core._session import (
        InMemorySessionStore,
        SessionInfo,
        SessionStore,
        TurnRecord,
    )
    from steerable._core._turn import (
        TurnResult,
    )
    from steerable._core._turn_state import (
        QueuedMessage,
    )
    from steerable._events import (
        Event,
        EventKind,
        TurnPhase,
        TurnStatus,
        event_to_dict,
    )
    from steerable._hooks import (
        CompressContext,
        HookAction,
        HookDecision,
        LLMRequestContext,
        LLMResponseContext,
        ToolCallContext,
        ToolResultContext,
    )
    from steerable._loop import (
        AgentLoop,
        LoopStatistics,
        TurnHandle,
        TurnInfo,
    )
    from steerable._messages import (
        Message,
        ToolCall,
        ToolResult,
        Usage,
    )
    from steerable.providers import (
        LLMRequest,
        LLMResponse,
        Provider,
        Reply,
        ScriptedProvider,
    )
    from steerable.tools import (
        BaseTool,
        FunctionTool,
        Tool,
        ToolContext,
        tool,
    )

__version__ = "0.1.0"

_WHERE: dict[str, str] = {
    "Agent": "steerable._core._agent",
    "AgentLoop": "steerable._loop",
    "BaseTool": "steerable.tools",
    "CancelHandle": "steerable._core._cancel",
    "CancelMode": "steerable._core._cancel",
    "Checkpoint": "steerable._core._checkpoint",
    "CompressContext": "steerable._hooks",
    "Event": "steerable._events",
    "EventKind": "steerable._events",
    "FunctionTool": "steerable.tools",
    "HookAction": "steerable._hooks",
    "HookDecision": "steerable._hooks",
    "HumanApprover": "steerable._core._approval",
    "InMemorySessionStore": "steerable._core._session",
    "LLMRequest": "steerable.providers",
    "LLMRequestContext": "steerable._hooks",
    "LLMResponse": "steerable.providers",
    "LLMResponseContext": "steerable._hooks",
    "Limits": "steerable._config",
    "LoopStatistics": "steerable._loop",
    "Message": "steerable._messages",
    "Permission": "steerable._core._permissions",
    "PermissionRule": "steerable._core._permissions",
    "Permissions": "steerable._core._permissions",
    "Provider": "steerable.providers",
    "QueuedMessage": "steerable._core._turn_state",
    "Reply": "steerable.providers",
    "ScriptedProvider": "steerable.providers",
    "SessionInfo": "steerable._core._session",
    "SessionStore": "steerable._core._session",
    "Subscription": "steerable._core._bus",
    "SummaryPolicy": "steerable._config",
    "Timeouts": "steerable._config",
    "Tool": "steerable.tools",
    "ToolCall": "steerable._messages",
    "ToolCallContext": "steerable._hooks",
    "ToolContext": "steerable.tools",
    "ToolResult": "steerable._messages",
    "ToolResultContext": "steerable._hooks",
    "TurnHandle": "steerable._loop",
    "TurnInfo": "steerable._loop",
    "TurnPhase": "steerable._events",
    "TurnRecord": "steerable._core._session",
    "TurnResult": "steerable._core._turn",
    "TurnStatus": "steerable._events",
    "Usage": "steerable._messages",
    "event_to_dict": "steerable._events",
    "tool": "steerable.tools",
}

__all__ = [
    "Agent",
    "AgentLoop",
    "BaseTool",
    "CancelHandle",
    "CancelMode",
    "Checkpoint",
    "CompressContext",
    "Event",
    "EventKind",
    "FunctionTool",
    "HookAction",
    "HookDecision",
    "HumanApprover",
    "InMemorySessionStore",
    "LLMRequest",
    "LLMRequestContext",
    "LLMResponse",
    "LLMResponseContext",
    "Limits",
    "LoopStatistics",
    "Message",
    "Permission",
    "PermissionRule",
    "Permissions",
    "Provider",
    "QueuedMessage",
    "Reply",
    "ScriptedProvider",
    "SessionInfo",
    "SessionStore",
    "Subscription",
    "SummaryPolicy",
    "Timeouts",
    "Tool",
    "ToolCall",
    "ToolCallContext",
    "ToolContext",
    "ToolResult",
    "ToolResultContext",
    "TurnHandle",
    "TurnInfo",
    "TurnPhase",
    "TurnRecord",
    "TurnResult",
    "TurnStatus",
    "Usage",
    "__version__",
    "event_to_dict",
    "tool",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'steerable' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is an ordinary attribute lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
