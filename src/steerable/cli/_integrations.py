"""The integrations a run or chat can switch on: a recording (``--record``) and OpenTelemetry
traces (``--otel``). Each imports its module only when asked for."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from steerable.cli._app import App
from steerable.cli._args import UsageError
from steerable.cli._settings import Settings

__all__ = ["recording", "telemetry"]


@contextlib.asynccontextmanager
async def recording(app: App, path: str | None) -> AsyncIterator[None]:
    """Record the app's loop to ``path`` while the body runs (nothing without a path)."""
    if path is None:
        yield
        return
    from steerable.replay import Recorder

    async with Recorder(app.loop, path):
        yield


def telemetry(app: App, settings: Settings) -> None:
    """With ``otel`` on, trace the loop to the global tracer provider (configured by the
    environment: ``opentelemetry-instrument``, or the application embedding the CLI)."""
    if not settings["otel"]:
        return
    try:
        from steerable.integrations.otel import OpenTelemetryHook
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    from steerable.providers import choose_provider_name

    app.loop.register_hook(OpenTelemetryHook(
        provider_name=choose_provider_name(settings["provider"])))
