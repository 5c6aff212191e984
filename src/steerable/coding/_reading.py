"""How the tool policy reads what a request asks for: the classification call (``_classify``),
then, for a change, the second reading that must agree (``_confirm``), then a name check that
turns "general" into "workspace" when the request names a file or folder that exists (a name is
a name in every language). Every failure reads as the safe kind: look, change nothing.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from steerable._hooks import LLMRequestContext
from steerable.coding._classify import Intent, classify_request, parse_kind
from steerable.coding._confirm import confirm_request, confirms
from steerable.coding._reads import WorkspaceReads
from steerable.errors import ProviderError

__all__ = ["read_request"]


async def read_request(ctx: LLMRequestContext, asked: Sequence[str],
                       reads: WorkspaceReads) -> tuple[Intent, bool]:
    """The kind of request ``ctx.request`` is, and whether a change was read but not confirmed
    (then the kind is the safe one, "workspace")."""
    try:
        reply = await ctx.ask(classify_request(ctx.request), "classify")
    except ProviderError:
        return "workspace", False  # the safe reading: look, change nothing
    kind = parse_kind(reply.text)
    if kind == "change":
        # One call of one model does not open the gate (the 0.5B read "What is 17 + 25?" as a
        # change, and wrote a file with --yes): a second reading, framed the other way round,
        # must agree.
        try:
            confirmed = confirms((await ctx.ask(confirm_request(ctx.request), "confirm")).text)
        except ProviderError:
            confirmed = False
        return ("change", False) if confirmed else ("workspace", True)
    if kind == "general" and await _names_workspace(" ".join(asked), reads):
        kind = "workspace"
    return kind, False


async def _names_workspace(text: str, reads: WorkspaceReads) -> bool:
    """Whether ``text`` names a file or folder of the workspace (typos forgiven)."""
    names = await reads.names()
    for word in re.findall(r"[\w.-]{3,}", text.lower()):
        if word in names or difflib.get_close_matches(word, names, n=1, cutoff=0.8):
            return True
    return False
