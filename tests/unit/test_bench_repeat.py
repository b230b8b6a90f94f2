"""``--repeat N``: the medians of several benchmark runs and which run's result is written."""

from __future__ import annotations

import pytest

from flotilla.bench.repeat import median_index, medians, pick, render_table, with_repeat


def _run(total: float, cpu: float, p99: float, problems: list[str] | None = None) -> dict:
    return {"workloads": 10, "total_seconds": total, "cpu_seconds": cpu, "latency_ms": {"p99": p99},
            "all_recovered": True, "problems": problems or []}


def test_pick_follows_dotted_keys_and_ignores_non_numbers() -> None:
    result = {"a": {"b": 2}, "flag": True, "text": "x"}
    assert pick(result, "a.b") == 2.0
    assert pick(result, "a.c") is None
    assert pick(result, "flag") is None  # a bool is not a number to take the median of
    assert pick(result, "text.more") is None


def test_medians_are_taken_per_number_over_the_runs_that_have_it() -> None:
    runs = [_run(9.0, 8.0, 900.0), _run(11.0, 7.0, 1100.0), _run(10.0, 9.5, 1000.0), {"total_seconds": 100.0}]
    got = medians(runs, ["total_seconds", "cpu_seconds", "latency_ms.p99", "missing"])
    assert got == {"total_seconds": 10.5, "cpu_seconds": 8.0, "latency_ms.p99": 1000.0, "missing": None}


def test_median_run_is_the_middle_one_by_the_order_key() -> None:
    runs = [_run(12.0, 1, 1), _run(10.0, 1, 1), _run(11.0, 1, 1)]
    assert median_index(runs, "total_seconds") == 2
    assert median_index(runs[:2], "total_seconds") == 1  # the lower median of two
    with pytest.raises(ValueError):
        median_index([], "total_seconds")


def test_repeat_document_is_the_median_run_with_every_runs_numbers_and_problems() -> None:
    runs = [_run(12.0, 3.0, 1.0), _run(10.0, 2.0, 1.0, ["only 9 of 10 recovered"]), _run(11.0, 4.0, 1.0)]
    doc = with_repeat(runs, ["total_seconds", "cpu_seconds"], "total_seconds")
    assert doc["total_seconds"] == 11.0 and doc["workloads"] == 10  # the median run's own keys stay at the top
    assert doc["repeat"]["median_run"] == 3
    assert doc["repeat"]["median"] == {"total_seconds": 11.0, "cpu_seconds": 3.0}
    assert [h["total_seconds"] for h in doc["repeat"]["headline"]] == [12.0, 10.0, 11.0]
    assert doc["problems"] == ["run 2: only 9 of 10 recovered"]  # a problem in any run fails the command


def test_table_has_a_column_per_run_and_the_median() -> None:
    text = render_table([_run(12.0, 3.0, 1.0), _run(10.0, 2.0, 1.0)], ["total_seconds", "cpu_seconds"])
    header, _rule, first, second = text.splitlines()
    assert header.split() == ["number", "run", "1", "run", "2", "median"]
    assert first.split() == ["total_seconds", "12.00", "10.00", "11.00"]
    assert second.split() == ["cpu_seconds", "3.00", "2.00", "2.50"]
