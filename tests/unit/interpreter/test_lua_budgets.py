"""Per-call budgets of Lua customizations: time, memory, result size; runtimes freed; failures reported."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import time
from collections.abc import Iterator

import pytest
from lupa import lua51

from flotilla.interpreter import (
    CustomizationFailure,
    CustomizationRegistry,
    LuaLimits,
    LuaScriptError,
    Operation,
    ResourceHealth,
    ResourceInterpreter,
)
from flotilla.interpreter.lua import lua_interpret_health, run_script
from flotilla.interpreter.operations import REASON_ERROR, REASON_MEMORY, REASON_TIMEOUT

from . import samples

HOG = ("function InterpretHealth(o) local t = {} local i = 0 "
       "while true do i = i + 1 t[i] = {i, tostring(i) .. 'padding-padding-padding'} end end")
LOOP = "function InterpretHealth(o) while true do end end"
MiB = 1024 * 1024


@pytest.fixture
def no_cycle_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _live_runtimes() -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, lua51.LuaRuntime))


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_no_runtime_outlives_its_call_without_the_cycle_collector(no_cycle_collector: None) -> None:
    # the kube helpers (which hand tables back to the runtime) are the path that used to make a cycle
    script = ("local kube = require('kube') function InterpretHealth(o) "
              "local r = kube.accuratePodRequirements(o.spec.template) "
              "local d = kube.getPodDependencies(o.spec.template, 'ns') "
              "return r ~= nil and d ~= nil end")
    obj = {"apiVersion": "v1", "kind": "X", "metadata": {"name": "x"},
           "spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}},
                                                          "envFrom": [{"configMapRef": {"name": "cm"}}]}]}}}}
    before = _live_runtimes()
    for _ in range(500):
        assert lua_interpret_health(script, obj) is True
    with pytest.raises(LuaScriptError):
        lua_interpret_health("function InterpretHealth(o) error('no') end", obj)
    assert _live_runtimes() - before == 0


def test_memory_hog_fails_with_a_memory_error_and_rss_stays_bounded(no_cycle_collector: None) -> None:
    limits = LuaLimits(max_memory=32 * MiB, timeout=30.0)
    start = _rss()
    for _ in range(10):
        with pytest.raises(LuaScriptError, match="32 MiB memory limit") as e:
            lua_interpret_health(HOG, {"kind": "X"}, limits=limits)
        assert e.value.reason == REASON_MEMORY
    # each call fills its 32 MiB; kept alive they would add up to 320 MiB
    assert _rss() - start < 4 * 32 * MiB


def test_a_result_larger_than_the_budget_is_a_memory_error() -> None:
    script = "function F() local t = {} for i = 1, 120000 do t[i] = 'abcdefghij' end return t end"
    with pytest.raises(LuaScriptError, match="returned more than 1 MiB of JSON") as e:
        run_script(script, "F", [], limits=LuaLimits(max_result=MiB, timeout=20.0))
    assert e.value.reason == REASON_MEMORY
    (ok,) = run_script(script, "F", [], limits=LuaLimits(max_result=8 * MiB, timeout=20.0))
    assert len(ok.value) == 120000


def test_reasons_tell_timeouts_from_errors() -> None:
    with pytest.raises(LuaScriptError) as e:
        lua_interpret_health(LOOP, {"kind": "X"}, limits=LuaLimits(timeout=0.1))
    assert e.value.reason == REASON_TIMEOUT
    with pytest.raises(LuaScriptError) as e:
        lua_interpret_health("function InterpretHealth(o) return o.a.b end", {"kind": "X"})
    assert e.value.reason == REASON_ERROR


def test_a_failing_customization_is_reported_with_its_name_operation_and_reason() -> None:
    seen: list[CustomizationFailure] = []
    registry = CustomizationRegistry([samples.ric("loops", healthInterpretation=LOOP),
                                      samples.ric("breaks", kind="Gadget",
                                                  healthInterpretation="function InterpretHealth(o) error('x') end")],
                                     limits=LuaLimits(timeout=0.1), on_failure=seen.append)
    widget = {"apiVersion": samples.WIDGET_API, "kind": "Widget", "metadata": {"namespace": "ns", "name": "w"}}
    gadget = {"apiVersion": samples.WIDGET_API, "kind": "Gadget", "metadata": {"name": "g"}}
    with pytest.raises(LuaScriptError, match="'loops', spec.customizations.healthInterpretation: .*time limit"):
        registry.interpret_health(widget)
    with pytest.raises(LuaScriptError, match="'breaks'"):
        registry.interpret_health(gadget)
    assert [(f.customization, f.operation, f.reason, f.object) for f in seen] == [
        ("loops", Operation.INTERPRET_HEALTH, REASON_TIMEOUT, "ns/w"),
        ("breaks", Operation.INTERPRET_HEALTH, REASON_ERROR, "g"),
    ]
    # a reporter that fails does not change the answer
    def broken(_: CustomizationFailure) -> None:
        raise RuntimeError("reporter down")

    registry = CustomizationRegistry([samples.ric("loops", healthInterpretation=LOOP)],
                                     limits=LuaLimits(timeout=0.1), on_failure=broken)
    with pytest.raises(LuaScriptError, match="time limit"):
        registry.interpret_health(widget)


async def test_an_endless_script_ends_within_its_budget_and_the_event_loop_keeps_ticking() -> None:
    budget = 2.0
    interp = ResourceInterpreter([samples.ric("loops", healthInterpretation=LOOP)], limits=LuaLimits(timeout=budget))
    obj = {"apiVersion": samples.WIDGET_API, "kind": "Widget", "metadata": {"name": "w"}}
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    start = time.monotonic()
    health = await interp.offload(Operation.INTERPRET_HEALTH, obj, lambda: interp.health(obj))
    elapsed = time.monotonic() - start
    task.cancel()
    assert health is ResourceHealth.UNKNOWN
    assert budget <= elapsed < budget + 5.0
    during = [t for t in ticks if start <= t <= start + elapsed]
    gaps = [b - a for a, b in zip(ticks, ticks[1:], strict=False)]
    # run inline, the loop would not tick at all for the whole budget
    assert len(during) >= 10
    assert max(gaps) < budget / 2


async def test_calls_answered_by_built_in_rules_are_not_offloaded() -> None:
    interp = ResourceInterpreter()
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 1}}
    threads: list[str] = []
    await interp.offload(Operation.INTERPRET_REPLICA, obj, lambda: threads.append(threading.current_thread().name))
    custom = ResourceInterpreter([samples.ric("h", healthInterpretation=samples.INTERPRET_HEALTH)])
    widget = {"apiVersion": samples.WIDGET_API, "kind": "Widget", "metadata": {"name": "w"}}
    await custom.offload(Operation.INTERPRET_HEALTH, widget,
                         lambda: threads.append(threading.current_thread().name))
    assert threads[0] == threading.current_thread().name
    assert threads[1].startswith("lua")
