"""The ``steerable`` command line: run, chat, sessions, config.

Only argparse is imported up front so that ``steerable --help`` stays fast; each command
imports what it needs (rich, prompt-toolkit, the store) when it runs.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from steerable.cli._args import USAGE_ERROR, UsageError, build_parser

__all__ = ["main"]

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, USAGE_ERROR, 3


class _OneLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"steerable: {record.levelname.lower()}: {record.getMessage()}"


def _setup_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    root = logging.getLogger("steerable")
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    root.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already printed
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    if args.version:
        from steerable import __version__

        print(f"steerable {__version__}")
        return EXIT_OK
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    _setup_logging()
    from steerable.cli._commands import dispatch
    from steerable.errors import SteerableError

    try:
        return dispatch(args)
    except UsageError as exc:
        print(f"steerable: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SteerableError as exc:
        _traceback_if(args.debug)
        print(f"steerable: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("steerable: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`steerable run --json ... | head`): stop quietly.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except Exception as exc:  # a bug of ours: still one line, the traceback on request
        _traceback_if(args.debug)
        hint = "" if args.debug else " (run with --debug for the traceback)"
        print(f"steerable: internal error: {type(exc).__name__}: {exc}{hint}", file=sys.stderr)
        return EXIT_ERROR


def _traceback_if(debug: bool) -> None:
    if debug:
        import traceback

        traceback.print_exc()
