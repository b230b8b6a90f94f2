"""WrittenObjects: read your own writes through an informer cache that has not caught up yet."""

from __future__ import annotations

from typing import Any

from flotilla.propagation.written import WrittenObjects


def obj(rv: str, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": "x", "resourceVersion": rv}, **extra}


def test_the_write_wins_while_the_cache_still_shows_the_version_it_replaced() -> None:
    w = WrittenObjects()
    w.record("ns/x", obj("5"), obj("9", status="new"))
    assert w.fresh("ns/x", obj("5"))["status"] == "new"
    assert w.fresh("ns/x", obj("5"))["metadata"]["resourceVersion"] == "9"  # still: the cache has not moved


def test_the_cache_wins_once_it_moved_and_the_record_goes() -> None:
    w = WrittenObjects()
    w.record("ns/x", "5", obj("9"))
    assert w.fresh("ns/x", obj("9")) == obj("9")
    assert len(w) == 0
    w.record("ns/x", "5", obj("9"))
    assert w.fresh("ns/x", obj("12", status="someone else")) == obj("12", status="someone else")
    w.record("ns/x", "5", obj("9"))
    assert w.fresh("ns/x", None) is None  # gone from the cache: gone


def test_unknown_versions_are_not_recorded_and_the_size_is_bounded() -> None:
    w = WrittenObjects(size=2)
    w.record("a", None, obj("2"))
    w.record("b", obj("1"), {"metadata": {}})
    w.record("c", obj("3"), obj("3"))
    assert len(w) == 0
    for key in ("a", "b", "c"):
        w.record(key, "1", obj("2"))
    assert len(w) == 2 and w.fresh("a", obj("1")) == obj("1")  # the oldest went
    w.forget("b")
    assert w.fresh("b", obj("1")) == obj("1")
    assert w.fresh("unknown", obj("7")) == obj("7")


def test_wrote_recognises_the_echo_of_the_own_write_only() -> None:
    w = WrittenObjects()
    w.record("ns/x", obj("5"), obj("9"))
    assert w.wrote("ns/x", obj("9"))
    assert not w.wrote("ns/x", obj("12"))  # someone else's write after it
    assert not w.wrote("ns/x", obj("5")) and not w.wrote("ns/y", obj("9")) and not w.wrote("ns/x", None)
    assert not w.wrote("ns/x", {"metadata": {}})
