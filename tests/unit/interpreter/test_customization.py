"""ResourceInterpreterCustomization parsing and merging."""

from __future__ import annotations

import pytest

from flotilla.interpreter import (
    GVK,
    CustomizationRegistry,
    HookNotFoundError,
    InterpreterError,
    LuaScriptError,
    Operation,
    parse_customization,
)

from . import samples

HEALTHY = "function InterpretHealth(o) return true end"
UNHEALTHY = "function InterpretHealth(o) return false end"
WIDGET = GVK(samples.WIDGET_API, "Widget")


def dependency_script(name: str) -> str:
    entry = "{apiVersion = 'v1', kind = 'ConfigMap', name = '" + name + "', namespace = o.metadata.namespace}"
    return "function GetDependencies(o) return {" + entry + "} end"


def test_parse() -> None:
    c = parse_customization(samples.widget_ric())
    assert c.name == "widgets"
    assert c.target == WIDGET
    assert set(c.scripts) == set(Operation)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.update(kind="Other"), "expected kind ResourceInterpreterCustomization"),
        (lambda r: r.update(apiVersion="config.karmada.io/v2"), "apiVersion must be config.karmada.io/v1alpha1"),
        (lambda r: r["spec"].pop("target"), "spec.target is missing"),
        (lambda r: r["spec"]["target"].pop("kind"), "spec.target.kind is not set"),
        (lambda r: r["spec"]["target"].update(apiVersion=""), "spec.target.apiVersion is not set"),
        (lambda r: r["spec"]["customizations"].update(healthInterpretations={"luaScript": ""}),
         "unknown customization spec.customizations.healthInterpretations"),
        (lambda r: r["spec"]["customizations"].update(retention={"luaScript": 5}),
         r"retention.luaScript must be a string"),
    ],
)
def test_parse_errors_say_what_to_fix(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    r = samples.widget_ric()
    mutate(r)
    with pytest.raises(InterpreterError, match=message):
        parse_customization(r)


def test_first_non_empty_script_by_name_wins() -> None:
    registry = CustomizationRegistry([
        samples.ric("c-third", healthInterpretation=UNHEALTHY),
        samples.ric("b-second", healthInterpretation=HEALTHY),
        samples.ric("a-first", healthInterpretation=""),
    ])
    assert registry.rules_for(WIDGET).origin(Operation.INTERPRET_HEALTH) == "'b-second'"  # type: ignore[union-attr]
    assert registry.interpret_health(samples.widget()) is True
    assert registry.conflicts() == ["ResourceInterpreterCustomizations 'b-second' and 'c-third' both define "
                                    "healthInterpretation for example.io/v1 Widget"]


def test_hooks_merge_per_operation() -> None:
    registry = CustomizationRegistry([samples.ric("a", healthInterpretation=HEALTHY),
                                      samples.ric("b", replicaRevision=samples.REVISE_REPLICA)])
    assert registry.has_hook(WIDGET, Operation.INTERPRET_HEALTH)
    assert registry.has_hook(WIDGET, Operation.REVISE_REPLICA)
    assert not registry.has_hook(WIDGET, Operation.RETAIN)
    assert not registry.has_hook(GVK("example.io/v2", "Widget"), Operation.INTERPRET_HEALTH)
    assert registry.conflicts() == []
    with pytest.raises(HookNotFoundError, match="no ResourceInterpreterCustomization defines retention"):
        registry.retain(samples.widget(), samples.widget())


def test_dependency_scripts_all_run_and_merge_sorted() -> None:
    registry = CustomizationRegistry([
        samples.ric("b", dependencyInterpretation=dependency_script("zeta")),
        samples.ric("a", dependencyInterpretation=dependency_script("alpha")),
        samples.ric("c", dependencyInterpretation=dependency_script("alpha")),
        samples.ric("d", dependencyInterpretation=""),
    ])
    assert registry.get_dependencies(samples.widget()) == [
        {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "demo", "name": "alpha"},
        {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "demo", "name": "zeta"},
    ]
    assert registry.conflicts() == []
    only_empty = CustomizationRegistry([samples.ric("d", dependencyInterpretation="")])
    assert not only_empty.has_hook(WIDGET, Operation.INTERPRET_DEPENDENCY)


def test_script_errors_name_the_customization_and_hook() -> None:
    registry = CustomizationRegistry([samples.ric("broken", statusReflection="function ReflectStatus(o) error('x') end")])
    with pytest.raises(LuaScriptError, match=r"'broken', spec.customizations.statusReflection: .*luaScript:1: x"):
        registry.reflect_status(samples.widget())
