"""Checkpoint storage of Flink jobs: where a job's configuration says it is (``config``), Flink's layout of
checkpoints and savepoints (``layout``), and reading and writing it through fsspec (``storage``).

Used by the control plane's restore step and by the simulated members; it imports nothing of the controllers.
"""

from flotilla.checkpoints.config import StorageConfig, StorageConfigError, storage_config
from flotilla.checkpoints.layout import METADATA, Snapshot, newest
from flotilla.checkpoints.storage import (
    SnapshotExistsError,
    SnapshotStorageError,
    describe_snapshot,
    list_snapshots,
    new_savepoint_dir,
    prune_checkpoints,
    read_metadata,
    write_snapshot,
)

__all__ = [
    "METADATA", "Snapshot", "SnapshotExistsError", "SnapshotStorageError", "StorageConfig", "StorageConfigError",
    "describe_snapshot", "list_snapshots", "new_savepoint_dir", "newest", "prune_checkpoints", "read_metadata",
    "storage_config", "write_snapshot",
]
