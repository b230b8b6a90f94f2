"""``flotilla demo``: the proposal's Flink story, for real, on one machine.

A FlinkDeployment ``wordcount`` runs on member1 (placement: member1 first, member2/member3 as the fallback group)
with a PropagationPolicy that moves it with ``purgeMode: Directly`` and preserves ``{ .jobStatus.jobId }`` as the
label ``failover.flink.io/job-id``. Two stories, each narrated with the time since the fault:

* the default, **automatic fencing**: the three members are Pull members whose agents keep a run permit and whose
  members run the guard (``flotilla up --pull-members 3 --guard``, with the short timings of :data:`FENCE_AFTER`,
  :data:`PERMIT_HOLD` and :data:`FENCE_MARGIN`). member1 is cut off from the control plane (the simulator's
  ``partition`` fault, through the stack's link); its job keeps running behind the cut until its guard stops it
  (the permit went stale); the control plane fences member1 by itself at the bound (taint, condition ``Fenced``,
  Event ``ClusterFencedAutomatically``); the job is re-created on another member with the job id as a label and
  resumes from its newest checkpoint. Nobody types anything. Then the partition heals and member1's agent deletes
  the stale copy before it could run again; member1 stays fenced until ``flotilla unfence``.
* ``--manual-fence``: three Push members; member1 loses power (the simulator's ``off`` fault: its API goes away and
  its workloads stop); detection (Ready False), the ClusterTaintPolicy's ``not-ready:NoExecute`` taint, the
  eviction task with the preserved job id; ``Directly`` waits until member1 is known to be down, which a person
  confirms with ``flotilla fence member1``; the job resumes elsewhere; member1 comes back (its API first, its
  workloads a few seconds later, as a rebooting cluster), it is unfenced, and its stale copy is deleted before it
  could run again.

The summary table and the checks come from :mod:`flotilla.local.demo_report`, from what the demo observed and from
the members' running history; the exit code is 0 only when every check held.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, TextIO, TypeVar

from flotilla.api import resources as R
from flotilla.client import ApiException, Client, Resource
from flotilla.failover.auto_fence import CONDITION_FENCED, EVENT_CLUSTER_FENCED_AUTOMATICALLY
from flotilla.failover.fencing import OUT_OF_SERVICE_TAINT_KEY
from flotilla.failover.peer_quorum import acknowledged_fences, pending_token
from flotilla.failover.run_permit import ANNOTATION_FENCE_AFTER, ANNOTATION_PERMIT_HOLD, GUARDED_LABEL
from flotilla.kube.resources import CRDS
from flotilla.kube.times import parse_time
from flotilla.local.demo_report import AUTOMATIC, MANUAL, DemoFacts, checks, format_seconds, render_summary
from flotilla.local.layout import RECORD_FILE
from flotilla.local.stack import LAPTOP_TIMINGS, NOT_READY_TAINT, LocalStack, StackConfig
from flotilla.member.flink_crd import FLINK_DEPLOYMENTS as FLINK
from flotilla.member.flink_crd import flink_deployment_crd
from flotilla.member.history import Interval, copies_at_most
from flotilla.member.savepoint_rule import DEFAULT_LABEL as JOB_LABEL
from flotilla.observability.logs import log_formatter
from flotilla.signals import stop_on_signals

__all__ = ["DemoError", "run_demo", "stack_config"]

T = TypeVar("T")

NAMESPACE = "default"
NAME = "wordcount"
BINDING = f"{NAME}-flinkdeployment"
BOOT_DELAY = 6.0  # --manual-fence: seconds from member1's power-on to its workloads restarting (its API answers at once)
ANN = "sim.flotilla.io/"

#: The default story's timings, in seconds: what `flotilla up --pull-members 3 --guard --fence-after 4
#: --permit-hold 12 --fence-margin 4` runs. The control plane fences a cut-off member once it has seen no Lease
#: renewal for FENCE_BOUND; the agents renew their Lease every LEASE_RENEW_INTERVAL (their default), so the last
#: renewal before the cut may be up to that old. The waits allow the documented bound plus explicit slack.
FENCE_AFTER: Final = 4.0
PERMIT_HOLD: Final = 12.0
FENCE_MARGIN: Final = 4.0
FENCE_BOUND: Final = PERMIT_HOLD + FENCE_AFTER + FENCE_MARGIN
LEASE_RENEW_INTERVAL: Final = 10.0
FENCE_PENDING: Final = LEASE_RENEW_INTERVAL + 5.0  # a fence may land this much past the bound (others' renewals)
STALE_PURGE: Final = 2 * LEASE_RENEW_INTERVAL  # after the heal: the agent's first renewal, then its purge
SLACK: Final = 20.0  # a loaded machine
AFTER_HEAL: Final = 2.0  # seconds the job is watched on the new member once the stale copy is gone


def stack_config(data_dir: Path, *, manual_fence: bool) -> StackConfig:
    """``--manual-fence``: three Push members. The default: three Pull members whose agents keep a run permit and
    whose members run the guard, so that when member1 is cut off the two others count as live (by their Leases) and
    the control plane sees the majority it needs to fence member1."""
    if manual_fence:
        return StackConfig(data_dir=data_dir, members=3, port=0, metrics_address=None)
    return StackConfig(data_dir=data_dir, members=3, port=0, metrics_address=None, pull_members=3, guard=True,
                       fence_after=FENCE_AFTER, permit_hold=PERMIT_HOLD,
                       timings={**LAPTOP_TIMINGS, "fence_margin": FENCE_MARGIN})


def policy() -> dict[str, Any]:
    return {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {
            "resourceSelectors": [{"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
                                   "name": NAME}],
            "placement": {
                "clusterAffinities": [{"affinityName": "primary", "clusterNames": ["member1"]},
                                      {"affinityName": "fallback", "clusterNames": ["member2", "member3"]}],
                "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]},
            "failover": {"cluster": {"purgeMode": "Directly", "statePreservation": {
                "rules": [{"aliasLabelName": JOB_LABEL, "jsonPath": "{ .jobStatus.jobId }"}]}}},
        },
    }


def flink_deployment() -> dict[str, Any]:
    return {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {"image": "flink:1.20", "flinkVersion": "v1_20", "serviceAccount": "flink",
                     "jobManager": {"resource": {"memory": "2048m", "cpu": 1}},
                     "taskManager": {"resource": {"memory": "2048m", "cpu": 1}},
                     "job": {"jarURI": "local:///opt/flink/examples/streaming/WordCount.jar", "parallelism": 2,
                             "upgradeMode": "last-state"}}}


class DemoError(Exception):
    """The demo could not go on; the message says where it stopped."""


class Narrator:
    """Prints each step with the elapsed time; while waiting, a live line on a terminal."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.start = time.monotonic()
        self.live = out.isatty()
        self.t0: float | None = None  # the power-off instant, once it happened

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def since_fault(self) -> float | None:
        return None if self.t0 is None else time.monotonic() - self.t0

    def say(self, message: str) -> None:
        stamp = f"[{self.elapsed():6.1f}s]"
        if self.t0 is not None:
            stamp += f" (T+{time.monotonic() - self.t0:5.1f}s)"
        self.out.write(f"{stamp} {message}\n")
        self.out.flush()

    async def wait(self, check: Callable[[], Awaitable[T | None]], what: str, limit: float = 60.0) -> T:
        from flotilla.cli.progress import Progress

        last_error = ""
        with Progress(f"    waiting for {what}", file=self.out, force=self.live) as line:
            while True:
                try:
                    result = await check()
                except (ApiException, OSError) as e:
                    result, last_error = None, str(e)
                if result is not None:
                    return result
                if line.elapsed > limit:
                    raise DemoError(f"timed out after {limit:.0f}s waiting for {what}"
                                    + (f" (last error: {last_error})" if last_error else ""))
                line.update()
                await asyncio.sleep(0.25)


async def _get(client: Client, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    return await client.get_or_none(res, name, namespace)


def _ann(obj: dict[str, Any], key: str) -> str:
    return str(((obj.get("metadata") or {}).get("annotations") or {}).get(ANN + key) or "")


def _job(obj: dict[str, Any]) -> dict[str, Any]:
    return (obj.get("status") or {}).get("jobStatus") or {}


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def _left(n: Narrator, since_fault: float) -> float:
    """How long a wait may still take for a step due within ``since_fault`` seconds of the fault."""
    return max(5.0, since_fault - (n.since_fault() or 0.0))


def _prepare_data_dir(data_dir: Path) -> None:
    """The demo starts afresh: an old demo directory (one ``flotilla up`` made) is removed; anything else is
    refused rather than deleted."""
    if not data_dir.exists():
        return
    if not data_dir.is_dir():
        raise DemoError(f"{data_dir} is not a directory; pass another --data-dir")
    entries = list(data_dir.iterdir())
    if entries and not (data_dir / RECORD_FILE).exists():
        raise DemoError(f"{data_dir} is not empty and was not made by flotilla; pass another --data-dir")
    shutil.rmtree(data_dir)


class Demo:
    def __init__(self, data_dir: Path, out: TextIO, *, keep: bool, manual_fence: bool = False) -> None:
        self.data_dir = data_dir
        self.keep = keep
        self.manual_fence = manual_fence
        self.n = Narrator(out)
        self.facts = DemoFacts(story=MANUAL if manual_fence else AUTOMATIC, old_member="member1")
        if not manual_fence:
            self.facts.permit_hold, self.facts.fence_after, self.facts.fence_margin = \
                PERMIT_HOLD, FENCE_AFTER, FENCE_MARGIN
        self.stack: LocalStack | None = None
        self.members: dict[str, Client] = {}
        self.pending_seen: dict[str, float] = {}  # member1's fence pending, its acknowledgements: seconds after the cut

    @property
    def cp(self) -> Client:
        assert self.stack is not None
        return self.stack.client

    async def run(self) -> int:
        _prepare_data_dir(self.data_dir)
        self.data_dir.mkdir(parents=True)
        log_file = self.data_dir / "demo.log"
        root = logging.getLogger()
        handler = logging.FileHandler(log_file)
        handler.setFormatter(log_formatter())  # --log-format json: one JSON object a line here too
        saved = (root.handlers[:], root.level)
        root.handlers = [handler]
        root.setLevel(logging.INFO)
        try:
            return await self._run(log_file)
        finally:
            root.handlers, level = saved
            root.setLevel(level)
            handler.close()

    async def _run(self, log_file: Path) -> int:
        n = self.n
        if self.manual_fence:
            n.say("starting Flotilla: control plane, every controller and 3 simulated members (flotilla up)")
        else:
            n.say("starting Flotilla: control plane, every controller and 3 simulated members in Pull mode, each "
                  "with its agent keeping a run permit and its guard (flotilla up --pull-members 3 --guard "
                  f"--fence-after {FENCE_AFTER:g} --permit-hold {PERMIT_HOLD:g} --fence-margin {FENCE_MARGIN:g})")
        self.stack = LocalStack(stack_config(self.data_dir, manual_fence=self.manual_fence), say=lambda m: None)
        try:
            await self.stack.start()
            for name, m in self.stack.group.members.items():
                self.members[name] = Client.from_kubeconfig(str(m.kubeconfig_path))
            await self._start_job()
            if self.manual_fence:
                await self._manual_story()
            else:
                await self._automatic_story()
            await self._finish()
        finally:
            if self.keep and self.stack.api is not None:
                await self._keep_running()
            for c in self.members.values():
                with contextlib.suppress(Exception):
                    await c.close()
            await self.stack.stop()
        results = checks(self.facts)
        n.out.write("\nsummary\n" + render_summary(self.facts) + "\n")
        ok = all(c.ok for c in results)
        n.out.write(("\nevery check held" if ok else "\nsome checks FAILED") + f" (the components' log: {log_file})\n")
        n.out.flush()
        return 0 if ok else 1

    async def _keep_running(self) -> None:
        assert self.stack is not None
        self.n.out.write(f"\n--keep: Flotilla keeps running. export KUBECONFIG={self.stack.kubeconfig.resolve()}"
                         " and explore with kubectl (contexts flotilla, member1..3); Ctrl-C stops it\n")
        self.n.out.flush()
        stop = stop_on_signals()
        await stop.wait()

    # ------------------------------------------------------------------ the story
    async def _start_job(self) -> None:
        """Both stories: the members ready, the job RUNNING on member1 with a completed checkpoint."""
        n, f = self.n, self.facts
        assert self.stack is not None
        if self.manual_fence:
            await n.wait(self._clusters_ready, "the 3 members to be Ready", 60)
            n.say("members ready; a ClusterTaintPolicy turns Ready=False/Unknown into "
                  f"{NOT_READY_TAINT}:NoExecute")
        else:
            await n.wait(self._guards_announced, "the 3 agents to register their members, announcing their guards",
                         90)
            n.say(f"members ready, each announcing its guard (fence-after {FENCE_AFTER:g}s, permit-hold "
                  f"{PERMIT_HOLD:g}s): the control plane fences a cut-off member by itself once it has seen no "
                  f"Lease renewal for {PERMIT_HOLD:g} + {FENCE_AFTER:g} + {FENCE_MARGIN:g} (fence-margin) = "
                  f"{FENCE_BOUND:g}s, and only while it sees a majority of the members live")

        with contextlib.suppress(ApiException):
            await self.cp.create(CRDS, flink_deployment_crd())
        await n.wait(self._crd_served, "the FlinkDeployment CRD to be served", 30)
        await self.cp.create(R.PROPAGATION_POLICIES, policy(), NAMESPACE)
        await self.cp.create(FLINK, flink_deployment(), NAMESPACE)
        n.say(f"applied PropagationPolicy {NAME} (member1 first; failover.cluster: purgeMode Directly, "
              f"preserve {{ .jobStatus.jobId }} as {JOB_LABEL}) and FlinkDeployment {NAME}")

        obj = await n.wait(lambda: self._running_in("member1"), f"{NAME} to run on member1", 60)
        f.job_id = str(_job(obj).get("jobId") or "")
        if self.manual_fence:
            n.say(f"job {f.job_id} RUNNING on member1")
        else:
            guarded = ((obj.get("metadata") or {}).get("labels") or {}).get(GUARDED_LABEL)
            n.say(f"job {f.job_id} RUNNING on member1, labelled {GUARDED_LABEL}={guarded} (purgeMode Directly): "
                  "member1's guard stops it when its run permit goes stale")
        await n.wait(self._job_id_on_binding, "the binding to hold the job's status", 30)
        obj = await n.wait(self._checkpointed, "a completed checkpoint", 30)
        n.say(f"checkpoint {_ann(obj, 'last-checkpoint')} completed; records processed: {_ann(obj, 'records-processed')}")
        await asyncio.sleep(1.0)
        last = await _get(self.members["member1"], FLINK, NAME, NAMESPACE)
        f.records_at_fault = int(_ann(last or obj, "records-processed") or 0)

    async def _fault_member1(self, mode: str) -> Any:
        """``flotilla sim fault member1 --mode MODE``: the fault of the story, whose clock starts now; member1."""
        assert self.stack is not None
        member1 = self.stack.member("member1")
        await member1.set_fault(mode)
        self.n.t0 = time.monotonic()
        return member1

    async def _manual_story(self) -> None:
        n, f = self.n, self.facts
        member1 = await self._fault_member1("off")
        n.say("member1 loses power: its API server is gone and its workloads stopped (flotilla sim fault member1 "
              "--mode off)")
        await asyncio.sleep(0.2)
        self._read_newest_checkpoint()
        n.say(f"the job's newest checkpoint: {Path(f.newest_checkpoint).name} (records [0, "
              f"{f.newest_checkpoint_offset}))")

        await n.wait(self._not_ready, "member1 to be detected as not Ready", 60)
        f.detection_seconds = n.since_fault()
        n.say("member1 is not Ready (the cluster-status controller's probes failed)")
        await n.wait(self._tainted, f"the {NOT_READY_TAINT}:NoExecute taint", 30)
        f.taint_seconds = n.since_fault()
        n.say(f"the ClusterTaintPolicy tainted member1 {NOT_READY_TAINT}:NoExecute")
        task = await n.wait(self._evicted, "the taint manager to evict the job from member1", 30)
        f.eviction_seconds = n.since_fault()
        n.say(f"evicted: graceful eviction task from member1, purgeMode {task.get('purgeMode')}, preserved state "
              f"{task.get('preservedLabelState')}")
        placed = await n.wait(self._rescheduled, "the scheduler to place the job elsewhere", 30)
        n.say(f"the scheduler placed it on {placed} (the fallback cluster group)")
        n.say("purgeMode Directly: the new copy is created only once the old one is known to be gone, and member1 "
              "cannot be asked. An operator confirms member1 is powered off: flotilla fence member1")
        from flotilla.cli.fence_commands import fence_cluster

        await fence_cluster(self.cp, "member1", out=lambda m: None, warn=lambda m: None)
        await self._wait_moved()

        n.say(f"member1 powers on: its API answers at once, its workloads restart {BOOT_DELAY:g}s later")
        member1.faults.boot_delay = BOOT_DELAY
        await member1.set_fault("recover")
        from flotilla.cli.fence_commands import unfence_cluster

        await n.wait(self._ready_again, "member1 to be Ready again", 60)
        await unfence_cluster(self.cp, "member1", out=lambda m: None)
        n.say("member1 is Ready; unfenced (flotilla unfence member1): its stale copy is deleted before anything else")
        await n.wait(self._stale_gone, "the stale copy on member1 to be deleted", 60)
        f.stale_copy_removed = True
        n.say("member1 holds no copy of the job any more")
        await asyncio.sleep(max(0.0, BOOT_DELAY + 1.0))  # past member1's workload restart: nothing may run there

    async def _automatic_story(self) -> None:
        n, f = self.n, self.facts
        member1 = await self._fault_member1("partition")
        f.cut_at = time.time()
        n.say("member1 is cut off from the control plane (flotilla sim fault member1 --mode partition): its agent "
              "cannot renew its Lease any more; member1 and its job go on running. Nobody types anything from now on")
        watcher = asyncio.ensure_future(self._watch_pending(n.t0))
        await asyncio.sleep(1.0)
        obj = await self._running_in("member1")
        if obj is not None:
            n.say(f"the job is still RUNNING on member1 behind the cut (records processed: "
                  f"{_ann(obj, 'records-processed')}); its agent renews the run permit only for {PERMIT_HOLD:g}s "
                  "after its last successful Lease renewal")

        stop = await n.wait(self._guard_stopped, "member1's guard to stop the job",
                            _left(n, PERMIT_HOLD + FENCE_AFTER + SLACK))
        f.old_copy_started_at, f.old_copy_stopped_at = stop.start, stop.end
        obj = await _get(self.members["member1"], FLINK, NAME, NAMESPACE)
        n.say(f"member1's guard stopped the job: the run permit had not changed for {FENCE_AFTER:g}s "
              f"({format_seconds(f.guard_stop_seconds)} after the cut); the object is "
              f"{'still there, state ' + str(_job(obj).get('state')) if obj is not None else 'gone'}")
        if obj is not None:
            f.records_at_fault = int(_ann(obj, "records-processed") or f.records_at_fault or 0)
        self._read_newest_checkpoint()
        n.say(f"the job's newest checkpoint: {Path(f.newest_checkpoint).name} (records [0, "
              f"{f.newest_checkpoint_offset}))")

        cluster = await n.wait(self._fenced_automatically, "the control plane to fence member1",
                               _left(n, FENCE_BOUND + FENCE_PENDING + SLACK))
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        if "pending" in self.pending_seen:
            acked = {k: v for k, v in self.pending_seen.items() if k != "pending"}
            n.say(f"(at T+{self.pending_seen['pending']:.1f}s the control plane had marked member1 fence-pending, "
                  f"after {PERMIT_HOLD:g}s without a Lease renewal; "
                  + (", ".join(f"{m}'s agent acknowledged it at T+{t:.1f}s" for m, t in sorted(acked.items()))
                     or "no acknowledgement seen")
                  + "; from then on no agent vouches for member1, and the fence waits for the peer-report ttl + "
                    "fence-after + margin after the last acknowledgement)")
        f.fence_seconds = n.since_fault()
        cond = _condition(cluster, CONDITION_FENCED) or {}
        f.fence_status = f"{cond.get('status')}/{cond.get('reason')}"
        taint = next((t for t in (cluster.get("spec") or {}).get("taints") or []
                      if t.get("key") == OUT_OF_SERVICE_TAINT_KEY), {})
        since = parse_time(taint.get("timeAdded"))  # stamped before the taint was written
        f.fenced_since = since.timestamp() if since is not None else None
        n.say(f"the control plane fenced member1 by itself: taint {OUT_OF_SERVICE_TAINT_KEY}:NoExecute, condition "
              f"{CONDITION_FENCED}={cond.get('status')} ({cond.get('reason')}): {cond.get('message')}")
        events = await n.wait(self._fence_events, f"the Event {EVENT_CLUSTER_FENCED_AUTOMATICALLY}", 15)
        f.fence_events = len(events)
        n.say(f"Event {EVENT_CLUSTER_FENCED_AUTOMATICALLY} ({events[0].get('type')}) on Cluster member1")
        task = await n.wait(self._evicted, "the taint manager to evict the job from member1", 30)
        n.say(f"evicted: graceful eviction task from member1, purgeMode {task.get('purgeMode')}, preserved state "
              f"{task.get('preservedLabelState')}")
        placed = await n.wait(self._rescheduled, "the scheduler to place the job elsewhere", 30)
        n.say(f"the scheduler placed it on {placed} (the fallback cluster group); member1 is fenced, so its Work "
              "is released without asking member1 and purgeMode Directly lets the new copy be created")
        await self._wait_moved()

        await member1.set_fault("recover")
        f.heal_seconds = n.since_fault()
        n.say("the partition heals (flotilla sim fault member1 --mode recover): member1's agent reaches the control "
              "plane again and first purges the guarded copies whose Work is gone")
        await n.wait(self._stale_gone, "the stale copy on member1 to be deleted", STALE_PURGE + SLACK)
        f.stale_gone_seconds = n.since_fault()
        f.stale_copy_removed = True
        n.say("member1 holds no copy of the job any more: its agent deleted the stale copy; member1 stays fenced "
              "until an operator runs flotilla unfence member1")
        await asyncio.sleep(AFTER_HEAL)

    async def _watch_pending(self, t0: float) -> None:
        """Record when member1's fence was first seen pending and when each other agent's Lease acknowledged it
        (seconds since the cut), for the narration."""
        from flotilla.kube.resources import LEASES

        self.pending_seen.clear()
        token = None
        while True:
            with contextlib.suppress(ApiException, OSError):
                if token is None:
                    token = pending_token(await self._cluster("member1"))
                    if token is not None:
                        self.pending_seen["pending"] = time.monotonic() - t0
                else:
                    for m in ("member2", "member3"):
                        if m not in self.pending_seen:
                            lease = await _get(self.cp, LEASES, m, "karmada-cluster")
                            if acknowledged_fences(lease).get("member1") == token:
                                self.pending_seen[m] = time.monotonic() - t0
            await asyncio.sleep(0.2)

    async def _wait_moved(self) -> None:
        n, f = self.n, self.facts
        obj = await n.wait(self._moved, "the job to run on another member", 60)
        f.failover_seconds = n.since_fault()
        labels = (obj.get("metadata") or {}).get("labels") or {}
        n.say(f"{NAME} RUNNING on {f.new_member}, created with label {JOB_LABEL}={f.injected_label}; restored from "
              f"{Path(f.restored_from).name or 'nothing'} at record {f.restored_offset}")
        n.say(f"the control plane wrote spec.job.initialSavepointPath={f.initial_savepoint_path or '(none)'} into "
              f"its Work: nothing is installed in the members")
        if labels.get(JOB_LABEL) != f.injected_label:
            n.say(f"(the label on {f.new_member} now reads {labels.get(JOB_LABEL)!r})")

    async def _finish(self) -> None:
        """Both stories: the new copy still runs; the stale copy is gone; what the running history says."""
        n, f = self.n, self.facts
        assert self.stack is not None
        obj = await n.wait(lambda: self._running_in(f.new_member), f"{NAME} still RUNNING on {f.new_member}", 30)
        f.records_at_end = int(_ann(obj, "records-processed") or 0)
        f.stale_copy_removed = await _get(self.members["member1"], FLINK, NAME, NAMESPACE) is None
        ivs = self.stack.group.history.intervals(kind="FlinkDeployment", namespace=NAMESPACE, name=NAME)
        from flotilla.member.history import overlaps

        f.overlaps = overlaps(ivs)
        f.copies_max = copies_at_most(ivs)
        f.old_member_starts = sorted(iv.start for iv in ivs if iv.member == f.old_member)

    # ------------------------------------------------------------------ observations
    async def _clusters_ready(self) -> bool | None:
        items = (await self.cp.list(R.CLUSTERS)).get("items") or []
        ready = [c for c in items if (_condition(c, "Ready") or {}).get("status") == "True"]
        return True if len(ready) == 3 else None

    async def _guards_announced(self) -> bool | None:
        """Every member Ready in Pull mode, announcing its guard, and its Lease in the control plane (the control
        plane fences only a cluster whose Lease it has seen)."""
        from flotilla.agent.lease import LEASE_NAMESPACE
        from flotilla.kube.resources import LEASES

        items = (await self.cp.list(R.CLUSTERS)).get("items") or []
        names = set()
        for c in items:
            annotations = (c.get("metadata") or {}).get("annotations") or {}
            if (_condition(c, "Ready") or {}).get("status") == "True" \
                    and (c.get("spec") or {}).get("syncMode") == "Pull" \
                    and ANNOTATION_FENCE_AFTER in annotations and ANNOTATION_PERMIT_HOLD in annotations:
                names.add(c["metadata"]["name"])
        leases = (await self.cp.list(LEASES, LEASE_NAMESPACE)).get("items") or []
        leased = {(x.get("metadata") or {}).get("name") for x in leases}
        return True if len(names) == 3 and names <= leased else None

    async def _crd_served(self) -> bool | None:
        try:
            await self.cp.list(FLINK, NAMESPACE)
            return True
        except ApiException:
            return None

    async def _running_in(self, member: str) -> dict[str, Any] | None:
        obj = await _get(self.members[member], FLINK, NAME, NAMESPACE)
        if obj is None or _job(obj).get("state") != "RUNNING" or not _job(obj).get("jobId"):
            return None
        return obj

    async def _job_id_on_binding(self) -> bool | None:
        rb = await _get(self.cp, R.RESOURCE_BINDINGS, BINDING, NAMESPACE)
        for item in ((rb or {}).get("status") or {}).get("aggregatedStatus") or []:
            if item.get("clusterName") == "member1" and \
                    ((item.get("status") or {}).get("jobStatus") or {}).get("jobId") == self.facts.job_id:
                return True
        return None

    async def _checkpointed(self) -> dict[str, Any] | None:
        obj = await _get(self.members["member1"], FLINK, NAME, NAMESPACE)
        if obj is None or _ann(obj, "last-checkpoint") in ("", "none"):
            return None
        return obj

    def _read_newest_checkpoint(self) -> None:
        from flotilla.member.checkpoints import CheckpointStore

        assert self.stack is not None
        store = CheckpointStore(self.stack.members_dir / "checkpoints")
        snap = store.latest_checkpoint(self.facts.job_id)
        if snap is not None:
            self.facts.newest_checkpoint = snap.path
            self.facts.newest_checkpoint_offset = snap.offset

    async def _cluster(self, name: str) -> dict[str, Any]:
        return await self.cp.get(R.CLUSTERS, name)

    async def _not_ready(self) -> bool | None:
        c = await self._cluster("member1")
        for cond in (c.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Ready" and cond.get("status") in ("False", "Unknown"):
                return True
        return None

    async def _ready_again(self) -> bool | None:
        c = await self._cluster("member1")
        for cond in (c.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Ready" and cond.get("status") == "True":
                return True
        return None

    async def _tainted(self) -> bool | None:
        c = await self._cluster("member1")
        taints = (c.get("spec") or {}).get("taints") or []
        return True if any(t.get("key") == NOT_READY_TAINT and t.get("effect") == "NoExecute" for t in taints) \
            else None

    async def _evicted(self) -> dict[str, Any] | None:
        rb = await _get(self.cp, R.RESOURCE_BINDINGS, BINDING, NAMESPACE)
        for task in ((rb or {}).get("spec") or {}).get("gracefulEvictionTasks") or []:
            if task.get("fromCluster") == "member1" and (task.get("preservedLabelState") or {}).get(JOB_LABEL):
                return dict(task)
        return None

    async def _rescheduled(self) -> str | None:
        rb = await _get(self.cp, R.RESOURCE_BINDINGS, BINDING, NAMESPACE)
        names = [c.get("name", "") for c in ((rb or {}).get("spec") or {}).get("clusters") or []]
        return ", ".join(names) if names and "member1" not in names else None

    async def _moved(self) -> dict[str, Any] | None:
        f = self.facts
        for member in ("member2", "member3"):
            obj = await _get(self.members[member], FLINK, NAME, NAMESPACE)
            if obj is None:
                continue
            label = ((obj.get("metadata") or {}).get("labels") or {}).get(JOB_LABEL)
            if label is not None and f.injected_label is None:
                f.injected_label = str(label)
            if _job(obj).get("state") == "RUNNING" and _ann(obj, "restored-offset"):
                f.new_member = member
                f.restored_from = _ann(obj, "restored-from")
                initial = ((obj.get("spec") or {}).get("job") or {}).get("initialSavepointPath")
                f.initial_savepoint_path = initial if isinstance(initial, str) else ""
                f.restored_offset = int(_ann(obj, "restored-offset") or 0)
                return obj
        return None

    async def _stale_gone(self) -> bool | None:
        return True if await _get(self.members["member1"], FLINK, NAME, NAMESPACE) is None else None


    async def _guard_stopped(self) -> Interval | None:
        """member1's run that was going on at the cut, once the running history shows it ended."""
        f = self.facts
        assert self.stack is not None and f.cut_at is not None
        ended = [iv for iv in self.stack.group.history.intervals(kind="FlinkDeployment", namespace=NAMESPACE,
                                                                 name=NAME, member=f.old_member)
                 if iv.start < f.cut_at and iv.end is not None]
        return max(ended, key=lambda iv: iv.start) if ended else None

    async def _fenced_automatically(self) -> dict[str, Any] | None:
        """member1 with the out-of-service taint and its Fenced condition True (written right after the taint)."""
        c = await self._cluster("member1")
        taints = (c.get("spec") or {}).get("taints") or []
        if not any(t.get("key") == OUT_OF_SERVICE_TAINT_KEY and t.get("effect") == "NoExecute" for t in taints):
            return None
        return c if (_condition(c, CONDITION_FENCED) or {}).get("status") == "True" else None

    async def _fence_events(self) -> list[dict[str, Any]] | None:
        from flotilla.kube.resources import EVENTS

        items = (await self.cp.list(EVENTS)).get("items") or []
        found = [e for e in items if e.get("reason") == EVENT_CLUSTER_FENCED_AUTOMATICALLY
                 and (e.get("involvedObject") or {}).get("kind") == "Cluster"
                 and (e.get("involvedObject") or {}).get("name") == "member1"]
        return found or None

def run_demo(data_dir: Path, *, keep: bool = False, manual_fence: bool = False, out: TextIO | None = None) -> int:
    """The default story (automatic fencing), or with ``manual_fence`` the power-off story fenced by hand."""
    out = out or sys.stdout
    demo = Demo(data_dir, out, keep=keep, manual_fence=manual_fence)
    try:
        return asyncio.run(demo.run())
    except DemoError as e:
        out.write(f"\nflotilla demo: {e}\n")
        return 1
    except KeyboardInterrupt:
        return 130
