"""``steerable serve``: a JSON API, server-sent events and a web page over running sessions.

Needs the ``server`` extra (Starlette, uvicorn). ``create_app(runner)`` builds the ASGI app
(``end_streams(app)`` ends its open event streams when the server shuts down); ``LocalRunner`` runs the sessions of one ``AgentLoop`` in this process, and any
other ``SessionRunner`` (e.g. one spread over worker processes) plugs into the same routes.
``UndoAPI`` adds the undo endpoints over a ``SnapshotHook`` (``create_app(runner, undo=...)``).
"""

from __future__ import annotations

from steerable.server._app import MAX_BODY, create_app, end_streams
from steerable.server._hub import EventHub
from steerable.server._runner import LocalRunner, Sent, SessionRunner
from steerable.server._undo_api import UndoAPI

__all__ = ["MAX_BODY", "EventHub", "LocalRunner", "Sent", "SessionRunner", "UndoAPI",
           "create_app", "end_streams"]
