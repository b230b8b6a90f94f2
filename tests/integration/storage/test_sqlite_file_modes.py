"""The SQLite store's files are the owner's only: the database and its -wal and -shm files hold every object,
Secrets (members' tokens) included."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from flotilla.storage import open_store
from flotilla.storage.sqlite import SQLiteStore


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The usual umask (022): without care, files come out 0644 and directories 0755."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


async def test_new_database_wal_and_shm_are_0600_in_a_0700_directory_after_writes(
        tmp_path: Path, open_umask: None) -> None:
    data_dir = tmp_path / "new" / "controlplane"
    store = await open_store("sqlite://", data_dir)
    try:
        for i in range(50):
            await store.create(f"/registry/secrets/karmada-cluster/m{i}", b"token-%d" % i)
        db = data_dir / "flotilla.db"
        files = [db, db.with_name("flotilla.db-wal"), db.with_name("flotilla.db-shm")]
        assert all(p.exists() for p in files), sorted(os.listdir(data_dir))
        assert {p.name: oct(mode(p)) for p in files} == {p.name: "0o600" for p in files}
        assert oct(mode(data_dir)) == "0o700" and oct(mode(data_dir.parent)) == "0o700"
    finally:
        await store.close()


async def test_reopening_narrows_a_world_readable_database_and_its_wal(tmp_path: Path, open_umask: None) -> None:
    path = tmp_path / "old.db"
    store = await SQLiteStore.open(path)
    await store.create("/k/a", b"a")
    wal, shm = path.with_name("old.db-wal"), path.with_name("old.db-shm")
    for p in (path, wal, shm):  # as an older version left them
        os.chmod(p, 0o644)
    await store.create("/k/b", b"b")  # written while wide open (the WAL keeps its mode)
    await store.close()
    leftover = [p for p in (path, wal, shm) if p.exists()]
    assert path in leftover

    store = await SQLiteStore.open(path)
    try:
        await store.create("/k/c", b"c")
        assert wal.exists() and shm.exists()
        assert {p.name: oct(mode(p)) for p in (path, wal, shm)} == {p.name: "0o600" for p in (path, wal, shm)}
        assert (await store.get("/k/b")) is not None  # the data is intact
    finally:
        await store.close()
