"""steerable: an agent loop you can watch, intercept, interrupt and steer while it runs.

The public names are loaded on first use, so ``import steerable`` (and ``steerable --help``)
costs almost nothing until the loop is actually used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from steerable._lazy import lazy_attributes

if TYPE_CHECKING:
    from steerable._config import (
        Limits,
        SummaryPolicy,
        Timeouts,
    )
    from steerable._core._agent import (
        Agent,
        BaseAgent,
    )
    from steerable._core._approval import (
        HumanApprover,
    )
    from steerable._core._bus import (
        Observer,
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
    from steerable._core._requests import (
        PendingRequest,
    )
    from steerable._core._session import (
        InMemorySessionStore,
        SessionInfo,
        SessionStore,
        TurnRecord,
    )
    from steerable._core._subturn import (
        SubturnHandle,
    )
    from steerable._core._turn import (
        TurnResult,
    )
    from steerable._core._turn_state import (
        QueuedMessage,
    )
    from steerable._events import (
        ApprovalRequested,
        ApprovalResolved,
        CompressReason,
        ContextCompress,
        ErrorEvent,
        ErrorSource,
        Event,
        EventKind,
        FollowUpQueued,
        InterruptMode,
        InterruptReceived,
        LLMDelta,
        LLMRequestEvent,
        LLMResponseEvent,
        LLMRetry,
        MessageStateEvent,
        PlanUpdated,
        QuestionAnswered,
        QuestionAsked,
        SessionSummarize,
        SkipReason,
        StateChanged,
        SteeringInjected,
        SubturnEnd,
        SubturnOrphan,
        SubturnResultDelivered,
        SubturnSpawn,
        ToolCallDelta,
        ToolExecEnd,
        ToolExecProgress,
        ToolExecSkipped,
        ToolExecStart,
        TurnEnd,
        TurnPhase,
        TurnStart,
        TurnStatus,
        event_to_dict,
    )
    from steerable._hooks import (
        CompressContext,
        Hook,
        HookAction,
        HookDecision,
        HookResult,
        LLMRequestContext,
        LLMResponseContext,
        ToolCallContext,
        ToolResultContext,
    )
    from steerable._messages import (
        Message,
        ToolCall,
        ToolResult,
        Usage,
    )
    from steerable._parts import (
        FilePart,
        ImagePart,
        TextPart,
    )
    from steerable._receipts import (
        MessageInfo,
        MessageReceipt,
        MessageState,
    )
    from steerable.drivers._composites import (
        LoopAgent,
        ParallelAgent,
        SequentialAgent,
    )
    from steerable.drivers._gateway import (
        InboundMessage,
        InProcessBus,
        OutboundReply,
    )
    from steerable.drivers._handle import (
        LoopStatistics,
        TurnHandle,
        TurnInfo,
    )
    from steerable.drivers._lanes import (
        BusyPolicy,
        QueuedTurn,
    )
    from steerable.drivers._loop import (
        AgentLoop,
    )
    from steerable.drivers._session_driver import (
        InterruptPress,
        SessionDriver,
    )
    from steerable.drivers._turnloop import (
        ExitState,
        PushAck,
        TurnInput,
        TurnLoop,
    )
    from steerable.errors import (
        SessionBusyError,
    )
    from steerable.providers import (
        FallbackProvider,
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
    "AgentLoop": "steerable.drivers._loop",
    "ApprovalRequested": "steerable._events",
    "ApprovalResolved": "steerable._events",
    "BaseAgent": "steerable._core._agent",
    "BaseTool": "steerable.tools",
    "BusyPolicy": "steerable.drivers._lanes",
    "CancelHandle": "steerable._core._cancel",
    "CancelMode": "steerable._core._cancel",
    "Checkpoint": "steerable._core._checkpoint",
    "CompressContext": "steerable._hooks",
    "CompressReason": "steerable._events",
    "ContextCompress": "steerable._events",
    "ErrorEvent": "steerable._events",
    "PlanUpdated": "steerable._events",
    "PendingRequest": "steerable._core._requests",
    "QuestionAnswered": "steerable._events",
    "QuestionAsked": "steerable._events",
    "ErrorSource": "steerable._events",
    "Event": "steerable._events",
    "ExitState": "steerable.drivers._turnloop",
    "EventKind": "steerable._events",
    "FallbackProvider": "steerable.providers",
    "FilePart": "steerable._parts",
    "FollowUpQueued": "steerable._events",
    "FunctionTool": "steerable.tools",
    "Hook": "steerable._hooks",
    "HookAction": "steerable._hooks",
    "HookDecision": "steerable._hooks",
    "HookResult": "steerable._hooks",
    "HumanApprover": "steerable._core._approval",
    "ImagePart": "steerable._parts",
    "InMemorySessionStore": "steerable._core._session",
    "InProcessBus": "steerable.drivers._gateway",
    "InboundMessage": "steerable.drivers._gateway",
    "InterruptMode": "steerable._events",
    "InterruptPress": "steerable.drivers._session_driver",
    "InterruptReceived": "steerable._events",
    "LLMDelta": "steerable._events",
    "LLMRequest": "steerable.providers",
    "LLMRequestContext": "steerable._hooks",
    "LLMRequestEvent": "steerable._events",
    "LLMResponse": "steerable.providers",
    "LLMResponseContext": "steerable._hooks",
    "LLMResponseEvent": "steerable._events",
    "LLMRetry": "steerable._events",
    "Limits": "steerable._config",
    "LoopAgent": "steerable.drivers._composites",
    "LoopStatistics": "steerable.drivers._handle",
    "Message": "steerable._messages",
    "MessageInfo": "steerable._receipts",
    "MessageReceipt": "steerable._receipts",
    "MessageState": "steerable._receipts",
    "MessageStateEvent": "steerable._events",
    "Observer": "steerable._core._bus",
    "OutboundReply": "steerable.drivers._gateway",
    "ParallelAgent": "steerable.drivers._composites",
    "Permission": "steerable._core._permissions",
    "PermissionRule": "steerable._core._permissions",
    "Permissions": "steerable._core._permissions",
    "Provider": "steerable.providers",
    "PushAck": "steerable.drivers._turnloop",
    "QueuedMessage": "steerable._core._turn_state",
    "QueuedTurn": "steerable.drivers._lanes",
    "Reply": "steerable.providers",
    "ScriptedProvider": "steerable.providers",
    "SequentialAgent": "steerable.drivers._composites",
    "SessionBusyError": "steerable.errors",
    "SessionDriver": "steerable.drivers._session_driver",
    "SessionInfo": "steerable._core._session",
    "SessionStore": "steerable._core._session",
    "SessionSummarize": "steerable._events",
    "SkipReason": "steerable._events",
    "StateChanged": "steerable._events",
    "SteeringInjected": "steerable._events",
    "Subscription": "steerable._core._bus",
    "SubturnEnd": "steerable._events",
    "SubturnHandle": "steerable._core._subturn",
    "SubturnOrphan": "steerable._events",
    "SubturnResultDelivered": "steerable._events",
    "SubturnSpawn": "steerable._events",
    "SummaryPolicy": "steerable._config",
    "TextPart": "steerable._parts",
    "Timeouts": "steerable._config",
    "Tool": "steerable.tools",
    "ToolCall": "steerable._messages",
    "ToolCallContext": "steerable._hooks",
    "ToolCallDelta": "steerable._events",
    "ToolContext": "steerable.tools",
    "ToolExecEnd": "steerable._events",
    "ToolExecProgress": "steerable._events",
    "ToolExecSkipped": "steerable._events",
    "ToolExecStart": "steerable._events",
    "ToolResult": "steerable._messages",
    "ToolResultContext": "steerable._hooks",
    "TurnEnd": "steerable._events",
    "TurnHandle": "steerable.drivers._handle",
    "TurnInfo": "steerable.drivers._handle",
    "TurnInput": "steerable.drivers._turnloop",
    "TurnLoop": "steerable.drivers._turnloop",
    "TurnPhase": "steerable._events",
    "TurnRecord": "steerable._core._session",
    "TurnResult": "steerable._core._turn",
    "TurnStart": "steerable._events",
    "TurnStatus": "steerable._events",
    "Usage": "steerable._messages",
    "event_to_dict": "steerable._events",
    "tool": "steerable.tools",
}

__all__ = [
    "Agent",
    "AgentLoop",
    "ApprovalRequested",
    "ApprovalResolved",
    "BaseAgent",
    "BaseTool",
    "BusyPolicy",
    "CancelHandle",
    "CancelMode",
    "Checkpoint",
    "CompressContext",
    "CompressReason",
    "ContextCompress",
    "ErrorEvent",
    "ErrorSource",
    "Event",
    "EventKind",
    "ExitState",
    "FallbackProvider",
    "FilePart",
    "FollowUpQueued",
    "FunctionTool",
    "Hook",
    "HookAction",
    "HookDecision",
    "HookResult",
    "HumanApprover",
    "ImagePart",
    "InMemorySessionStore",
    "InProcessBus",
    "InboundMessage",
    "InterruptMode",
    "InterruptPress",
    "InterruptReceived",
    "LLMDelta",
    "LLMRequest",
    "LLMRequestContext",
    "LLMRequestEvent",
    "LLMResponse",
    "LLMResponseContext",
    "LLMResponseEvent",
    "LLMRetry",
    "Limits",
    "LoopAgent",
    "LoopStatistics",
    "Message",
    "MessageInfo",
    "MessageReceipt",
    "MessageState",
    "MessageStateEvent",
    "Observer",
    "OutboundReply",
    "ParallelAgent",
    "PendingRequest",
    "Permission",
    "PermissionRule",
    "Permissions",
    "PlanUpdated",
    "Provider",
    "PushAck",
    "QuestionAnswered",
    "QuestionAsked",
    "QueuedMessage",
    "QueuedTurn",
    "Reply",
    "ScriptedProvider",
    "SequentialAgent",
    "SessionBusyError",
    "SessionDriver",
    "SessionInfo",
    "SessionStore",
    "SessionSummarize",
    "SkipReason",
    "StateChanged",
    "SteeringInjected",
    "Subscription",
    "SubturnEnd",
    "SubturnHandle",
    "SubturnOrphan",
    "SubturnResultDelivered",
    "SubturnSpawn",
    "SummaryPolicy",
    "TextPart",
    "Timeouts",
    "Tool",
    "ToolCall",
    "ToolCallContext",
    "ToolCallDelta",
    "ToolContext",
    "ToolExecEnd",
    "ToolExecProgress",
    "ToolExecSkipped",
    "ToolExecStart",
    "ToolResult",
    "ToolResultContext",
    "TurnEnd",
    "TurnHandle",
    "TurnInfo",
    "TurnInput",
    "TurnLoop",
    "TurnPhase",
    "TurnRecord",
    "TurnResult",
    "TurnStart",
    "TurnStatus",
    "Usage",
    "__version__",
    "event_to_dict",
    "tool",
]


__getattr__ = lazy_attributes(__name__, _WHERE, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
