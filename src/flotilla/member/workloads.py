"""Workload simulators: Deployment, ReplicaSet, StatefulSet, DaemonSet and Job status without pods or kubelets.

Each workload gets a set of *simulated pods* kept in memory (no Pod objects are created). A pod becomes Ready
``ready_delay`` seconds after it is created, unless one of the workload's images matches the member's
broken-image pattern (``fake/...`` by default, like Karmada's e2e tests), in which case it never does. From the
pods the simulator writes the status the real controller would, with every field the official clients need:

* Deployment: rolling update (all new pods created at once; old Ready pods kept until the new ones are
  available, old unready ones dropped) or Recreate; ``Available`` and ``Progressing`` conditions,
  ``ProgressDeadlineExceeded`` once the deadline passed without the rollout completing (counted from the
  rollout's start or the last time it was complete); ``spec.paused``.
* ReplicaSet: scales; a template change does not touch existing pods (as in Kubernetes).
* StatefulSet: ordinals, ``OrderedReady`` (one pod at a time) or ``Parallel`` creation, rolling update from
  the highest ordinal down to ``partition``, ``OnDelete``, current/update revisions. Unlike Kubernetes, an
  outdated pod that is not Ready is replaced without waiting (there is no Pod object to delete by hand), so
  fixing a broken image recovers. Records running intervals (running = at least one ready pod) in the
  member's history.
* DaemonSet: one pod per simulated node (``MemberConfig.daemonset_nodes``), rolling update by
  ``maxUnavailable``.
* Job: runs ``ready_delay`` seconds then Complete (SuccessCriteriaMet + Complete); broken: one failed pod per
  ``ready_delay`` until ``backoffLimit`` is exceeded, then Failed (FailureTarget + Failed); suspend and
  ``activeDeadlineSeconds``.

Per-object annotations (on the workload's metadata) override the member's settings:
``sim.flotilla.io/ready-delay: "2.5"`` and ``sim.flotilla.io/broken: "true"`` (every pod crashes and stays
unready until the annotation is removed or set to ``"false"``; useful to make an application fail in one
member).

A simulated member has no defaulting controllers either, so :func:`install_workload_defaults` gives the member's
API server kube-apiserver's defaults for these kinds (``strategy``, ``updateStrategy``, ``replicas``,
``progressDeadlineSeconds``, Job ``completions``/``parallelism``/``backoffLimit`` ...): ``kubectl rollout
status`` refuses a StatefulSet or DaemonSet without ``updateStrategy.type``.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from flotilla.apiserver.objects import now_rfc3339
from flotilla.member.simulator import ObjectKey, ResourceSimulator, register_simulator

__all__ = [
    "DaemonSetSimulator",
    "DeploymentSimulator",
    "JobSimulator",
    "ReplicaSetSimulator",
    "StatefulSetSimulator",
    "install_workload_defaults",
    "template_hash",
]

_SAFE = "bcdfghjklmnpqrstvwxz2456789"
_NEVER = math.inf


def template_hash(template: Any) -> str:
    """A stable short name for a pod template (like the pod-template-hash label; not the same values)."""
    digest = hashlib.sha256(orjson.dumps(template or {}, option=orjson.OPT_SORT_KEYS)).digest()
    n = int.from_bytes(digest[:6], "big")
    out = ""
    while n:
        n, r = divmod(n, len(_SAFE))
        out += _SAFE[r]
    return out[:10] or _SAFE[0]


def _int(v: Any, default: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        return default
    return v


def resolve_int_or_percent(value: Any, total: int, default: int, round_up: bool) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, str):
        s = value.strip()
        try:
            if s.endswith("%"):
                frac = total * int(s[:-1]) / 100
                return max(math.ceil(frac) if round_up else math.floor(frac), 0)
            return max(int(s), 0)
        except ValueError:
            return default
    return default


def _omit_zero(d: dict[str, Any], *keys: str) -> dict[str, Any]:
    """Go's ``omitempty``: real API servers leave zero counters out."""
    for k in keys:
        if d.get(k) == 0:
            del d[k]
    return d


def _condition(prev_list: Any, ctype: str, status: str, reason: str, message: str, now: str,
               *, update_time: bool = False, probe_time: bool = False) -> dict[str, Any]:
    """A condition keeping the previous timestamps when nothing about it changed."""
    prev: dict[str, Any] = {}
    for c in prev_list if isinstance(prev_list, list) else []:
        if isinstance(c, dict) and c.get("type") == ctype:
            prev = c
            break
    c: dict[str, Any] = {"type": ctype, "status": status, "reason": reason, "message": message}
    same_status = prev.get("status") == status
    c["lastTransitionTime"] = prev.get("lastTransitionTime") or now if same_status else now
    unchanged = same_status and prev.get("reason") == reason and prev.get("message") == message
    if update_time:
        c["lastUpdateTime"] = prev.get("lastUpdateTime") or now if unchanged else now
    if probe_time:
        c["lastProbeTime"] = prev.get("lastProbeTime") or now if unchanged else now
    return c


# ====================================================================================== simulated pods
@dataclass
class SimPod:
    revision: str
    ready_at: float  # loop time the pod turns Ready; inf = never (its image is broken)
    ordinal: int = 0
    image_broken: bool = False

    def ready(self, now: float) -> bool:
        return self.ready_at <= now

    def available(self, now: float, min_ready: float) -> bool:
        return self.ready_at + min_ready <= now


@dataclass
class _State:
    uid: str
    pods: list[SimPod] = field(default_factory=list)
    revision: str = ""  # the template the pods are being brought to
    current_revision: str = ""  # StatefulSet: the revision every pod had at the last completed rollout
    crashed: bool = False  # sim.flotilla.io/broken was set
    progress_since: float = 0.0
    new_ready: int = -1
    timed_out: bool = False
    created: bool = False
    # Job
    start_wall: str = ""
    start: float = -1.0
    finished: str = ""  # "", "Complete" or "Failed"
    finish_wall: str = ""
    suspended_at_start: bool = False


class _WorkloadSimulator(ResourceSimulator):
    """Shared parts: per-uid state, readiness timing, the broken/crash annotations, wake-up times."""

    group = "apps"
    stopped_by_guard = True

    def __init__(self) -> None:
        super().__init__()
        self.states: dict[str, _State] = {}

    def _loop_now(self) -> float:
        return asyncio.get_running_loop().time()

    def state_for(self, obj: dict[str, Any]) -> tuple[_State, bool]:
        uid = obj["metadata"].get("uid") or ""
        st = self.states.get(uid)
        if st is None:
            st = self.states[uid] = _State(uid=uid)
            return st, True
        return st, False

    async def forget(self, key: ObjectKey, last: dict[str, Any]) -> None:
        uid = (last.get("metadata") or {}).get("uid") or ""
        self.states.pop(uid, None)

    def new_pod(self, obj: dict[str, Any], revision: str, now: float, ordinal: int = 0) -> SimPod:
        broken = self.config.image_broken(obj)
        crashed = self.halted(obj)
        delay = self.config.ready_delay_for(obj)
        ready_at = _NEVER if broken or crashed else now + delay
        return SimPod(revision=revision, ready_at=ready_at, ordinal=ordinal, image_broken=broken)

    def apply_crash(self, st: _State, obj: dict[str, Any], now: float) -> None:
        """sim.flotilla.io/broken (or the member's guard): every pod crashes now; removing it restarts them (Ready
        after the delay)."""
        crashed = self.halted(obj)
        if crashed and not st.crashed:
            for p in st.pods:
                p.ready_at = _NEVER
        elif st.crashed and not crashed:
            delay = self.config.ready_delay_for(obj)
            for p in st.pods:
                if not p.image_broken and p.ready_at == _NEVER:
                    p.ready_at = now + delay
        st.crashed = crashed

    @staticmethod
    def next_wakeup(pods: list[SimPod], now: float, min_ready: float, extra: float = _NEVER) -> float | None:
        times = [extra]
        for p in pods:
            for t in (p.ready_at, p.ready_at + min_ready):
                if now < t < _NEVER:
                    times.append(t)
        nxt = min(times)
        return None if nxt == _NEVER else max(nxt - now, 0.0) + 0.005

    def begin(self, obj: dict[str, Any], revision: str, ready_field: str) -> tuple[float, _State]:
        """The loop time and ``obj``'s state for one reconcile: seeded from its status (``ready_field``, at
        ``revision``) when this simulator has none yet, with the crash annotation applied."""
        now = self._loop_now()
        st, fresh_state = self.state_for(obj)
        if fresh_state:
            self.seed(st, obj, revision, ready_field, now)
            self.seeded(st, obj)
        self.apply_crash(st, obj, now)
        return now, st

    def seeded(self, st: _State, obj: dict[str, Any]) -> None:
        """What a kind adjusts once :meth:`seed` took over an existing object's pods."""

    async def write_generation_status(self, obj: dict[str, Any],
                                      status: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]],
                                      *omit_zero: str) -> None:
        """Write ``status`` (or ``status(current object)``), its ``omit_zero`` counters left out when 0, unless the
        object moved on to another generation meanwhile (its next reconcile writes that one's)."""
        gen = obj["metadata"].get("generation")

        def compute(fresh: dict[str, Any]) -> dict[str, Any] | None:
            if (fresh.get("metadata") or {}).get("generation") != gen:
                return None
            return _omit_zero(status(fresh) if callable(status) else dict(status), *omit_zero)

        await self.set_status(obj, compute)

    def seed(self, st: _State, obj: dict[str, Any], revision: str, ready_field: str, now: float) -> None:
        """A simulator (re)started on existing objects: trust a status that observed the current generation.

        After a power-off (``cold_start``) those pods had died with the member: they start again now (Ready
        after the ready delay) instead of being Ready at once."""
        status = obj.get("status") or {}
        md = obj["metadata"]
        if status.get("observedGeneration") != md.get("generation"):
            return
        n = _int(status.get(ready_field), 0)
        if self.cold_start:
            st.pods = [self.new_pod(obj, revision, now, i) for i in range(n)]
        else:
            st.pods = [SimPod(revision=revision, ready_at=-_NEVER, ordinal=i) for i in range(n)]
        st.revision = revision
        st.current_revision = revision
        st.created = True
        st.progress_since = now


def _dict_at(d: dict[str, Any], key: str) -> dict[str, Any]:
    """``d[key]`` when it is an object, else an empty one (what is malformed is validation's business)."""
    v = d.get(key)
    return v if isinstance(v, dict) else {}


def _min_ready(spec: dict[str, Any]) -> float:
    return float(_int(spec.get("minReadySeconds"), 0))


def _ready_available(pods: list[SimPod], now: float, min_ready: float) -> tuple[int, int]:
    """How many of ``pods`` are Ready, and how many have been for ``min_ready`` (available)."""
    return sum(p.ready(now) for p in pods), sum(p.available(now, min_ready) for p in pods)


class _PodsSimulator(_WorkloadSimulator):
    """A kind whose status follows its simulated pods: every reconcile starts the same way (:meth:`begin` at the
    pod template's revision), then :meth:`step` brings the kind's pods and status forward."""

    #: the status counter whose pods an existing object is taken over with (:meth:`seed`)
    ready_field = "readyReplicas"

    def revision(self, obj: dict[str, Any], spec: dict[str, Any]) -> str:
        """The revision the pods are brought to: a hash of the pod template."""
        return template_hash(spec.get("template"))

    def wanted(self, spec: dict[str, Any]) -> int:
        """How many pods the object asks for (none once it is being deleted)."""
        return _int(spec.get("replicas"), 1)

    async def reconcile(self, obj: dict[str, Any]) -> float | None:
        spec = _dict_at(obj, "spec")
        rev = self.revision(obj, spec)
        now, st = self.begin(obj, rev, self.ready_field)
        desired = 0 if obj["metadata"].get("deletionTimestamp") else self.wanted(spec)
        return await self.step(obj, spec, st, now, rev, desired)

    async def step(self, obj: dict[str, Any], spec: dict[str, Any], st: _State, now: float, rev: str,
                   desired: int) -> float | None:
        """The kind's pods and status at loop time ``now``, ``desired`` pods wanted; like :meth:`reconcile`, the
        seconds until the next."""
        raise NotImplementedError


# ====================================================================================== Deployment
class DeploymentSimulator(_PodsSimulator):
    name = "deployment"
    plural = "deployments"
    ready_field = "availableReplicas"

    async def step(self, obj: dict[str, Any], spec: dict[str, Any], st: _State, now: float, rev: str,
                   desired: int) -> float | None:
        md = obj["metadata"]
        strategy = _dict_at(spec, "strategy")
        min_ready = _min_ready(spec)
        paused = bool(spec.get("paused"))
        if not paused and rev != st.revision:
            st.revision = rev
            st.progress_since = now
            st.new_ready = -1
            st.timed_out = False
        target = st.revision
        if target:
            new = [p for p in st.pods if p.revision == target]
            old = [p for p in st.pods if p.revision != target]
            if len(new) > desired:
                new.sort(key=lambda p: p.ready_at)
                new = new[:desired]
            if strategy.get("type") == "Recreate":
                old = []
                new += [self.new_pod(obj, target, now) for _ in range(desired - len(new))]
            else:
                new, old = self._rolling_update(obj, strategy, desired, new, old, target, now, min_ready)
            st.pods = new + old
        else:
            new, old = [], []
        new_ready = sum(p.ready(now) for p in new)
        if new_ready > st.new_ready:
            if st.new_ready >= 0:
                st.progress_since = now  # progress: more new pods ready (also lifts a timeout)
                st.timed_out = False
            st.new_ready = new_ready
        deadline = self.config.progress_deadline
        if deadline is None:
            deadline = float(_int(spec.get("progressDeadlineSeconds"), 600))
        replicas = len(st.pods)
        updated = len(new)
        ready, available = _ready_available(st.pods, now, min_ready)
        complete = updated == desired and replicas == desired and available >= desired
        if complete:
            # the deadline of a later setback (pods crashing) counts from the last time all was well
            st.progress_since = now
            st.timed_out = False
        elif not paused and now - st.progress_since >= deadline:
            st.timed_out = True
        if strategy.get("type") == "Recreate":
            max_unavailable = 0
        else:
            ru = _dict_at(strategy, "rollingUpdate")
            max_unavailable = min(resolve_int_or_percent(ru.get("maxUnavailable", "25%"), desired, 0, False),
                                  desired)
        rs_name = f"{md.get('name')}-{target}" if target else md.get("name", "")
        gen = md.get("generation")
        timed_out = st.timed_out
        wall = now_rfc3339()

        def compute(fresh: dict[str, Any]) -> dict[str, Any]:
            prev = (fresh.get("status") or {}).get("conditions")
            if available >= desired - max_unavailable:
                avail = _condition(prev, "Available", "True", "MinimumReplicasAvailable",
                                   "Deployment has minimum availability.", wall, update_time=True)
            else:
                avail = _condition(prev, "Available", "False", "MinimumReplicasUnavailable",
                                   "Deployment does not have minimum availability.", wall, update_time=True)
            if paused:
                prog = _condition(prev, "Progressing", "Unknown", "DeploymentPaused", "Deployment is paused",
                                  wall, update_time=True)
            elif complete:
                prog = _condition(prev, "Progressing", "True", "NewReplicaSetAvailable",
                                  f'ReplicaSet "{rs_name}" has successfully progressed.', wall, update_time=True)
            elif timed_out:
                prog = _condition(prev, "Progressing", "False", "ProgressDeadlineExceeded",
                                  f'ReplicaSet "{rs_name}" has timed out progressing.', wall, update_time=True)
            elif gen == 1 and new_ready == 0:
                prog = _condition(prev, "Progressing", "True", "NewReplicaSetCreated",
                                  f'Created new replica set "{rs_name}"', wall, update_time=True)
            else:
                prog = _condition(prev, "Progressing", "True", "ReplicaSetUpdated",
                                  f'ReplicaSet "{rs_name}" is progressing.', wall, update_time=True)
            status = {
                "observedGeneration": gen,
                "replicas": replicas,
                "updatedReplicas": updated,
                "readyReplicas": ready,
                "availableReplicas": available,
                "unavailableReplicas": max(0, desired - available),
                "conditions": [avail, prog],
            }
            return status

        await self.write_generation_status(obj, compute, "replicas", "updatedReplicas", "readyReplicas",
                                           "availableReplicas", "unavailableReplicas")
        extra = _NEVER
        if not complete and not paused and not st.timed_out:
            extra = st.progress_since + deadline
        return self.next_wakeup(st.pods, now, min_ready, extra)

    def _rolling_update(self, obj: dict[str, Any], strategy: dict[str, Any], desired: int, new: list[SimPod],
                        old: list[SimPod], target: str, now: float,
                        min_ready: float) -> tuple[list[SimPod], list[SimPod]]:
        """One step of a RollingUpdate, as the deployment controller takes it: at most ``desired + maxSurge``
        pods in all, at least ``desired - maxUnavailable`` available; old pods that are not ready go first.
        Repeated until nothing changes (each pass of the real controller does the same, a sync at a time)."""
        ru = _dict_at(strategy, "rollingUpdate")
        surge = resolve_int_or_percent(ru.get("maxSurge", "25%"), desired, 0, True)
        unavailable = resolve_int_or_percent(ru.get("maxUnavailable", "25%"), desired, 0, False)
        if surge == 0 and unavailable == 0:
            unavailable = 1  # the API refuses both 0; a controller given them would never progress
        old = [p for p in old if p.ready(now)]
        while True:
            changed = False
            room = desired + surge - len(old) - len(new)
            if len(new) < desired and room > 0:
                new += [self.new_pod(obj, target, now) for _ in range(min(room, desired - len(new)))]
                changed = True
            available = sum(p.available(now, min_ready) for p in new + old)
            removable = min(len(old), max(0, available - (desired - unavailable)))
            if removable > 0:
                old.sort(key=lambda p: p.ready_at, reverse=True)  # the youngest old pods go first
                old = old[removable:]
                changed = True
            if not changed:
                return new, old


# ====================================================================================== ReplicaSet
class ReplicaSetSimulator(_PodsSimulator):
    name = "replicaset"
    plural = "replicasets"

    async def step(self, obj: dict[str, Any], spec: dict[str, Any], st: _State, now: float, rev: str,
                   desired: int) -> float | None:
        md = obj["metadata"]
        min_ready = _min_ready(spec)
        if len(st.pods) < desired:
            st.pods += [self.new_pod(obj, rev, now) for _ in range(desired - len(st.pods))]
        elif len(st.pods) > desired:
            st.pods.sort(key=lambda p: p.ready_at)  # unready pods go first
            st.pods = st.pods[:desired]
        replicas = len(st.pods)
        ready, available = _ready_available(st.pods, now, min_ready)
        status = {"replicas": replicas, "fullyLabeledReplicas": replicas, "readyReplicas": ready,
                  "availableReplicas": available, "observedGeneration": md.get("generation")}
        await self.write_generation_status(obj, status, "fullyLabeledReplicas", "readyReplicas", "availableReplicas")
        return self.next_wakeup(st.pods, now, min_ready)


# ====================================================================================== StatefulSet
class StatefulSetSimulator(_PodsSimulator):
    name = "statefulset"
    plural = "statefulsets"

    def revision(self, obj: dict[str, Any], spec: dict[str, Any]) -> str:
        return f"{obj['metadata'].get('name', '')}-{template_hash(spec.get('template'))}"

    async def step(self, obj: dict[str, Any], spec: dict[str, Any], st: _State, now: float, update_rev: str,
                   replicas_wanted: int) -> float | None:
        md = obj["metadata"]
        if not st.current_revision:
            st.current_revision = update_rev
        start = _first_ordinal(spec)
        wanted = range(start, start + replicas_wanted)
        strategy = _dict_at(spec, "updateStrategy")
        stype = strategy.get("type") or "RollingUpdate"
        partition = _int(_dict_at(strategy, "rollingUpdate").get("partition"), 0)
        parallel = spec.get("podManagementPolicy") == "Parallel"
        min_ready = _min_ready(spec)

        pods = {p.ordinal: p for p in st.pods if p.ordinal in wanted}  # scale down: higher ordinals go
        for ordinal in wanted:
            if ordinal in pods:
                continue
            if not parallel and not all(pods[o].ready(now) for o in pods if o < ordinal):
                break
            rev = update_rev if ordinal - start >= partition else st.current_revision
            pods[ordinal] = self.new_pod(obj, rev, now, ordinal)
            if not parallel:
                break  # OrderedReady: one pod at a time, the next once this one is Ready
        if stype == "RollingUpdate":
            # An outdated pod that is not Ready (a broken image being fixed) is replaced at once. Kubernetes
            # waits for it forever until someone deletes the pod by hand, which a member without Pod objects
            # would not allow.
            for ordinal, p in list(pods.items()):
                if ordinal - start >= partition and p.revision != update_rev and not p.ready(now):
                    pods[ordinal] = self.new_pod(obj, update_rev, now, ordinal)
            if len(pods) == len(wanted) and all(p.ready(now) for p in pods.values()):
                for ordinal in sorted(pods, reverse=True):
                    if ordinal - start < partition:
                        break
                    if pods[ordinal].revision != update_rev:
                        pods[ordinal] = self.new_pod(obj, update_rev, now, ordinal)  # one at a time
                        break
        st.pods = [pods[o] for o in sorted(pods)]
        updated = sum(p.revision == update_rev for p in st.pods)
        ready, available = _ready_available(st.pods, now, min_ready)
        if updated == len(st.pods) == replicas_wanted and ready == replicas_wanted:
            st.current_revision = update_rev
        current = sum(p.revision == st.current_revision for p in st.pods)
        running = ready > 0
        self.record_running(obj, running, kind="StatefulSet")
        status = {
            "observedGeneration": md.get("generation"),
            "replicas": len(st.pods),
            "readyReplicas": ready,
            "currentReplicas": current,
            "updatedReplicas": updated,
            "availableReplicas": available,
            "currentRevision": st.current_revision,
            "updateRevision": update_rev,
            "collisionCount": 0,
        }
        await self.write_generation_status(obj, status, "readyReplicas", "currentReplicas", "updatedReplicas")
        return self.next_wakeup(st.pods, now, min_ready)

    def seeded(self, st: _State, obj: dict[str, Any]) -> None:
        status = obj.get("status") or {}
        if st.pods and status.get("currentRevision") != status.get("updateRevision"):
            st.pods, st.created = [], False
        start = _first_ordinal(_dict_at(obj, "spec"))
        for i, p in enumerate(st.pods):
            p.ordinal = start + i

    async def forget(self, key: ObjectKey, last: dict[str, Any]) -> None:
        await super().forget(key, last)
        self.record_running(last, False, kind="StatefulSet")


def _first_ordinal(spec: dict[str, Any]) -> int:
    return _int(_dict_at(spec, "ordinals").get("start"), 0)


# ====================================================================================== DaemonSet
class DaemonSetSimulator(_PodsSimulator):
    name = "daemonset"
    plural = "daemonsets"
    ready_field = "numberReady"

    def wanted(self, spec: dict[str, Any]) -> int:
        return max(self.config.daemonset_nodes, 0)  # one pod per simulated node

    async def step(self, obj: dict[str, Any], spec: dict[str, Any], st: _State, now: float, rev: str,
                   nodes: int) -> float | None:
        md = obj["metadata"]
        min_ready = _min_ready(spec)
        strategy = _dict_at(spec, "updateStrategy")
        ru = _dict_at(strategy, "rollingUpdate")
        max_unavailable = max(resolve_int_or_percent(ru.get("maxUnavailable", 1), nodes, 1, True), 1)
        pods = {p.ordinal: p for p in st.pods if p.ordinal < nodes}
        for node in range(nodes):
            if node not in pods:
                pods[node] = self.new_pod(obj, rev, now, node)
        if (strategy.get("type") or "RollingUpdate") == "RollingUpdate":
            unavailable = sum(not p.available(now, min_ready) for p in pods.values())
            for node in sorted(pods):
                p = pods[node]
                if p.revision == rev:
                    continue
                if not p.available(now, min_ready):
                    pods[node] = self.new_pod(obj, rev, now, node)  # replacing an unavailable pod costs nothing
                elif unavailable < max_unavailable:
                    pods[node] = self.new_pod(obj, rev, now, node)
                    unavailable += 1
        st.pods = [pods[o] for o in sorted(pods)]
        ready, available = _ready_available(st.pods, now, min_ready)
        status = {
            "currentNumberScheduled": len(st.pods),
            "desiredNumberScheduled": nodes,
            "numberMisscheduled": 0,
            "numberReady": ready,
            "numberAvailable": available,
            "numberUnavailable": max(0, nodes - available),
            "updatedNumberScheduled": sum(p.revision == rev for p in st.pods),
            "observedGeneration": md.get("generation"),
        }
        await self.write_generation_status(obj, status, "numberAvailable", "numberUnavailable",
                                           "updatedNumberScheduled")
        return self.next_wakeup(st.pods, now, min_ready)


# ====================================================================================== Job
def _indexes(n: int) -> str:
    """completedIndexes text for 0..n-1 (three or more consecutive numbers become a range)."""
    if n <= 0:
        return ""
    if n == 1:
        return "0"
    if n == 2:
        return "0,1"
    return f"0-{n - 1}"


class JobSimulator(_WorkloadSimulator):
    name = "job"
    group = "batch"
    plural = "jobs"
    stopped_by_guard = False  # a Job runs to its end: the guard does not stop it

    async def reconcile(self, obj: dict[str, Any]) -> float | None:
        now = self._loop_now()
        spec = _dict_at(obj, "spec")
        st, fresh_state = self.state_for(obj)
        prev_status = obj.get("status") or {}
        if fresh_state:
            for c in prev_status.get("conditions") or []:
                if isinstance(c, dict) and c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
                    st.finished = "Frozen"  # finished before this simulator started: leave it alone
        if st.finished == "Frozen":
            return None
        wall = now_rfc3339()
        completions = spec.get("completions")
        parallelism = _int(spec.get("parallelism"), 1)
        want = _int(completions, 1) if completions is not None else 1
        active_n = min(parallelism, want) if completions is not None else parallelism
        backoff_limit = _int(spec.get("backoffLimit"), 6)
        delay = self.config.ready_delay_for(obj)
        broken = self.config.image_broken(obj) or self.config.crash_annotation(obj)
        suspended = bool(spec.get("suspend"))
        deadline = spec.get("activeDeadlineSeconds")
        indexed = spec.get("completionMode") == "Indexed"
        wake: float | None = None

        if not st.finished and not suspended and st.start < 0:
            st.start = now
            st.start_wall = prev_status.get("startTime") or wall
        failed = 0
        if not st.finished and not suspended:
            elapsed = now - st.start
            if isinstance(deadline, int) and not isinstance(deadline, bool) and elapsed >= deadline:
                st.finished, st.finish_wall = "Failed:DeadlineExceeded", wall
            elif broken:
                failed = min(int(elapsed // delay) if delay > 0 else backoff_limit + 1, backoff_limit + 1)
                if failed > backoff_limit:
                    st.finished, st.finish_wall = "Failed:BackoffLimitExceeded", wall
                else:
                    wake = st.start + (failed + 1) * delay - now
            elif elapsed >= delay:
                st.finished, st.finish_wall = "Complete", wall
            else:
                wake = st.start + delay - now
            if wake is not None and isinstance(deadline, int) and not isinstance(deadline, bool):
                wake = min(wake, st.start + deadline - now)
        if st.finished.startswith("Failed"):
            failed = backoff_limit + 1 if st.finished.endswith("BackoffLimitExceeded") else failed

        finished, finish_wall, start_wall = st.finished, st.finish_wall, st.start_wall

        def compute(fresh: dict[str, Any]) -> dict[str, Any] | None:
            prev = (fresh.get("status") or {}).get("conditions")
            status: dict[str, Any] = {"uncountedTerminatedPods": {}, "terminating": 0}
            conds: list[dict[str, Any]] = []
            if start_wall:
                status["startTime"] = start_wall
            if suspended and not finished:
                conds.append(_condition(prev, "Suspended", "True", "JobSuspended", "Job suspended", wall,
                                        probe_time=True))
                status["active"] = 0
                status["ready"] = 0
            elif finished == "Complete":
                msg = "Reached expected number of succeeded pods"
                conds.append(_condition(prev, "SuccessCriteriaMet", "True", "CompletionsReached", msg, finish_wall,
                                        probe_time=True))
                conds.append(_condition(prev, "Complete", "True", "CompletionsReached", msg, finish_wall,
                                        probe_time=True))
                status.update(succeeded=want, ready=0, completionTime=finish_wall)
                if indexed:
                    status["completedIndexes"] = _indexes(want)
            elif finished.startswith("Failed"):
                reason = finished.split(":", 1)[1]
                msg = ("Job has reached the specified backoff limit" if reason == "BackoffLimitExceeded"
                       else "Job was active longer than specified deadline")
                conds.append(_condition(prev, "FailureTarget", "True", reason, msg, finish_wall, probe_time=True))
                conds.append(_condition(prev, "Failed", "True", reason, msg, finish_wall, probe_time=True))
                status.update(failed=failed, ready=0)
            else:
                status.update(active=active_n, ready=0 if broken else active_n, failed=failed)
            if any(c["type"] == "Suspended" for c in prev or [] if isinstance(c, dict)) and not suspended:
                conds.insert(0, _condition(prev, "Suspended", "False", "JobResumed", "Job resumed", wall,
                                           probe_time=True))
            if conds:
                status["conditions"] = conds
            return _omit_zero(status, "active", "failed", "succeeded")

        await self.set_status(obj, compute)
        return None if wake is None else max(wake, 0.0) + 0.005


# ====================================================================================== defaulting
def _sub(obj: dict[str, Any], key: str) -> dict[str, Any] | None:
    """obj[key] as a dict, created if absent; None if it holds something else (left for validation)."""
    v = obj.get(key)
    if v is None:
        v = obj[key] = {}
    return v if isinstance(v, dict) else None


def _default_rolling_update(spec: dict[str, Any], key: str, **rolling_update: Any) -> None:
    """``spec[key]``: type RollingUpdate unless set, and then ``rollingUpdate``'s defaults."""
    strategy = _sub(spec, key)
    if strategy is None:
        return
    strategy.setdefault("type", "RollingUpdate")
    if strategy.get("type") == "RollingUpdate":
        ru = _sub(strategy, "rollingUpdate")
        if ru is not None:
            for field_name, value in rolling_update.items():
                ru.setdefault(field_name, value)


def _default_deployment(obj: dict[str, Any]) -> None:
    spec = _sub(obj, "spec")
    if spec is None:
        return
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _default_rolling_update(spec, "strategy", maxUnavailable="25%", maxSurge="25%")


def _default_statefulset(obj: dict[str, Any]) -> None:
    spec = _sub(obj, "spec")
    if spec is None:
        return
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    spec.setdefault("revisionHistoryLimit", 10)
    _default_rolling_update(spec, "updateStrategy", partition=0)
    policy = _sub(spec, "persistentVolumeClaimRetentionPolicy")
    if policy is not None:
        policy.setdefault("whenDeleted", "Retain")
        policy.setdefault("whenScaled", "Retain")


def _default_daemonset(obj: dict[str, Any]) -> None:
    spec = _sub(obj, "spec")
    if spec is None:
        return
    spec.setdefault("revisionHistoryLimit", 10)
    _default_rolling_update(spec, "updateStrategy", maxUnavailable=1, maxSurge=0)


def _default_replicaset(obj: dict[str, Any]) -> None:
    spec = _sub(obj, "spec")
    if spec is not None:
        spec.setdefault("replicas", 1)


def _default_job(obj: dict[str, Any]) -> None:
    spec = _sub(obj, "spec")
    if spec is None:
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)


_DEFAULTERS: dict[tuple[str, str], Callable[[dict[str, Any]], None]] = {
    ("apps", "Deployment"): _default_deployment,
    ("apps", "StatefulSet"): _default_statefulset,
    ("apps", "DaemonSet"): _default_daemonset,
    ("apps", "ReplicaSet"): _default_replicaset,
    ("batch", "Job"): _default_job,
}


def install_workload_defaults(storage: Any) -> None:
    """Give a member's ResourceStorage kube-apiserver's defaulting for the workload kinds.

    Installed as storage strategies (they run before the generation is computed, so a PUT without the
    defaulted fields does not bump ``metadata.generation``); an existing strategy for the kind runs first.
    """
    for gk, fn in _DEFAULTERS.items():
        previous = storage.strategies.get(gk)

        def strategy(obj: dict[str, Any], old: dict[str, Any] | None, _fn: Any = fn, _prev: Any = previous) -> None:
            if _prev is not None:
                _prev(obj, old)
            _fn(obj)

        storage.strategies[gk] = strategy


register_simulator("deployment", DeploymentSimulator)
register_simulator("replicaset", ReplicaSetSimulator)
register_simulator("statefulset", StatefulSetSimulator)
register_simulator("daemonset", DaemonSetSimulator)
register_simulator("job", JobSimulator)
