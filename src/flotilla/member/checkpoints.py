"""The shared checkpoint store of simulated Flink jobs: a directory every simulated member writes to, like S3.

Layout (Flink's, see ``state.checkpoints.dir``)::

    <root>/<jobId>/chk-<n>/_metadata          a completed checkpoint
    <root>/<jobId>/shared/, taskowned/        created empty, as Flink does
    <root>/savepoints/savepoint-<jobId[:6]>-<12 hex>/_metadata    savepoints (``state.savepoints.dir``)

``_metadata`` is JSON (a simulation; Flink's is binary) with the stream offset the job had reached::

    {"format": "flotilla-sim-snapshot/v1", "kind": "checkpoint", "jobId": "...", "checkpointId": 7,
     "timestamp": 1734462491693, "offset": 1400, "restoredFrom": "<path>|null", ...}

Writes are atomic: the snapshot is written into a hidden temporary directory (``.chk-7.<random>.inprogress``),
flushed, then renamed to ``chk-7``; readers skip hidden entries, so a crash never leaves a half checkpoint.
Older checkpoints beyond the retention count are deleted after a newer one is complete.

Paths given to :meth:`CheckpointStore.resolve` (a job's ``initialSavepointPath``) may name the snapshot
directory or its ``_metadata`` file, plain or as a ``file://`` URI. The store is the only file system the
simulation has: a path outside the root is "not found", with the message Flink gives.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from flotilla.checkpoints.storage import write_local_snapshot
from flotilla.files import private_dir

METADATA = "_metadata"
FORMAT = "flotilla-sim-snapshot/v1"
SAVEPOINTS_DIR = "savepoints"
JOB_ID_RE = re.compile(r"^[0-9a-fA-F]{32}$")
_CHK_RE = re.compile(r"^chk-(\d+)$")
_SAVEPOINT_RE = re.compile(r"^savepoint-[0-9a-fA-F]{6}-[0-9a-f]{12}$")


class SnapshotError(Exception):
    """A snapshot cannot be used. ``java_type`` is the exception Flink raises in the same situation."""

    java_type = "java.io.IOException"


class SnapshotNotFoundError(SnapshotError):
    java_type = "java.io.FileNotFoundException"


class SnapshotCorruptError(SnapshotError):
    java_type = "java.io.IOException"


class StorageConfigurationError(SnapshotError):
    """The job's checkpoint storage configuration cannot be used (the message names the key)."""

    java_type = "org.apache.flink.configuration.IllegalConfigurationException"


class CheckpointExistsError(SnapshotError):
    """Another writer completed the same checkpoint first (two jobs with one job id: split brain)."""


@dataclass(frozen=True)
class Snapshot:
    """One completed checkpoint or savepoint."""

    path: str  # the snapshot directory (what initialSavepointPath names)
    kind: str  # "checkpoint" | "savepoint"
    job_id: str
    checkpoint_id: int
    offset: int  # records of the stream the job had processed when the snapshot was taken
    timestamp: int  # epoch milliseconds
    restored_from: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def metadata_path(self) -> str:
        return str(Path(self.path) / METADATA)

    def order_key(self) -> tuple[int, int, int]:
        """Newest first by checkpoint id (savepoints consume ids too), then time; checkpoints win ties."""
        return (self.checkpoint_id, self.timestamp, 1 if self.kind == "checkpoint" else 0)


def valid_job_id(job_id: Any) -> bool:
    return isinstance(job_id, str) and bool(JOB_ID_RE.match(job_id))


def snapshot_from_meta(path: str, meta: dict[str, Any]) -> Snapshot:
    """The snapshot a simulated ``_metadata`` describes, at ``path``."""
    known = {"format", "kind", "jobId", "checkpointId", "offset", "timestamp", "restoredFrom"}
    return Snapshot(
        path=path,
        kind=str(meta.get("kind") or "checkpoint"),
        job_id=str(meta["jobId"]),
        checkpoint_id=int(meta["checkpointId"]),
        offset=int(meta["offset"]),
        timestamp=int(meta["timestamp"]),
        restored_from=meta.get("restoredFrom"),
        extra={k: v for k, v in meta.items() if k not in known},
    )


class CheckpointStore:
    """Reads and writes snapshots under one root directory. Safe to share between members and processes."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).absolute()

    # ------------------------------------------------------------------ paths
    def job_dir(self, job_id: str) -> Path:
        if not valid_job_id(job_id):
            raise ValueError(f"not a Flink job id (32 hex digits): {job_id!r}")
        return self.root / job_id

    def checkpoint_path(self, job_id: str, checkpoint_id: int) -> str:
        return str(self.job_dir(job_id) / f"chk-{checkpoint_id}")

    def new_savepoint_path(self, job_id: str) -> str:
        """A fresh savepoint directory name, as Flink makes them: ``savepoint-<jobId[:6]>-<12 random hex>``."""
        if not valid_job_id(job_id):
            raise ValueError(f"not a Flink job id (32 hex digits): {job_id!r}")
        return str(self.root / SAVEPOINTS_DIR / f"savepoint-{job_id[:6].lower()}-{secrets.token_hex(6)}")

    # ------------------------------------------------------------------ writing
    def _write_snapshot_dir(self, final: Path, meta: dict[str, Any]) -> None:
        from flotilla.checkpoints import SnapshotExistsError

        try:
            write_local_snapshot(final, orjson.dumps(meta, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2))
        except SnapshotExistsError as e:
            raise CheckpointExistsError(str(e)) from e

    def write_checkpoint(
        self,
        job_id: str,
        checkpoint_id: int,
        offset: int,
        timestamp: int,
        *,
        retained: int = 1,
        restored_from: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Snapshot:
        """Complete checkpoint ``chk-<checkpoint_id>`` of ``job_id`` atomically, then drop the oldest beyond
        ``retained``."""
        job_dir = self.job_dir(job_id)
        for sub in ("shared", "taskowned"):
            private_dir(job_dir / sub)
        final = job_dir / f"chk-{checkpoint_id}"
        meta = self._meta("checkpoint", job_id, checkpoint_id, offset, timestamp, restored_from, extra)
        self._write_snapshot_dir(final, meta)
        self.prune(job_id, retained)
        return self._snapshot(final, meta)

    def write_savepoint(
        self,
        job_id: str,
        checkpoint_id: int,
        offset: int,
        timestamp: int,
        *,
        path: str | None = None,
        restored_from: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Snapshot:
        final = Path(path) if path else Path(self.new_savepoint_path(job_id))
        meta = self._meta("savepoint", job_id, checkpoint_id, offset, timestamp, restored_from, extra)
        self._write_snapshot_dir(final, meta)
        return self._snapshot(final, meta)

    @staticmethod
    def _meta(
        kind: str, job_id: str, checkpoint_id: int, offset: int, timestamp: int,
        restored_from: str | None, extra: dict[str, Any] | None,
    ) -> dict[str, Any]:
        meta: dict[str, Any] = dict(extra or {})
        meta.update({
            "format": FORMAT,
            "kind": kind,
            "jobId": job_id,
            "checkpointId": int(checkpoint_id),
            "offset": int(offset),
            "timestamp": int(timestamp),
            "restoredFrom": restored_from,
        })
        return meta

    def prune(self, job_id: str, retained: int) -> list[str]:
        """Delete all but the newest ``retained`` (at least 1) completed checkpoints of ``job_id``."""
        ids = self._checkpoint_ids(job_id)
        doomed = ids[: max(0, len(ids) - max(1, retained))]
        removed = []
        for n in doomed:
            p = self.job_dir(job_id) / f"chk-{n}"
            shutil.rmtree(p, ignore_errors=True)
            removed.append(str(p))
        return removed

    def cleanup_incomplete(self, job_id: str) -> int:
        """Remove the temporary directories a crashed writer left behind; returns how many."""
        n = 0
        try:
            entries = list(os.scandir(self.job_dir(job_id)))
        except FileNotFoundError:
            return 0
        for e in entries:
            if e.name.startswith(".") and e.name.endswith(".inprogress"):
                shutil.rmtree(e.path, ignore_errors=True)
                n += 1
        return n

    # ------------------------------------------------------------------ reading
    def _checkpoint_ids(self, job_id: str) -> list[int]:
        try:
            names = os.listdir(self.job_dir(job_id))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(int(m.group(1)) for m in (_CHK_RE.match(n) for n in names) if m)

    def _snapshot(self, directory: Path, meta: dict[str, Any]) -> Snapshot:
        return snapshot_from_meta(str(directory), meta)

    def _read_dir(self, directory: Path) -> Snapshot:
        try:
            raw = (directory / METADATA).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            raise SnapshotNotFoundError(f"Cannot find meta data file '{METADATA}' in directory '{directory}'. "
                                        "Please try to load the checkpoint/savepoint directly from the metadata "
                                        "file instead of the directory.") from None
        try:
            meta = orjson.loads(raw)
            if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                raise ValueError("not a simulated snapshot")
            return self._snapshot(directory, meta)
        except (ValueError, KeyError, TypeError) as e:
            raise SnapshotCorruptError(f"Failed to load checkpoint metadata '{directory / METADATA}': {e}") from None

    def resolve(self, pointer: str) -> Snapshot:
        """The snapshot a savepoint path names (directory or ``_metadata``; plain path or ``file://`` URI).

        Raises :class:`SnapshotNotFoundError` with Flink's message when there is nothing there.
        """
        if not isinstance(pointer, str) or not pointer.strip():
            raise SnapshotNotFoundError("Cannot find checkpoint or savepoint file/directory '' on file system 'file'.")
        scheme = "file"
        raw = pointer.strip()
        m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", raw)
        if m:
            scheme = m.group(1).lower()
            raw = m.group(2)
            if scheme == "file" and not raw.startswith("/"):
                raw = "/" + raw.split("/", 1)[1] if "/" in raw else ""  # file://host/path -> /path
        not_found = SnapshotNotFoundError(
            f"Cannot find checkpoint or savepoint file/directory '{pointer}' on file system '{scheme}'."
        )
        if scheme != "file" or not raw.startswith("/"):
            raise not_found
        target = Path(os.path.normpath(raw))
        if target != self.root and self.root not in target.parents:
            raise not_found  # the shared directory is the simulation's only file system
        if target.name == METADATA:
            if not target.is_file():
                raise not_found
            return self._read_dir(target.parent)
        if not target.exists():
            raise not_found
        if not target.is_dir():
            raise SnapshotCorruptError(f"Failed to load checkpoint metadata '{target}': not a snapshot")
        return self._read_dir(target)

    def checkpoints(self, job_id: str) -> list[Snapshot]:
        """The completed checkpoints of ``job_id``, oldest first (ones deleted meanwhile are skipped)."""
        out = []
        for n in self._checkpoint_ids(job_id):
            try:
                out.append(self._read_dir(self.job_dir(job_id) / f"chk-{n}"))
            except SnapshotError:
                continue
        return out

    def latest_checkpoint(self, job_id: str) -> Snapshot | None:
        if not valid_job_id(job_id):
            return None
        for n in reversed(self._checkpoint_ids(job_id)):
            try:
                return self._read_dir(self.job_dir(job_id) / f"chk-{n}")
            except SnapshotError:
                continue  # pruned or broken meanwhile: the next older one
        return None

    def savepoints(self, job_id: str | None = None) -> list[Snapshot]:
        """Savepoints (of ``job_id`` when given), oldest first."""
        base = self.root / SAVEPOINTS_DIR
        try:
            names = os.listdir(base)
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            if not _SAVEPOINT_RE.match(name):
                continue
            if job_id is not None and not name[len("savepoint-"):].startswith(job_id[:6].lower()):
                continue
            try:
                snap = self._read_dir(base / name)
            except SnapshotError:
                continue
            if job_id is None or snap.job_id.lower() == job_id.lower():
                out.append(snap)
        return sorted(out, key=Snapshot.order_key)

    def latest_snapshot(self, job_id: str, *, include_savepoints: bool = True) -> Snapshot | None:
        """The newest checkpoint or savepoint of ``job_id``: where a job with that id left off."""
        if not valid_job_id(job_id):
            return None
        candidates = [s for s in [self.latest_checkpoint(job_id)] if s is not None]
        if include_savepoints:
            candidates.extend(self.savepoints(job_id))
        return max(candidates, key=Snapshot.order_key) if candidates else None

    def job_ids(self) -> list[str]:
        try:
            return sorted(n for n in os.listdir(self.root) if valid_job_id(n))
        except FileNotFoundError:
            return []


# ---------------------------------------------------------------------------------------------- any fsspec storage
class RemoteCheckpointStore:
    """The same layout and ``_metadata`` format in the storage a :class:`~flotilla.checkpoints.StorageConfig`
    names (``s3://``, ``file://``, any fsspec URI), read and written through :mod:`flotilla.checkpoints`.

    Synchronous (call it off the event loop for writes); storage failures become :class:`SnapshotError`s
    with the message Flink gives, so a job whose restore path cannot be read fails as it would."""

    def __init__(self, config: Any, shared: CheckpointStore | None = None) -> None:
        self.config = config  # flotilla.checkpoints.StorageConfig
        self.shared = shared  # where savepoints go when the configuration names no savepoint directory

    def _meta_snapshot(self, path: str, raw: bytes) -> Snapshot:
        try:
            meta = orjson.loads(raw)
            if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                raise ValueError("not a simulated snapshot")
            return snapshot_from_meta(path, meta)
        except (ValueError, KeyError, TypeError) as e:
            raise SnapshotCorruptError(f"Failed to load checkpoint metadata '{path}/{METADATA}': {e}") from None

    def _error(self, err: Exception, pointer: str) -> SnapshotError:
        from flotilla.checkpoints import SnapshotExistsError

        if isinstance(err, SnapshotExistsError):
            return CheckpointExistsError(str(err))
        reason = getattr(err, "reason", "invalid")
        scheme = pointer.split("://", 1)[0] if "://" in pointer else "file"
        if reason == "invalid":
            return SnapshotNotFoundError(
                f"Cannot find checkpoint or savepoint file/directory '{pointer}' on file system '{scheme}'.")
        return SnapshotError(f"Could not read '{pointer}' on file system '{scheme}': {err}")

    # ------------------------------------------------------------------ SnapshotSource
    def resolve(self, pointer: str) -> Snapshot:
        from flotilla.checkpoints.storage import SnapshotStorageError, read_metadata_sync

        try:
            snap, raw = read_metadata_sync(self.config, pointer)
        except SnapshotStorageError as e:
            raise self._error(e, pointer) from None
        return self._meta_snapshot(snap.path, raw)

    def checkpoints(self, job_id: str) -> list[Snapshot]:
        from flotilla.checkpoints.storage import SnapshotStorageError, list_snapshots_sync

        if not valid_job_id(job_id) or not self.config.checkpoint_dir:
            return []
        try:
            found = [s for s in list_snapshots_sync(self.config, job_id) if s.kind == "checkpoint"]
        except SnapshotStorageError:
            return []
        out = []
        for s in sorted(found, key=lambda s: s.checkpoint_id or 0):
            try:
                out.append(self.resolve(s.path))
            except SnapshotError:
                continue  # pruned or broken meanwhile
        return out

    def latest_checkpoint(self, job_id: str) -> Snapshot | None:
        found = self.checkpoints(job_id)
        return found[-1] if found else None

    def new_savepoint_path(self, job_id: str) -> str:
        from flotilla.checkpoints import new_savepoint_dir

        if self.config.savepoint_dir:
            return new_savepoint_dir(self.config.savepoint_dir, job_id)
        if self.shared is not None:
            return self.shared.new_savepoint_path(job_id)
        raise ValueError("no savepoint directory configured")

    # ------------------------------------------------------------------ writing
    def checkpoint_path(self, job_id: str, checkpoint_id: int) -> str:
        from flotilla.checkpoints.layout import join

        if not valid_job_id(job_id):
            raise ValueError(f"not a Flink job id (32 hex digits): {job_id!r}")
        return join(self.config.checkpoint_dir, job_id, f"chk-{checkpoint_id}")

    def _write(self, directory: str, meta: dict[str, Any], markers: tuple[str, ...]) -> Snapshot:
        from flotilla.checkpoints.storage import SnapshotStorageError, write_snapshot_sync

        data = orjson.dumps(meta, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)
        try:
            write_snapshot_sync(self.config, directory, data, markers=markers)
        except SnapshotStorageError as e:
            raise self._error(e, directory) from None
        return self._meta_snapshot(directory, data)

    def write_checkpoint(self, job_id: str, checkpoint_id: int, offset: int, timestamp: int, *, retained: int = 1,
                         restored_from: str | None = None, extra: dict[str, Any] | None = None) -> Snapshot:
        from flotilla.checkpoints.storage import SnapshotStorageError, prune_checkpoints_sync

        meta = CheckpointStore._meta("checkpoint", job_id, checkpoint_id, offset, timestamp, restored_from, extra)
        snap = self._write(self.checkpoint_path(job_id, checkpoint_id), meta, ("shared", "taskowned"))
        try:
            prune_checkpoints_sync(self.config, job_id, retained)
        except SnapshotStorageError as e:
            raise SnapshotError(f"pruning checkpoints of {job_id}: {e}") from None
        return snap

    def write_savepoint(self, job_id: str, checkpoint_id: int, offset: int, timestamp: int, *,
                        path: str | None = None, restored_from: str | None = None,
                        extra: dict[str, Any] | None = None) -> Snapshot:
        target = path or self.new_savepoint_path(job_id)
        if self.shared is not None and not self.config.savepoint_dir and "://" not in target:
            return self.shared.write_savepoint(job_id, checkpoint_id, offset, timestamp, path=target,
                                               restored_from=restored_from, extra=extra)
        meta = CheckpointStore._meta("savepoint", job_id, checkpoint_id, offset, timestamp, restored_from, extra)
        return self._write(target, meta, ())


class JobStorage:
    """Where one FlinkDeployment's job keeps its snapshots: the storage its ``flinkConfiguration`` names
    (``execution.checkpointing.dir`` / ``state.checkpoints.dir``, the savepoint directory and Flink's ``s3.*``
    keys), else the member's shared store. ``conf`` returns the current ``flinkConfiguration``.

    Restore paths in another scheme than ``file`` (``s3://...``) are read through :mod:`flotilla.checkpoints`
    with the job's storage options; local paths under the job's own directories too; other local paths from the
    shared store (the simulation's only other file system). A configuration that cannot be used makes restores
    fail and writes fail (logged by the simulator), with the message naming the key."""

    def __init__(self, shared: CheckpointStore, conf: Callable[[], Mapping[str, Any] | None]) -> None:
        self.shared = shared
        self.conf = conf
        self._key: bytes | None = None
        self._remote: RemoteCheckpointStore | None = None
        self.error: str | None = None  # why the configuration cannot be used

    def remote(self) -> RemoteCheckpointStore | None:
        """The store of the configured directories (None: the job uses the shared store)."""
        from flotilla.checkpoints import StorageConfigError, storage_config

        conf = self.conf()
        try:
            key = orjson.dumps(conf, option=orjson.OPT_SORT_KEYS, default=str)
        except TypeError:
            key = repr(conf).encode()
        if key != self._key:
            self._key, self._remote, self.error = key, None, None
            try:
                cfg = storage_config(conf)
            except StorageConfigError as e:
                self.error = f"Invalid Flink configuration: {e}"
            else:
                if cfg.checkpoint_dir or cfg.savepoint_dir:
                    self._remote = RemoteCheckpointStore(cfg, self.shared)
        return self._remote

    def configuration_error(self) -> str | None:
        """Why the job's storage configuration cannot be used (None: it can)."""
        self.remote()
        return self.error

    def _check(self) -> None:
        if self.configuration_error():
            raise StorageConfigurationError(self.error or "")

    def _owns(self, remote: RemoteCheckpointStore, pointer: str) -> bool:
        from flotilla.checkpoints.config import split_uri

        scheme, path = split_uri(pointer.strip())
        if scheme != "file":
            return True
        for d in (remote.config.checkpoint_dir, remote.config.savepoint_dir):
            if d and split_uri(d)[0] == "file":
                root = split_uri(d)[1].rstrip("/")
                if os.path.normpath(path) == root or os.path.normpath(path).startswith(root + "/"):
                    return True
        return False

    # ------------------------------------------------------------------ SnapshotSource
    def resolve(self, pointer: str) -> Snapshot:
        self._check()
        remote = self.remote()
        if isinstance(pointer, str) and "://" in pointer and not pointer.strip().lower().startswith("file://"):
            if remote is None:
                from flotilla.checkpoints import storage_config

                remote = RemoteCheckpointStore(storage_config(None), self.shared)
            return remote.resolve(pointer.strip())
        if remote is not None and isinstance(pointer, str) and self._owns(remote, pointer):
            return remote.resolve(pointer.strip())
        return self.shared.resolve(pointer)

    def latest_checkpoint(self, job_id: str) -> Snapshot | None:
        remote = self.remote()
        if remote is not None and remote.config.checkpoint_dir:
            return remote.latest_checkpoint(job_id)
        if self.error:
            return None
        return self.shared.latest_checkpoint(job_id)

    def new_savepoint_path(self, job_id: str) -> str:
        remote = self.remote()
        return remote.new_savepoint_path(job_id) if remote is not None else self.shared.new_savepoint_path(job_id)

    # ------------------------------------------------------------------ writing (off the event loop)
    def write_checkpoint(self, job_id: str, checkpoint_id: int, offset: int, timestamp: int, *, retained: int = 1,
                         restored_from: str | None = None, extra: dict[str, Any] | None = None) -> Snapshot:
        self._check()
        remote = self.remote()
        if remote is not None and remote.config.checkpoint_dir:
            return remote.write_checkpoint(job_id, checkpoint_id, offset, timestamp, retained=retained,
                                           restored_from=restored_from, extra=extra)
        return self.shared.write_checkpoint(job_id, checkpoint_id, offset, timestamp, retained=retained,
                                            restored_from=restored_from, extra=extra)

    def write_savepoint(self, job_id: str, checkpoint_id: int, offset: int, timestamp: int, *,
                        path: str | None = None, restored_from: str | None = None,
                        extra: dict[str, Any] | None = None) -> Snapshot:
        self._check()
        remote = self.remote()
        if remote is not None and (path is None or self._owns(remote, path)):
            return remote.write_savepoint(job_id, checkpoint_id, offset, timestamp, path=path,
                                          restored_from=restored_from, extra=extra)
        return self.shared.write_savepoint(job_id, checkpoint_id, offset, timestamp, path=path,
                                           restored_from=restored_from, extra=extra)
