"""flotilla.kube.conditions: finding and setting status conditions as ``meta.SetStatusCondition`` does."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from types import MappingProxyType

from flotilla.kube.conditions import find_condition, set_condition, set_conditions

READY = {"type": "Ready", "status": "True", "reason": "Up", "message": "", "lastTransitionTime": "t0"}


def test_find_condition_takes_the_first_object_of_the_type() -> None:
    second = {"type": "Ready", "status": "False"}
    assert find_condition(["x", READY, second], "Ready") is READY
    assert find_condition((second,), "Ready") is second
    assert find_condition({"type": "Ready"}, "Ready") is None
    assert find_condition(None, "Ready") is None and find_condition("Ready", "Ready") is None


def test_set_condition_never_changes_its_input() -> None:
    given = [READY, {"type": "Other", "status": "True", "lastTransitionTime": "t0"}]
    before = copy.deepcopy(given)
    out = set_condition(given, {"type": "Ready", "status": "False", "reason": "Down", "message": "m"}, "t1")
    assert given == before
    assert out[0] == {"type": "Ready", "status": "False", "reason": "Down", "message": "m", "lastTransitionTime": "t1"}
    out[1]["status"] = "False"
    assert given[1]["status"] == "True"


def test_set_condition_follows_the_new_fields_and_keeps_the_time_while_the_status_holds() -> None:
    old = [{**READY, "observedGeneration": 3}]
    out = set_condition(old, MappingProxyType({"type": "Ready", "status": "True", "reason": "Still", "message": "x"}),
                        "t9")
    assert out == [{"type": "Ready", "status": "True", "reason": "Still", "message": "x", "lastTransitionTime": "t0"}]
    stamped = set_condition([{"type": "Ready", "status": "True"}], READY | {"lastTransitionTime": ""}, "t9")
    assert stamped[0]["lastTransitionTime"] == "t9"


def test_set_condition_stamps_a_datetime_as_metav1_time() -> None:
    out = set_condition(["junk"], {"type": "Ready", "status": "True"}, datetime(2024, 5, 6, 7, 8, 9, 999))
    assert out == [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-05-06T07:08:09Z"}]
    aware = set_condition(None, {"type": "Ready", "status": "True"}, datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC))
    assert aware[0]["lastTransitionTime"] == "2024-05-06T07:08:09Z"
    given = set_condition(None, READY, "t5")
    assert given[0]["lastTransitionTime"] == "t0"


def test_set_conditions_reports_a_change_only_when_a_condition_changes() -> None:
    out, changed = set_conditions([READY, "junk"], [{k: v for k, v in READY.items() if k != "lastTransitionTime"}],
                                  "t1")
    assert out == [READY] and not changed
    out, changed = set_conditions([READY], [{"type": "Synced", "status": "True"}, READY], "t1")
    assert changed and [c["type"] for c in out] == ["Ready", "Synced"]
    assert set_conditions(None, [], "t1") == ([], False)
