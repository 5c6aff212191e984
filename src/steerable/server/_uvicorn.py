"""uvicorn's server for an app made by ``create_app``: it ends the app's open event streams as
soon as it is told to stop, so an open stream does not hold the graceful shutdown until its
timeout (uvicorn waits for every response to finish before it stops)."""

from __future__ import annotations

import asyncio
import socket
from types import FrameType

import uvicorn
from starlette.applications import Starlette

from steerable.server._app import end_streams

__all__ = ["Server"]


class Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, app: Starlette) -> None:
        super().__init__(config)
        self._app = app
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        # A signal handler: the streams are ended on the loop's own turn.
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(end_streams, self._app)

    def stop(self) -> None:
        """Stop from the loop's thread (as a signal would): the streams end, then the server."""
        self.should_exit = True
        end_streams(self._app)
