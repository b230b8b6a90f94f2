"""D1: the failover machinery is on by default (Karmada: off), each part can be switched off with Karmada's
flag names, ClusterTaintPolicies may carry NoExecute taints unless the API server says otherwise, and NoExecute
taints never appear implicitly. (The same, end to end: tests/integration/controllers/test_d1_defaults.py.)"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from flotilla.apiserver.admission import Admission
from flotilla.apiserver.server import ApiServerConfig
from flotilla.apiserver.webhooks import register_karmada_admission
from flotilla.cli.controller_manager import build_parser, options_from_args
from flotilla.cluster.taints import condition_taint_changes, taints_for_condition
from flotilla.runtime.options import DEFAULT_FEATURE_GATES, ControllerOptions

FAILOVER_GATES = ("Failover", "GracefulEviction", "StatefulFailoverInjection")
NOW = datetime(2024, 1, 1, tzinfo=UTC)


def karmada_flags(*argv: str) -> ControllerOptions:
    """The options ``flotilla controller-manager`` builds from these command-line flags."""
    return options_from_args(build_parser().parse_args(list(argv)))


def switches(options: ControllerOptions) -> dict[str, bool]:
    return {**{g: options.gate(g) for g in FAILOVER_GATES},
            "enable-no-execute-taint-eviction": options.enable_no_execute_taint_eviction}


ALL_ON = {"Failover": True, "GracefulEviction": True, "StatefulFailoverInjection": True,
          "enable-no-execute-taint-eviction": True}


def test_d1_failover_gates_and_taint_eviction_on_by_default() -> None:
    assert switches(ControllerOptions()) == ALL_ON
    assert switches(karmada_flags()) == ALL_ON  # the command without flags
    assert {g: DEFAULT_FEATURE_GATES[g] for g in FAILOVER_GATES} == dict.fromkeys(FAILOVER_GATES, True)


@pytest.mark.parametrize(("argv", "off"), [
    (["--feature-gates=Failover=false"], "Failover"),
    (["--feature-gates", "GracefulEviction=false"], "GracefulEviction"),
    (["--feature-gates=StatefulFailoverInjection=false"], "StatefulFailoverInjection"),
    (["--enable-no-execute-taint-eviction=false"], "enable-no-execute-taint-eviction"),
])
def test_d1_each_switch_goes_off_with_karmadas_flag_name(argv: list[str], off: str) -> None:
    assert switches(karmada_flags(*argv)) == {**ALL_ON, off: False}


def test_d1_all_off_gives_karmadas_defaults_back() -> None:
    options = karmada_flags("--feature-gates=Failover=false,StatefulFailoverInjection=false",
                            "--enable-no-execute-taint-eviction=false")
    # Karmada v1.19: Failover false, GracefulEviction true, StatefulFailoverInjection false, eviction false
    assert switches(options) == {"Failover": False, "GracefulEviction": True, "StatefulFailoverInjection": False,
                                 "enable-no-execute-taint-eviction": False}
    assert options.validate() == []


def test_d1_help_shows_the_defaults() -> None:
    text = build_parser().format_help()
    assert "Failover=true" in text and "GracefulEviction=true" in text and "StatefulFailoverInjection=true" in text
    assert "--enable-no-execute-taint-eviction" in text


def ctp_errors(**register: bool) -> list[str]:
    admission = Admission()
    register_karmada_admission(admission, **register)
    policy = {"metadata": {"name": "not-ready"}, "spec": {
        "addOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["False", "Unknown"]}],
        "taints": [{"key": "cluster.karmada.io/not-ready", "effect": "NoExecute"}]}}
    result = admission.admit("policy.karmada.io", "ClusterTaintPolicy", policy, None, "CREATE")
    return [f"{c.field}: {c.message}" for c in result.causes]


def test_d1_no_execute_taint_policies_allowed_by_default() -> None:
    assert ApiServerConfig().allow_no_execute_taint_policy is True
    assert ctp_errors() == []


def test_d1_no_execute_taint_policies_refused_with_karmadas_t1_message_when_disallowed() -> None:
    assert ctp_errors(allow_no_execute_taint_policy=False) == [
        "spec.taints[0]: Forbidden: Configuring taint with NoExecute effect is not allowed, this capability must be "
        "explicitly enabled by administrators through command-line flags"
    ]


@pytest.mark.parametrize("status", [None, "False", "Unknown", "True", "Bogus"])
def test_d1_cluster_conditions_never_give_a_no_execute_taint(status: str | None) -> None:
    ready = None if status is None else {"type": "Ready", "status": status}
    ensure, remove = condition_taint_changes(ready)
    assert all(t["effect"] == "NoSchedule" for t in ensure + remove)


def test_d1_not_ready_cluster_gets_only_no_schedule_and_keeps_a_persons_no_execute_taint() -> None:
    person = {"key": "cluster.karmada.io/not-ready", "effect": "NoExecute", "timeAdded": "2023-12-31T00:00:00Z"}
    for taints in ([], [person]):
        cluster = {"metadata": {"name": "m1"}, "spec": {"taints": list(taints)},
                   "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
        new = taints_for_condition(cluster, NOW)
        assert new is not None
        assert [(t["key"], t["effect"]) for t in new] == [(t["key"], t["effect"]) for t in taints] + [
            ("cluster.karmada.io/not-ready", "NoSchedule")]
        assert new[: len(taints)] == taints  # the NoExecute taint a person set is left as it is
