"""A session whose workflow task is failing (its worker hung or died mid-task, and the retry
has not yet run elsewhere) refuses updates with ``WorkflowNotReadyFailure``; the client sends
the update again until the task runs (the refused one was not delivered), and gives up with a
clear error if it never does. Any other refusal is the caller's at once."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.api.common.v1 import GrpcStatus
from temporalio.api.errordetails.v1 import MultiOperationExecutionFailure
from temporalio.service import RPCError, RPCStatusCode

from steerable.temporal import TemporalClient
from steerable.temporal import _client as client_module

_NOT_READY = "type.googleapis.com/temporal.api.errordetails.v1.WorkflowNotReadyFailure"


def _refusal(status: RPCStatusCode, detail: str, *, with_start: bool = False) -> RPCError:
    grpc = GrpcStatus(code=status.value, message="refused")
    if with_start:  # an update-with-start: the update's status inside the operations' failure
        failure = MultiOperationExecutionFailure()
        failure.statuses.add(code=status.value).details.add(type_url=detail)
        grpc.details.add(type_url="type.googleapis.com/temporal.api.errordetails.v1."
                         "MultiOperationExecutionFailure", value=failure.SerializeToString())
    else:
        grpc.details.add(type_url=detail)
    return RPCError("Unable to perform workflow execution update due to Workflow Task in "
                    "failed state.", status, grpc.SerializeToString())


class _Handle:
    def __init__(self, refusals: list[RPCError]) -> None:
        self.refusals = refusals
        self.calls: list[str] = []

    async def execute_update(self, name: str, args: list[Any]) -> Any:
        self.calls.append(name)
        if self.refusals:
            raise self.refusals.pop(0)
        return True


class _Client:
    def __init__(self, handle: _Handle) -> None:
        self.handle = handle

    def get_workflow_handle(self, workflow_id: str) -> _Handle:
        return self.handle


def _client(refusals: list[RPCError]) -> tuple[TemporalClient, _Handle]:
    handle = _Handle(refusals)
    return TemporalClient(_Client(handle)), handle  # type: ignore[arg-type]


async def test_an_update_refused_while_the_workflow_task_fails_is_sent_again() -> None:
    not_ready = _refusal(RPCStatusCode.FAILED_PRECONDITION, _NOT_READY)
    client, handle = _client([not_ready, not_ready])
    assert await client.interrupt_hard("s1") is True
    assert handle.calls == ["interrupt"] * 3


class _StartingClient(_Client):
    def __init__(self, refusals: list[RPCError]) -> None:
        super().__init__(_Handle([]))
        self.refusals = refusals
        self.sent = 0

    async def execute_update_with_start_workflow(self, name: str, **kwargs: Any) -> Any:
        self.sent += 1
        if self.refusals:
            raise self.refusals.pop(0)
        return {"message_id": "m1", "state": "started", "accepted": True, "action": "started"}


async def test_a_send_that_would_start_or_reach_a_failing_session_is_sent_again() -> None:
    not_ready = _refusal(RPCStatusCode.FAILED_PRECONDITION, _NOT_READY, with_start=True)
    fake = _StartingClient([not_ready])
    receipt = await TemporalClient(fake).send("go", "s1")  # type: ignore[arg-type]
    assert (fake.sent, receipt.message_id) == (2, "m1")


@pytest.mark.parametrize(("status", "detail"), [
    (RPCStatusCode.FAILED_PRECONDITION, "type.googleapis.com/some.OtherFailure"),
    (RPCStatusCode.INVALID_ARGUMENT, _NOT_READY),
])
async def test_any_other_refusal_reaches_the_caller_at_once(status: RPCStatusCode,
                                                            detail: str) -> None:
    client, handle = _client([_refusal(status, detail)])
    with pytest.raises(RPCError):
        await client.interrupt_hard("s1")
    assert handle.calls == ["interrupt"]


async def test_a_workflow_task_that_keeps_failing_is_given_up_on_with_a_clear_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "NOT_READY_WAIT", 0.5)
    not_ready = _refusal(RPCStatusCode.FAILED_PRECONDITION, _NOT_READY)
    client, handle = _client([not_ready] * 100)
    with pytest.raises(RuntimeError, match=r"session 's1': its workflow task has kept failing"):
        await client.interrupt_hard("s1")
    assert 2 <= len(handle.calls) < 100
