"""The informer's object cache and its indexes (pure, no I/O)."""

from __future__ import annotations

from typing import Any

import pytest

from flotilla.client.informer import ObjectCache, label_indexer, namespace_indexer


def obj(name: str, ns: str | None = "default", **labels: str) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "labels": labels}
    if ns:
        md["namespace"] = ns
    return {"metadata": md}


def test_put_remove_and_indexes_follow_changes() -> None:
    c = ObjectCache()
    c.add_indexer("namespace", namespace_indexer)
    c.add_indexer("app", label_indexer("app"))
    assert c._put("default/a", obj("a", app="web")) is None
    c._put("other/b", obj("b", "other", app="web"))
    c._put("c", obj("c", None))
    assert len(c) == 3 and "c" in c and c.get_by_name("b", "other") is c.get("other/b")
    assert c.index_keys("app", "web") == ["default/a", "other/b"]
    assert c.index_values("namespace") == ["default", "other"]

    old = c._put("default/a", obj("a", app="db"))
    assert old is not None and old["metadata"]["labels"] == {"app": "web"}
    assert c.index_keys("app", "web") == ["other/b"] and c.index_keys("app", "db") == ["default/a"]
    assert c._remove("other/b") is not None and c._remove("other/b") is None
    assert c.index_keys("app", "web") == [] and c.index_values("app") == ["db"]
    assert c.index_values("namespace") == ["default"]
    assert sorted(c.keys()) == ["c", "default/a"] and len(list(c)) == 2


def test_indexer_added_late_indexes_existing_objects_and_names_are_unique() -> None:
    c = ObjectCache()
    c._put("default/a", obj("a", tier="x"))
    c.add_indexer("tier", label_indexer("tier"))
    assert [o["metadata"]["name"] for o in c.by_index("tier", "x")] == ["a"]
    with pytest.raises(ValueError):
        c.add_indexer("tier", label_indexer("tier"))
    with pytest.raises(KeyError):
        c.by_index("nope", "x")


def test_a_failing_index_function_does_not_break_the_cache() -> None:
    c = ObjectCache()

    def broken(o: dict[str, Any]) -> list[str]:
        raise RuntimeError("bug")

    c.add_indexer("broken", broken)
    c._put("default/a", obj("a"))
    assert c.get("default/a") is not None and c.by_index("broken", "anything") == []


def test_label_indexer_ignores_missing_and_non_string_values() -> None:
    f = label_indexer("k")
    assert f(obj("a", k="v")) == ["v"]
    assert f(obj("a")) == [] and f({"metadata": {"labels": {"k": 3}}}) == [] and f({}) == []
    assert namespace_indexer(obj("a", None)) == []
