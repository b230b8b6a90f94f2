"""The member-side savepoint rule: what Karmada's stateful-failover proposal does with a Kyverno policy.

Karmada carries a failed-over Flink job's old ``jobId`` to the new member as a label (a label value cannot hold a
checkpoint path). In the member, this rule turns the label into a restore: when a FlinkDeployment is **created**
with the label (default key ``failover.flink.io/job-id``; its value is the preserved job id) and without
``spec.job.initialSavepointPath``, it sets

    spec.job.initialSavepointPath = <newest checkpoint (or savepoint) of that job id in the shared directory>
    spec.job.upgradeMode = savepoint

so the object is stored already carrying the path, and the job's first deployment resumes from it. When no
checkpoint of that job exists (or the label is not a job id) the object is left as it is and the response carries a
warning, which kubectl prints. When it sets the path it also records it in the annotation
``savepoint-rule.flotilla.io/restored-from`` (as Kyverno leaves a trace of its patches). Updates are never touched: ``initialSavepointPath`` only matters for the first
deployment.

It is an admission plugin of the member's API server: ``install_savepoint_rule(admission, store)``.
"""

from __future__ import annotations

from typing import Any

from flotilla.apiserver.admission import Admission, Operation
from flotilla.kube.validation import Cause
from flotilla.member.checkpoints import CheckpointStore, valid_job_id
from flotilla.member.flink_model import GROUP, KIND

DEFAULT_LABEL = "failover.flink.io/job-id"
APPLIED_ANNOTATION = "savepoint-rule.flotilla.io/restored-from"  # the path the rule set (audit trail)


def _d(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


class SavepointRule:
    """Admission plugin for flink.apache.org FlinkDeployment (default / validate / warnings)."""

    def __init__(self, store: CheckpointStore, label_key: str = DEFAULT_LABEL, *,
                 include_savepoints: bool = True) -> None:
        self.store = store
        self.label_key = label_key
        self.include_savepoints = include_savepoints

    def _candidate(self, obj: dict[str, Any], op: Operation) -> str | None:
        """The preserved job id when the rule applies to this request, else None."""
        if op != "CREATE":
            return None
        labels = _d(_d(obj.get("metadata")).get("labels"))
        value = labels.get(self.label_key)
        if not isinstance(value, str) or not value:
            return None
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return None
        job = spec.get("job")
        if job is not None and not isinstance(job, dict):
            return None  # schema validation reports it
        if isinstance(job, dict) and job.get("initialSavepointPath"):
            return None  # the user (or an earlier rule) chose a path: leave it
        return value

    def default(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> None:
        job_id = self._candidate(obj, op)
        if job_id is None or not valid_job_id(job_id):
            return
        snap = self.store.latest_snapshot(job_id, include_savepoints=self.include_savepoints)
        if snap is None:
            return
        job = obj["spec"].setdefault("job", {})
        job["initialSavepointPath"] = snap.path
        job["upgradeMode"] = "savepoint"
        annotations = obj["metadata"].get("annotations")
        if not isinstance(annotations, dict):
            annotations = obj["metadata"]["annotations"] = {}
        annotations[APPLIED_ANNOTATION] = snap.path

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> list[Cause]:
        return []

    def warnings(self, obj: dict[str, Any], old: dict[str, Any] | None, op: Operation) -> list[str]:
        # runs after default(): a candidate still without a path means the rule found nothing to restore
        job_id = self._candidate(obj, op)
        if job_id is None:
            return []
        if not valid_job_id(job_id):
            return [f"savepoint rule: label {self.label_key}={job_id} is not a Flink job id (32 hex digits); "
                    "the job starts without state"]
        return [f"savepoint rule: no checkpoint of job {job_id} in {self.store.root}; "
                "spec.job.initialSavepointPath left unset, the job starts without state"]


def install_savepoint_rule(admission: Admission, store: CheckpointStore, label_key: str = DEFAULT_LABEL,
                           **kwargs: Any) -> SavepointRule:
    """Register the rule on a member API server's admission chain; returns it."""
    rule = SavepointRule(store, label_key, **kwargs)
    admission.register(GROUP, KIND, rule)
    return rule
