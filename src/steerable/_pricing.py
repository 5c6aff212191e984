"""What an LLM call cost, from Pydantic's ``genai-prices`` table (the ``prices`` extra).

The table is a maintained package, not a list kept here: prices change monthly and a hand-kept
copy goes stale. Without the package installed every cost is unknown (None) and nothing else
changes. Importing it takes ~0.8 s (its data module is 1.6 MB), so the first priced call loads
it in a worker thread instead of stalling every turn on the event loop; after that a lookup is
a plain call (~0.3 ms). A model the table does not know, or an API it does not know (a local
server, a proxy), has no price: None, never a guess.
"""

from __future__ import annotations

import asyncio
import importlib
from types import ModuleType

from steerable._messages import Usage

__all__ = ["call_cost", "prices_available"]

_module: ModuleType | None = None
_missing = False


def _load() -> ModuleType | None:
    global _module, _missing
    if _module is None and not _missing:
        try:
            _module = importlib.import_module("genai_prices")
        except ImportError:
            _missing = True
    return _module


def prices_available() -> bool:
    """Whether the price table can be loaded (``pip install 'steerable[prices]'``)."""
    return _load() is not None


def _price(prices: ModuleType, usage: Usage, model: str, api_url: str | None) -> float | None:
    counts = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
    if usage.cached_tokens:
        counts["cache_read_tokens"] = usage.cached_tokens
    if usage.cache_write_tokens:
        counts["cache_write_tokens"] = usage.cache_write_tokens
    try:
        if api_url:
            found = prices.calc_price(prices.Usage(**counts), model, provider_api_url=api_url)
        else:
            found = prices.calc_price(prices.Usage(**counts), model)
    except LookupError:  # a model or an API the table does not know
        return None
    return float(found.total_price)


async def call_cost(usage: Usage, model: str | None, api_url: str | None) -> float | None:
    """The cost in US dollars of one call with ``usage`` on ``model`` through ``api_url``
    (None: the model's name alone picks the provider), or None when it is not known."""
    if model is None or _missing:
        return None
    prices = _module
    if prices is None:  # the first lookup builds the table's indexes too (~65 ms): a thread
        return await asyncio.to_thread(_first, usage, model, api_url)
    return _price(prices, usage, model, api_url)


def _first(usage: Usage, model: str, api_url: str | None) -> float | None:
    prices = _load()
    return None if prices is None else _price(prices, usage, model, api_url)
