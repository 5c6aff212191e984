"""One face over two engines, so each behavioural test runs on the local ``AgentLoop`` and on
Temporal alike: send, steer, interrupt, cancel, approve, read events and history."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

from steerable import AgentLoop, CancelMode, HumanApprover, Timeouts
from steerable._events import event_to_dict
from steerable._messages import Message
from steerable.temporal import TemporalClient, WorkerHook
from tests.temporal._harness import running

Event = dict[str, Any]
_MODES = {"immediate": CancelMode.IMMEDIATE, "after_model": CancelMode.AFTER_MODEL,
          "after_tools": CancelMode.AFTER_TOOLS}


class Driver(Protocol):
    async def send(self, text: str, sid: str, policy: str | None = None) -> Any: ...
    async def result(self, sid: str, receipt: Any) -> tuple[str, str, str | None]: ...
    async def steer(self, text: str, sid: str) -> Any: ...
    async def interrupt(self, sid: str, mode: str) -> bool: ...
    async def cancel(self, sid: str, mode: str) -> bool: ...
    async def approve(self, request_id: str, approved: bool) -> bool: ...
    async def follow_up(self, text: str, sid: str) -> Any: ...
    async def answer(self, request_id: str, value: Any) -> None: ...
    async def pending(self, sid: str) -> list[str]: ...
    async def revoke(self, message_id: str) -> bool: ...
    async def events(self, sid: str, until: Callable[[Event], bool]) -> list[Event]: ...
    async def messages(self, sid: str) -> list[Message]: ...


class LocalDriver:
    def __init__(self, loop: AgentLoop) -> None:
        self.loop = loop
        self.sub = loop.subscribe(buffer=100_000)
        self.seen: list[Event] = []

    async def send(self, text: str, sid: str, policy: str | None = None) -> Any:
        return self.loop.send(text, sid, policy)  # type: ignore[arg-type]

    async def result(self, sid: str, receipt: Any) -> tuple[str, str, str | None]:
        r = await receipt
        return r.status.value, r.text, r.turn_id

    async def steer(self, text: str, sid: str) -> Any:
        return self.loop.inject_steering(text, sid)

    async def interrupt(self, sid: str, mode: str) -> bool:
        if mode == "hard":
            return self.loop.interrupt_hard(sid)
        return self.loop.interrupt_graceful(sid)

    async def cancel(self, sid: str, mode: str) -> bool:
        handle = self.loop.cancel(sid, _MODES[mode])
        return handle is not None and handle.contributed

    async def approve(self, request_id: str, approved: bool) -> bool:
        return self.loop.resolve_approval(request_id, approved)

    async def follow_up(self, text: str, sid: str) -> Any:
        return self.loop.inject_follow_up(text, sid)

    async def answer(self, request_id: str, value: Any) -> None:
        self.loop.answer(request_id, value)

    async def pending(self, sid: str) -> list[str]:
        return [r.request_id for r in self.loop.pending_requests(sid)]

    async def revoke(self, message_id: str) -> bool:
        return self.loop.revoke_message(message_id)

    async def events(self, sid: str, until: Callable[[Event], bool]) -> list[Event]:
        for old in self.seen:
            if until(old):
                return list(self.seen)

        async def read() -> None:
            async for e in self.sub:
                self.seen.append(event_to_dict(e))
                if until(self.seen[-1]):
                    return

        await asyncio.wait_for(read(), 20)
        return list(self.seen)

    async def messages(self, sid: str) -> list[Message]:
        return self.loop.session_messages(sid)


class TemporalDriver:
    """Session ids are the namespace's: each test's are prefixed with its task queue, so a
    session of an earlier test (its workflow still open on the shared dev server) is not
    taken for this one's."""

    def __init__(self, client: TemporalClient) -> None:
        self.client = client
        self.prefix = client.task_queue

    async def send(self, text: str, sid: str, policy: str | None = None) -> Any:
        return await self.client.send(text, self.prefix + sid, policy)

    async def result(self, sid: str, receipt: Any) -> tuple[str, str, str | None]:
        r = await asyncio.wait_for(self.client.result(self.prefix + sid, receipt.message_id), 30)
        return r.status, r.text, r.turn_id

    async def steer(self, text: str, sid: str) -> Any:
        return await self.client.inject_steering(text, self.prefix + sid)

    async def interrupt(self, sid: str, mode: str) -> bool:
        if mode == "hard":
            return await self.client.interrupt_hard(self.prefix + sid)
        return await self.client.interrupt_graceful(self.prefix + sid)

    async def cancel(self, sid: str, mode: str) -> bool:
        return await self.client.cancel(self.prefix + sid, mode)

    async def approve(self, request_id: str, approved: bool) -> bool:
        return await self.client.resolve_approval(request_id, approved)

    async def follow_up(self, text: str, sid: str) -> Any:
        return await self.client.inject_follow_up(text, self.prefix + sid)

    async def answer(self, request_id: str, value: Any) -> None:
        await self.client.answer(request_id, value)  # its session found by id

    async def pending(self, sid: str) -> list[str]:
        # The listing is the sessions' memos (visibility), which trail a moment.
        for _ in range(100):
            found = [r["request_id"] for r in await self.client.pending_requests(
                self.prefix + sid)]
            if found:
                return found
            await asyncio.sleep(0.05)
        return []

    async def revoke(self, message_id: str) -> bool:
        return await self.client.revoke_message(message_id)  # its session found by id

    async def events(self, sid: str, until: Callable[[Event], bool]) -> list[Event]:
        seen: list[Event] = []

        async def read() -> None:
            async for _, event in self.client.events(self.prefix + sid):
                seen.append(event)
                if until(event):
                    return

        await asyncio.wait_for(read(), 20)
        return seen

    async def messages(self, sid: str) -> list[Message]:
        return await self.client.session_messages(self.prefix + sid)


Make = Callable[..., Any]


def maker(engine: str, target: str | None, queue: str, events_url: str) -> Make:
    """``async with make(agent, permissions=None, human_approval=False, hooks=()) as
    driver``; ``hooks`` are ``WorkerHook``s (registered on the local loop as they say)."""

    @asynccontextmanager
    async def make(agent: Any, *, permissions: Any = None, human_approval: bool = False,
                   hooks: Sequence[WorkerHook] = ()) -> AsyncIterator[Driver]:
        if engine == "local":
            loop = AgentLoop(agent, permissions=permissions,
                             timeouts=Timeouts(approval=3600.0))
            if human_approval:
                loop.register_hook(HumanApprover())
            for spec in hooks:
                loop.register_hook(spec.make(), spec.priority, spec.timeout)
            async with loop:
                yield LocalDriver(loop)
            return
        assert target is not None
        async with running(agent, target, queue, events_url, permissions=permissions,
                           human_approval=human_approval, hooks=hooks) as client:
            yield TemporalDriver(client)

    return make
