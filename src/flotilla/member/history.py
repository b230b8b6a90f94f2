"""Running-interval recorder: when did a copy of a stateful workload run in which member?

A *copy* is one object (one uid) of a workload in one member. It *runs* from the moment its simulator marks it
running (a StatefulSet with a ready pod, a FlinkDeployment whose job is RUNNING, ...) until it is deleted, stops
being ready, or its member process stops. The headline promise of Flotilla's stateful failover is that two copies
of the same workload (same kind, namespace and name) in different members never run at the same time;
:func:`overlaps` checks exactly that over recorded intervals.

Intervals are kept in memory (per process) and appended as JSON lines to a shared file. Several processes may
append to one file: each record is written with a single ``write`` on an ``O_APPEND`` descriptor, so lines never
interleave. A record is written when an interval opens (``end: null``) and again when it closes (with ``end``);
:func:`read_history` merges the two. Times are wall-clock seconds since the epoch (``time.time()``), comparable
between processes on one host.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from flotilla.files import PRIVATE_FILE, make_private, private_dir

__all__ = ["HistoryRecorder", "Interval", "copies_at_most", "overlaps", "read_history"]


@dataclass
class Interval:
    kind: str
    namespace: str
    name: str
    member: str
    uid: str
    start: float
    end: float | None = None  # None: still running

    @property
    def workload(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)

    @property
    def copy(self) -> tuple[str, str]:
        """Which copy ran: (member, uid)."""
        return (self.member, self.uid)

    @property
    def key(self) -> tuple[str, str, str, str, str, float]:
        return (self.kind, self.namespace, self.name, self.member, self.uid, self.start)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name, "member": self.member,
                "uid": self.uid, "start": self.start, "end": self.end}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Interval:
        end = d.get("end")
        return cls(kind=str(d["kind"]), namespace=str(d.get("namespace") or ""), name=str(d["name"]),
                   member=str(d["member"]), uid=str(d.get("uid") or ""), start=float(d["start"]),
                   end=None if end is None else float(end))

    def overlaps(self, other: Interval) -> bool:
        """True when both ran at some common instant (touching ends do not overlap)."""
        inf = float("inf")
        return self.start < (other.end if other.end is not None else inf) and \
            other.start < (self.end if self.end is not None else inf)


def overlaps(intervals: Iterable[Interval | dict[str, Any]]) -> list[tuple[Interval, Interval]]:
    """Pairs of intervals of the same workload, from different copies, that ran at the same time.

    Pure function: give it what :func:`read_history` or :meth:`HistoryRecorder.intervals` returned (or plain
    dicts of the same shape). An open interval (``end`` None) counts as running until now and beyond.
    """
    by_workload: dict[tuple[str, str, str], list[Interval]] = {}
    for item in intervals:
        iv = item if isinstance(item, Interval) else Interval.from_dict(item)
        by_workload.setdefault(iv.workload, []).append(iv)
    pairs: list[tuple[Interval, Interval]] = []
    for ivs in by_workload.values():
        ivs.sort(key=lambda i: i.start)
        for i, a in enumerate(ivs):
            for b in ivs[i + 1:]:
                if a.end is not None and b.start >= a.end:
                    # sorted by start: no later interval can overlap ``a`` either
                    break
                if a.copy != b.copy and a.overlaps(b):
                    pairs.append((a, b))
    return pairs


def copies_at_most(intervals: Iterable[Interval | Mapping[str, Any]]) -> int:
    """The most of ``intervals`` (or dicts of the same shape) running at one instant: touching ends do not count,
    an open interval (``end`` None) runs on."""
    events: list[tuple[float, int]] = []
    for item in intervals:
        start, end = (item["start"], item.get("end")) if isinstance(item, Mapping) else (item.start, item.end)
        events.append((float(start), 1))
        events.append((float(end) if end is not None else math.inf, -1))
    events.sort(key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    most = current = 0
    for _, delta in events:
        current += delta
        most = max(most, current)
    return most


def read_history(path: str | os.PathLike[str]) -> list[Interval]:
    """All intervals in a history file: an interval's closing record supersedes its opening one.

    Unparseable lines (a writer killed mid-line cannot happen with O_APPEND single writes, but a file may be
    edited by hand) are skipped.
    """
    merged: dict[tuple[str, str, str, str, str, float], Interval] = {}
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            iv = Interval.from_dict(orjson.loads(line))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
        old = merged.get(iv.key)
        if old is None or old.end is None:
            merged[iv.key] = iv
    return sorted(merged.values(), key=lambda i: (i.start, i.member))


class HistoryRecorder:
    """Records running intervals in memory and (optionally) appends them to a shared JSON-lines file.

    One recorder serves every member of a process. Thread-safe; all methods are synchronous and cheap (one
    small ``write`` per state change).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, clock: Any = time.time) -> None:
        self.path = Path(path) if path is not None else None
        self._clock = clock
        self._lock = threading.Lock()
        self._intervals: list[Interval] = []
        self._open: dict[tuple[str, str, str, str, str], Interval] = {}
        self._fd: int | None = None
        if self.path is not None:
            private_dir(self.path.parent)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
            make_private(self.path)  # one an older version made 0644

    # ------------------------------------------------------------------ recording
    def set_running(self, *, member: str, kind: str, namespace: str, name: str, uid: str, running: bool,
                    at: float | None = None) -> Interval | None:
        """Declare whether a copy runs now. Idempotent: opens an interval on a False->True change, closes the
        open one on True->False; returns the interval opened or closed (None when nothing changed)."""
        key = (member, kind, namespace or "", name, uid)
        with self._lock:
            current = self._open.get(key)
            if running and current is None:
                iv = Interval(kind=kind, namespace=namespace or "", name=name, member=member, uid=uid,
                              start=self._clock() if at is None else at)
                self._open[key] = iv
                self._intervals.append(iv)
                self._write(iv)
                return iv
            if not running and current is not None:
                del self._open[key]
                current.end = max(current.start, self._clock() if at is None else at)
                self._write(current)
                return current
            return None

    def is_running(self, *, member: str, kind: str, namespace: str, name: str, uid: str) -> bool:
        with self._lock:
            return (member, kind, namespace or "", name, uid) in self._open

    def close_member(self, member: str, at: float | None = None) -> list[Interval]:
        """Close every open interval of ``member`` (its process stops: nothing of it runs any more)."""
        with self._lock:
            keys = [k for k in self._open if k[0] == member]
            closed = []
            when = self._clock() if at is None else at
            for k in keys:
                iv = self._open.pop(k)
                iv.end = max(iv.start, when)
                self._write(iv)
                closed.append(iv)
            return closed

    def _write(self, iv: Interval) -> None:
        if self._fd is None:
            return
        line = orjson.dumps(iv.to_dict()) + b"\n"
        os.write(self._fd, line)  # one write on O_APPEND: whole lines, even with several writer processes

    # ------------------------------------------------------------------ queries
    def intervals(self, *, kind: str | None = None, namespace: str | None = None, name: str | None = None,
                  member: str | None = None) -> list[Interval]:
        """Copies of the intervals recorded by this process, optionally filtered."""
        with self._lock:
            out = []
            for iv in self._intervals:
                if kind is not None and iv.kind != kind:
                    continue
                if namespace is not None and iv.namespace != namespace:
                    continue
                if name is not None and iv.name != name:
                    continue
                if member is not None and iv.member != member:
                    continue
                out.append(Interval(**iv.to_dict()))
            return out

    def open_intervals(self) -> list[Interval]:
        with self._lock:
            return [Interval(**iv.to_dict()) for iv in self._open.values()]

    def close(self) -> None:
        """Stop writing to the file (open intervals stay open; call :meth:`close_member` first)."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
