"""What an MCP server asks of the person during a tool call, as the calling tool's questions.

A server of the 2026-07-28 revision answers ``tools/call`` with ``input_required``: a map of
input requests and an opaque state; the client answers them and calls again with the responses
and the state. A server of the 2025 revisions sends ``elicitation/create`` in the middle of the
call instead. Either way each elicitation becomes a question of the tool that made the call
(``ctx.ask``, SPEC 11): answered live, or parked with its turn and answered later from the CLI
(``steerable answer``), the server (``/v1/requests``) or the library (``loop.answer``). A parked
call is made again when the turn resumes; its questions are asked in the same order (a 2026
round by the server's keys, sorted; a 2025 server one at a time), so each gets its recorded
answer back at once and the server sees the same answers again.

How an elicitation reads as a question:

- a form with fields: the answer is JSON that fits the form's schema, or the text ``decline``;
- a form with no fields (a confirmation), or a URL to open: one of ``accept`` / ``decline``.

A steerable approval is the permission for a call before it runs (one per call, replayed by
call id on resume), so what a server asks mid-call is a question even when it is a yes or no.

Sampling and roots requests are not offered (the client does not advertise them); a server
that sends them anyway gets an error, and the call ends with an error result the model reads.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from mcp import types
from pydantic import ValidationError

from steerable import ToolContext
from steerable.errors import ToolError

__all__ = ["DECLINE", "MAX_ROUNDS", "Relay", "answer_requests", "elicit", "paused", "question_for",
           "response_for"]

DECLINE = "decline"
"""The answer that declines a form (``accept`` is answering it)."""
MAX_ROUNDS = 10
"""``input_required`` rounds one call may take (the SDKs' own cap) before it fails."""
_PICK = ("accept", DECLINE)


def question_for(server: str, params: types.ElicitRequestParams
                 ) -> tuple[str, tuple[str, ...] | None, dict[str, Any] | None]:
    """The question, choices and schema that ``ctx.ask`` gets for an elicitation."""
    said = f"MCP server {server!r} asks: {params.message}"
    if isinstance(params, types.ElicitRequestURLParams):
        return f"{said}\nOpen {params.url} (accept) or decline.", _PICK, None
    form = dict(params.requested_schema)
    if not form.get("properties"):
        return said, _PICK, None
    # A schema of its own, so an answer can fit the form or decline it; its type list tells
    # the CLI and the web page to read a typed answer as JSON (text: a decline).
    schema = {"type": ["object", "string"], "anyOf": [form, {"const": DECLINE}]}
    return f"{said}\n(Answer with JSON that fits the form, or {DECLINE!r}.)", None, schema


def response_for(params: types.ElicitRequestParams, answer: Any) -> types.ElicitResult:
    """The server's response to an elicitation that the person answered with ``answer``."""
    if answer == DECLINE:
        return types.ElicitResult(action="decline")
    if isinstance(params, types.ElicitRequestURLParams):
        return types.ElicitResult(action="accept")
    # Only the form's own fields go back (a schema that does not forbid others lets an answer
    # carry them; the server asked for these), validated: a form's field may allow more than
    # MCP's flat content does.
    fields = params.requested_schema.get("properties") or {}
    content = {k: v for k, v in answer.items() if k in fields} \
        if isinstance(answer, Mapping) else {}
    try:
        return types.ElicitResult.model_validate({"action": "accept", "content": content})
    except ValidationError as exc:
        raise ToolError(f"the answer cannot be sent as the form's content: "
                        f"{exc.errors()[0]['msg']}") from None


async def elicit(ctx: ToolContext, server: str, params: types.ElicitRequestParams
                 ) -> types.ElicitResult:
    """Ask the person (the calling tool's question) and give the server its response."""
    question, choices, schema = question_for(server, params)
    return response_for(params, await ctx.ask(question, choices=choices, schema=schema))


async def answer_requests(ctx: ToolContext, server: str,
                          requests: Mapping[str, types.InputRequest]) -> types.InputResponses:
    """Responses to one ``input_required`` round, asked at once (a parked turn records them
    all together) in the order of the server's keys (the order of the answers on resume)."""
    elicitations: list[tuple[str, types.ElicitRequest]] = []
    for key in sorted(requests):
        request = requests[key]
        if not isinstance(request, types.ElicitRequest):
            raise ToolError(f"MCP server {server!r} asked for {request.method} ({key}), which "
                            "steerable does not offer")
        elicitations.append((key, request))
    keys = [key for key, _ in elicitations]
    asked = [elicit(ctx, server, request.params) for _, request in elicitations]
    return dict(zip(keys, await asyncio.gather(*asked), strict=True))


@contextlib.contextmanager
def paused(deadline: asyncio.Timeout) -> Iterator[None]:
    """The call's deadline stops while the person answers (a person may take longer than a
    server may), and runs on with the time that was left."""
    when = deadline.when()
    loop = asyncio.get_running_loop()
    left = None if when is None else when - loop.time()
    deadline.reschedule(None)
    try:
        yield
    finally:
        if left is not None:
            deadline.reschedule(loop.time() + left)


class Relay:
    """Elicitations of a 2025 server during one call, from the SDK's receiving task to the
    tool's own task: the tool asks (so a park cancels the tool, as any tool that asks), and
    the SDK's task waits for the response."""

    def __init__(self) -> None:
        self._asked: asyncio.Queue[tuple[types.ElicitRequestParams,
                                         asyncio.Future[types.ElicitResult]]] = asyncio.Queue()
        self._replies: list[asyncio.Future[types.ElicitResult]] = []

    async def relay(self, params: types.ElicitRequestParams) -> types.ElicitResult:
        """Called in the SDK's task: wait until the tool's task has the person's answer."""
        reply: asyncio.Future[types.ElicitResult] = asyncio.get_running_loop().create_future()
        self._replies.append(reply)
        self._asked.put_nowait((params, reply))
        return await reply

    async def next(self) -> tuple[types.ElicitRequestParams,
                                  asyncio.Future[types.ElicitResult]]:
        """The next elicitation to ask (in the tool's task)."""
        return await self._asked.get()

    @staticmethod
    async def answer(ctx: ToolContext, server: str,
                     asked: tuple[types.ElicitRequestParams,
                                  asyncio.Future[types.ElicitResult]]) -> None:
        """Ask the person in the tool's task and hand the response to the waiting SDK task.
        If the tool stops first (a park, a cancel, nobody answered), ``close`` answers
        ``cancel`` once the call itself was cancelled on the server, so that the server does
        not run the tool on with a cancelled elicitation."""
        params, reply = asked
        response = await elicit(ctx, server, params)
        if not reply.done():
            reply.set_result(response)

    def close(self) -> None:
        """The call is over: what is still unanswered is cancelled for the server."""
        for reply in self._replies:
            if not reply.done():
                reply.set_result(types.ElicitResult(action="cancel"))
