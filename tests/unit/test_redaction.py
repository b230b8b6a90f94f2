"""The redacted view of Works and bindings served to a requester who may not read Secrets (pure functions)."""

from __future__ import annotations

import copy
import json
from typing import Any

import orjson

from flotilla.apiserver.auth import (
    DEFAULT_VIEWERS_GROUP,
    MASTERS_GROUP,
    Authorizer,
    UserInfo,
    may_read_secrets,
)
from flotilla.apiserver.redaction import (
    LAST_APPLIED,
    REDACTED,
    binding_for_viewer,
    for_requester,
    may_carry_secret,
    redactor_for,
    work_for_viewer,
)

TOKEN = "c2VjcmV0LXRva2Vu"  # base64 of the value that must not be served
PLAIN = "plain-secret-value"
GROUP = "work.karmada.io"


def _secret(**extra: Any) -> dict[str, Any]:
    applied = json.dumps({"apiVersion": "v1", "kind": "Secret", "data": {"token": TOKEN}})
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db", "namespace": "default", "labels": {"app": "db"},
                         "annotations": {LAST_APPLIED: applied, "team": "a"}},
            "type": "Opaque", "data": {"token": TOKEN, "ca.crt": TOKEN}, "stringData": {"password": PLAIN},
            **extra}


def _deployment() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 2}}


def _work(*manifests: dict[str, Any], statuses: list[dict[str, Any]] | None = None,
          annotations: dict[str, str] | None = None) -> dict[str, Any]:
    work: dict[str, Any] = {"apiVersion": f"{GROUP}/v1alpha1", "kind": "Work",
                            "metadata": {"name": "w", "namespace": "karmada-es-member1",
                                         "annotations": dict(annotations or {})},
                            "spec": {"workload": {"manifests": list(manifests)}}}
    if statuses is not None:
        work["status"] = {"manifestStatuses": statuses, "conditions": [{"type": "Applied", "status": "True"}]}
    return work


def _identifier(kind: str, version: str = "v1", group: str = "") -> dict[str, Any]:
    return {"ordinal": 0, "group": group, "version": version, "kind": kind, "namespace": "default", "name": "db"}


def _leaks(obj: Any) -> bool:
    text = orjson.dumps(obj).decode()
    return TOKEN in text or PLAIN in text


def test_secret_manifest_values_are_redacted_keys_and_metadata_kept() -> None:
    work = _work(_deployment(), _secret())
    served = work_for_viewer(work)
    assert not _leaks(served)
    secret = served["spec"]["workload"]["manifests"][1]
    assert secret["data"] == {"token": REDACTED, "ca.crt": REDACTED}
    assert secret["stringData"] == {"password": REDACTED}
    assert secret["metadata"] == {"name": "db", "namespace": "default", "labels": {"app": "db"},
                                  "annotations": {"team": "a"}}
    assert secret["type"] == "Opaque"
    assert served["spec"]["workload"]["manifests"][0] is work["spec"]["workload"]["manifests"][0]


def test_redaction_never_changes_the_object_it_is_given() -> None:
    applied = json.dumps(_work(_secret()))
    work = _work(_secret(), statuses=[{"identifier": _identifier("Secret"), "status": {"token": TOKEN},
                                       "health": "Healthy"}], annotations={LAST_APPLIED: applied})
    before = copy.deepcopy(work)
    work_for_viewer(work)
    assert work == before
    binding = _binding({"apiVersion": "v1", "kind": "Secret", "namespace": "default", "name": "db"})
    before = copy.deepcopy(binding)
    binding_for_viewer(binding)
    assert binding == before


def test_a_work_without_secrets_is_served_itself_not_a_copy() -> None:
    work = _work(_deployment(), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                                 "data": {"k": "v"}},
                 statuses=[{"identifier": _identifier("Deployment", group="apps"), "status": {"replicas": 2}}],
                 annotations={"x": "y"})
    assert work_for_viewer(work) is work
    assert for_requester(GROUP, "Work", work, may_read_secrets=False) is work


def test_only_core_v1_secrets_are_redacted() -> None:
    lookalike = {"apiVersion": "example.com/v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": PLAIN}}
    work = _work(lookalike)
    assert work_for_viewer(work) is work


def test_fields_a_secret_does_not_have_are_left_out_and_non_object_data_dropped() -> None:
    secret = _secret(extra={"token": PLAIN})
    secret["data"] = PLAIN  # malformed: not an object
    served = work_for_viewer(_work(secret))["spec"]["workload"]["manifests"][0]
    assert "extra" not in served and "data" not in served
    assert not _leaks(served)


def test_reflected_status_of_a_secret_is_left_out_others_kept() -> None:
    statuses = [{"identifier": _identifier("Secret"), "status": {"token": TOKEN}, "health": "Healthy"},
                {"identifier": _identifier("Deployment", group="apps"), "status": {"replicas": 2},
                 "health": "Healthy"}]
    work = _work(_secret(), _deployment(), statuses=statuses)
    served = work_for_viewer(work)
    assert not _leaks(served)
    assert served["status"]["manifestStatuses"][0] == {"identifier": _identifier("Secret"), "health": "Healthy"}
    assert served["status"]["manifestStatuses"][1] is statuses[1]
    assert served["status"]["conditions"] is work["status"]["conditions"]


def test_reflected_status_of_a_secret_is_left_out_even_when_the_manifest_is_gone() -> None:
    work = _work(_deployment(), statuses=[{"identifier": _identifier("Secret"), "status": {"token": TOKEN}}])
    assert not _leaks(work_for_viewer(work))


def test_the_works_own_last_applied_configuration_goes_when_it_recorded_a_secret() -> None:
    with_secret = _work(_secret(), annotations={LAST_APPLIED: json.dumps(_work(_secret())), "keep": "me"})
    served = work_for_viewer(with_secret)
    assert served["metadata"]["annotations"] == {"keep": "me"}
    assert not _leaks(served)
    # the Work no longer holds the Secret, but what kubectl recorded of it still does
    earlier = _work(_deployment(), annotations={LAST_APPLIED: json.dumps(_work(_secret()))})
    assert LAST_APPLIED not in work_for_viewer(earlier)["metadata"]["annotations"]
    unreadable = _work(_deployment(), annotations={LAST_APPLIED: "{not json " + PLAIN})
    assert not _leaks(work_for_viewer(unreadable))
    harmless = _work(_deployment(), annotations={LAST_APPLIED: json.dumps(_work(_deployment()))})
    assert work_for_viewer(harmless) is harmless


def _binding(resource: dict[str, Any], kind: str = "ResourceBinding") -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1alpha2", "kind": kind,
            "metadata": {"name": "db-secret", "namespace": "default", "annotations": {LAST_APPLIED: PLAIN}},
            "spec": {"resource": resource, "clusters": [{"name": "member1"}],
                     "gracefulEvictionTasks": [{"fromCluster": "member2", "preservedLabelState": {"k": PLAIN}}]},
            "status": {"aggregatedStatus": [{"clusterName": "member1", "status": {"token": TOKEN},
                                             "applied": True, "health": "Healthy"}]}}


def test_a_binding_of_a_secret_loses_reflected_status_and_preserved_values() -> None:
    binding = _binding({"apiVersion": "v1", "kind": "Secret", "namespace": "default", "name": "db"})
    served = binding_for_viewer(binding)
    assert not _leaks(served)
    assert served["status"]["aggregatedStatus"] == [{"clusterName": "member1", "applied": True,
                                                     "health": "Healthy"}]
    assert served["spec"]["gracefulEvictionTasks"][0] == {"fromCluster": "member2", "preservedLabelState": {"k": ""}}
    assert served["spec"]["clusters"] is binding["spec"]["clusters"]
    assert LAST_APPLIED not in served["metadata"]["annotations"]
    crb = _binding({"apiVersion": "v1", "kind": "Secret", "namespace": "default", "name": "db"},
                   "ClusterResourceBinding")
    assert not _leaks(for_requester(GROUP, "ClusterResourceBinding", crb, may_read_secrets=False))


def test_a_binding_of_another_kind_is_served_itself() -> None:
    binding = _binding({"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web"})
    assert binding_for_viewer(binding) is binding


def test_requesters_who_may_read_secrets_and_other_kinds_get_the_object_itself() -> None:
    work = _work(_secret())
    assert for_requester(GROUP, "Work", work, may_read_secrets=True) is work
    assert redactor_for("", "ConfigMap") is None and redactor_for("apps", "Deployment") is None
    assert for_requester("", "ConfigMap", work, may_read_secrets=False) is work


def test_malformed_works_do_not_crash_the_redaction() -> None:
    for spec in (None, "x", {"workload": None}, {"workload": {"manifests": "x"}},
                 {"workload": {"manifests": [None, 3, "s", {"kind": "Secret", "apiVersion": "v1"}]}}):
        work = {"kind": "Work", "metadata": {"name": "w"}, "spec": spec,
                "status": {"manifestStatuses": [None, {"identifier": None}, {"status": 1}]}}
        work_for_viewer(work)
    assert work_for_viewer({"metadata": None, "spec": {"workload": {"manifests": [_secret()]}}})["spec"]
    binding_for_viewer({"spec": {"resource": {"apiVersion": "v1", "kind": "Secret"}, "gracefulEvictionTasks": 3},
                        "status": {"aggregatedStatus": [None, 2]}})


def test_may_read_secrets_follows_the_authorizer() -> None:
    authorizer = Authorizer()
    assert may_read_secrets(authorizer, UserInfo("admin", groups=(MASTERS_GROUP,)))
    assert not may_read_secrets(authorizer, UserInfo("viewer", groups=(DEFAULT_VIEWERS_GROUP,)))
    assert not may_read_secrets(authorizer, UserInfo("nobody"))
    anonymous = UserInfo("system:anonymous", groups=("system:unauthenticated",))
    assert not may_read_secrets(Authorizer(anonymous=True, anonymous_read_only=True), anonymous)
    assert may_read_secrets(Authorizer(anonymous=True), anonymous)


def test_bytes_that_may_need_redaction_are_always_noticed() -> None:
    applied = json.dumps(_work(_secret()))
    needing = [
        _work(_deployment(), _secret()),
        _work(_deployment(), statuses=[{"identifier": _identifier("Secret"), "status": {"token": TOKEN}}]),
        _work(_deployment(), annotations={LAST_APPLIED: applied}),
        # JSON in a string may spell "Secret" with escapes, which json.loads turns back into it
        _work(_deployment(), annotations={LAST_APPLIED: applied.replace("Secret", "\\u0053ecret")}),
        _binding({"apiVersion": "v1", "kind": "Secret", "namespace": "default", "name": "db"}),
    ]
    for obj in needing:
        kind = obj["kind"]
        assert for_requester(GROUP, kind, obj, may_read_secrets=False) is not obj
        assert may_carry_secret(orjson.dumps(obj)), obj
        assert may_carry_secret(orjson.dumps({"kind": "WorkList", "items": [_work(_deployment()), obj]}))
    clean = _work(_deployment(), annotations={LAST_APPLIED: json.dumps(_work(_deployment()))})
    assert b"\\" in orjson.dumps(clean)  # escaped quotes alone do not count
    assert not may_carry_secret(orjson.dumps({"kind": "WorkList", "items": [clean, _work(_deployment())]}))
    assert may_carry_secret(orjson.dumps({"note": "C:\\users"}))  # a backslash and a u: looked through
