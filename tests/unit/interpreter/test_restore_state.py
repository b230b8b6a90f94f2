"""RestoreState (D20): the interpreter operation that writes where a workload restarts from into its object."""

from __future__ import annotations

import asyncio
import copy
import threading
from typing import Any

import pytest

from flotilla.interpreter import (
    GVK,
    CustomizationFailure,
    HookNotFoundError,
    InterpreterError,
    LuaScriptError,
    Operation,
    ResourceInterpreter,
    Source,
    interpret,
    restore_input,
)
from flotilla.interpreter.lua import lua_restore_state

from . import samples

PATH = "s3://flink/checkpoints/6f1c0e2b9a4d4b7e8c3a1d2e5f607182/chk-42"
JOB_ID = "6f1c0e2b9a4d4b7e8c3a1d2e5f607182"


def restore(**changes: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"path": PATH, "kind": "checkpoint", "jobId": JOB_ID, "checkpointId": 42,
                           "existed": False, "nonce": 7}
    out.update(changes)
    return out


def flink(job: dict[str, Any] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"image": "flink:1.20", "flinkVersion": "v1_20"}
    if job is not None:
        spec["job"] = job
    return {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
            "metadata": {"name": "orders", "namespace": "stream"}, "spec": spec}


# --------------------------------------------------------------------------- the operation's names


def test_d20_restore_state_operation_names() -> None:
    op = Operation.RESTORE_STATE
    assert (op.value, op.hook_field, op.lua_function) == ("RestoreState", "restoreState", "RestoreState")
    assert Operation.parse("restorestate") is op and Operation.parse("restoreState") is op
    assert not op.karmada and Operation.RETAIN.karmada


# ------------------------------------------------------------------------ the FlinkDeployment rule


@pytest.mark.parametrize(("before", "after"), [(None, "savepoint"), ("stateless", "savepoint"),
                                                ("last-state", "last-state"), ("savepoint", "savepoint")])
def test_d20_flink_restore_sets_the_path_and_keeps_taking_savepoints(before: str | None, after: str) -> None:
    job: dict[str, Any] = {"jarURI": "local:///opt/job.jar", "parallelism": 2}
    if before is not None:
        job["upgradeMode"] = before
    obj = flink(job)
    kept = copy.deepcopy(obj)
    out = ResourceInterpreter().restore_state(obj, restore())
    assert out["spec"]["job"] == {"jarURI": "local:///opt/job.jar", "parallelism": 2, "initialSavepointPath": PATH,
                                  "upgradeMode": after}
    assert obj == kept  # the input is not changed


def test_d20_flink_restore_of_an_existing_deployment_sets_the_redeploy_nonce() -> None:
    obj = flink({"jarURI": "local:///opt/job.jar", "upgradeMode": "stateless", "savepointRedeployNonce": 3,
                 "initialSavepointPath": "s3://flink/savepoints/old"})
    fresh = ResourceInterpreter().restore_state(obj, restore(existed=False))
    assert fresh["spec"]["job"]["initialSavepointPath"] == PATH
    assert fresh["spec"]["job"]["savepointRedeployNonce"] == 3  # a first deploy honours the path: no nonce change
    existing = ResourceInterpreter().restore_state(obj, restore(existed=True, nonce=8))
    assert existing["spec"]["job"]["savepointRedeployNonce"] == 8
    assert existing["spec"]["job"]["initialSavepointPath"] == PATH
    assert existing["spec"]["job"]["upgradeMode"] == "savepoint"


def test_d20_flink_restore_answers_from_the_built_in_rule() -> None:
    interp = ResourceInterpreter()
    obj = flink({"jarURI": "local:///opt/job.jar"})
    assert interp.hook_enabled(obj, Operation.RESTORE_STATE)
    assert interp.hook_enabled(GVK.of(obj), Operation.RESTORE_STATE)
    result = interp.interpret_restore_state(obj, restore(kind="savepoint", checkpointId=None))
    assert result.source is Source.THIRD_PARTY
    assert result.named_values() == (("restored", result.value),)
    assert not ResourceInterpreter(third_party=False).hook_enabled(obj, Operation.RESTORE_STATE)


def test_d20_flink_session_cluster_has_no_job_to_restore() -> None:
    with pytest.raises(InterpreterError, match="spec.job is not set: a session cluster has no job to restore") as e:
        ResourceInterpreter().restore_state(flink(None), restore())
    assert e.value.operation is Operation.RESTORE_STATE and e.value.source is Source.THIRD_PARTY
    with pytest.raises(InterpreterError, match="spec.job must be an object"):
        ResourceInterpreter().restore_state(flink("oops"), restore())  # type: ignore[arg-type]


def test_d20_kinds_nobody_taught_to_restore_have_no_fallback() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {}}
    interp = ResourceInterpreter()
    assert not interp.hook_enabled(deployment, Operation.RESTORE_STATE)
    with pytest.raises(HookNotFoundError, match="define spec.customizations.restoreState"):
        interp.restore_state(deployment, restore())


# ------------------------------------------------------------------------------- the restore input


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"path": ""}, r"restore.path must be a non-empty string"),
        ({"path": None}, r"restore.path must be a non-empty string"),
        ({"kind": "snapshot"}, r"restore.kind must be one of checkpoint, savepoint, got 'snapshot'"),
        ({"jobId": 12}, r"restore.jobId must be a string, got 12"),
        ({"checkpointId": "42"}, r"restore.checkpointId must be a whole number or null, got '42'"),
        ({"checkpointId": 4.5}, r"restore.checkpointId must be a whole number"),
        ({"existed": "yes"}, r"restore.existed must be true or false, got 'yes'"),
        ({"nonce": True}, r"restore.nonce must be a whole number, got True"),
        ({"nonce": {}}, r"restore.nonce must be a whole number, got an object"),
        ({"pathh": "x"}, r"restore.pathh is not a restore key; use path, kind, jobId"),
    ],
)
def test_d20_bad_restore_input_names_the_key_to_fix(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(InterpreterError, match=message) as e:
        ResourceInterpreter().restore_state(flink({"jarURI": "x"}), restore(**changes))
    assert e.value.operation is Operation.RESTORE_STATE


def test_d20_restore_input_defaults_and_normalizes() -> None:
    assert restore_input({"path": PATH, "kind": "savepoint"}) == {
        "path": PATH, "kind": "savepoint", "jobId": "", "checkpointId": None, "existed": False, "nonce": 0}
    assert restore_input(restore(checkpointId=42.0, nonce=3.0)) == restore(nonce=3)
    with pytest.raises(InterpreterError, match="must be an object with path, kind"):
        restore_input([PATH])


def test_d20_interpret_entry_needs_the_restore_input() -> None:
    obj = flink({"jarURI": "x"})
    with pytest.raises(InterpreterError, match="RestoreState needs the restore input"):
        interpret(Operation.RESTORE_STATE, desired=obj)
    out = interpret("RestoreState", desired=obj, restore=restore())
    assert out.value["spec"]["job"]["initialSavepointPath"] == PATH


# ---------------------------------------------------------------------- a customization's script


def widget_interpreter(script: str = samples.RESTORE_STATE, **kwargs: Any) -> ResourceInterpreter:
    return ResourceInterpreter([samples.ric("widgets", restoreState=script)], **kwargs)


def test_d20_customization_restores_a_custom_kind() -> None:
    w = samples.widget(3)
    w["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "RESTORE_FROM", "value": "old"},
                                                              {"name": "MODE", "value": "stream"}]
    kept = copy.deepcopy(w)
    interp = widget_interpreter()
    assert interp.hook_enabled(w, Operation.RESTORE_STATE)
    result = interp.interpret_restore_state(w, restore(existed=True, nonce=5))
    assert result.source is Source.CUSTOMIZATION
    out = result.value
    assert out["metadata"]["annotations"] == {"example.io/restore-from": PATH, "example.io/restore-kind": "checkpoint",
                                              "example.io/restore-nonce": "5"}
    assert out["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "MODE", "value": "stream"},
                                                                      {"name": "RESTORE_FROM", "value": PATH}]
    # the rest of the object comes back as it went in (empty args and all)
    out["metadata"].pop("annotations")
    kept["metadata"].pop("annotations")
    out["spec"]["template"]["spec"]["containers"][0].pop("env")
    kept["spec"]["template"]["spec"]["containers"][0].pop("env")
    assert out == kept
    assert w["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] == "old"


def test_d20_customization_overrides_the_flink_rule() -> None:
    script = ("function RestoreState(obj, restore)\n"
              "  obj.spec.job.initialSavepointPath = restore.path .. '#' .. restore.jobId\n"
              "  if restore.checkpointId == nil then obj.spec.job.note = 'savepoint' end\n"
              "  return obj\nend\n")
    ric = samples.ric("flink-restore", "flink.apache.org/v1beta1", "FlinkDeployment", restoreState=script)
    out = ResourceInterpreter([ric]).restore_state(flink({"jarURI": "x"}), restore(checkpointId=None))
    assert out["spec"]["job"] == {"jarURI": "x", "initialSavepointPath": f"{PATH}#{JOB_ID}", "note": "savepoint"}


def test_d20_customization_script_error_is_an_interpreter_error_and_reported() -> None:
    failures: list[CustomizationFailure] = []
    interp = widget_interpreter("function RestoreState(obj, restore)\n  return obj.spec.missing.field\nend\n",
                                on_failure=failures.append)
    with pytest.raises(LuaScriptError, match="'widgets', spec.customizations.restoreState: .*luaScript:2: "
                                             "attempt to index field 'missing'") as e:
        interp.restore_state(samples.widget(), restore())
    assert isinstance(e.value, InterpreterError)
    assert e.value.operation is Operation.RESTORE_STATE and e.value.source is Source.CUSTOMIZATION
    assert e.value.reason == "error" and e.value.customization == "widgets"
    assert [(f.customization, f.operation, f.reason, f.object) for f in failures] == [
        ("widgets", Operation.RESTORE_STATE, "error", "demo/w")]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("return 'restored'", "RestoreState: the result must be a table, got string"),
        ("return nil", "RestoreState: the result must be a table, got nil"),
        ("return obj.spec", "the returned object has no kind; return the whole object"),
        ("return {1, 2}", "the result must be the whole object .* got an array"),
    ],
)
def test_d20_customization_must_return_the_object(body: str, message: str) -> None:
    interp = widget_interpreter(f"function RestoreState(obj, restore)\n  {body}\nend\n")
    with pytest.raises(LuaScriptError, match=message):
        interp.restore_state(samples.widget(), restore())


def test_d20_lua_sees_the_restore_input_with_nil_for_unknown_ids() -> None:
    script = ("function RestoreState(obj, r)\n"
              "  obj.metadata.annotations.seen = type(r.checkpointId) .. ',' .. tostring(r.existed) .. ','\n"
              "    .. tostring(r.nonce) .. ',' .. r.kind\n  return obj\nend\n")
    out = lua_restore_state(script, samples.widget(), restore_input(restore(checkpointId=None)))
    assert out["metadata"]["annotations"]["seen"] == "nil,false,7,checkpoint"


def test_d20_bad_restore_input_never_reaches_the_script() -> None:
    failures: list[CustomizationFailure] = []
    interp = widget_interpreter(on_failure=failures.append)
    with pytest.raises(InterpreterError, match="restore.kind must be one of"):
        interp.restore_state(samples.widget(), restore(kind=None))
    with pytest.raises(InterpreterError, match="restore.existed must be true or false"):
        interp.customizations.restore_state(samples.widget(), restore(existed=1))
    assert failures == []  # the caller's mistake, not the customization's


def test_d20_customization_runs_in_a_lua_worker_when_offloaded() -> None:
    interp = widget_interpreter()
    w = samples.widget()
    threads: list[str] = []

    def call() -> Any:
        threads.append(threading.current_thread().name)
        return interp.restore_state(w, restore())

    async def main() -> Any:
        return await interp.offload(Operation.RESTORE_STATE, w, call)

    out = asyncio.run(main())
    assert out["metadata"]["annotations"]["example.io/restore-from"] == PATH
    assert threads and threads[0].startswith("lua")
    # built-in rules answer inline
    threads.clear()
    obj = flink({"jarURI": "x"})

    async def inline() -> Any:
        return await interp.offload(Operation.RESTORE_STATE, obj,
                                    lambda: (threads.append(threading.current_thread().name),
                                             interp.restore_state(obj, restore()))[1])

    assert asyncio.run(inline())["spec"]["job"]["initialSavepointPath"] == PATH
    assert threads == [threading.main_thread().name]
