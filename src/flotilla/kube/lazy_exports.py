"""A package's names imported from its modules on first use (PEP 562), so that importing one light module of the
package (a command's parser needs a constant) does not load the heavy ones its ``__init__`` re-exports."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, modules: Mapping[str, Iterable[str]]) -> tuple[Callable[[str], Any], list[str]]:
    """The module ``__getattr__`` of ``package`` and its ``__all__``, for ``modules`` (sub-module -> the names it
    defines that the package exports)."""
    exports = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)

    return __getattr__, sorted(exports)
