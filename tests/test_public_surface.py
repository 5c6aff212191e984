"""The whole public surface, pinned: every exported name, every event's fields, every enum.

A name added or removed, an event field renamed or reordered, fails here first, so changes to
the API are deliberate (update the lists in the same commit). A type checker must also narrow
an ``Event`` by ``event.kind is EventKind.X``: checked by running mypy on a small program.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import textwrap
from pathlib import Path

import pytest

import steerable
from steerable import EventKind, HookAction, HookDecision, TurnPhase, TurnStatus
from steerable._events import EVENT_CLASSES
from steerable._hooks import HOOK_POINTS

EXPORTS: dict[str, list[str]] = {
    "steerable": [
        "Agent", "AgentLoop", "ApprovalRequested", "ApprovalResolved", "BaseAgent", "BaseTool",
        "BusyPolicy", "CancelHandle", "CancelMode", "Checkpoint", "CompressContext",
        "CompressReason", "ContextCompress", "ErrorEvent", "ErrorSource", "Event", "EventKind",
        "ExitState", "FallbackProvider", "FilePart", "ImagePart", "TextPart", "FollowUpQueued", "FunctionTool", "Hook", "HookAction", "HookDecision",
        "HookResult", "HumanApprover", "InMemorySessionStore", "InProcessBus", "InboundMessage",
        "InterruptMode", "InterruptPress", "InterruptReceived", "LLMDelta", "LLMRequest",
        "LLMRequestContext", "LLMRequestEvent", "LLMResponse", "LLMResponseContext",
        "LLMResponseEvent", "LLMRetry", "Limits", "LoopAgent", "LoopStatistics", "Message",
        "MessageInfo", "MessageReceipt", "MessageState", "MessageStateEvent", "Observer", "OutboundReply", "ParallelAgent", "PendingRequest", "Permission", "PermissionRule", "Permissions", "PlanUpdated",
        "Provider", "PushAck", "QuestionAnswered", "QuestionAsked", "QueuedMessage", "QueuedTurn", "Reply", "ScriptedProvider",
        "SequentialAgent", "SessionBusyError", "SessionDriver", "SessionInfo", "SessionStore",
        "SessionSummarize", "SkipReason", "StateChanged", "SteeringInjected", "Subscription",
        "SubturnEnd", "SubturnHandle", "SubturnOrphan", "SubturnResultDelivered", "SubturnSpawn",
        "SummaryPolicy", "Timeouts", "Tool", "ToolCall", "ToolCallContext", "ToolCallDelta", "ToolContext",
        "ToolExecEnd", "ToolExecProgress", "ToolExecSkipped", "ToolExecStart", "ToolResult",
        "ToolResultContext", "TurnEnd", "TurnHandle", "TurnInfo", "TurnInput", "TurnLoop",
        "TurnPhase", "TurnRecord", "TurnResult", "TurnStart", "TurnStatus", "Usage", "__version__",
        "event_to_dict", "tool",
    ],
    "steerable.providers": [
        "PROVIDER_NAMES", "Chunk", "FallbackProvider", "LLMRequest", "LLMResponse", "Provider", "ProviderTimeouts",
        "Reply", "RetryNotice", "RetryPolicy", "ScriptStep", "ScriptedProvider", "StreamEnd",
        "TextDelta", "ThinkingDelta", "ToolArgsDelta", "ToolCallChunk", "ToolSpec", "choose_provider_name",
        "load_script", "select_provider",
    ],
    "steerable.tools": [
        "BaseTool", "CarriedState", "FunctionTool", "Tool", "ToolContext", "UncoveredSubject", "result_from_return",
        "tool",
    ],
    "steerable.storage": [
        "CHECKPOINT_VERSION", "Checkpoint", "CheckpointError", "CheckpointStore",
        "JSONLSessionStore", "LeaseLostError", "MissingBlobError", "RedisSessionStore", "RedisStoreError",
        "RedisUnavailableError", "SQLiteSessionStore", "SQLiteStoreError", "SessionFileError",
        "checkpoint_from_record", "checkpoint_to_record", "default_data_dir",
    ],
    "steerable.coding": [
        "BackgroundShells", "CommandHookSpec", "CommandHooks", "ConventionFile", "Conventions", "HookConsent",
        "HookSet", "NothingToUndoError", "PLAN_STATUSES", "SNAPSHOT_HOOK_PRIORITY", "SNAPSHOT_HOOK_TIMEOUT", "Sandbox",
        "SandboxLimits", "Shell", "ShellNotice", "Skill", "SlashCommand", "SnapshotHook", "SnapshotLimits", "SnapshotStoreError", "Snapshots", "StepInfo",
        "UndoConflictError", "UndoResult", "Workspace", "coding_tools", "expand_command",
        "find_commands", "find_skills", "make_ask_user_tool", "make_bash_tool",
        "make_edit_tool", "make_find_tool", "make_grep_tool", "make_ls_tool", "make_read_tool", "make_skill_tool", "make_todo_tool",
        "load_conventions", "load_hook_settings", "make_write_tool", "remove_session_snapshots", "skills_prompt",
    ],
    "steerable.errors": [
        "CheckpointError", "ConfigurationError", "ContextOverflowError", "FatalProviderError",
        "IllegalTransitionError", "InvalidAnswerError", "OutputValidationError", "ProviderError",
        "RequestClosedError", "RequestError", "RetryableProviderError",
        "ScriptExhaustedError", "SessionBusyError", "SteerableError", "SubturnError",
        "SubturnLimitError", "ToolArgumentsError", "ToolError", "UnknownRequestError",
    ],
    "steerable.temporal": [
        "DEFAULT_TASK_QUEUE", "CallOptions", "EventLog", "Receipt", "TemporalClient",
        "TemporalWorker", "TurnOutcome", "WorkerHook", "workflow_id", "workflow_read",
    ],
}  # fmt: skip

COMMON_FIELDS = ("turn_id", "parent_turn_id", "session_id", "seq", "time")

# Each event class, by kind: its name and its own fields in order (after the common ones).
EVENT_FIELDS: dict[EventKind, tuple[str, tuple[str, ...]]] = {
    EventKind.TURN_START: ("TurnStart", ("input", "agent", "resumed_from")),
    EventKind.TURN_END: ("TurnEnd", (
        "status", "text", "iterations", "error", "duration", "usage", "cancel_mode")),
    EventKind.STATE_CHANGED: ("StateChanged", ("old", "new")),
    EventKind.LLM_REQUEST: ("LLMRequestEvent", ("iteration", "model", "message_count", "tools",
                                                "tool_choice", "may_call", "reason", "purpose")),
    EventKind.LLM_DELTA: ("LLMDelta", ("iteration", "text", "thinking")),
    EventKind.LLM_RESPONSE: ("LLMResponseEvent", (
        "iteration", "text", "tool_calls", "usage", "finish_reason", "duration", "purpose")),
    EventKind.LLM_RETRY: ("LLMRetry", ("iteration", "attempt", "reason", "delay")),
    EventKind.TOOL_CALL_DELTA: ("ToolCallDelta", ("iteration", "call_index", "tool_name",
                                                  "arguments_delta")),
    EventKind.TOOL_EXEC_START: ("ToolExecStart", ("iteration", "call_id", "tool_name", "arguments")),
    EventKind.TOOL_EXEC_PROGRESS: ("ToolExecProgress", ("call_id", "tool_name", "text", "data")),
    EventKind.TOOL_EXEC_END: ("ToolExecEnd", (
        "call_id", "tool_name", "is_error", "content", "duration")),
    EventKind.TOOL_EXEC_SKIPPED: ("ToolExecSkipped", ("call_id", "tool_name", "reason", "detail")),
    EventKind.APPROVAL_REQUESTED: ("ApprovalRequested", (
        "request_id", "call_id", "tool_name", "arguments")),
    EventKind.APPROVAL_RESOLVED: ("ApprovalResolved", (
        "request_id", "call_id", "tool_name", "approved", "reason")),
    EventKind.STEERING_INJECTED: ("SteeringInjected", ("text",)),
    EventKind.FOLLOW_UP_QUEUED: ("FollowUpQueued", ("text",)),
    EventKind.INTERRUPT_RECEIVED: ("InterruptReceived", ("mode", "hint")),
    EventKind.CONTEXT_COMPRESS: ("ContextCompress", (
        "reason", "messages_before", "messages_after", "tokens_before", "tokens_after")),
    EventKind.SESSION_SUMMARIZE: ("SessionSummarize", ("messages_summarized", "summary")),
    EventKind.SUBTURN_SPAWN: ("SubturnSpawn", ("child_turn_id", "agent", "is_async")),
    EventKind.SUBTURN_END: ("SubturnEnd", ("child_turn_id", "status", "text")),
    EventKind.SUBTURN_RESULT_DELIVERED: ("SubturnResultDelivered", ("child_turn_id", "text")),
    EventKind.SUBTURN_ORPHAN: ("SubturnOrphan", ("child_turn_id", "text")),
    EventKind.PLAN_UPDATED: ("PlanUpdated", ("call_id", "items")),
    EventKind.QUESTION_ASKED: ("QuestionAsked", (
        "request_id", "call_id", "tool_name", "question", "choices", "schema")),
    EventKind.QUESTION_ANSWERED: ("QuestionAnswered", (
        "request_id", "call_id", "tool_name", "value", "outcome")),
    EventKind.ERROR: ("ErrorEvent", ("message", "source")),
    EventKind.MESSAGE_STATE: ("MessageStateEvent", (
        "message_id", "state", "detail", "message_kind", "text", "origin_id", "request_seq")),
}  # fmt: skip


@pytest.mark.parametrize("module", sorted(EXPORTS))
def test_exports_are_exactly_these(module: str) -> None:
    mod = importlib.import_module(module)
    assert sorted(mod.__all__) == sorted(EXPORTS[module])
    for name in mod.__all__:
        assert getattr(mod, name) is not None, f"{module}.{name}"


def test_every_kind_has_one_exported_event_class_with_these_fields() -> None:
    assert set(EVENT_CLASSES) == set(EventKind) == set(EVENT_FIELDS)
    for kind, (name, fields) in EVENT_FIELDS.items():
        cls = getattr(steerable, name)
        assert EVENT_CLASSES[kind] is cls and cls.kind is kind
        assert tuple(f.name for f in dataclasses.fields(cls)) == COMMON_FIELDS + fields, name
        assert cls.__dataclass_params__.frozen and "__slots__" in vars(cls), name
        with pytest.raises(TypeError):  # keyword-only: no positional construction
            cls("t", None, "s", 1, 0.0)


def test_enums_are_exactly_these() -> None:
    assert [k.name for k in EventKind] == [
        "TURN_START", "TURN_END", "STATE_CHANGED", "LLM_REQUEST", "LLM_DELTA", "LLM_RESPONSE",
        "LLM_RETRY", "TOOL_CALL_DELTA", "TOOL_EXEC_START", "TOOL_EXEC_PROGRESS", "TOOL_EXEC_END",
        "TOOL_EXEC_SKIPPED", "APPROVAL_REQUESTED", "APPROVAL_RESOLVED", "STEERING_INJECTED",
        "FOLLOW_UP_QUEUED", "INTERRUPT_RECEIVED", "CONTEXT_COMPRESS", "SESSION_SUMMARIZE",
        "SUBTURN_SPAWN", "SUBTURN_END", "SUBTURN_RESULT_DELIVERED", "SUBTURN_ORPHAN", "ERROR",
        "MESSAGE_STATE",
        "PLAN_UPDATED", "QUESTION_ASKED", "QUESTION_ANSWERED",
    ]  # fmt: skip
    assert all(k.value == k.name.lower() for k in EventKind)
    assert [s.name for s in TurnStatus] == [
        "COMPLETED", "INTERRUPTED", "ABORTED", "ERROR", "MAX_ITERATIONS", "CANCELLED",
        "BUDGET_EXCEEDED", "WAITING"]
    assert [p.name for p in TurnPhase] == [
        "IDLE", "THINKING", "EXECUTING", "COMPACTING", "ABORTING", "DONE", "ERROR"]
    assert [a.name for a in HookAction] == [
        "CONTINUE", "MODIFY", "DENY_TOOL", "RESPOND", "ABORT_TURN", "HARD_ABORT"]


def test_literal_fields_are_exactly_these() -> None:
    from typing import get_args

    assert get_args(steerable.SkipReason) == (
        "interrupted", "steering", "denied", "aborted", "max_iterations", "cancelled", "budget")
    assert get_args(steerable.InterruptMode) == (
        "graceful", "hard", "abort_turn", "cancel_after_model", "cancel_after_tools", "budget")
    assert get_args(steerable.CompressReason) == ("overflow", "estimate")
    assert get_args(steerable.ErrorSource) == (
        "checkpoint", "hook", "observer", "queue", "store", "summarize", "turn")


def test_hooks_surface() -> None:
    assert HOOK_POINTS == ("on_event", "before_llm", "after_llm", "before_tool", "approve_tool",
                           "after_tool", "before_compress")
    assert [f.name for f in dataclasses.fields(HookDecision)] == [
        "action", "messages", "model", "tools", "params", "tool_choice", "text", "tool_calls",
        "arguments", "result", "is_error", "reason"]


NARROWING = """
    from typing import assert_type
    from steerable import (Event, EventKind, ErrorEvent, ErrorSource, SkipReason, ToolExecSkipped,
                           TurnEnd, TurnStatus)

    def check(event: Event) -> None:
        if event.kind is EventKind.TOOL_EXEC_SKIPPED:
            assert_type(event, ToolExecSkipped)
            assert_type(event.reason, SkipReason)
        elif event.kind is EventKind.ERROR:
            assert_type(event, ErrorEvent)
            assert_type(event.source, ErrorSource)
        match event.kind:
            case EventKind.TURN_END:
                assert_type(event, TurnEnd)
                assert_type(event.status, TurnStatus)
            case _:
                pass
"""


def test_a_type_checker_narrows_events_by_kind(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api", reason="mypy is in the dev extra")
    program = tmp_path / "narrow.py"
    program.write_text(textwrap.dedent(NARROWING))
    root = Path(__file__).resolve().parents[1]
    # The project's own cache (CI runs mypy on src first) keeps this to a second or two.
    out, err, status = api.run([
        "--strict", "--no-error-summary", "--cache-dir", str(root / ".mypy_cache"),
        "--python-executable", sys.executable, str(program),
    ])
    assert status == 0, out + err
