"""Which template version a binding names: the newest specification change the informer delivered."""

from __future__ import annotations

from typing import Any

from flotilla.propagation.template_versions import SpecificationVersions


def version(rv: str, uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"name": "t", "uid": uid, "resourceVersion": rv}}


def test_a_status_write_after_a_specification_change_keeps_the_change_s_version() -> None:
    v = SpecificationVersions()
    v.added("k", version("10"))
    v.updated("k", version("11"), specification_changed=True)  # the claim
    v.updated("k", version("12"), specification_changed=False)  # a status write
    assert v.version_for("k", version("12")) == "11"


def test_each_specification_change_is_named() -> None:
    v = SpecificationVersions()
    v.added("k", version("10"))
    assert v.version_for("k", version("10")) == "10"
    v.updated("k", version("11"), specification_changed=False)
    assert v.version_for("k", version("11")) == "10"
    v.updated("k", version("12"), specification_changed=True)
    assert v.version_for("k", version("12")) == "12"


def test_a_version_the_informer_has_not_delivered_names_itself() -> None:
    v = SpecificationVersions()
    v.added("k", version("10"))
    v.updated("k", version("11"), specification_changed=False)
    assert v.version_for("k", version("13")) == "13"  # e.g. the detector's own claim write, not seen yet


def test_an_unknown_or_recreated_template_names_itself() -> None:
    v = SpecificationVersions()
    assert v.version_for("k", version("5")) == "5"
    v.added("k", version("10", uid="old"))
    v.updated("k", version("11", uid="old"), specification_changed=False)
    assert v.version_for("k", version("11", uid="new")) == "11"
    v.updated("k", version("12", uid="new"), specification_changed=False)  # a new object under the same key
    assert v.version_for("k", version("12", uid="new")) == "12"


def test_a_deleted_template_is_forgotten() -> None:
    v = SpecificationVersions()
    v.added("k", version("10"))
    v.updated("k", version("11"), specification_changed=False)
    v.deleted("k")
    assert len(v) == 0
    assert v.version_for("k", version("11")) == "11"
