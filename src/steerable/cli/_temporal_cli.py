"""The commands that read or answer sessions running on Temporal (``--temporal HOST:PORT``):
``sessions list|show``, ``waiting``, ``answer``, ``approve`` and ``deny``.

They talk to the sessions' workflows through a ``TemporalClient``: the list of sessions and of
waiting requests is one visibility query (each workflow keeps its summary in its memo); an
answer is an update of the workflow that waits for it, whose turn then goes on on a worker
(follow it with ``steerable serve --temporal`` or ``TemporalClient.events``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any, NoReturn

from steerable.cli._args import USAGE_ERROR, UsageError
from steerable.errors import RequestError

__all__ = ["exit_now", "temporal_command"]


def temporal_command(args: argparse.Namespace) -> NoReturn:
    """Run the command, then end the process (``exit_now``)."""
    try:
        from steerable.temporal import TemporalClient
    except ImportError as exc:
        raise UsageError(f"--temporal needs the temporal extra: pip install "
                         f"'steerable[temporal]' ({exc.name} is missing)") from None

    async def go() -> int:
        try:
            client = await TemporalClient.connect(args.temporal, task_queue=args.task_queue)
        except RuntimeError as exc:  # the SDK's connection error
            raise UsageError(f"cannot reach Temporal at {args.temporal}: {exc}") from None
        try:
            if args.command == "sessions":
                return await _sessions(client, args)
            if args.command == "waiting":
                return _waiting(await client.pending_requests(), args.json)
            return await _answer(client, args)
        finally:
            await client.aclose()

    try:
        code = asyncio.run(go())
    except UsageError as exc:
        print(f"steerable: error: {exc}", file=sys.stderr)
        code = USAGE_ERROR
    exit_now(code)


def exit_now(code: int) -> NoReturn:
    """End a process that used Temporal without finalizing the interpreter. The Temporal
    SDK's Rust threads can abort the process while it finalizes ("PyGILState_Release ... must
    be current", temporalio/sdk-python#300), which would turn a command that did its work
    (or a worker stopped cleanly) into exit code -6; everything is closed, written and
    flushed first."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


async def _sessions(client: Any, args: argparse.Namespace) -> int:
    if args.action == "list":
        rows = await client.list_sessions()
        if args.json:
            print(json.dumps([{"session_id": r["id"], "messages": r["messages"],
                               "updated": r["updated"], "title": r["title"],
                               "busy": r["busy"], "open": r["open"]} for r in rows], indent=2))
        elif not rows:
            print(f"no sessions on task queue {client.task_queue}")
        for r in [] if args.json else rows:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["updated"] or 0))
            state = "busy" if r["busy"] else "open" if r["open"] else "closed"
            print(f"{r['id']:<28} {when}  {r['messages']:>5} msgs  {state:<6}  "
                  f"{r['title'][:52]}")
        return 0
    if args.action == "show":
        if await client.state(args.id) is None:
            raise UsageError(f"no session {args.id!r} on task queue {client.task_queue}")
        from steerable.cli._sessions import show_messages

        return show_messages(args.id, await client.session_messages(args.id), None)
    raise UsageError(f"sessions {args.action} is not available with --temporal (list, show)")


def _waiting(pending: list[dict[str, Any]], as_json: bool) -> int:
    if as_json:
        for req in pending:
            print(json.dumps(req, ensure_ascii=False))
        return 0
    if not pending:
        print("nothing waits for an answer")
    for req in pending:
        if req["kind"] == "question":
            choices = f" ({' / '.join(req['choices'])})" if req.get("choices") else ""
            print(f"{req['session_id']}: {req['tool_name']} asks: {req['question']}{choices}\n"
                  f"  steerable answer {req['request_id']} VALUE --temporal ...")
        else:
            print(f"{req['session_id']}: {req['tool_name']} "
                  f"{json.dumps(req.get('arguments') or {})} needs approval\n"
                  f"  steerable approve|deny {req['request_id']} --temporal ...")
    return 0


async def _answer(client: Any, args: argparse.Namespace) -> int:
    from steerable.cli._requests import parse_value

    rid = args.request_id
    asked = {r["request_id"]: r for r in await client.pending_requests()}.get(rid)
    if asked is None:
        raise UsageError(f"no waiting request {rid!r} on task queue {client.task_queue} "
                         "('steerable waiting --temporal ...' lists them)")
    session = asked["session_id"]
    try:
        if args.command == "answer":
            await client.answer(rid, parse_value(args.value, asked.get("schema")),
                                session_id=session)
        elif not await client.resolve_approval(rid, args.command == "approve",
                                               args.reason or "", session_id=session):
            raise UsageError(f"request {rid} is no longer waiting")
    except RequestError as exc:
        raise UsageError(str(exc)) from None
    print(f"answered {rid}; session {session} goes on on its worker")
    return 0
