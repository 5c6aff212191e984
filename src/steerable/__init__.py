"""steerable: an agent loop you can watch, intercept, interrupt and steer while it runs."""

from steerable._config import Limits, SummaryPolicy, Timeouts
from steerable._core._agent import Agent
from steerable._core._approval import HumanApprover
from steerable._core._bus import Subscription
from steerable._core._permissions import Permission, PermissionRule, Permissions
from steerable._core._session import InMemorySessionStore, SessionInfo, SessionStore, TurnRecord
from steerable._core._turn import TurnResult
from steerable._core._turn_state import QueuedMessage
from steerable._events import Event, EventKind, TurnPhase, TurnStatus, event_to_dict
from steerable._hooks import (
    CompressContext,
    HookAction,
    HookDecision,
    LLMRequestContext,
    LLMResponseContext,
    ToolCallContext,
    ToolResultContext,
)
from steerable._loop import AgentLoop, LoopStatistics, TurnHandle, TurnInfo
from steerable._messages import Message, ToolCall, ToolResult, Usage
from steerable.providers import LLMRequest, LLMResponse, Provider, Reply, ScriptedProvider
from steerable.tools import BaseTool, FunctionTool, Tool, ToolContext, tool

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentLoop",
    "BaseTool",
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
