"""The command line grammar (argparse only: building it must stay cheap for ``--help``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

__all__ = ["USAGE_ERROR", "UsageError", "build_parser"]

USAGE_ERROR = 2


class UsageError(Exception):
    """The command line asks for something impossible; exit code 2, one line on stderr."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One clear line instead of argparse's usage dump; --help shows the rest.
        sys.stderr.write(f"{self.prog}: error: {message} (see '{self.prog} --help')\n")
        raise SystemExit(USAGE_ERROR)


_EPILOG = """\
exit codes: 0 completed, 1 error, 2 bad command line, 3 interrupted, aborted or cancelled,
4 every action denied, 5 waiting for an answer (steerable answer/approve/deny), 6 nothing
changed.
configuration: flags > environment (STEERABLE_*) > ./.steerable.toml > user config.toml.
"""


def _fallback_flag(value: str) -> dict[str, str]:
    """``--fallback PROVIDER[:MODEL]`` as a ``[[fallback]]`` table of the settings."""
    provider, _, model = value.partition(":")
    if provider not in ("openai", "anthropic", "local"):
        raise argparse.ArgumentTypeError(
            f"expected PROVIDER[:MODEL] with PROVIDER openai, anthropic or local, got {value!r}")
    return {"provider": provider, "model": model} if model else {"provider": provider}


def _agent_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("agent")
    g.add_argument("--provider", choices=["openai", "anthropic", "local", "scripted"],
                   help="LLM provider (default: openai with OPENAI_API_KEY or OPENAI_BASE_URL, "
                        "anthropic with ANTHROPIC_API_KEY, else local)")
    g.add_argument("--model", help="model name for the provider")
    g.add_argument("--base-url", help="API base URL (OpenAI-compatible servers)")
    g.add_argument("--fallback", action="append", type=_fallback_flag, metavar="PROVIDER[:MODEL]",
                   help="provider to switch to when the main one fails in a way retries cannot "
                        "fix (repeatable, tried in order; replaces the config's [[fallback]])")
    g.add_argument("--workspace", help="folder the tools work in (default: current folder)")
    g.add_argument("--session", metavar="ID", help="continue session ID ('new' or none: start one)")
    g.add_argument("--dry-run", action="store_true", default=None,
                   help="mutating tools show what they would do instead of doing it")
    g.add_argument("--yes", action="store_true", default=None,
                   help="approve every tool call that would be asked")
    g.add_argument("--allow", action="append", metavar="RULE", default=[],
                   help="permission rule to allow, e.g. 'bash(git status*)' (repeatable)")
    g.add_argument("--deny", action="append", metavar="RULE", default=[],
                   help="permission rule to deny, e.g. 'write(secrets/**)' (repeatable)")
    g.add_argument("--max-iterations", type=int, metavar="N", help="LLM calls per turn at most")
    g.add_argument("--no-sandbox", dest="sandbox", action="store_const", const=False, default=None,
                   help="run bash unconfined (default: in bubblewrap when installed)")
    g.add_argument("--sandbox-network", action="store_true", default=None,
                   help="let sandboxed bash commands reach the network")
    g.add_argument("--explorer", action="store_true", default=None,
                   help="give the agent a read-only 'explorer' sub-agent it can delegate "
                        "searches to (shown indented under the turn)")
    g.add_argument("--policy", choices=("auto", "on", "off"), default=None,
                   help="the tool policy (steerable.coding.policy): the model classifies each "
                        "request, only a change request may change files, unsupported facts "
                        "are marked; auto: on for every provider but the scripted one")
    g.add_argument("--record-events", metavar="FILE",
                   help="append every event to FILE as JSON lines (debug recorder; also "
                        "STEERABLE_EVENT_LOG)")
    g.add_argument("--otel", action="store_true", default=None,
                   help="send OpenTelemetry traces (GenAI conventions) to the tracer provider "
                        "the environment configured, e.g. under opentelemetry-instrument "
                        "(also STEERABLE_OTEL=1)")
    g.add_argument("--record", metavar="FILE",
                   help="record the run to FILE (events, model streams, tool results, your "
                        "steering) for 'steerable replay FILE'")
    # Test-only: plays a JSON script of replies instead of calling a model.
    g.add_argument("--script", help=argparse.SUPPRESS)


def _serve_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("agent")
    g.add_argument("--provider", choices=["openai", "anthropic", "local", "scripted"],
                   help="LLM provider (chosen as for 'run' when absent)")
    g.add_argument("--model", help="model name for the provider")
    g.add_argument("--base-url", help="API base URL (OpenAI-compatible servers)")
    g.add_argument("--workspace", help="folder the tools work in (default: current folder)")
    g.add_argument("--dry-run", action="store_true", default=None,
                   help="mutating tools show what they would do instead of doing it")
    g.add_argument("--yes", action="store_true", default=None,
                   help="approve every tool call (else the page asks)")
    g.add_argument("--allow", action="append", metavar="RULE", default=[],
                   help="permission rule to allow (repeatable)")
    g.add_argument("--deny", action="append", metavar="RULE", default=[],
                   help="permission rule to deny (repeatable)")
    g.add_argument("--max-iterations", type=int, metavar="N", help="LLM calls per turn at most")
    g.add_argument("--policy", choices=("auto", "on", "off"), default=None,
                   help="the tool policy (steerable.coding.policy): the model classifies each "
                        "request, only a change request may change files, unsupported facts "
                        "are marked; auto: on for every provider but the scripted one")
    g.add_argument("--record-events", metavar="FILE",
                   help="append every event to FILE as JSON lines (debug recorder)")
    g.add_argument("--script", help=argparse.SUPPRESS)


_ON_TEMPORAL = "the sessions that run on Temporal at HOST:PORT (not the local store)"


def _temporal_options(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--temporal", metavar="HOST:PORT", help=what)
    p.add_argument("--task-queue", default="steerable", metavar="NAME",
                   help="the Temporal task queue of the sessions (default: steerable)")


def _undo_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--session", metavar="ID",
                   help="the session whose changes to take back (default: the latest one that "
                        "changed files in this workspace)")
    p.add_argument("--workspace", help="the folder the agent worked in (default: current folder)")
    p.add_argument("--force", action="store_true",
                   help="overwrite files changed since the agent's turn (refused otherwise)")


def _undo_parsers(sub: Any) -> None:
    undo = sub.add_parser("undo", help="take back the file changes of the agent's last turn(s)",
                          description="Put back the files the agent's last N turns changed "
                          "(bash included), from snapshots taken before each tool call. "
                          "Refused, naming them, when files were changed since.")
    undo.add_argument("n", nargs="?", type=int, default=1, metavar="N",
                      help="how many turns that changed files (default: 1)")
    undo.add_argument("--list", action="store_true",
                      help="list the session's turns and the files each changed")
    undo.add_argument("--json", action="store_true", help="with --list: as JSON")
    _undo_options(undo)
    redo = sub.add_parser("redo", help="re-apply what the last undo took back")
    _undo_options(redo)
    rewind = sub.add_parser("rewind", help="take code and/or conversation back to before a turn",
                            description="Go back to how things were before turn TURN (its "
                            "number in 'steerable undo --list', or its id).")
    rewind.add_argument("turn", metavar="TURN")
    what = rewind.add_mutually_exclusive_group(required=True)
    what.add_argument("--code", action="store_true", help="the files only")
    what.add_argument("--conversation", action="store_true", help="the messages only")
    what.add_argument("--both", action="store_true", help="files and messages")
    _undo_options(rewind)


def _answer_parsers(sub: Any) -> None:
    answer = sub.add_parser("answer", help="answer a waiting question and resume its turn",
                            description="Answer the question REQUEST_ID (printed by a run that "
                            "left its turn waiting, or 'steerable waiting'); once the turn has "
                            "every answer it needs it resumes here, rendered as 'run' does.",
                            epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    answer.add_argument("request_id", metavar="REQUEST_ID")
    answer.add_argument("value", metavar="VALUE",
                        help="the answer (JSON when the question's schema wants a number, a "
                             "bool, a list or an object)")
    for verb, what in (("approve", "allow"), ("deny", "refuse")):
        p = sub.add_parser(verb, help=f"{what} a waiting tool call and resume its turn",
                           epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("request_id", metavar="REQUEST_ID")
        p.add_argument("--reason", default="", help="said to the model (with deny)")
        p.add_argument("--json", action="store_true", help="print the events as JSON lines")
        _agent_options(p)
        _temporal_options(p, _ON_TEMPORAL)
    answer.add_argument("--json", action="store_true", help="print the events as JSON lines")
    _agent_options(answer)
    _temporal_options(answer, _ON_TEMPORAL)
    waiting = sub.add_parser("waiting", help="list the questions and approvals that wait for "
                             "an answer, across sessions")
    waiting.add_argument("--json", action="store_true", help="one JSON object per line")
    _temporal_options(waiting, _ON_TEMPORAL)


def _run_parsers(sub: Any) -> None:
    run = sub.add_parser("run", help="run one prompt and exit", epilog=_EPILOG,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("prompt", nargs="?", help="what to ask (optional with --template)")
    run.add_argument("--json", action="store_true",
                     help="print every event as one JSON object per line instead of rendering")
    run.add_argument("--resume", action="store_true",
                     help="continue the pending turn of --session ID (one that was cancelled, "
                          "or cut off when its process stopped); takes no prompt")
    run.add_argument("--discard-pending", action="store_true",
                     help="drop the pending turn of --session ID and run the prompt afresh")
    run.add_argument("--template", metavar="FILE",
                     help="prompt template; {name} is filled from --var, wrapped as untrusted")
    run.add_argument("--var", action="append", metavar="NAME=VALUE", default=[],
                     help="a value for the template (repeatable)")
    run.add_argument("--attach", action="append", metavar="FILE", default=[],
                     help="send FILE with the prompt: an image, a PDF or a text file "
                          "(repeatable; at most 20 MB each)")
    _agent_options(run)

    chat = sub.add_parser("chat", help="interactive session: type to steer while it works")
    _agent_options(chat)


def _serve_parsers(sub: Any) -> None:
    """The long-running front ends: HTTP, Temporal worker, ACP and MCP over stdio."""
    serve = sub.add_parser("serve", help="HTTP API, server-sent events and a web page",
                           description="Serve the agent over HTTP: a JSON API, server-sent "
                           "events and a web page at /. Off loopback it needs a token in "
                           "STEERABLE_SERVER_TOKEN; clients send 'Authorization: Bearer <token>'.")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: "
                       "127.0.0.1; anything else needs STEERABLE_SERVER_TOKEN)")
    serve.add_argument("--port", type=int, default=8321, help="port (0: any free port; "
                       "default: 8321)")
    serve.add_argument("--redis", metavar="URL",
                       help="be one worker of a group sharing sessions through Redis "
                       "(redis://HOST:PORT/DB; default: $STEERABLE_REDIS_URL): any process "
                       "takes any message, events and control reach the right worker")
    _temporal_options(serve, "run the sessions on Temporal at HOST:PORT, this process "
                      "being one of its workers (events through --redis URL)")
    serve.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                       help="without a token only localhost and loopback addresses are served "
                       "(against DNS rebinding); also serve this host name (repeatable)")
    serve.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                       help="let pages of this origin (scheme://host[:port]) call the API from "
                       "a browser (repeatable; default: the server's own pages only)")
    _serve_options(serve)

    worker = sub.add_parser("worker", help="run sessions for a Temporal server (no HTTP)",
                            description="Be one worker of the sessions run on Temporal: each "
                            "session is a workflow, each model and tool call an activity. "
                            "Front ends are 'steerable serve --temporal' processes or "
                            "steerable.temporal.TemporalClient.")
    _temporal_options(worker, "the Temporal frontend to work for (required)")
    worker.add_argument("--redis", metavar="URL", help="Redis for the sessions' event stream "
                        "(redis://HOST:PORT/DB; default: $STEERABLE_REDIS_URL)")
    _serve_options(worker)

    acp = sub.add_parser("acp", help="serve the agent to an editor over ACP (stdin/stdout)",
                         description="Run as an Agent Client Protocol agent on stdin/stdout, "
                         "for editors (Zed, JetBrains IDEs, Neovim...): see docs/protocols/acp.md for "
                         "their settings. Approvals are asked in the editor unless --yes.")
    acp.add_argument("--busy-policy", default="steer",
                     choices=["steer", "follow_up", "interrupt", "rollback", "reject"],
                     help="what a prompt for a session at work does (default: steer it into "
                          "the running turn)")
    acp.add_argument("--unstable", action="store_true",
                     help="also offer the draft _session/inject method")
    acp.add_argument("--no-editor-fs", dest="editor_fs", action="store_false",
                     help="read and write files directly, not through the editor's buffers")
    acp.add_argument("--no-editor-terminal", dest="editor_terminal", action="store_false",
                     help="run bash here, not in the editor's terminal")
    _serve_options(acp)
    g = acp.add_argument_group("sandbox")
    g.add_argument("--no-sandbox", dest="sandbox", action="store_const", const=False,
                   default=None, help="run bash unconfined (default: in bubblewrap when "
                   "installed)")


def _sessions_parsers(sub: Any) -> None:
    sessions = sub.add_parser("sessions", help="list, show, export, fork or remove sessions")
    ss = sessions.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser,
                                 required=True)
    ls = ss.add_parser("list", help="saved sessions, newest first")
    ls.add_argument("--json", action="store_true")
    _temporal_options(ls, _ON_TEMPORAL)
    show = ss.add_parser("show", help="print a session's conversation")
    show.add_argument("id")
    _temporal_options(show, _ON_TEMPORAL)
    export = ss.add_parser("export", help="write a session as Markdown or JSON")
    export.add_argument("id")
    export.add_argument("--format", choices=["markdown", "json"], default="markdown")
    export.add_argument("--output", "-o", metavar="FILE", help="write here instead of stdout")
    fork = ss.add_parser("fork", help="copy a session (or its first N messages) to a new one")
    fork.add_argument("id")
    fork.add_argument("--at", type=int, metavar="N", help="keep the first N messages")
    fork.add_argument("--to", metavar="NEW_ID", help="id of the copy (default: generated)")
    rm = ss.add_parser("rm", help="delete sessions (and their undo snapshots)")
    rm.add_argument("ids", nargs="+", metavar="id")


def _utility_parsers(sub: Any) -> None:
    """Replay, MCP and configuration: commands around the agent rather than runs of it."""
    rp = sub.add_parser("replay", help="play a recording (run --record) again, offline",
                        description="Replay a recording with no model and no network; stop "
                                    "at the first difference from it.")
    rp.add_argument("file", help="a recording written by --record or steerable.replay.Recorder")
    rp.add_argument("--json", action="store_true",
                    help="print every event as one JSON object per line instead of rendering")

    mcp = sub.add_parser("mcp", help="MCP servers of the configuration")
    ms = mcp.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser, required=True)
    mlist = ms.add_parser("list", help="connect to each configured server and list its tools")
    mlist.add_argument("--json", action="store_true")
    mserve = ms.add_parser("serve", help="serve the agent as an MCP server on stdin/stdout",
                           description="Be an MCP server on stdin/stdout: tools run, steer, "
                           "cancel, approve and status drive the agent (see docs/protocols/mcp-server.md).")
    _serve_options(mserve)

    config = sub.add_parser("config", help="show the merged configuration")
    cs = config.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser,
                               required=True)
    cshow = cs.add_parser("show", help="every setting, where it came from, secrets masked")
    cshow.add_argument("--json", action="store_true")
    _agent_options(cshow)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="steerable", epilog=_EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter,
                     description="A coding agent you can watch, steer and stop while it works.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("--debug", action="store_true",
                        help="on an error, print the full traceback too")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    # The order here is the order of 'steerable --help'.
    _run_parsers(sub)
    _serve_parsers(sub)
    _answer_parsers(sub)
    _sessions_parsers(sub)
    _undo_parsers(sub)
    _utility_parsers(sub)
    return parser
