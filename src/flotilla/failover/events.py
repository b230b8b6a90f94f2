"""The Event reasons of the failover path, in one place.

A failover is told by its Events: the cluster's health and taints, the eviction queued and performed, the state
preserved (or not), the new placement, the new Work, the old copy's task removed, fencing (by hand or automatic). The event recorder
(:class:`flotilla.client.events.EventRecorder`) is given :data:`FAILOVER_EVENT_REASONS` as its
``priority_reasons``: Events with these reasons are never held back by the per-object spam filter, are written
before any other and may take the place of any other waiting write when the recorder's queue is full. Busy
objects spend their budget on routine Events (``AggregateStatusSucceed`` on every status change); a failover's
Events must land anyway.

The reasons that only controllers emit are defined here, so that the controllers and this list share one
spelling; the others come from the pure modules that build the Events.
"""

from __future__ import annotations

from typing import Final

from flotilla.cluster.health import (
    REASON_CLUSTER_NOT_REACHABLE,
    REASON_CLUSTER_NOT_READY,
    REASON_CLUSTER_READY,
)
from flotilla.failover.auto_fence import (
    EVENT_CLUSTER_FENCE_CANCELLED,
    EVENT_CLUSTER_FENCE_PENDING,
    EVENT_CLUSTER_FENCED_AUTOMATICALLY,
)
from flotilla.failover.eviction import EVENT_EVICT_FAILED, EVENT_EVICT_SUCCEEDED
from flotilla.failover.fencing import EVENT_WORK_ABANDONED
from flotilla.failover.graceful import EVENT_TASK_REMOVED
from flotilla.failover.history import EVENT_FAILOVER_COMPLETED, EVENT_FAILOVER_SUPERSEDED
from flotilla.failover.moves import (
    EVENT_PLANNED_MOVE_COMPLETED,
    EVENT_PLANNED_MOVE_FAILED,
    EVENT_PLANNED_MOVE_SKIPPED,
    EVENT_PLANNED_MOVE_STARTED,
    EVENT_SAVEPOINT_TAKEN,
)
from flotilla.failover.restore import (
    EVENT_STATE_RESTORE_FAILED,
    EVENT_STATE_RESTORE_TIMED_OUT,
    EVENT_STATE_RESTORED,
)
from flotilla.failover.state import (
    EVENT_STATE_CARRIED_FORWARD,
    EVENT_STATE_PRESERVATION_FAILED,
    EVENT_STATE_PRESERVATION_TIMED_OUT,
)

__all__ = [
    "EVENT_EVICTION_HALTED",
    "EVENT_EVICTION_PERFORMED",
    "EVENT_EVICTION_QUEUED",
    "EVENT_SCHEDULE_BINDING_FAILED",
    "EVENT_SCHEDULE_BINDING_SUCCEED",
    "EVENT_STALE_OBJECTS_DELETED",
    "EVENT_SYNC_WORK_FAILED",
    "EVENT_SYNC_WORK_SUCCEED",
    "EVENT_TAINT_CLUSTER_FAILED",
    "EVENT_TAINT_CLUSTER_SUCCEED",
    "EVENT_TASK_REMOVED",
    "FAILOVER_EVENT_REASONS",
]

# the taint manager
EVENT_EVICTION_QUEUED: Final = "EvictionQueued"  # Normal: a key was queued, due now or at the toleration deadline
EVENT_EVICTION_PERFORMED: Final = "EvictionPerformed"  # Normal: the task was written, the cluster left spec.clusters
EVENT_EVICTION_HALTED: Final = "EvictionHalted"  # Warning: D10 halts evictions (every cluster unhealthy, or rate 0)
# the scheduler: the placement after the eviction
EVENT_SCHEDULE_BINDING_SUCCEED: Final = "ScheduleBindingSucceed"
EVENT_SCHEDULE_BINDING_FAILED: Final = "ScheduleBindingFailed"
# the binding controller: the Works of the new placement
EVENT_SYNC_WORK_SUCCEED: Final = "SyncWorkSucceed"
EVENT_SYNC_WORK_FAILED: Final = "SyncWorkFailed"
# the cluster and ClusterTaintPolicy controllers: the taints that start a failover
EVENT_TAINT_CLUSTER_SUCCEED: Final = "TaintClusterSucceed"
EVENT_TAINT_CLUSTER_FAILED: Final = "TaintClusterFailed"
# the execution controller: a recovered (fenced or unreachable) cluster purged of its stale copies (D2 and D17, purge on return)
EVENT_STALE_OBJECTS_DELETED: Final = "StaleObjectsDeleted"

#: Every reason a failover writes, from the cluster's health to the end of the eviction task.
FAILOVER_EVENT_REASONS: Final[frozenset[str]] = frozenset({
    # health (the cluster-status controller's Ready transitions) and taints
    REASON_CLUSTER_READY, REASON_CLUSTER_NOT_READY, REASON_CLUSTER_NOT_REACHABLE,
    EVENT_TAINT_CLUSTER_SUCCEED, EVENT_TAINT_CLUSTER_FAILED,
    # eviction (taint manager, application failover) and graceful eviction
    EVENT_EVICTION_QUEUED, EVENT_EVICTION_PERFORMED, EVENT_EVICTION_HALTED,
    EVENT_EVICT_SUCCEEDED, EVENT_EVICT_FAILED, EVENT_TASK_REMOVED,
    # state preservation and injection (D5 carry-over, D6 failures that surface)
    EVENT_STATE_PRESERVATION_FAILED, EVENT_STATE_PRESERVATION_TIMED_OUT, EVENT_STATE_CARRIED_FORWARD,
    # native restore (D20)
    EVENT_STATE_RESTORED, EVENT_STATE_RESTORE_FAILED, EVENT_STATE_RESTORE_TIMED_OUT,
    # the new placement and its Works
    EVENT_SCHEDULE_BINDING_SUCCEED, EVENT_SCHEDULE_BINDING_FAILED, EVENT_SYNC_WORK_SUCCEED, EVENT_SYNC_WORK_FAILED,
    # fencing (D2)
    EVENT_WORK_ABANDONED, EVENT_STALE_OBJECTS_DELETED, EVENT_CLUSTER_FENCED_AUTOMATICALLY,
    EVENT_CLUSTER_FENCE_PENDING, EVENT_CLUSTER_FENCE_CANCELLED,
    # the failover history (D22)
    EVENT_FAILOVER_COMPLETED, EVENT_FAILOVER_SUPERSEDED,
    # planned moves (D21)
    EVENT_PLANNED_MOVE_STARTED, EVENT_SAVEPOINT_TAKEN, EVENT_PLANNED_MOVE_FAILED, EVENT_PLANNED_MOVE_COMPLETED,
    EVENT_PLANNED_MOVE_SKIPPED,
})
