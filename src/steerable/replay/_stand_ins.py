"""What stands in for the outside world during a replay: a provider and tools that answer from
the recording, at the pace the player sets (see ``_player.Player.gate``)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any, Protocol

from steerable import BaseTool, ToolContext, ToolResult
from steerable._parts_json import part_from_json
from steerable.providers._base import Chunk, LLMRequest
from steerable.replay._format import chunk_from_json, error_from_json

__all__ = ["Pacer", "ReplayProvider", "ReplayTool"]


class Pacer(Protocol):
    """What the stand-ins need of the player (``_player.Player``): the recording's answers
    and its pace. A protocol, so this module never imports the player that imports it."""

    def take_llm(self, agent: str, request: LLMRequest) -> dict[str, Any]: ...

    def tool_result(self, call_id: str) -> dict[str, Any] | None: ...

    def progress_of(self, call_id: str) -> list[tuple[int, dict[str, Any]]]: ...

    async def gate(self) -> None: ...

    async def until_index(self, index: int) -> None: ...

    async def until_ready(self, call_id: str) -> None: ...

    async def wait_cancelled(self) -> None: ...


class ReplayProvider:
    """Answers each LLM call of one agent with the recorded stream, after checking the request.
    The recorded text was cut where the live loop cut it: the loop must not cut it again."""

    text_guarded = True

    def __init__(self, player: Pacer, agent: str) -> None:
        self._player = player
        self._agent = agent

    async def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        await self._player.gate()  # an earlier event that differs is the first difference
        entry = self._player.take_llm(self._agent, request)
        positions = entry.get("positions") or [None] * len(entry["chunks"])
        for raw, position in zip(entry["chunks"], positions, strict=True):
            # Each chunk waits until the player has seen the events so far (a control recorded
            # between two chunks is then made before the next one, as it was) and, when it
            # makes an event, everything recorded before that event.
            if position is not None:
                await self._player.until_index(position)
            await self._player.gate()
            yield chunk_from_json(raw)
        await self._player.gate()
        if "error" in entry:
            raise error_from_json(entry["error"])
        if entry.get("cancelled"):
            await self._player.wait_cancelled()

    async def aclose(self) -> None:
        return None


class ReplayTool(BaseTool):
    """A recorded tool: same name, schema and read-only flag; its result is the recorded one."""

    def __init__(self, player: Pacer, spec: Mapping[str, Any]) -> None:
        self._player = player
        self.name = str(spec["name"])
        self.description = str(spec.get("description", ""))
        self._parameters = dict(spec.get("parameters") or {"type": "object", "properties": {}})
        self.read_only = bool(spec.get("read_only", False))
        timeout = spec.get("timeout")
        self.timeout = None if timeout is None else float(timeout)

    @property
    def parameters(self) -> Mapping[str, Any]:
        return self._parameters

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        player = self._player
        await player.gate()
        for index, progress in player.progress_of(ctx.call_id):
            await player.until_index(index)
            ctx.progress(str(progress.get("text", "")), **dict(progress.get("data") or {}))
        await player.until_ready(ctx.call_id)
        entry = player.tool_result(ctx.call_id)
        if entry is None:  # it never finished in the recording: an abort or a timeout stopped it
            await player.wait_cancelled()
            return None
        return ToolResult(str(entry["content"]), bool(entry["is_error"]),
                          parts=tuple(part_from_json(p, None) for p in entry.get("parts", ())))

    def preview(self, arguments: Mapping[str, Any], ctx: ToolContext) -> str:
        entry = self._player.tool_result(ctx.call_id)
        return "" if entry is None else str(entry["content"])
