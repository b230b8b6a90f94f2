"""Reading and writing checkpoint storage through fsspec (local files, S3 and S3-compatible stores...).

File systems keep no listings between calls (``use_listings_cache=False``, caches dropped on each call), so a
later call sees the checkpoints written meanwhile. The async functions run fsspec's synchronous calls in a thread under a timeout;
the ``*_sync`` ones are for code already off the event loop (the simulated members' writers).

Failures raise :class:`SnapshotStorageError` with a ``reason``:

* ``unreachable``: connection refused, DNS failure, time-out;
* ``denied``: the store refused the credentials (HTTP 403, unknown access key, bad signature);
* ``invalid``: the bucket does not exist, a name is malformed, a snapshot's ``_metadata`` is missing.

Messages name the path and the cause, never a credential.
"""

from __future__ import annotations

import asyncio
import errno
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

from flotilla.checkpoints.config import StorageConfig, fsspec_protocol, split_uri
from flotilla.checkpoints.layout import (
    METADATA,
    Snapshot,
    SnapshotKind,
    checkpoint_id_of,
    is_savepoint_name,
    join,
    savepoint_prefix,
    valid_job_id,
)
from flotilla.files import PRIVATE_DIR, PRIVATE_FILE, private_dir
from flotilla.kube.times import parse_time

__all__ = [
    "SnapshotExistsError", "SnapshotStorageError", "describe_snapshot", "describe_snapshot_sync", "fsync_dir",
    "write_local_snapshot",
    "list_snapshots", "list_snapshots_sync", "new_savepoint_dir", "prune_checkpoints", "prune_checkpoints_sync",
    "read_metadata", "read_metadata_sync", "write_snapshot", "write_snapshot_sync",
]

T = TypeVar("T")
Reason = Literal["unreachable", "denied", "invalid"]
MARKER_DIRS = ("shared", "taskowned")
_DENIED_CODES = ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken",
                 "AllAccessDisabled", "403", "Forbidden", "InvalidClientTokenId")
_UNREACHABLE_NAMES = ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError",
                      "ClientConnectorError", "ServerDisconnectedError", "ServerTimeoutError", "FSTimeoutError",
                      "ClientOSError", "ConnectionError", "TimeoutError", "gaierror")


class SnapshotStorageError(Exception):
    """Checkpoint storage cannot be read or written. ``reason``: unreachable | denied | invalid."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason


class SnapshotExistsError(SnapshotStorageError):
    """Another writer completed the same snapshot first (two jobs with one job id)."""

    def __init__(self, message: str) -> None:
        super().__init__("invalid", message)


# ---------------------------------------------------------------------------------------------- file systems
def _fs(config: StorageConfig, uri: str) -> tuple[Any, str]:
    """The fsspec file system for ``uri`` and the path inside it. Instances are shared (building an S3 client
    is costly) but keep no listings: ``use_listings_cache=False``, and what was cached is dropped."""
    import fsspec

    scheme, rest = split_uri(uri)
    protocol = fsspec_protocol(scheme)
    options = config.options_for(uri)
    if protocol == "s3":
        options.setdefault("use_listings_cache", False)
    try:
        fs = fsspec.filesystem(protocol, **options)
    except (ImportError, ValueError) as e:
        raise SnapshotStorageError("invalid", f"{uri}: no usable file system for {scheme!r}: {e}") from None
    fs.invalidate_cache()
    return fs, rest.rstrip("/") if rest != "/" else rest


def _uri(base_uri: str, base_path: str, path: str) -> str:
    """Turn a file system path found under ``base_path`` back into a URI in ``base_uri``'s form."""
    path = path.rstrip("/")
    base_path = base_path.rstrip("/")
    if path == base_path:
        return base_uri.rstrip("/")
    if path.startswith(base_path + "/"):
        return join(base_uri, path[len(base_path) + 1:])
    return path


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _mtime(info: dict[str, Any]) -> datetime | None:
    for key in ("LastModified", "last_modified", "mtime", "updated", "modified", "created"):
        v = info.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return datetime.fromtimestamp(float(v), UTC)
        parsed = parse_time(v)
        if parsed is not None:
            return parsed
    return None


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        err = response.get("Error") or {}
        code = err.get("Code") or (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        return str(code or "")
    return ""


def _classify(exc: BaseException, where: str) -> SnapshotStorageError:
    """The storage error for an exception from fsspec/s3fs/botocore/the OS (no credential in the message)."""
    if isinstance(exc, SnapshotStorageError):
        return exc
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(chain) < 8:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    text = " ".join(f"{type(e).__name__}: {e}" for e in chain)
    codes = {_error_code(e) for e in chain} - {""}
    names = {c.__name__ for e in chain for c in type(e).__mro__}
    if isinstance(exc, PermissionError) or codes & set(_DENIED_CODES) or any(c in text for c in _DENIED_CODES[:5]):
        return SnapshotStorageError("denied", f"{where}: access denied ({_short(exc)})")
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) or names & set(_UNREACHABLE_NAMES) or (
            isinstance(exc, OSError) and exc.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH,
                                                       errno.ETIMEDOUT, errno.ECONNRESET)):
        return SnapshotStorageError("unreachable", f"{where}: storage unreachable ({_short(exc)})")
    if "NoSuchBucket" in text or "bucket does not exist" in text.lower():
        return SnapshotStorageError("invalid", f"{where}: the bucket does not exist")
    return SnapshotStorageError("invalid", f"{where}: {_short(exc)}")


def _short(exc: BaseException) -> str:
    msg = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {msg[:300]}"


async def _run(fn: Callable[..., T], *args: Any, timeout: float, where: str) -> T:  # noqa: ASYNC109 (the contract's per-call timeout)
    try:
        return await asyncio.wait_for(asyncio.to_thread(fn, *args), timeout)
    except TimeoutError:
        raise SnapshotStorageError("unreachable", f"{where}: no answer within {timeout:g}s") from None


def _guard(fn: Callable[..., T], where: str) -> Callable[..., T]:
    def call(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except SnapshotStorageError:
            raise
        except Exception as e:  # noqa: BLE001 - every storage failure becomes a SnapshotStorageError
            raise _classify(e, where) from None

    return call


# ---------------------------------------------------------------------------------------------- reading
def _ls(fs: Any, path: str) -> list[dict[str, Any]]:
    try:
        return list(fs.ls(path, detail=True))
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        return []


def _check_root(fs: Any, protocol: str, path: str) -> None:
    """For S3, a missing bucket is an error (``invalid``), not "no snapshots"."""
    if protocol != "s3":
        return
    bucket = path.split("/", 1)[0]
    try:
        fs.ls(bucket, detail=False)
    except FileNotFoundError:
        raise SnapshotStorageError("invalid", f"s3://{bucket}: the bucket does not exist") from None


def _complete(fs: Any, directory: str) -> dict[str, Any] | None:
    """The info of ``directory``'s ``_metadata`` when it is a complete snapshot, else None."""
    try:
        info = fs.info(join(directory, METADATA))
    except (FileNotFoundError, NotADirectoryError):
        return None
    return info if info.get("type", "file") == "file" else None


def list_snapshots_sync(config: StorageConfig, job_id: str) -> list[Snapshot]:
    return _guard(_list_snapshots, f"snapshots of job {job_id}")(config, job_id)


def _list_snapshots(config: StorageConfig, job_id: str) -> list[Snapshot]:
    if not valid_job_id(job_id):
        raise SnapshotStorageError("invalid", f"not a Flink job id (32 hex digits): {job_id!r}")
    out: list[Snapshot] = []
    if config.checkpoint_dir:
        fs, root = _fs(config, config.checkpoint_dir)
        job_dir = join(root, job_id)
        entries = _ls(fs, job_dir)
        if not entries:
            _check_root(fs, fsspec_protocol(split_uri(config.checkpoint_dir)[0]), root)
        for e in entries:
            name = _name(e["name"])
            n = checkpoint_id_of(name)
            if n is None or e.get("type") != "directory":
                continue
            info = _complete(fs, e["name"])
            if info is not None:
                out.append(Snapshot(_uri(config.checkpoint_dir, root, join(job_dir, name)), "checkpoint", job_id, n,
                                    _mtime(info)))
    if config.savepoint_dir:
        fs, root = _fs(config, config.savepoint_dir)
        entries = _ls(fs, root)
        if not entries:
            _check_root(fs, fsspec_protocol(split_uri(config.savepoint_dir)[0]), root)
        prefix = savepoint_prefix(job_id)
        for e in entries:
            name = _name(e["name"])
            if not (is_savepoint_name(name) and name.lower().startswith(prefix)) or e.get("type") != "directory":
                continue
            info = _complete(fs, e["name"])
            if info is not None:
                out.append(Snapshot(_uri(config.savepoint_dir, root, join(root, name)), "savepoint", job_id, None,
                                    _mtime(info)))
    return out


async def list_snapshots(config: StorageConfig, job_id: str, *, timeout: float = 10.0) -> list[Snapshot]:  # noqa: ASYNC109 (the contract's per-call timeout)
    """The complete checkpoints (``<checkpoint_dir>/<jobId>/chk-N``) and savepoints (``<savepoint_dir>/
    savepoint-<jobId[:6]>-*``) of ``job_id``; [] when there are none. Raises :class:`SnapshotStorageError`."""
    return await _run(list_snapshots_sync, config, job_id, timeout=timeout, where=f"snapshots of job {job_id}")


def _snapshot_dir(path: str) -> str:
    path = path.rstrip("/")
    return path[: -len(METADATA) - 1] if _name(path) == METADATA else path


def _describe(config: StorageConfig, path: str) -> tuple[Snapshot, Any, str]:
    directory = _snapshot_dir(path)
    fs, fs_dir = _fs(config, directory)
    info = _complete(fs, fs_dir)
    if info is None:
        protocol = fsspec_protocol(split_uri(directory)[0])
        _check_root(fs, protocol, fs_dir)
        raise SnapshotStorageError("invalid", f"{directory}: no complete snapshot there (no {METADATA})")
    name = _name(fs_dir)
    n = checkpoint_id_of(name)
    parent = _name(fs_dir[: -len(name) - 1]) if "/" in fs_dir else ""
    if n is not None:
        snap = Snapshot(directory, "checkpoint", parent if valid_job_id(parent) else None, n, _mtime(info))
    else:
        snap = Snapshot(directory, "savepoint", None, None, _mtime(info))
    return snap, fs, join(fs_dir, METADATA)


def describe_snapshot_sync(config: StorageConfig, path: str) -> Snapshot:
    return _guard(lambda: _describe(config, path)[0], path)()


async def describe_snapshot(config: StorageConfig, path: str, *, timeout: float = 10.0) -> Snapshot:  # noqa: ASYNC109 (the contract's per-call timeout)
    """The snapshot at ``path`` (its directory or its ``_metadata``), checked complete. A savepoint's job id is
    not in its name (only 6 digits of it): ``job_id`` is None for savepoints. Raises SnapshotStorageError."""
    return await _run(describe_snapshot_sync, config, path, timeout=timeout, where=path)


def read_metadata_sync(config: StorageConfig, path: str) -> tuple[Snapshot, bytes]:
    def read() -> tuple[Snapshot, bytes]:
        snap, fs, meta = _describe(config, path)
        return snap, fs.cat_file(meta)

    return _guard(read, path)()


async def read_metadata(config: StorageConfig, path: str, *, timeout: float = 10.0) -> tuple[Snapshot, bytes]:  # noqa: ASYNC109 (the contract's per-call timeout)
    """The snapshot at ``path`` and the bytes of its ``_metadata``."""
    return await _run(read_metadata_sync, config, path, timeout=timeout, where=path)


# ---------------------------------------------------------------------------------------------- writing
def new_savepoint_dir(savepoint_dir: str, job_id: str) -> str:
    """A fresh savepoint directory as Flink names them: ``<dir>/savepoint-<jobId[:6]>-<12 random hex>``."""
    if not valid_job_id(job_id):
        raise ValueError(f"not a Flink job id (32 hex digits): {job_id!r}")
    return join(savepoint_dir, savepoint_prefix(job_id) + secrets.token_hex(6))


def fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (best effort)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_local_snapshot(final: Path, metadata: bytes, files: dict[str, bytes] | None = None) -> None:
    """Write a snapshot directory on a local file system atomically: a hidden temporary directory gets the
    payload and ``_metadata`` (fsynced, private modes), then one rename. Raises SnapshotExistsError when
    ``final`` is already there, OSError for other failures (the temporary directory is removed)."""
    parent = final.parent
    private_dir(parent)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".inprogress", dir=parent))
    try:
        for name, data in (files or {}).items():
            (tmp / name).write_bytes(data)
        with os.fdopen(os.open(tmp / METADATA, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE), "wb") as f:
            f.write(metadata)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, PRIVATE_DIR)
        try:
            os.rename(tmp, final)  # atomic; fails when ``final`` exists and is not empty
        except OSError as e:
            if final.exists():
                raise SnapshotExistsError(f"snapshot {final} already exists") from e
            raise
        fsync_dir(parent)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _write(config: StorageConfig, directory: str, metadata: bytes, files: dict[str, bytes],
           markers: Iterable[str]) -> Snapshot:
    fs, fs_dir = _fs(config, directory)
    protocol = fsspec_protocol(split_uri(directory)[0])
    for marker in markers:
        if protocol == "file":
            os.makedirs(join(fs_dir.rsplit("/", 1)[0], marker), mode=0o700, exist_ok=True)
        else:  # object stores have no directories: an empty object holds the prefix
            target = join(fs_dir.rsplit("/", 1)[0], marker, ".keep")
            if not fs.exists(target):
                fs.pipe_file(target, b"")
    if protocol == "file":
        write_local_snapshot(Path(fs_dir), metadata, files)
    else:
        if _complete(fs, fs_dir) is not None:
            raise SnapshotExistsError(f"snapshot {directory} already exists")
        for name, data in files.items():
            fs.pipe_file(join(fs_dir, name), data)
        fs.pipe_file(join(fs_dir, METADATA), metadata)  # last: one object put, atomic for readers
    info = _complete(fs, fs_dir)
    n = checkpoint_id_of(_name(fs_dir))
    parent = _name(fs_dir.rsplit("/", 1)[0])
    kind: SnapshotKind = "checkpoint" if n is not None else "savepoint"
    return Snapshot(directory, kind, parent if n is not None and valid_job_id(parent) else None, n,
                    _mtime(info or {}))


def write_snapshot_sync(config: StorageConfig, directory: str, metadata: bytes, *,
                        files: dict[str, bytes] | None = None, markers: Iterable[str] = ()) -> Snapshot:
    """Write a snapshot directory (a URI or path): ``files`` first, ``_metadata`` last, so a reader never sees
    a half snapshot. On a local file system it is written in a hidden temporary directory and renamed.
    ``markers`` are sibling directories created empty (``shared``, ``taskowned`` beside a ``chk-N``).
    Raises :class:`SnapshotExistsError` when the snapshot is already complete, else SnapshotStorageError."""
    return _guard(_write, directory)(config, directory, metadata, dict(files or {}), tuple(markers))


async def write_snapshot(config: StorageConfig, directory: str, metadata: bytes, *,
                         files: dict[str, bytes] | None = None, markers: Iterable[str] = (),
                         timeout: float = 10.0) -> Snapshot:  # noqa: ASYNC109 (the contract's per-call timeout)
    return await _run(lambda: write_snapshot_sync(config, directory, metadata, files=files, markers=markers),
                      timeout=timeout, where=directory)


def _prune(config: StorageConfig, job_id: str, retained: int) -> list[str]:
    if not config.checkpoint_dir or not valid_job_id(job_id):
        return []
    fs, root = _fs(config, config.checkpoint_dir)
    job_dir = join(root, job_id)
    complete: list[int] = []
    for e in _ls(fs, job_dir):
        n = checkpoint_id_of(_name(e["name"]))
        if n is not None and _complete(fs, e["name"]) is not None:
            complete.append(n)
    complete.sort()
    removed = []
    for n in complete[: max(0, len(complete) - max(1, retained))]:
        target = join(job_dir, f"chk-{n}")
        try:
            fs.rm(target, recursive=True)
        except FileNotFoundError:
            continue
        removed.append(_uri(config.checkpoint_dir, root, target))
    return removed


def prune_checkpoints_sync(config: StorageConfig, job_id: str, retained: int) -> list[str]:
    """Delete all but the newest ``retained`` (at least 1) complete checkpoints of ``job_id``; their URIs."""
    return _guard(_prune, f"checkpoints of job {job_id}")(config, job_id, retained)


async def prune_checkpoints(config: StorageConfig, job_id: str, retained: int, *,
                            timeout: float = 10.0) -> list[str]:  # noqa: ASYNC109 (the contract's per-call timeout)
    return await _run(prune_checkpoints_sync, config, job_id, retained, timeout=timeout,
                      where=f"checkpoints of job {job_id}")
