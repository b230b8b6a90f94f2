"""The running-interval recorder, its shared JSON-lines file and the pure ``overlaps`` check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from flotilla.member.history import HistoryRecorder, Interval, overlaps, read_history


def iv(member: str, start: float, end: float | None, name: str = "db", uid: str = "") -> Interval:
    return Interval(kind="StatefulSet", namespace="ns", name=name, member=member, uid=uid or f"uid-{member}",
                    start=start, end=end)


def test_overlaps_pairs_only_concurrent_copies_of_one_workload() -> None:
    a = iv("m1", 0, 10)
    b = iv("m2", 10, 20)  # starts exactly when a ended: no overlap
    c = iv("m3", 19, None)  # still running, overlaps b
    d = iv("m1", 30, 40, name="other")
    e = iv("m2", 35, None, name="other")
    same_copy = iv("m3", 25, 26, uid="uid-m3")  # the same copy twice never counts
    found = overlaps([a, b, c, d, e, same_copy])
    assert {(x.member, y.member, x.name) for x, y in found} == {("m2", "m3", "db"), ("m1", "m2", "other")}
    assert overlaps([a, b]) == []
    assert overlaps([]) == []
    # plain dicts work too (e.g. read from JSON)
    assert len(overlaps([a.to_dict(), iv("m2", 5, 6).to_dict()])) == 1


def test_recorder_is_idempotent_and_closes_member(tmp_path: Path) -> None:
    clock = iter(range(100)).__next__
    rec = HistoryRecorder(tmp_path / "h.jsonl", clock=lambda: float(clock()))
    args = {"member": "m1", "kind": "StatefulSet", "namespace": "ns", "name": "db", "uid": "u1"}
    assert rec.set_running(**args, running=True) is not None
    assert rec.set_running(**args, running=True) is None  # already running
    assert rec.is_running(**args)
    closed = rec.set_running(**args, running=False)
    assert closed is not None and closed.end is not None and closed.end >= closed.start
    assert rec.set_running(**args, running=False) is None
    rec.set_running(**args, running=True)
    rec.set_running(**{**args, "member": "m2", "uid": "u2"}, running=True)
    assert [i.member for i in rec.close_member("m1")] == ["m1"]
    assert [i.member for i in rec.open_intervals()] == ["m2"]
    assert len(rec.intervals(kind="StatefulSet", name="db", member="m1")) == 2
    rec.close()
    on_disk = read_history(tmp_path / "h.jsonl")
    assert [(i.member, i.end is None) for i in on_disk] == [("m1", False), ("m1", False), ("m2", True)]
    assert len(overlaps(on_disk)) == 1  # m1's second run and m2's open interval


_WRITER = """
import sys
from flotilla.member.history import HistoryRecorder
rec = HistoryRecorder(sys.argv[1])
for i in range(200):
    args = dict(member=sys.argv[2], kind="StatefulSet", namespace="ns", name=f"w{i}", uid=f"{sys.argv[2]}-{i}")
    rec.set_running(**args, running=True)
    rec.set_running(**args, running=False)
rec.close()
"""


def test_several_processes_append_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), f"p{n}"]) for n in range(3)]
    for p in procs:
        assert p.wait(30) == 0
    lines = path.read_bytes().splitlines()
    assert len(lines) == 3 * 200 * 2
    intervals = read_history(path)
    assert len(intervals) == 600 and all(i.end is not None for i in intervals)
    assert read_history(tmp_path / "missing.jsonl") == []
