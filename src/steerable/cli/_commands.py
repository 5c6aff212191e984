"""Dispatch of parsed command lines to the commands (imported here, not at start-up)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

from steerable.cli._args import UsageError
from steerable.cli._settings import SECRET_ENV, Settings, load_settings, mask, user_config_path

__all__ = ["dispatch"]


def dispatch(args: argparse.Namespace) -> int:
    settings = load_settings(args)
    if getattr(args, "temporal", None) and args.command in (
            "sessions", "answer", "approve", "deny", "waiting"):
        from steerable.cli._temporal_cli import temporal_command

        return temporal_command(args)
    if args.command == "sessions":
        from steerable.cli._sessions import sessions_command

        return sessions_command(args, settings)
    if args.command in ("undo", "redo", "rewind"):
        from steerable.cli import _undo

        command = {"undo": _undo.undo_command, "redo": _undo.redo_command,
                   "rewind": _undo.rewind_command}[args.command]
        return command(args, settings)
    if args.command == "config":
        return config_show(settings, args.json)
    if args.command == "run":
        return _run(args, settings)
    if args.command in ("answer", "approve", "deny", "waiting"):
        from steerable.cli import _answer

        if args.command == "waiting":
            return _answer.waiting_command(args, settings)
        return _answer.answer_command(args, settings)
    if args.command == "serve":
        from steerable.cli._serve import serve

        return serve(args, settings)
    if args.command == "worker":
        from steerable.cli._serve import temporal_worker_command

        return temporal_worker_command(args, settings)
    if args.command == "acp":
        from steerable.cli._acp import acp_command

        return acp_command(args, settings)
    if args.command == "chat":
        from steerable.cli._chat import chat

        return chat(args, settings)
    if args.command == "replay":
        from steerable.cli._replay import replay_command

        return asyncio.run(replay_command(args.file, args.json))
    if args.command == "mcp" and args.action == "serve":
        from steerable.cli._mcp_serve import mcp_serve

        return mcp_serve(args, settings)
    if args.command == "mcp":
        from steerable.cli._mcp import mcp_list

        return asyncio.run(mcp_list(settings, args.json))
    raise UsageError(f"unknown command {args.command!r}")


def _prompt(args: argparse.Namespace) -> str:
    from steerable.cli._template import load_template

    parts = []
    if args.template:
        parts.append(load_template(args.template, args.var))
    elif args.var:
        raise UsageError("--var needs --template")
    if args.prompt:
        parts.append(args.prompt)
    if not parts or not "".join(parts).strip():
        raise UsageError("run needs a prompt (or --template FILE)")
    return "\n\n".join(parts)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from steerable.cli._app import build_app
    from steerable.cli._integrations import recording, telemetry
    from steerable.cli._mcp import configured_tools
    from steerable.cli._run import run_prompt

    if args.resume:
        if args.session in (None, "new"):
            raise UsageError("--resume needs --session ID (see 'steerable sessions list')")
        if args.prompt or args.template or args.discard_pending:
            raise UsageError("--resume continues a pending turn: it takes no prompt, "
                             "--template or --discard-pending")
        prompt = None
    else:
        prompt = _prompt(args)
    from steerable.cli._attach import read_attachments, with_attachments

    if args.attach and prompt is None:
        raise UsageError("--attach goes with a prompt, not with --resume")
    try:
        attached = read_attachments(args.attach)
    except ValueError as exc:
        raise UsageError(str(exc)) from None

    async def go() -> int:
        async with configured_tools(settings) as mcp_tools:
            app = build_app(settings, session=args.session, can_ask=True, script=args.script,
                            record_events=args.record_events, extra_tools=mcp_tools)
            telemetry(app, settings)
            from steerable.cli._slash import expand_slash

            expanded = None if prompt is None else expand_slash(app.commands, prompt, app.skills)
            text = expanded or prompt
            async with recording(app, args.record):
                return await run_prompt(app, None if text is None else with_attachments(
                    text, attached), as_json=args.json, debug=args.debug,
                    discard_pending=args.discard_pending)

    return asyncio.run(go())


def config_show(settings: Settings, as_json: bool) -> int:
    secrets = {name: mask(os.environ[name]) for name in SECRET_ENV if os.environ.get(name)}
    env_urls = {n: os.environ[n] for n in ("OPENAI_BASE_URL",) if os.environ.get(n)}
    from steerable.providers import choose_provider_name

    effective = choose_provider_name(settings["provider"])
    from steerable.cli._mcp import describe_servers

    servers = describe_servers(settings)
    conventions = _conventions(settings)
    from steerable.cli._hook_setup import hooks_listing

    hooks = hooks_listing(settings)
    if as_json:
        print(json.dumps({"settings": settings.values, "sources": settings.sources,
                          "mcp_servers": servers,
                          "provider_in_use": effective,
                          "permissions": [{"action": a, "pattern": p, "source": s}
                                          for a, p, s in settings.rules],
                          "secrets": secrets, "environment": env_urls,
                          "files": {"user": str(user_config_path()), "read": settings.files},
                          "project_instructions": conventions, "command_hooks": hooks},
                         indent=2))
        return 0
    print(f"# user config: {user_config_path()}")
    print(f"# files read: {', '.join(settings.files) or 'none'}")
    for key, value in settings.values.items():
        print(f"{key} = {json.dumps(value)}    # {settings.sources[key]}")
    print(f"# provider in use: {effective}")
    for action, pattern, source in settings.rules:
        print(f"permission {action} {pattern}    # {source}")
    for server in servers:
        where = server.get("url") or " ".join([server.get("command", ""), *server.get("args", [])])
        print(f"mcp server {server['name']}: {where}    # {server['source']}")
    for name, shown in {**secrets, **env_urls}.items():
        print(f"{name} = {shown}    # environment")
    for item in conventions["read"]:
        how = f"imported by {item['imported_by']}" if item["imported_by"] else (
            "applies everywhere" if item["scope"] == "." else f"applies under {item['scope']}/")
        print(f"instructions {item['path']}    # {how}, {item['chars']} characters")
    for hook in hooks:
        on = f" {hook['matcher']}" if hook["matcher"] not in ("", "*") else ""
        print(f"hook {hook['event']}{on}: {hook['command']}    # {hook['source']}, "
              f"{hook['runs']}")
    for item in conventions["skipped"]:
        print(f"instructions skipped {item['path']}    # {item['why']}")
    sys.stdout.flush()
    return 0


def _conventions(settings: Settings) -> dict[str, list[dict[str, object]]]:
    """The project instructions a run in the configured workspace would read."""
    from pathlib import Path

    from steerable.coding import load_conventions

    root = Path(settings["workspace"]).expanduser()
    if not root.is_dir():
        return {"read": [], "skipped": []}
    found = load_conventions(root)
    return {"read": [{"path": f.path, "scope": f.scope, "imported_by": f.imported_by,
                      "chars": f.chars} for f in found.files],
            "skipped": [{"path": p, "why": why} for p, why in found.skipped]}
