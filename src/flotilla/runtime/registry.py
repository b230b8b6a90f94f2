"""Controllers by name, in start order (the controller-manager's ``--controllers`` names)."""

from __future__ import annotations

import importlib

from flotilla.runtime.base import Controller
from flotilla.runtime.controller_names import DECLARED_CONTROLLERS


def _load() -> dict[str, type[Controller]]:
    found: dict[str, type[Controller]] = {}
    for name, module, cls in DECLARED_CONTROLLERS:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name == module:  # not written yet
                continue
            raise
        found[name] = getattr(mod, cls)
    return found


CONTROLLERS: dict[str, type[Controller]] = _load()
