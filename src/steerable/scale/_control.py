"""The commands other processes send to this worker: the answers one process would give.

A command names a session this worker holds (or an approval it raised). Messages follow the
session's busy policy: ``steer`` joins the running turn, ``follow_up`` queues behind it,
``interrupt`` / ``rollback`` stop it gracefully / hard and run the message next, ``reject``
refuses. Queued messages go to the session's queue in Redis, never to memory, so a worker that
dies afterwards loses none of them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

from steerable._core._cancel import CancelHandle
from steerable._receipts import MessageReceipt
from steerable.drivers._commands import Steer
from steerable.drivers._controls import COMMANDS, from_wire
from steerable.drivers._handle import TurnHandle
from steerable.scale._host import WorkerHost
from steerable.scale._protocol import decode, encode

__all__ = ["ControlHandler"]

log = logging.getLogger("steerable.scale")


class ControlHandler:
    def __init__(self, worker: WorkerHost) -> None:
        self.worker = worker
        self.loop = worker.loop

    async def run(self) -> None:
        w = self.worker
        key = w.keys.control(w.worker_id)
        cursor = "0-0"
        while True:
            got = await w._redis.xread({key: cursor}, count=64, block=1000)
            for _, entries in got or ():
                for entry_id, fields in entries:
                    cursor = entry_id.decode()
                    command = decode(fields[b"c"])
                    try:
                        answer = await self.handle(command)
                    except (ValueError, TypeError, KeyError) as exc:
                        # (the class name lets the poster raise a RequestError as such)
                        answer = {"error": str(exc), "type": type(exc).__name__}
                    pipe = w._redis.pipeline(transaction=False)
                    pipe.rpush(command["reply"], encode(answer))
                    pipe.expire(command["reply"], 60)
                    pipe.xdel(key, entry_id)
                    await pipe.execute()

    async def handle(self, wire: dict[str, Any]) -> dict[str, Any]:
        """The answer to one command: a posted message, the listing of what waits, or a
        command of the loop's one table of verbs (``from_wire``)."""
        op, session_id, args = wire["op"], wire["session"], dict(wire["args"])
        if op == "message":
            return await self._message(session_id, args["entry"])
        if op == "queue":
            return {"messages": self._queued(session_id)}
        cls = COMMANDS.get(op)
        if cls is not None and "session_id" in {f.name for f in dataclasses.fields(cls)}:  # a command for the session's turn
            if session_id not in self.worker.running:
                return {"ok": False}  # no turn here now, as on one process
            args["session_id"] = session_id
        return self._answer(self.loop.submit(from_wire(op, args)))

    def _queued(self, session_id: str) -> list[dict[str, Any]]:
        if session_id not in self.worker.tokens:
            return []
        return [{"message_id": m.message_id, "kind": m.kind, "text": m.text,
                 "state": m.state.value, "turn_id": m.turn_id, "origin_id": m.origin_id}
                for m in self.loop.queued_messages(session_id)]

    @staticmethod
    def _answer(answer: Any) -> dict[str, Any]:
        if isinstance(answer, MessageReceipt):
            return {"ok": bool(answer), "message_id": answer.message_id,
                    "state": answer.state.value, "detail": answer.detail}
        if isinstance(answer, CancelHandle):
            return {"ok": answer.contributed}
        if isinstance(answer, TurnHandle):  # an answer resumed a turn (a worker never does)
            return {"ok": True, "turn_id": answer.turn_id}
        return {"ok": bool(answer)}

    async def _message(self, session_id: str, entry: dict[str, Any]) -> dict[str, Any]:
        w = self.worker
        token = w.tokens.get(session_id)
        handle = w.running.get(session_id)
        queued = {"message_id": entry["id"], "state": "queued"}
        if token is None:
            # Let go of the session since the poster looked: queue it for whoever takes it.
            _, waiting = await w.scripts.post(session_id, entry, maxlen=100_000, force=True)
            return {"action": "started" if waiting == 1 else "queued", **queued}
        if handle is None or handle.done():
            waiting = await self._queue(session_id, token, entry, at_head=False)
            return {"action": "started" if waiting == 1 else "queued", **queued}
        policy = entry["policy"]
        turn_id = handle.turn_id
        if policy == "reject":
            return {"action": "rejected", "turn_id": turn_id}
        if policy == "steer":
            # Under the entry's id: refused (the turn is ending, its steering is full), the
            # message is queued below as it is, never rejected first.
            receipt = self.loop.submit(Steer(str(entry["text"]), session_id,
                                             message_id=str(entry["id"])))
            if receipt:  # the message lives on in its turn
                return {"action": "steered", "turn_id": turn_id,
                        "message_id": receipt.message_id, "state": receipt.state.value}
        if policy in ("interrupt", "rollback"):
            await self._queue(session_id, token, entry, at_head=True)
            if policy == "interrupt":
                self.loop.interrupt_graceful(session_id)
            else:
                self.loop.interrupt_hard(session_id)
            action = "interrupted" if policy == "interrupt" else "rolled_back"
            return {"action": action, "turn_id": turn_id, **queued}
        # follow_up, or steering the turn could no longer take (it was ending): next turn.
        await self._queue(session_id, token, entry, at_head=False)
        return {"action": "queued", "turn_id": turn_id, **queued}

    async def _queue(self, session_id: str, token: str, entry: dict[str, Any], *,
                     at_head: bool) -> int:
        import redis

        w = self.worker
        try:
            return await w.scripts.queue(session_id, token, entry, at_head=at_head)
        except redis.ResponseError as exc:
            if "LEASE_LOST" not in str(exc):
                raise
        # The lease ended between the look and the push: queue it for the next holder.
        _, waiting = await w.scripts.post(session_id, entry, maxlen=100_000, force=True)
        await asyncio.sleep(0)
        return waiting
