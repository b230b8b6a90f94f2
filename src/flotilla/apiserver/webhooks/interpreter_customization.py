"""ResourceInterpreterCustomization admission.

Karmada's validating webhook (``pkg/webhook/resourceinterpretercustomization``):
  - every Lua script must compile: ``InterpreterOperation(<Operation>) Lua script error: <error>``;
  - no two RICs may customize the same operation (``InterpretDependency`` excepted: dependency
    scripts are all run and their results merged) for the same ``target`` apiVersion and kind:
    ``conflicting with InterpreterOperation(<Operation>) of existing ResourceInterpreterCustomization(<name>)``.
Flotilla adds:
  - the hook ``spec.customizations.restoreState`` (operation ``RestoreState``, function
    ``RestoreState(desiredObj, restore)``), checked like Karmada's hooks; Karmada's RICs stay valid as they are;
  - each script must define, at its top level, the global function Karmada calls for the operation
    (``Retain``, ``GetReplicas``, ``GetComponents``, ``ReviseReplica``, ``ReflectStatus``,
    ``AggregateStatus``, ``InterpretHealth``, ``GetDependencies``; ``RestoreState``); Karmada finds out only
    when it first calls the hook;
  - at least one customization, and a non-empty ``target.apiVersion``/``target.kind``.

Scripts are compiled with Lua 5.1 (lupa, as Flotilla's interpreter runs them; Karmada's gopher-lua
is Lua 5.1 too) and **never run**: the function is found in the compiled chunk (a ``SETGLOBAL
<name>`` in the main chunk), so admission executes no user code. Precompiled (binary) chunks are
refused. Note: gopher-lua also accepts Lua 5.2's ``goto`` and labels; Lua 5.1 does not, so such a
script is refused here (with a hint) because Flotilla could not run it.

The conflict check needs the other RICs, which a plugin does not see: pass ``existing``, a callable
returning the stored RICs (e.g. :meth:`RICIndex.items`). Without it the check is skipped. Like
Karmada's webhook (which lists RICs from its cache), two RICs created at the same moment can both
pass.
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from flotilla.apiserver.admission import Operation
from flotilla.apiserver.store_mirror import NameMirror
from flotilla.apiserver.webhooks.common import (
    OMIT,
    NoOpPlugin,
    as_dict,
    forbidden,
    invalid,
    required,
    spec_unchanged,
)
from flotilla.kube.objects import as_map, as_str, meta_of, spec_of
from flotilla.kube.validation import Cause

log = logging.getLogger(__name__)

GROUP = "config.karmada.io"
KIND = "ResourceInterpreterCustomization"


@dataclass(frozen=True)
class Hook:
    field: str  # key under spec.customizations
    operation: str  # Karmada's InterpreterOperation name
    function: str  # global Lua function the script must define


#: In Karmada's order (``interpreter.AllResourceInterpreterCustomizationRules``), then Flotilla's ``restoreState``.
HOOKS: tuple[Hook, ...] = (
    Hook("retention", "Retain", "Retain"),
    Hook("replicaResource", "InterpretReplica", "GetReplicas"),
    Hook("componentResource", "InterpretComponent", "GetComponents"),
    Hook("replicaRevision", "ReviseReplica", "ReviseReplica"),
    Hook("statusReflection", "InterpretStatus", "ReflectStatus"),
    Hook("statusAggregation", "AggregateStatus", "AggregateStatus"),
    Hook("healthInterpretation", "InterpretHealth", "InterpretHealth"),
    Hook("dependencyInterpretation", "InterpretDependency", "GetDependencies"),
    Hook("restoreState", "RestoreState", "RestoreState"),
)
MULTI_SCRIPT_OPERATIONS = frozenset({"InterpretDependency"})


def script_of(ric: Mapping[str, Any], hook: Hook) -> str:
    """The hook's script ("" when the hook is not customized), as Karmada's ``rule.GetScript``."""
    return as_str(as_map(as_map(spec_of(ric).get("customizations")).get(hook.field)).get("luaScript"))


# ---------------------------------------------------------------------------------------------
# Compiling Lua without running it
# ---------------------------------------------------------------------------------------------

_COMPILE = b"""
local loadstring, dump = loadstring or load, string.dump
return function(src, name)
  local f, err = loadstring(src, name)
  if not f then return false, err end
  return true, dump(f)
end
"""

_SETGLOBAL = 7  # Lua 5.1 opcode


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        if data[:5] != b"\x1bLua\x51" or data[5] != 0:
            raise ValueError("not a Lua 5.1 chunk")
        little = data[6] == 1
        self.endian = "<" if little else ">"
        self.int_size, self.size_t, self.instr_size, self.number_size = data[7], data[8], data[9], data[10]
        self.pos = 12

    def _unsigned(self, size: int) -> int:
        value = int.from_bytes(self.data[self.pos : self.pos + size], "little" if self.endian == "<" else "big")
        self.pos += size
        return value

    def int(self) -> int:
        return self._unsigned(self.int_size)

    def string(self) -> bytes | None:
        n = self._unsigned(self.size_t)
        if n == 0:
            return None
        text = self.data[self.pos : self.pos + n - 1]  # without the trailing NUL
        self.pos += n
        return text

    def function(self, *, main: bool) -> set[bytes]:
        """Names assigned with SETGLOBAL in this function (only collected for the main chunk)."""
        self.string()  # source
        self.int()  # linedefined
        self.int()  # lastlinedefined
        self.pos += 4  # nups, numparams, is_vararg, maxstacksize
        code = [self._unsigned(self.instr_size) for _ in range(self.int())]
        constants: list[Any] = []
        for _ in range(self.int()):
            kind = self.data[self.pos]
            self.pos += 1
            if kind == 0:
                constants.append(None)
            elif kind == 1:
                constants.append(bool(self.data[self.pos]))
                self.pos += 1
            elif kind == 3:
                raw = self.data[self.pos : self.pos + self.number_size]
                constants.append(struct.unpack(self.endian + ("d" if self.number_size == 8 else "f"), raw)[0])
                self.pos += self.number_size
            elif kind == 4:
                constants.append(self.string())
            else:
                raise ValueError(f"unknown constant type {kind}")
        for _ in range(self.int()):
            self.function(main=False)
        for _ in range(self.int()):  # line info
            self.int()
        for _ in range(self.int()):  # local variables
            self.string()
            self.int()
            self.int()
        for _ in range(self.int()):  # upvalue names
            self.string()
        if not main:
            return set()
        names: set[bytes] = set()
        for instruction in code:
            if instruction & 0x3F == _SETGLOBAL:
                bx = instruction >> 14
                if bx < len(constants) and isinstance(constants[bx], bytes):
                    names.add(constants[bx])
        if b"_G" in constants:
            # _G.Name = ... / _G["Name"] = ... / rawset(_G, "Name", ...): count the string constants too
            names.update(c for c in constants if isinstance(c, bytes))
        return names


def lua51_globals_assigned(bytecode: bytes) -> set[str]:
    """Global names the main chunk of a ``string.dump`` (Lua 5.1) assigns (``SETGLOBAL``; with a
    reference to ``_G``, every string constant of the main chunk is counted as well)."""
    return {name.decode("utf-8", "replace") for name in _Reader(bytecode).function(main=True)}


class LuaChecker:
    """Compiles scripts with Lua 5.1 (never running them). One Lua state, guarded by a lock."""

    MAX_MEMORY = 64 * 1024 * 1024

    def __init__(self) -> None:
        from lupa import lua51  # type: ignore[import-untyped]

        self._lock = threading.Lock()
        self._rt = lua51.LuaRuntime(
            encoding=None,
            register_eval=False,
            register_builtins=False,
            unpack_returned_tuples=True,
            max_memory=self.MAX_MEMORY,
        )
        self._compile = self._rt.execute(_COMPILE)

    def check(self, script: str, function: str) -> str | None:
        """The problem with ``script`` (a compile error, or the function not being defined), or ``None``."""
        if script.startswith("\x1b"):
            return "precompiled (binary) Lua chunks are not allowed; give the script as source text"
        source = script.encode()
        with self._lock:
            try:
                ok, result = self._compile(source, b"=luaScript")
            except Exception as e:  # lupa.LuaMemoryError and friends
                return f"the script cannot be compiled: {e}"
        if not ok:
            error = _text(result)
            if b"goto" in source or b"::" in source:
                error += " (scripts run on Lua 5.1, which has no goto statement or labels)"
            return error
        try:
            defined = lua51_globals_assigned(bytes(result))
        except (ValueError, IndexError, struct.error):  # pragma: no cover - our own dump format
            log.exception("cannot read compiled Lua chunk")
            return None
        if function not in defined:
            return f"the script does not define the global function {function}"
        return None


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


_checker: LuaChecker | None = None


def lua_checker() -> LuaChecker:
    global _checker
    if _checker is None:
        _checker = LuaChecker()
    return _checker


def check_lua_script(script: str, function: str) -> str | None:
    """``None`` if ``script`` compiles (Lua 5.1) and defines the global ``function``; else the problem."""
    return lua_checker().check(script, function)


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------


def validate_customization_scripts(spec: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    ric = {"spec": spec}
    customized = 0
    for hook in HOOKS:
        script = script_of(ric, hook)
        if not script:
            continue
        customized += 1
        problem = check_lua_script(script, hook.function)
        if problem:
            causes.append(
                invalid(
                    f"spec.customizations.{hook.field}.luaScript",
                    OMIT,
                    f"InterpreterOperation({hook.operation}) Lua script error: {problem}",
                )
            )
    if not customized and isinstance(spec.get("customizations"), dict):
        causes.append(
            required(
                "spec.customizations",
                "at least one customization must have a luaScript (one of "
                + ", ".join(h.field for h in HOOKS)
                + ")",
            )
        )
    target = as_dict(spec.get("target"))
    for key in ("apiVersion", "kind"):
        if target.get(key) == "":
            causes.append(required(f"spec.target.{key}"))
    return causes


def conflicting_customizations(ric: Mapping[str, Any], others: Iterable[Mapping[str, Any]]) -> list[Cause]:
    """Operations of ``ric`` already customized by another RIC for the same target."""
    name = meta_of(ric).get("name")
    target = as_map(spec_of(ric).get("target"))
    causes: list[Cause] = []
    reported: set[str] = set()
    for other in sorted(others, key=lambda o: as_str(meta_of(o).get("name"))):
        other_name = meta_of(other).get("name")
        if other_name == name:
            continue
        other_target = as_map(spec_of(other).get("target"))
        if (other_target.get("apiVersion"), other_target.get("kind")) != (target.get("apiVersion"), target.get("kind")):
            continue
        for hook in HOOKS:
            if hook.operation in MULTI_SCRIPT_OPERATIONS or hook.field in reported:
                continue
            if script_of(other, hook) and script_of(ric, hook):
                reported.add(hook.field)
                causes.append(
                    forbidden(
                        f"spec.customizations.{hook.field}",
                        f"conflicting with InterpreterOperation({hook.operation}) of existing "
                        f"ResourceInterpreterCustomization({other_name})",
                    )
                )
    return causes


class InterpreterCustomizationAdmission(NoOpPlugin):
    def __init__(self, *, existing: Callable[[], Iterable[Mapping[str, Any]]] | None = None) -> None:
        self.existing = existing

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> list[Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec_unchanged(obj, old, op):
            return []
        causes = validate_customization_scripts(spec)
        if self.existing is not None:
            causes.extend(conflicting_customizations(obj, list(self.existing())))
        return causes


# ---------------------------------------------------------------------------------------------
# The stored RICs, for the conflict check
# ---------------------------------------------------------------------------------------------


class RICIndex(NameMirror[dict[str, Any]]):
    """The ResourceInterpreterCustomizations stored in an API server, kept current.

    ``attach(storage)`` lists them once, then follows writes (of this server, via
    ``storage.after_write``, and of other servers sharing the store, via a watch). ``items`` is the
    ``existing`` callable of :class:`InterpreterCustomizationAdmission`.
    """

    what = "ResourceInterpreterCustomizations"

    def items(self) -> list[dict[str, Any]]:
        return list(self.by_name.values())

    def value_of(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        return dict(obj)

    def watches(self, rt: Any) -> bool:
        return rt is self._rt or (getattr(rt, "group", None) == GROUP and getattr(rt, "kind", None) == KIND)

    async def attach(self, storage: Any, rt: Any = None, *, follow: bool = True) -> None:
        rt = rt if rt is not None else storage.types.by_kind(GROUP, "v1alpha1", KIND)
        if rt is None:
            raise LookupError(f"{GROUP}/v1alpha1 {KIND} is not served")
        await super().attach(storage, rt, follow=follow)
