"""``steerable answer REQUEST_ID VALUE``, ``steerable approve|deny REQUEST_ID``, and
``steerable waiting``: answer a parked turn's request from any process, and watch it resume.

The request names its session (the store's index of waiting requests); the answer is given on a
loop over that session, and when it was the turn's last open request the resumed turn is
rendered here as ``run`` renders a turn, with the same exit codes (5: it waits again).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from steerable import TurnResult, TurnStatus
from steerable.cli._args import UsageError
from steerable.cli._settings import Settings
from steerable.errors import CheckpointError, RequestError

__all__ = ["answer_command", "waiting_command"]


def _session_of(settings: Settings, request_id: str) -> str:
    from steerable.cli._app import make_store

    store = make_store(settings)
    session = store.request_session(request_id)
    if session is not None:
        return session
    if store.request_answers([request_id]):
        raise UsageError(f"request {request_id} was answered already (an answer counts once)")
    raise UsageError(f"no waiting request {request_id!r} in {store.directory} "
                     "('steerable waiting' lists them)")


def answer_command(args: argparse.Namespace, settings: Settings) -> int:
    """``answer`` / ``approve`` / ``deny``: give the answer, then render the resumed turn."""
    from steerable.cli._app import build_app
    from steerable.cli._mcp import configured_tools
    from steerable.cli._requests import parse_value
    from steerable.cli._run import run_prompt

    rid = args.request_id
    session = _session_of(settings, rid)

    async def go() -> int:
        async with configured_tools(settings) as mcp_tools:
            app = build_app(settings, session=session, can_ask=True, script=args.script,
                            record_events=args.record_events, extra_tools=mcp_tools)
            loop = app.loop

            async def start() -> TurnResult:
                if args.command == "answer":
                    asked = {r.request_id: r for r in loop.pending_requests(session)}.get(rid)
                    schema = None if asked is None else asked.schema
                    got: Any = loop.answer(rid, parse_value(args.value, schema))
                else:
                    got = loop.resolve_approval(rid, args.command == "approve",
                                                args.reason or "")
                if not isinstance(got, bool):
                    result: TurnResult = await got
                    return result
                # Recorded; other requests of the same turn still wait for theirs.
                return TurnResult(turn_id="", session_id=session, status=TurnStatus.WAITING,
                                  text="", iterations=0,
                                  pending=tuple(loop.pending_requests(session)))

            try:
                return await run_prompt(app, None, as_json=args.json, debug=args.debug,
                                        start=start)
            except (RequestError, CheckpointError) as exc:
                raise UsageError(str(exc)) from None

    return asyncio.run(go())


def waiting_command(args: argparse.Namespace, settings: Settings) -> int:
    """Every request waiting in the store, across sessions, with how to answer it."""
    from steerable._core._parking import waiting_in_store
    from steerable.cli._app import make_store
    from steerable.cli._requests import how_to_answer

    pending = waiting_in_store(make_store(settings), None)
    if args.json:
        for req in pending:
            print(json.dumps({"request_id": req.request_id, "kind": req.kind,
                              "session_id": req.session_id, "tool_name": req.tool_name,
                              "question": req.question, "choices": req.choices,
                              "schema": req.schema, "arguments": req.arguments},
                             ensure_ascii=False))
    elif not pending:
        print("nothing waits for an answer")
    else:
        print("\n".join(how_to_answer(pending)[1:]))
    return 0
