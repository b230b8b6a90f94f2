"""``validate_metadata`` remembers which names, keys and label values passed; a string that fails gets its full
messages every time, and a remembered pass never hides a failure of another kind's naming rule."""

from __future__ import annotations

from typing import Any

from flotilla.kube.validation import (
    Cause,
    dns1123_label_errors,
    label_value_errors,
    qualified_name_errors,
    validate_metadata,
)


def _obj(**meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "default", **meta}}


def test_valid_metadata_passes_again_and_again() -> None:
    obj = _obj(labels={"app": "web", "example.io/tier": "front"}, annotations={"a.io/b": "x"},
               finalizers=["karmada.io/binding-controller"])
    for _ in range(3):
        assert validate_metadata("apps", "Deployment", obj, namespaced=True) == []


def test_bad_keys_values_and_finalizers_report_every_time() -> None:
    bad_key, bad_value = "-bad", "not valid!"
    obj = _obj(labels={"app": "web", bad_key: bad_value}, annotations={bad_key: "x", "ok": "y"},
               finalizers=["ok.io/f", "/nope"])
    expected = (
        [Cause("metadata.labels", f'Invalid value: "{bad_key}": {e}') for e in qualified_name_errors(bad_key)]
        + [Cause("metadata.labels", f'Invalid value: "{bad_value}": {e}') for e in label_value_errors(bad_value)]
        + [Cause("metadata.annotations", f'Invalid value: "{bad_key}": {e}') for e in qualified_name_errors(bad_key)]
        + [Cause("metadata.finalizers[1]", f'Invalid value: "/nope": {e}') for e in qualified_name_errors("/nope")]
    )
    assert expected
    for _ in range(3):
        assert validate_metadata("apps", "Deployment", obj, namespaced=True) == expected


def test_a_name_valid_for_one_kind_is_still_checked_for_a_kind_with_stricter_names() -> None:
    obj = {"metadata": {"name": "a.b"}}
    assert validate_metadata("apps", "Deployment", obj, namespaced=True) == []  # a subdomain: fine
    expected = [Cause("metadata.name", f'Invalid value: "a.b": {e}') for e in dns1123_label_errors("a.b")]
    for _ in range(2):
        assert validate_metadata("", "Namespace", obj, namespaced=False) == expected  # must be a DNS label
