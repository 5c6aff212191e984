"""The request index every store that keeps checkpoints offers (``_parking.RequestIndex``):
each method's contract, the same on every store, exactly once where it says once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from steerable import InMemorySessionStore


@pytest.fixture(params=["memory", "jsonl", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        return InMemorySessionStore()
    if request.param == "jsonl":
        from steerable.storage import JSONLSessionStore

        return JSONLSessionStore(tmp_path)
    from steerable.storage import SQLiteSessionStore

    return SQLiteSessionStore(str(tmp_path / "s.db"))


def test_the_request_index_answers_once_and_forgets_what_was_used(store: Any) -> None:
    store.index_requests("s", ["r1", "r2"])
    store.index_requests("t", ["r3"])
    assert [store.request_session(r) for r in ("r1", "r2", "r3", "r4")] == ["s", "s", "t", None]
    assert sorted(store.waiting_requests()) == [("r1", "s"), ("r2", "s"), ("r3", "t")]
    assert store.answer_request("r1", {"value": True, "reason": "ok"}) is True
    assert store.answer_request("r1", {"value": False, "reason": "late"}) is False  # once
    assert store.request_answers(["r1", "r2", "r4"]) == {"r1": {"value": True, "reason": "ok"}}
    assert sorted(store.waiting_requests()) == [("r2", "s"), ("r3", "t")]
    store.close_requests(["r1", "r3"])
    assert (store.request_session("r1"), store.request_session("r3")) == (None, None)
    assert store.request_session("r2") == "s"
    assert store.waiting_requests() == [("r2", "s")]
    assert store.request_answers(["r1"]) == {"r1": {"value": True, "reason": "ok"}}  # a record
    assert store.claim_resume("cp.1") is True
    assert store.claim_resume("cp.1") is False and store.claim_resume("cp.2") is True
    if hasattr(store, "close"):
        store.close()
