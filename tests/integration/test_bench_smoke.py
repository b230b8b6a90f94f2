"""``flotilla bench apiserver`` with tiny numbers: the harness runs end to end and its counts add up.

These check the benchmark's correctness (every write answered, every watch event received, the list
complete), never its timings.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flotilla.bench.command import run_bench
from flotilla.bench.stats import percentile
from flotilla.main import build_parser
from flotilla.storage import etcd_launcher as bench_etcd

OBJECTS = 50
STORE_WRITES = 500


def _run(tmp_path: Path, backends: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    output = tmp_path / "bench.json"
    args = build_parser().parse_args([
        "bench", "apiserver", "--backends", backends, "--objects", str(OBJECTS),
        "--store-writes", str(STORE_WRITES), "--concurrency", "8", "--output", str(output),
    ])  # fmt: skip
    code = run_bench(args)
    printed = capsys.readouterr().out
    return code, json.loads(output.read_text()), printed


def _check_backend(r: dict[str, Any]) -> None:
    assert "error" not in r and "skipped" not in r, r
    store = r["store"]
    for phase in ("creates", "updates"):
        assert store[phase]["count"] == STORE_WRITES
        assert store[phase]["per_second"] > 0
        assert store[phase]["p50_ms"] > 0
        assert store[phase]["p99_ms"] >= store[phase]["p50_ms"]
        assert store[phase]["errors"] == 0
    assert store["updates"]["conflicts"] == 0
    # every watcher received exactly every CAS update (and, in the lone-writer phase, every write)
    load = store["watch_under_load"]
    assert load["expected"] == STORE_WRITES
    assert load["received"] == [STORE_WRITES] * load["watchers"]
    assert load["p99_ms"] > 0
    idle = store["watch_idle"]
    assert idle["received"] == [idle["expected"]] * idle["watchers"] and idle["expected"] > 0

    http = r["http"]
    for phase in ("creates", "gets", "updates"):
        assert http[phase]["count"] == OBJECTS
        assert http[phase]["errors"] == 0
        assert http[phase]["per_second"] > 0
        assert 0 < http[phase]["p50_ms"] <= http[phase]["p99_ms"]
    watch = http["watch"]
    assert watch["received"] == watch["expected"] == http["updates"]["count"] == OBJECTS
    assert watch["event_types"] == {"MODIFIED": OBJECTS}
    assert watch["per_second"] > 0
    assert http["list"]["items"] == OBJECTS
    assert http["list"]["best_ms"] > 0
    assert http["server"]["mode"] == "subprocess"
    assert http["namespace"].startswith("bench-")


def test_bench_memory_and_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, results, printed = _run(tmp_path, "memory,sqlite", capsys)
    assert code == 0, results.get("problems")
    assert results["problems"] == []
    assert list(results["backends"]) == ["memory", "sqlite"]
    for backend in ("memory", "sqlite"):
        _check_backend(results["backends"][backend])
    # fresh namespaces per backend
    assert results["backends"]["memory"]["http"]["namespace"] != results["backends"]["sqlite"]["http"]["namespace"]
    # the SQLite store groups concurrent writes into transactions
    assert results["backends"]["sqlite"]["store"]["creates"]["writes_per_transaction"] >= 1
    assert results["command"] == (
        f"flotilla bench apiserver --backends memory,sqlite --objects {OBJECTS} --concurrency 8 "
        f"--store-writes {STORE_WRITES} --output {tmp_path / 'bench.json'}"
    )
    assert results["machine"]["nproc"] >= 1
    assert f"command: {results['command']}" in printed
    assert "HTTP creates/s" in printed and "memory" in printed and "sqlite" in printed


def test_bench_skips_etcd_when_not_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing() -> str:
        raise bench_etcd.EtcdNotFoundError("etcd is not installed (test)")

    monkeypatch.setattr(bench_etcd, "find_etcd", missing)
    code, results, printed = _run(tmp_path, "etcd", capsys)
    assert code == 0
    assert results["backends"]["etcd"]["skipped"] == "etcd is not installed (test)"
    assert "etcd: skipped - etcd is not installed (test)" in printed


@pytest.mark.etcd
def test_bench_etcd(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        bench_etcd.find_etcd()
    except bench_etcd.EtcdNotFoundError:
        pytest.skip("etcd is not installed")
    code, results, _ = _run(tmp_path, "etcd", capsys)
    assert code == 0, results.get("problems")
    _check_backend(results["backends"]["etcd"])


def test_percentile() -> None:
    assert percentile([], 50) == 0.0
    samples = [float(x) for x in range(1, 101)]
    assert percentile(samples, 50) == 50.0
    assert percentile(samples, 99) == 99.0
    assert percentile(samples, 100) == 100.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
