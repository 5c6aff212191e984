"""The driver layer: what runs turns of the engine (``_core``) for callers.

``AgentLoop`` (``_loop``) is a thin front over its parts: the binding to one asyncio event loop
(``_binding``), the event observers (``_observers``, ``_recorder``), the turns it starts and
resumes (``_turns``), the lanes of ``send`` with their busy policies (``_lanes``) and the one
table of inbound commands (``_commands``, run by ``_controls``). Beside it: ``TurnLoop``
(``_turnloop``), ``SessionDriver`` (``_session_driver``), the in-process bus gateway
(``_gateway``), the composite agents (``_composites``) and the one rule for which top-level
session an event belongs to (``_top_session``).

Layers: this package imports the values, ``_core`` and ``storage`` protocols; front ends
(``cli``, ``server``, ``protocols``, ``scale``, ``replay``) import it. The public names are
exported from ``steerable``.
"""
