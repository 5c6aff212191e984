"""``steerable serve``: the coding agent behind the HTTP API and web page (SPEC 7).

Prints ``listening on http://HOST:PORT`` once the socket accepts connections. Off loopback it
refuses to start without ``STEERABLE_SERVER_TOKEN``; with a token every API request needs
``Authorization: Bearer <token>``. Tool calls that need approval are asked on the page (or
through ``POST /v1/approvals/{id}``) unless ``--yes``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import os
import secrets
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from steerable.cli._args import UsageError
from steerable.cli._settings import Settings

if TYPE_CHECKING:
    import uvicorn

__all__ = ["TOKEN_ENV", "serve", "temporal_worker_command"]

TOKEN_ENV = "STEERABLE_SERVER_TOKEN"
REDIS_ENV = "STEERABLE_REDIS_URL"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(args: argparse.Namespace, settings: Settings) -> int:
    token = os.environ.get(TOKEN_ENV) or None
    if not _is_loopback(args.host) and token is None:
        raise UsageError(f"refusing to listen on {args.host} without a token: set {TOKEN_ENV} "
                         "(clients then send 'Authorization: Bearer <token>')")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be 0-65535, got {args.port}")
    try:
        import uvicorn

        from steerable.server import LocalRunner, create_app
        from steerable.server._uvicorn import Server
    except ImportError as exc:
        raise UsageError(f"serve needs the server extra: pip install 'steerable[server]' "
                         f"({exc.name} is missing)") from None
    from steerable.cli._app import build_app
    from steerable.cli._fronts import protocol_routes
    from steerable.cli._integrations import telemetry
    from steerable.cli._mcp import configured_tools

    redis_url = getattr(args, "redis", None) or os.environ.get(REDIS_ENV) or None

    async def main() -> int:
        # The configured MCP servers live as long as the server does.
        async with configured_tools(settings) as mcp_tools:
            app = build_app(settings, session=None, can_ask=False, script=args.script,
                            record_events=args.record_events, ask_by_events=True,
                            extra_tools=mcp_tools)
            telemetry(app, settings)
            runner = (_temporal_runner(app, redis_url, args) if args.temporal
                      else _redis_runner(app, redis_url, args) if redis_url
                      else LocalRunner(app.loop, app.redact, on_delete=app.shells.stop_session))
            fronts = protocol_routes(runner, agent_name=app.agent.name,
                                     secured=token is not None)
            asgi = create_app(runner, token=token, undo=_undo_api(app, runner),
                              allowed_hosts=args.allow_host, allowed_origins=args.allow_origin,
                              extra_routes=fronts.routes,
                              contexts=[*fronts.contexts, _shells_closed(app)],
                              public_paths=fronts.public)
            config = uvicorn.Config(asgi, host=args.host, port=args.port, log_level="warning",
                                    access_log=False, lifespan="on",
                                    timeout_graceful_shutdown=3)
            return await _serve(Server(config, asgi))

    try:
        code = asyncio.run(main())
    except KeyboardInterrupt:
        # uvicorn shuts down gracefully on Ctrl+C / SIGTERM, then re-raises the signal:
        # for a server that is the normal way to stop.
        code = 0
    if args.temporal:
        from steerable.cli._temporal_cli import exit_now

        exit_now(code)
    return code


@contextlib.asynccontextmanager
async def _shells_closed(app: Any) -> AsyncIterator[None]:
    """The background commands end with the server (before its loop closes: no notice then)."""
    try:
        yield
    finally:
        await app.shells.aclose()


def _undo_api(app: Any, runner: Any) -> Any:
    """Undo's endpoints for a server whose sessions run here (not shared through Redis: a
    worker elsewhere would have changed files elsewhere)."""
    from steerable.server import LocalRunner
    from steerable.server._undo_api import UndoAPI

    if app.undo is None or not isinstance(runner, LocalRunner):
        return None
    return UndoAPI(app.undo, runner.loop.busy, getattr(app.store, "turns", None))


def _redis_runner(app: Any, url: str, args: argparse.Namespace) -> Any:
    """This process as one worker of the group at ``url``: the same agent, permissions and
    approvals as a lone server, over the sessions (and checkpoints) kept in Redis."""
    try:
        from steerable.scale import RedisWorker
        from steerable.server._redis_runner import RedisRunner
        from steerable.storage import RedisSessionStore
    except ImportError as exc:
        raise UsageError(f"--redis needs the redis extra: pip install 'steerable[redis]' "
                         f"({exc.name} is missing)") from None
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise UsageError(f"--redis takes a URL like redis://HOST:PORT/DB, got {url!r}")
    from steerable import AgentLoop, HumanApprover, Timeouts
    from steerable.cli._app import HUMAN_APPROVAL_TIMEOUT, PAGE_PARK_AFTER, tell_session
    from steerable.cli._integrations import telemetry_hook
    from steerable.cli._settings import turn_limits

    def make_loop(store: Any) -> AgentLoop:
        # A request open PAGE_PARK_AFTER parks: any worker resumes the turn once answered.
        loop = AgentLoop(app.agent, store=store, permissions=app.loop.permissions,
                         limits=turn_limits(app.settings),
                         timeouts=Timeouts(approval=HUMAN_APPROVAL_TIMEOUT,
                                           park_after=PAGE_PARK_AFTER),
                         record_events=args.record_events, park=True)
        if not app.settings["yes"]:
            loop.register_hook(HumanApprover())  # asked on the page, answered from anywhere
        hook = telemetry_hook(app.settings)  # the turns run here, not on the front loop
        if hook is not None:
            loop.register_hook(hook)
        # Background commands start in this worker's turns: their sessions hear from here.
        app.shells.notify = lambda notice: tell_session(loop, notice)
        loop.register_hook(app.shells)
        return loop

    store = RedisSessionStore(url, redact=app.redact)
    return RedisRunner(RedisWorker(make_loop, url, store=store, redact=app.redact), app.redact)


def _temporal_worker(app: Any, redis_url: str | None, args: argparse.Namespace) -> Any:
    """A Temporal worker of ``app``'s agent, permissions and approvals (as a lone server's)."""
    try:
        from steerable.temporal import TemporalWorker
    except ImportError as exc:
        raise UsageError(f"--temporal needs the temporal extra: pip install "
                         f"'steerable[temporal]' ({exc.name} is missing)") from None
    from steerable.errors import ConfigurationError

    if redis_url is not None and not redis_url.startswith(("redis://", "rediss://", "unix://")):
        raise UsageError(f"--redis takes a URL like redis://HOST:PORT/DB, got {redis_url!r}")
    # This process's background commands are its own: their ids name this worker, so
    # bash_output and bash_kill (and a hard abort's stop) are sent here, not to any worker.
    app.shells.home = secrets.token_hex(4)
    try:
        from steerable.coding.policy import read_functions

        # The tool policy's looks at the files, made here as activities for the workflow.
        return TemporalWorker(app.agent, target=args.temporal, task_queue=args.task_queue,
                              events_url=redis_url, permissions=app.loop.permissions,
                              human_approval=not app.settings["yes"], redact=app.redact,
                              hooks=_worker_hooks(app),
                              reads=read_functions(app.workspace.root), home=app.shells.home)
    except ConfigurationError as exc:
        raise UsageError(f"--temporal: {exc}") from None


def _worker_hooks(app: Any) -> list[Any]:
    """The coding agent's hooks on a Temporal worker, each where it belongs (see
    ``steerable.temporal._hooks``): the tool policy decides in the workflow (its state is
    rebuilt by replay; its model calls are activities); undo's snapshots, the project's
    command hooks and the background shells act on this machine, in activities."""
    from steerable.cli._app import POLICY_TIMEOUT
    from steerable.coding import SNAPSHOT_HOOK_PRIORITY, SNAPSHOT_HOOK_TIMEOUT
    from steerable.coding.policy import RecordedReads, ToolPolicy
    from steerable.temporal import WorkerHook, workflow_read

    hooks = [WorkerHook(app.shells)]
    if app.undo is not None:
        hooks.append(WorkerHook(app.undo, SNAPSHOT_HOOK_PRIORITY, SNAPSHOT_HOOK_TIMEOUT))
    if app.policy is not None:  # one per workflow run, over the same workspace (its gate)
        # Every look it takes at the files is an activity the history records (a replay on
        # any worker, however the files changed since, reads what the first run read).
        hooks.append(WorkerHook(
            lambda: ToolPolicy(app.workspace, reads=RecordedReads(workflow_read)), 100,
            POLICY_TIMEOUT, in_workflow=True))
    if app.command_hooks is not None:
        timeout = sum(s.timeout for s in app.command_hooks.specs) + 5.0
        hooks.append(WorkerHook(app.command_hooks, timeout=timeout))
    return hooks


def _temporal_runner(app: Any, redis_url: str | None, args: argparse.Namespace) -> Any:
    """This process as a front end and one worker of the sessions on Temporal."""
    if redis_url is None:
        raise UsageError(f"serve --temporal needs --redis URL (or {REDIS_ENV}) for the "
                         "sessions' event stream")
    worker = _temporal_worker(app, redis_url, args)
    from steerable.server._temporal_runner import TemporalRunner
    from steerable.temporal import TemporalClient

    async def connect() -> Any:
        client = await TemporalClient.connect(args.temporal, task_queue=args.task_queue,
                                              events_url=redis_url)
        # A background command that ends tells its session, on Temporal (as locally).
        app.shells.notify = lambda notice: client.send_nowait(notice.text, notice.session_id,
                                                              "steer")
        return client

    return TemporalRunner(worker, connect, app.redact)


def temporal_worker_command(args: argparse.Namespace, settings: Settings) -> int:
    """``steerable worker --temporal HOST:PORT``: run sessions until interrupted."""
    if not args.temporal:
        raise UsageError("worker needs --temporal HOST:PORT")
    from steerable.cli._app import build_app

    redis_url = getattr(args, "redis", None) or os.environ.get(REDIS_ENV) or None
    app = build_app(settings, session=None, can_ask=False, script=args.script,
                    record_events=args.record_events, ask_by_events=True)
    worker = _temporal_worker(app, redis_url, args)

    async def main() -> int:
        from steerable.temporal import TemporalClient

        client = await TemporalClient.connect(args.temporal, task_queue=args.task_queue)
        worker.client = client.client
        # A background command that ends tells its session, on Temporal (as locally).
        app.shells.notify = lambda notice: client.send_nowait(notice.text, notice.session_id,
                                                              "steer")
        try:
            task = asyncio.ensure_future(worker.run())
            ready = asyncio.ensure_future(worker.ready.wait())
            await asyncio.wait([task, ready], return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                ready.cancel()
                task.result()
            sys.stdout.write(f"working for {args.temporal} (task queue {args.task_queue})\n")
            sys.stdout.flush()
            await task
        finally:
            await app.shells.aclose()
            await client.aclose()
        return 0

    try:
        code = asyncio.run(main())
    except KeyboardInterrupt:
        code = 0
    from steerable.cli._temporal_cli import exit_now

    exit_now(code)


async def _serve(server: uvicorn.Server) -> int:
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        if task.done():
            return 1 if task.exception() is not None else 0
        await asyncio.sleep(0.01)
    host, port = server.servers[0].sockets[0].getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    sys.stdout.write(f"listening on http://{shown}:{port}\n")
    sys.stdout.flush()
    await task
    return 0
