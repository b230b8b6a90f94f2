"""The data directory of ``flotilla up``: where everything goes, and the record that makes a restart resume.

``D`` is ``--data-dir`` (default ``.flotilla``)::

    D/flotilla-up.json     format, Flotilla version, ports, member names, secure or --insecure, --guard
    D/kubeconfig           contexts ``flotilla`` (control plane) and ``member1``... (one per member)
    D/controlplane/        the control plane API server's SQLite database and its own kubeconfig
    D/members/             the members' databases, kubeconfigs, admin.json, checkpoints/, history.jsonl
    D/up.pid               the pid of a running ``flotilla up`` (removed when it stops)
    D/up.log               the log of a detached ``flotilla up``
    D/viewer.kubeconfig    unless ``--insecure``: a read-only kubeconfig (the viewer token)
    D/agents/<member>/     with ``--pull-members``: the agent's control-plane kubeconfig, agent.log, agent.pid

Everything here is pure: reading, checking and writing the record; the stack itself is in
:mod:`flotilla.local.stack`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from flotilla.files import atomic_write, private_dir

__all__ = ["DATA_FORMAT", "DataDirError", "Layout", "StackRecord", "pid_alive", "resume_conflict"]

#: Bumped whenever the layout of the data directory changes incompatibly.
DATA_FORMAT: Final = 1
RECORD_FILE: Final = "flotilla-up.json"


class DataDirError(Exception):
    """The data directory cannot be used (another version's, damaged, or in use); the message says what to do."""


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("flotilla")
    except Exception:  # noqa: BLE001 - not installed as a distribution (a source checkout on sys.path)
        return "unknown"


@dataclass
class StackRecord:
    """What ``flotilla up`` remembers between runs (``D/flotilla-up.json``)."""

    format: int = DATA_FORMAT
    version: str = field(default_factory=_version)
    api_port: int = 0
    member_ports: dict[str, int] = field(default_factory=dict)
    # TLS and tokens everywhere (the default); False: created with ``--insecure``, or by a version that served
    # plain http unless given ``--secure`` (a record without the key reads as False)
    secure: bool = True
    link_ports: dict[str, int] = field(default_factory=dict)  # each member's control-plane link (local.links)
    guard: bool = False  # created by ``flotilla up --guard``: the Pull members keep a run permit and a guard

    def to_json(self) -> bytes:
        doc = {"format": self.format, "version": self.version, "apiPort": self.api_port,
               "members": dict(self.member_ports), "secure": self.secure, "links": dict(self.link_ports),
               "guard": self.guard}
        return (json.dumps(doc, indent=2) + "\n").encode()

    @classmethod
    def from_json(cls, raw: bytes | str, where: Path) -> StackRecord:
        try:
            doc = json.loads(raw)
        except ValueError as e:
            raise DataDirError(f"{where} is damaged ({e}); move the data directory away or pass another "
                               f"--data-dir") from None
        if not isinstance(doc, dict):
            raise DataDirError(f"{where} is not a flotilla up record; pass another --data-dir")
        fmt = doc.get("format")
        if fmt != DATA_FORMAT:
            made_by = doc.get("version") or "an unknown version"
            raise DataDirError(
                f"{where.parent} was created by Flotilla {made_by} (data format {fmt!r}); this Flotilla "
                f"({_version()}) uses data format {DATA_FORMAT} and cannot resume it: pass another --data-dir, "
                f"or remove {where.parent} to start afresh")
        members = doc.get("members") if isinstance(doc.get("members"), dict) else {}
        ports = {str(k): int(v) for k, v in members.items() if isinstance(v, int) and not isinstance(v, bool)}
        links = doc.get("links") if isinstance(doc.get("links"), dict) else {}
        link_ports = {str(k): int(v) for k, v in links.items() if isinstance(v, int) and not isinstance(v, bool)}
        api_port = doc.get("apiPort")
        return cls(format=DATA_FORMAT, version=str(doc.get("version") or "unknown"),
                   api_port=api_port if isinstance(api_port, int) and not isinstance(api_port, bool) else 0,
                   member_ports=ports, secure=doc.get("secure") is True, link_ports=link_ports,
                   guard=doc.get("guard") is True)


def resume_conflict(root: Path, record: StackRecord | None, *, secure: bool, guard: bool) -> str | None:
    """Why ``flotilla up`` cannot resume ``root`` (whose record is ``record``, None: a new data directory) in the mode
    asked for, said with what to pass instead; None when it can."""
    if record is None or not record.api_port:
        return None
    if record.secure and not secure:
        return (f"{root} was created secure (TLS and tokens) and cannot be resumed with --insecure: drop "
                f"--insecure, or pass another --data-dir")
    if secure and not record.secure:
        return (f"{root} was created without TLS and authentication (with --insecure, or by an older Flotilla "
                f"whose default that was) and cannot be resumed secure: pass --insecure to resume it as it is, or "
                f"another --data-dir (or remove {root}) to start a secure one")
    if record.guard != guard:
        was, now = ("with", "without") if record.guard else ("without", "with")
        return (f"{root} was created {was} --guard and cannot be resumed {now} it: "
                f"pass {'--guard' if record.guard else 'no --guard'}, or another --data-dir")
    return None


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _live_pid(pid_file: Path) -> int | None:
    """The pid in ``pid_file`` when that process is alive, else None (no file, or a stale one)."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if pid_alive(pid) else None


class _Under:
    """A path in the data directory: ``layout.root / name``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, layout: Layout, owner: type | None = None) -> Path:
        return layout.root / self.name


@dataclass(frozen=True)
class Layout:
    root: Path

    record_path = _Under(RECORD_FILE)
    kubeconfig = _Under("kubeconfig")
    #: unless ``--insecure``: the read-only kubeconfig (the viewer's token)
    viewer_kubeconfig = _Under("viewer.kubeconfig")
    controlplane = _Under("controlplane")
    members = _Under("members")
    #: ``D/agents/<member>/``: the Pull members' agents (kubeconfig, log, pid)
    agents = _Under("agents")
    pid_file = _Under("up.pid")
    log_file = _Under("up.log")

    def agent_dir(self, member: str) -> Path:
        return self.agents / member

    def agent_pid(self, member: str) -> int | None:
        """The pid of the running agent of Pull member ``member``, else None."""
        return _live_pid(self.agent_dir(member) / "agent.pid")

    def load_record(self) -> StackRecord | None:
        """The record, or None for a new (or empty) directory; DataDirError for another version's."""
        try:
            raw = self.record_path.read_bytes()
        except FileNotFoundError:
            if self.root.is_dir() and (self.controlplane / "flotilla.db").exists():
                raise DataDirError(f"{self.root} holds a control plane database but no {RECORD_FILE}: it was not "
                                   f"made by `flotilla up` (or by an older version); pass another --data-dir") from None
            return None
        except OSError as e:
            raise DataDirError(f"cannot read {self.record_path}: {e.strerror}") from None
        return StackRecord.from_json(raw, self.record_path)

    def save_record(self, record: StackRecord) -> None:
        private_dir(self.root)
        atomic_write(self.record_path, record.to_json())

    def running_pid(self) -> int | None:
        """The pid of a live ``flotilla up`` on this directory, else None (a stale pid file is ignored)."""
        return _live_pid(self.pid_file)

    def write_pid(self, pid: int) -> None:
        private_dir(self.root)
        atomic_write(self.pid_file, f"{pid}\n".encode())

    def remove_pid(self, pid: int) -> None:
        try:
            if int(self.pid_file.read_text().strip()) == pid:
                self.pid_file.unlink()
        except (OSError, ValueError):
            pass

    def describe(self) -> dict[str, Any]:
        return {"dataDir": str(self.root), "kubeconfig": str(self.kubeconfig), "log": str(self.log_file)}
