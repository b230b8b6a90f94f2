"""ResourceInterpreterCustomization admission: Lua scripts compile (never run) and define their function."""

from __future__ import annotations

from typing import Any

import pytest

from flotilla.apiserver.webhooks.interpreter_customization import (
    HOOKS,
    InterpreterCustomizationAdmission,
    RICIndex,
    check_lua_script,
    conflicting_customizations,
    validate_customization_scripts,
)


def ric(name: str = "flink", kind: str = "FlinkDeployment", **scripts: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "target": {"apiVersion": "flink.apache.org/v1beta1", "kind": kind},
            "customizations": {hook: {"luaScript": script} for hook, script in scripts.items()},
        },
    }


GOOD = {h.field: f"function {h.function}(a, b)\n  return a\nend\n" for h in HOOKS}


def test_hook_names_are_karmadas_then_d20_restore_state() -> None:
    assert [(h.field, h.operation, h.function) for h in HOOKS] == [
        ("retention", "Retain", "Retain"),
        ("replicaResource", "InterpretReplica", "GetReplicas"),
        ("componentResource", "InterpretComponent", "GetComponents"),
        ("replicaRevision", "ReviseReplica", "ReviseReplica"),
        ("statusReflection", "InterpretStatus", "ReflectStatus"),
        ("statusAggregation", "AggregateStatus", "AggregateStatus"),
        ("healthInterpretation", "InterpretHealth", "InterpretHealth"),
        ("dependencyInterpretation", "InterpretDependency", "GetDependencies"),
        ("restoreState", "RestoreState", "RestoreState"),
    ]


def test_all_hooks_valid() -> None:
    assert validate_customization_scripts(ric(**GOOD)["spec"]) == []


@pytest.mark.parametrize(
    "script",
    [
        "function InterpretHealth(obj) return true end",
        "InterpretHealth = function(obj) return obj.status ~= nil end",
        "local kube = require('kube')\nfunction InterpretHealth(obj)\n  return kube ~= nil\nend",
        "_G.InterpretHealth = function(obj) return true end",
        "if true then\n  function InterpretHealth(o) return true end\nend",
    ],
)
def test_scripts_that_define_the_function(script: str) -> None:
    assert check_lua_script(script, "InterpretHealth") is None


def test_syntax_errors_are_lua_errors() -> None:
    assert check_lua_script("function InterpretHealth(obj\n  return true\nend", "InterpretHealth") == (
        "luaScript:2: ')' expected near 'return'"
    )


@pytest.mark.parametrize(
    "script",
    [
        "local function InterpretHealth(obj) return true end",
        "function interpretHealth(obj) return true end",
        "local M = {}\nfunction M.InterpretHealth(obj) return true end\nreturn M",
        "function Other() InterpretHealth = nil end",
    ],
)
def test_scripts_that_do_not_define_the_function(script: str) -> None:
    assert check_lua_script(script, "InterpretHealth") == "the script does not define the global function InterpretHealth"


def test_goto_is_not_lua_51() -> None:
    problem = check_lua_script("function InterpretHealth(o)\n  goto done\n  ::done::\n  return true\nend", "InterpretHealth")
    assert problem is not None and problem.endswith("(scripts run on Lua 5.1, which has no goto statement or labels)")


def test_binary_chunks_refused() -> None:
    assert check_lua_script("\x1bLuaQ\x00", "InterpretHealth") == (
        "precompiled (binary) Lua chunks are not allowed; give the script as source text"
    )


def test_scripts_are_never_run() -> None:
    # an endless loop or an error at the top level would hang or fail if the chunk ran
    assert check_lua_script("while true do end\nfunction InterpretHealth() end", "InterpretHealth") is None
    assert check_lua_script("error('boom')\nfunction InterpretHealth() end", "InterpretHealth") is None


def test_validation_messages() -> None:
    spec = ric(healthInterpretation="function InterpretHealth(", statusReflection="function Reflect() end")["spec"]
    msgs = [f"{c.field}: {c.message}" for c in validate_customization_scripts(spec)]
    assert msgs == [
        "spec.customizations.statusReflection.luaScript: Invalid value: InterpreterOperation(InterpretStatus) Lua "
        "script error: the script does not define the global function ReflectStatus",
        "spec.customizations.healthInterpretation.luaScript: Invalid value: InterpreterOperation(InterpretHealth) Lua "
        "script error: luaScript:1: <name> or '...' expected near '<eof>'",
    ]


def test_at_least_one_customization_and_a_target() -> None:
    spec = {"target": {"apiVersion": "", "kind": ""}, "customizations": {"retention": {"luaScript": ""}}}
    msgs = [f"{c.field}: {c.message}" for c in validate_customization_scripts(spec)]
    assert msgs[0].startswith("spec.customizations: Required value: at least one customization must have a luaScript")
    assert msgs[1:] == ["spec.target.apiVersion: Required value", "spec.target.kind: Required value"]


def test_conflicts_with_other_customizations() -> None:
    existing = [
        ric("a-health", healthInterpretation=GOOD["healthInterpretation"],
            dependencyInterpretation=GOOD["dependencyInterpretation"]),
        ric("b-other-kind", kind="SessionJob", statusReflection=GOOD["statusReflection"]),
    ]
    new = ric("c-new", healthInterpretation=GOOD["healthInterpretation"], statusReflection=GOOD["statusReflection"],
              dependencyInterpretation=GOOD["dependencyInterpretation"])
    msgs = [f"{c.field}: {c.message}" for c in conflicting_customizations(new, existing)]
    assert msgs == [
        "spec.customizations.healthInterpretation: Forbidden: conflicting with InterpreterOperation(InterpretHealth) "
        "of existing ResourceInterpreterCustomization(a-health)"
    ]
    # the stored copy of the same RIC is no conflict
    assert conflicting_customizations(existing[0], existing) == []


def test_plugin_with_and_without_existing() -> None:
    stored = [ric("a", healthInterpretation=GOOD["healthInterpretation"])]
    new = ric("b", healthInterpretation=GOOD["healthInterpretation"])
    assert InterpreterCustomizationAdmission().validate(new, None, "CREATE") == []
    assert len(InterpreterCustomizationAdmission(existing=lambda: stored).validate(new, None, "CREATE")) == 1


def test_ric_index_follows_writes() -> None:
    class RT:
        group, kind = "config.karmada.io", "ResourceInterpreterCustomization"

    index = RICIndex()
    index.on_write(RT(), "ADDED", ric("a"))
    index.on_write(RT(), "MODIFIED", ric("b"))
    assert sorted(r["metadata"]["name"] for r in index.items()) == ["a", "b"]
    index.on_write(RT(), "DELETED", ric("a"))
    assert [r["metadata"]["name"] for r in index.items()] == ["b"]


def test_d20_restore_state_script_is_checked_like_karmadas_hooks() -> None:
    good = ric(restoreState="function RestoreState(desiredObj, restore)\n  return desiredObj\nend\n")
    assert validate_customization_scripts(good["spec"]) == []
    misnamed = ric(restoreState="function Restore(desiredObj, restore)\n  return desiredObj\nend\n")
    msgs = [f"{c.field}: {c.message}" for c in validate_customization_scripts(misnamed["spec"])]
    assert msgs == ["spec.customizations.restoreState.luaScript: Invalid value: InterpreterOperation(RestoreState) "
                    "Lua script error: the script does not define the global function RestoreState"]
    other = ric("b-other", restoreState="function RestoreState(o, r)\n  return o\nend\n")
    msgs = [f"{c.field}: {c.message}" for c in conflicting_customizations(other, [good])]
    assert msgs == ["spec.customizations.restoreState: Forbidden: conflicting with InterpreterOperation(RestoreState) "
                    "of existing ResourceInterpreterCustomization(flink)"]
