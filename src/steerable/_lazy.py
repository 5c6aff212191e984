"""Module attributes imported on first use (a package's ``__getattr__``, PEP 562): a name
few programs need costs nothing at import, and after its first use it is an ordinary
attribute of the package."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, where: Mapping[str, str],
                    namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package`` (whose globals are ``namespace``): each name of
    ``where`` comes from the module it maps to, looked up once."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # the next access is an ordinary attribute lookup
        return value

    return __getattr__
