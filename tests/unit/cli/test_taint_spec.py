"""``taint clusters`` argument parsing and taint updates, with karmadactl's messages."""

from __future__ import annotations

import pytest

from flotilla.cli.taint_spec import (
    MODIFIED,
    TAINTED,
    UNTAINTED,
    TaintSpecError,
    apply_update,
    parse_taint_args,
    split_resources_and_taints,
)


def test_resources_come_before_taint_changes() -> None:
    assert split_resources_and_taints(["clusters", "m1", "m2", "a=b:NoSchedule", "c-"]) == \
        (["clusters", "m1", "m2"], ["a=b:NoSchedule", "c-"])
    with pytest.raises(TaintSpecError, match="all resources must be specified before taint changes: m2"):
        split_resources_and_taints(["clusters", "m1", "a:NoSchedule", "m2"])


@pytest.mark.parametrize(("spec", "taint"), [
    ("dedicated=special-user:NoSchedule", {"key": "dedicated", "value": "special-user", "effect": "NoSchedule"}),
    ("bar:NoExecute", {"key": "bar", "effect": "NoExecute"}),
    ("example.com/my-app=x:PreferNoSchedule", {"key": "example.com/my-app", "value": "x",
                                               "effect": "PreferNoSchedule"}),
])
def test_additions_are_parsed_into_taints(spec: str, taint: dict[str, str]) -> None:
    assert parse_taint_args([spec]).add == (taint,)


def test_removals_with_and_without_effect() -> None:
    update = parse_taint_args(["a:NoSchedule-", "b-"])
    assert update.remove == ({"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": ""})


@pytest.mark.parametrize(("specs", "message"), [
    ([], "at least one taint update is required"),
    (["a:Bad"], "invalid taint effect: Bad, unsupported taint effect"),
    (["a:Bad-"], "invalid taint effect: Bad, unsupported taint effect"),
    (["a=b"], "invalid taint spec: a=b"),
    (["a=b=c:NoSchedule"], "invalid taint spec: a=b=c:NoSchedule"),
    (["a:b:c"], "invalid taint spec: a:b:c"),
    (["-bad:NoSchedule"], "invalid taint spec: -bad:NoSchedule, name part must consist of"),
    (["a=has space:NoSchedule"], "invalid taint spec: a=has space:NoSchedule, a valid label must be"),
    (["a=1:NoSchedule", "a=2:NoSchedule"], "duplicated taints with the same key and effect: a=2:NoSchedule"),
    (["a=1:NoSchedule", "a-"], 'can not both modify and remove the following taint\\(s\\) in the same command: '
                               '{"a":""}'),
])
def test_bad_taint_arguments_get_karmadactl_messages(specs: list[str], message: str) -> None:
    with pytest.raises(TaintSpecError, match=message):
        parse_taint_args(specs)


def test_adding_an_existing_key_and_effect_needs_overwrite() -> None:
    current = [{"key": "a", "value": "1", "effect": "NoSchedule"}]
    update = parse_taint_args(["a=2:NoSchedule"])
    with pytest.raises(TaintSpecError, match="cluster m1 already has a taint\\(s\\) with same effect\\(s\\) and "
                                             "--overwrite is false"):
        apply_update("m1", current, update, overwrite=False)
    op, taints = apply_update("m1", current, update, overwrite=True)
    assert (op, taints) == (MODIFIED, [{"key": "a", "value": "2", "effect": "NoSchedule"}])


def test_the_same_key_with_another_effect_is_a_new_taint() -> None:
    current = [{"key": "a", "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:00Z"}]
    op, taints = apply_update("m1", current, parse_taint_args(["a:NoExecute"]), overwrite=False)
    assert op == TAINTED
    assert taints == [{"key": "a", "effect": "NoExecute"}, current[0]]  # kept as it was, timeAdded included


def test_removing_reports_untainted_and_a_missing_taint_is_an_error() -> None:
    current = [{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"}, {"key": "b",
                                                                                           "effect": "NoSchedule"}]
    op, taints = apply_update("m1", current, parse_taint_args(["a-"]), overwrite=False)
    assert (op, taints) == (UNTAINTED, [{"key": "b", "effect": "NoSchedule"}])
    op, taints = apply_update("m1", current, parse_taint_args(["a:NoExecute-"]), overwrite=False)
    assert op == UNTAINTED and {"key": "a", "effect": "NoExecute"} not in taints and len(taints) == 2
    with pytest.raises(TaintSpecError, match='taint "zz:NoSchedule" not found'):
        apply_update("m1", current, parse_taint_args(["zz:NoSchedule-"]), overwrite=False)


def test_adding_and_removing_at_once_is_modified() -> None:
    current = [{"key": "b", "effect": "NoSchedule"}]
    op, taints = apply_update("m1", current, parse_taint_args(["a:NoSchedule", "b-"]), overwrite=False)
    assert (op, taints) == (MODIFIED, [{"key": "a", "effect": "NoSchedule"}])
