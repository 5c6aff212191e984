"""steerable on Temporal (``pip install 'steerable[temporal]'``): a session is a workflow, each
LLM call and each tool call an activity; steering, interrupts, cancel modes, busy policies and
approvals keep their local meaning. See docs/guides/temporal.md."""

from steerable.temporal._client import Receipt, TemporalClient, TurnOutcome, workflow_id
from steerable.temporal._eventlog import EventLog
from steerable.temporal._hooks import WorkerHook, workflow_read
from steerable.temporal._proxies import CallOptions
from steerable.temporal._worker import DEFAULT_TASK_QUEUE, TemporalWorker

__all__ = ["DEFAULT_TASK_QUEUE", "CallOptions", "EventLog", "Receipt", "TemporalClient",
           "TemporalWorker", "TurnOutcome", "WorkerHook", "workflow_id", "workflow_read"]
