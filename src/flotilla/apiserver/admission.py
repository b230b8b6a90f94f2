"""The admission hook every kind can plug into: default, validate, warn (Karmada's webhooks' job).

Plugins are registered per (group, kind). They run in registration order on create and update,
after the server's own defaulting and before anything is persisted, so a rejected object is
never half-written.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from flotilla.kube.validation import Cause

Operation = Literal["CREATE", "UPDATE"]


class AdmissionPlugin(Protocol):
    def default(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> None:
        """Fill in defaults, mutating ``obj`` in place."""

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> list[Cause]:
        """Problems that make the object invalid (422, with field paths)."""

    def warnings(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> list[str]:
        """Things the user should hear about; returned as HTTP Warning headers (kubectl prints them)."""


@dataclass
class AdmissionResult:
    causes: list[Cause]
    warnings: list[str]


class Admission:
    def __init__(self) -> None:
        self._plugins: dict[tuple[str, str], list[AdmissionPlugin]] = defaultdict(list)

    def register(self, group: str, kind: str, plugin: AdmissionPlugin) -> None:
        self._plugins[(group, kind)].append(plugin)

    def plugins_for(self, group: str, kind: str) -> list[AdmissionPlugin]:
        return list(self._plugins.get((group, kind), ()))

    def admit(
        self, group: str, kind: str, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation
    ) -> AdmissionResult:
        plugins = self._plugins.get((group, kind), ())
        for p in plugins:
            p.default(obj, old, op)
        causes: list[Cause] = []
        warnings: list[str] = []
        for p in plugins:
            causes.extend(p.validate(obj, old, op))
            warnings.extend(p.warnings(obj, old, op))
        return AdmissionResult(causes, warnings)
