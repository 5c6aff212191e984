"""The integrations a run or chat can switch on: a recording (``--record``) and OpenTelemetry
traces (``--otel``). Each imports its module only when asked for."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from steerable.cli._app import App
from steerable.cli._args import UsageError
from steerable.cli._settings import Settings

if TYPE_CHECKING:
    from steerable.integrations.otel import OpenTelemetryHook

__all__ = ["recording", "telemetry", "telemetry_hook"]


@contextlib.asynccontextmanager
async def recording(app: App, path: str | None) -> AsyncIterator[None]:
    """Record the app's loop to ``path`` while the body runs (nothing without a path)."""
    if path is None:
        yield
        return
    from steerable.replay import Recorder

    async with Recorder(app.loop, path, redact=app.redact):
        yield


def telemetry(app: App, settings: Settings) -> None:
    """With ``otel`` on, trace the loop to the global tracer provider (configured by the
    environment: ``opentelemetry-instrument``, or the application embedding the CLI)."""
    hook = telemetry_hook(settings)
    if hook is not None:
        app.loop.register_hook(hook)


def telemetry_hook(settings: Settings) -> OpenTelemetryHook | None:
    """A new OpenTelemetry hook when ``otel`` is on (one per loop: ``serve --redis`` workers
    run their turns on loops of their own), else None."""
    if not settings["otel"]:
        return None
    try:
        from steerable.integrations.otel import OpenTelemetryHook
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    from steerable.providers import choose_provider_name

    return OpenTelemetryHook(provider_name=choose_provider_name(settings["provider"]))
