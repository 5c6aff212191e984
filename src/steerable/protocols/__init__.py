"""Front ends for the ecosystem's agent protocols, one package per protocol (SPEC 12).

Each is a thin adapter over the drivers (``AgentLoop``) and takes its types from the protocol's
own package, installed with an extra (``steerable[acp]``); nothing below imports this package.
"""
