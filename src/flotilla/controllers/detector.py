"""The resource detector: binds resource templates to (Cluster)PropagationPolicies.

It watches PropagationPolicies, ClusterPropagationPolicies, (Cluster)ResourceBindings and, for every
``apiVersion``/``kind`` a policy selects (or a claimed binding names), the templates of that type
(an informer per type, started on demand). For each template it picks the policy (the one already
claiming it, else :func:`flotilla.policy.matching.best_policy`), claims the template (labels and
annotations, :mod:`flotilla.policy.claims`) and creates or updates its binding
(:mod:`flotilla.propagation.binding_spec`). Policy changes re-reconcile the templates they concern
(:mod:`flotilla.propagation.policy_changes`); a deleted policy releases its templates and bindings
(the claim metadata is removed; bindings and their Works stay until the template goes) and, with
Karmada's policy finalizer, removes the finalizer afterwards. Preemption needs the ``PolicyPreemption``
gate.

Queue keys: ``t|<apiVersion>|<kind>|<namespace>|<name>`` (a template), ``pp|<namespace>|<name>``,
``cpp|<name>`` (policies), ``type|<apiVersion>|<kind>`` (start watching a template type).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from flotilla.api import labels as L
from flotilla.api.resources import (
    CLUSTER_OVERRIDE_POLICIES,
    CLUSTER_PROPAGATION_POLICIES,
    CLUSTER_RESOURCE_BINDINGS,
    OVERRIDE_POLICIES,
    PROPAGATION_POLICIES,
    RESOURCE_BINDINGS,
)
from flotilla.client import ApiException, Informer, Resource, is_already_exists, is_conflict, is_not_found
from flotilla.client.events import NORMAL, WARNING
from flotilla.client.informer import label_indexer
from flotilla.interpreter import Operation
from flotilla.interpreter.operations import GVK, InterpreterError
from flotilla.kube.jsondiff import with_precondition
from flotilla.kube.objects import meta_of, spec_of
from flotilla.policy.claims import (
    ClaimRef,
    claim_of,
    claim_patch,
    claimed_by_other_controller,
    resource_change_by_karmada,
    specification_changed,
    unclaim_patch,
)
from flotilla.policy.matching import (
    PREEMPT_ALWAYS,
    best_policy,
    detector_handles,
    is_cluster_policy,
    is_deleting,
    is_lazy_activation,
    policies_to_requeue_on_deprioritize,
    policy_matches,
    skips_binding_refresh,
)
from flotilla.propagation.binding_spec import (
    binding_kind_for,
    binding_name_for,
    binding_update_patch,
    build_binding,
    replica_interpretation,
)
from flotilla.propagation.policy_changes import (
    TemplateKey,
    bound_template_keys,
    detector_watches,
    missing_dependent_overrides,
    policy_claim_label,
    preemption_targets,
    selector_scopes,
    template_key,
    template_key_of_binding,
    unclaimed_matching,
    unmatched_bindings,
)
from flotilla.propagation.template_versions import SpecificationVersions
from flotilla.propagation.written import WrittenObjects
from flotilla.runtime.base import Controller, ControllerContext, settle_deleted
from flotilla.runtime.interpreters import shared_interpreter
from flotilla.runtime.patching import patch_with_retry
from flotilla.runtime.typed_informers import TypedInformers, warn_on_failure

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = ["DetectorController"]


# Karmada's event reasons
APPLY_POLICY_SUCCEED = "ApplyPolicySucceed"
APPLY_POLICY_FAILED = "ApplyPolicyFailed"
GET_REPLICAS_FAILED = "GetReplicasFailed"
#: Flotilla's: Karmada's detector only logs a failing InterpretComponent
GET_COMPONENTS_FAILED = "GetComponentsFailed"
#: the feature gate of Karmada's multi-component scheduling (off by default, as in Karmada)
MULTIPLE_POD_TEMPLATES_SCHEDULING = "MultiplePodTemplatesScheduling"
PREEMPT_POLICY_SUCCEED = "PreemptPolicySucceed"
PREEMPT_POLICY_FAILED = "PreemptPolicyFailed"

_PP_ID_INDEX = "detector/pp-id"
_CPP_ID_INDEX = "detector/cpp-id"
_RETRY_DISCOVERY = 30.0  # seconds: a selected kind the server does not serve (yet) is looked up again
_PATCH_ATTEMPTS = 5
_SYNC_TIMEOUT = 30.0  # seconds to wait for the first list of a template type


class WaitingForDependentOverrides(Exception):
    """The policy names ``dependentOverrides`` that do not exist yet (retried with backoff)."""


def _obj_key(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def _add_indexer(inf: Informer, name: str, fn: Callable[[dict[str, Any]], list[str]]) -> None:
    try:
        inf.add_indexer(name, fn)
    except ValueError:  # shared informer: the index exists already
        pass


# ============================================================================ shared helpers


# ============================================================================ the controller


def _claim_key(key: TemplateKey) -> str:
    return f"{key.api_version}|{key.kind}|{key.namespace}|{key.name}"


class DetectorController(Controller):
    name = "detector"
    role = "forward"
    workers = 4

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self._templates = TypedInformers(self, "detector", sync_timeout=_SYNC_TIMEOUT,
                                         prepare=self._prepare_template_informer)
        self._karmada_change: dict[str, bool] = {}
        self._deleted_policies: dict[str, dict[str, Any]] = {}
        self._warned_preemption: set[str] = set()
        #: per template: the resourceVersion of its newest specification change (what its binding names)
        self._spec_versions = SpecificationVersions()
        #: per template: the version its claim was written as (the pass that wrote it built the binding from it)
        self._claims = WrittenObjects()

    # ------------------------------------------------------------------ setup and event handlers

    def setup(self) -> None:
        self.pps = self.informer(PROPAGATION_POLICIES)
        self.cpps = self.informer(CLUSTER_PROPAGATION_POLICIES)
        for inf in (self.pps, self.cpps):
            inf.add_handler(on_add=self._enqueue_policy, on_update=self._on_policy_update,
                            on_delete=self._on_policy_delete)
        self.rbs = self.informer(RESOURCE_BINDINGS)
        self.crbs = self.informer(CLUSTER_RESOURCE_BINDINGS)
        for inf in (self.rbs, self.crbs):
            _add_indexer(inf, _PP_ID_INDEX, label_indexer(L.PROPAGATION_POLICY_PERMANENT_ID_LABEL))
            _add_indexer(inf, _CPP_ID_INDEX, label_indexer(L.CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL))
            inf.add_handler(on_add=self._on_binding_add, on_delete=self._on_binding_delete)
        self.interpreters = shared_interpreter(self.ctx)

    @staticmethod
    def _policy_key(policy: Mapping[str, Any]) -> str:
        meta = meta_of(policy)
        if is_cluster_policy(policy):
            return f"cpp|{meta.get('name', '')}"
        return f"pp|{meta.get('namespace', '')}|{meta.get('name', '')}"

    def _enqueue_policy(self, policy: Mapping[str, Any]) -> None:
        self.enqueue(self._policy_key(policy))

    def _on_policy_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        if meta_of(old).get("generation") == meta_of(new).get("generation"):
            return
        self._enqueue_policy(new)
        if self.options.gate("PolicyPreemption"):
            same_scope = (self.cpps.store.list() if is_cluster_policy(new)
                          else self.pps.store.by_index("namespace", str(meta_of(new).get("namespace") or "")))
            for p in policies_to_requeue_on_deprioritize(old, new, same_scope):
                self._enqueue_policy(p)

    def _on_policy_delete(self, policy: Mapping[str, Any]) -> None:
        key = self._policy_key(policy)
        self._deleted_policies[key] = dict(policy)
        self.enqueue(key)

    def _on_binding_add(self, binding: Mapping[str, Any]) -> None:
        if claim_of(binding) is None:
            return
        key = template_key_of_binding(binding)
        if key is not None and self._templates.started(key.api_version, key.kind) is None:
            self.enqueue(f"type|{key.api_version}|{key.kind}")

    def _on_binding_delete(self, binding: Mapping[str, Any]) -> None:
        # a binding that stood in the way (owned by an older template of the same name) is gone
        if claim_of(binding) is None:
            return
        key = template_key_of_binding(binding)
        if key is not None:
            self._enqueue_template(key)

    def _enqueue_template(self, key: TemplateKey, *, karmada_change: bool | None = None) -> None:
        qkey = f"t|{key.api_version}|{key.kind}|{key.namespace}|{key.name}"
        if karmada_change is not None:
            # several changes before one reconcile: it counts as Karmada's only if all of them were
            self._karmada_change[qkey] = self._karmada_change.get(qkey, karmada_change) and karmada_change
        self.enqueue(qkey)

    def _handles(self, obj: Mapping[str, Any]) -> bool:
        return detector_handles(obj, self.options.skipped_propagating_namespaces)

    def _on_template_add(self, obj: Mapping[str, Any]) -> None:
        if self._handles(obj):
            key = template_key(obj)
            self._spec_versions.added(key, obj)
            self._enqueue_template(key, karmada_change=False)

    def _on_template_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        key = template_key(new)
        if not self._handles(new):
            self._spec_versions.deleted(key)
            return
        changed = specification_changed(old, new)
        self._spec_versions.updated(key, new, changed)
        if changed and not self._claims.wrote(_claim_key(key), new):
            self._enqueue_template(key, karmada_change=resource_change_by_karmada(old, new))

    def _on_template_delete(self, obj: Mapping[str, Any]) -> None:
        key = template_key(obj)
        self._spec_versions.deleted(key)
        self._claims.forget(_claim_key(key))
        if self._handles(obj):
            self._enqueue_template(key)

    # ------------------------------------------------------------------ template informers

    async def _template_informer(self, api_version: str, kind: str) -> Informer | None:
        """The informer of templates of this type, started on first use; None when the type is not
        served (or not a template type)."""
        if not detector_watches(api_version, kind):
            return None
        inf = await self._templates.informer(api_version, kind)
        if inf is None:
            log.info("detector: %s %s is not served; templates of it are not watched yet", api_version, kind)
        return inf

    def _prepare_template_informer(self, inf: Informer, res: Resource) -> None:
        _add_indexer(inf, _PP_ID_INDEX, label_indexer(L.PROPAGATION_POLICY_PERMANENT_ID_LABEL))
        _add_indexer(inf, _CPP_ID_INDEX, label_indexer(L.CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL))
        inf.add_handler(on_add=self._on_template_add, on_update=self._on_template_update,
                        on_delete=self._on_template_delete)
        log.info("detector: watching %s templates", res)

    def _cached_template(self, key: TemplateKey) -> Mapping[str, Any] | None:
        inf = self._templates.started(key.api_version, key.kind)
        if inf is None:
            return None
        return inf.store.get(_obj_key(key.namespace or None, key.name))

    # ------------------------------------------------------------------ reconcile

    async def reconcile(self, key: str) -> float | None:
        kind, _, rest = key.partition("|")
        if kind == "t":
            api_version, k, namespace, name = rest.split("|", 3)
            karmada_change = self._karmada_change.pop(key, False)
            return await self._reconcile_template(TemplateKey(api_version, k, namespace, name), karmada_change)
        if kind == "pp":
            namespace, _, name = rest.partition("|")
            return await self._reconcile_policy(key, PROPAGATION_POLICIES, namespace, name)
        if kind == "cpp":
            return await self._reconcile_policy(key, CLUSTER_PROPAGATION_POLICIES, None, rest)
        if kind == "type":
            api_version, _, k = rest.partition("|")
            inf = await self._template_informer(api_version, k)
            return None if inf is not None or not detector_watches(api_version, k) else _RETRY_DISCOVERY
        log.warning("detector: unknown key %r", key)
        return None

    # ------------------------------------------------------------------ templates

    async def _get_template(self, key: TemplateKey) -> tuple[Resource | None, Mapping[str, Any] | None]:
        if await self._template_informer(key.api_version, key.kind) is None:
            return None, None
        return await self._templates.get(key.api_version, key.kind, key.namespace, key.name)

    async def _reconcile_template(self, key: TemplateKey, karmada_change: bool) -> float | None:
        res, template = await self._get_template(key)
        if res is None or template is None:
            return None  # gone: the garbage collector deletes its binding (owner reference)
        if not self._handles(template) or claimed_by_other_controller(template):
            return None
        claim = claim_of(template)
        if claim is not None:
            policy = self._claiming_policy(claim)
            if policy is None:
                # the policy is gone but its claim is still here (its deletion was handled before the
                # claim reached our cache): release the binding, then the template
                await self._release(res, template, claim.cluster_scoped, claim.claim_labels())
                return None
            if is_deleting(policy):
                return None  # the policy's deletion releases the template, which brings it back here
            if not policy_matches(template, policy):
                return None
        else:
            namespace = str(meta_of(template).get("namespace") or "")
            pps = self.pps.store.by_index("namespace", namespace) if namespace else []
            policy, _ = best_policy(template, pps, self.cpps.store.list())
            if policy is None:
                return None
        await self._check_dependent_overrides(policy)
        await self._apply_policy(res, template, policy, karmada_change)
        return None

    def _claiming_policy(self, claim: ClaimRef) -> Mapping[str, Any] | None:
        if claim.cluster_scoped:
            return self.cpps.store.get(claim.name)
        return self.pps.store.get(_obj_key(claim.namespace, claim.name))

    async def _check_dependent_overrides(self, policy: Mapping[str, Any]) -> None:
        names = spec_of(policy).get("dependentOverrides")
        if not isinstance(names, list) or not names:
            return
        cluster_scoped = is_cluster_policy(policy)
        res = CLUSTER_OVERRIDE_POLICIES if cluster_scoped else OVERRIDE_POLICIES
        namespace = None if cluster_scoped else str(meta_of(policy).get("namespace") or "")
        present = []
        for name in names:
            if not isinstance(name, str):
                continue
            try:
                await self.client.get(res, name, namespace)
            except ApiException as e:
                if is_not_found(e):
                    continue
                raise
            present.append(name)
        missing = missing_dependent_overrides(policy, present)
        if missing:
            raise WaitingForDependentOverrides(
                f"policy {_obj_key(namespace, str(meta_of(policy).get('name')))} waits for its dependent "
                f"overrides {', '.join(missing)}")

    async def _apply_policy(self, res: Resource, template: Mapping[str, Any], policy: Mapping[str, Any],
                            karmada_change: bool) -> None:
        meta = meta_of(template)
        pmeta = meta_of(policy)
        policy_name = _obj_key(None if is_cluster_policy(policy) else str(pmeta.get("namespace")),
                               str(pmeta.get("name")))
        kind = "ClusterPropagationPolicy" if is_cluster_policy(policy) else "PropagationPolicy"
        with warn_on_failure(self, lambda: template, APPLY_POLICY_FAILED, f"Applying {kind} {policy_name}"):
            claimed = await patch_with_retry(
                self.client, res, template, str(meta.get("name")), meta.get("namespace") or None,
                lambda t: self._with_rv(claim_patch(t, policy), t))
            if claimed is None:
                return  # the template was deleted meanwhile
            # the echo of this claim changes nothing this pass does not see: it is not queued again
            self._claims.record(_claim_key(template_key(template)), template, claimed)
            template = claimed
            if claim_of(template) is None:
                return
            if skips_binding_refresh(policy, karmada_change):
                return  # Lazy activation: only a user's change to the template publishes the policy
            desired = await self._desired_binding(template, policy)
            resource = desired["spec"]["resource"]
            if resource.get("resourceVersion"):
                # a status write since the template's last specification change does not move the binding
                resource["resourceVersion"] = self._spec_versions.version_for(template_key(template), template)
            outcome = await self._create_or_update_binding(desired)
        if outcome != "unchanged":
            self.ctx.recorder.event(template, NORMAL, APPLY_POLICY_SUCCEED,
                                    f"{kind} {policy_name} applied: {binding_kind_for(template)} "
                                    f"{binding_name_for(template)} {outcome}")

    @staticmethod
    def _with_rv(patch: dict[str, Any] | None, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        return None if patch is None else with_precondition(patch, obj)

    async def _interpret(self, interpreter: Any, operation: Operation, template: Mapping[str, Any],
                         call: Callable[[Mapping[str, Any]], T], failed: str) -> T:
        """``call(template)`` through the interpreter; a failure is also a Warning Event ``failed`` on the template."""
        try:
            return await interpreter.offload(operation, template, lambda: call(template))
        except InterpreterError as e:
            self.ctx.recorder.event(template, WARNING, failed, str(e))
            raise

    async def _desired_binding(self, template: Mapping[str, Any], policy: Mapping[str, Any]) -> dict[str, Any]:
        interpreter = self.interpreters.get()
        gvk = GVK.of(template)
        operation = replica_interpretation(
            multiple_pod_templates=self.options.gate(MULTIPLE_POD_TEMPLATES_SCHEDULING),
            component_hook=interpreter.hook_enabled(gvk, Operation.INTERPRET_COMPONENT),
            replica_hook=interpreter.hook_enabled(gvk, Operation.INTERPRET_REPLICA))
        replicas, requirements, components = 0, None, None
        if operation is Operation.INTERPRET_COMPONENT:
            components = await self._interpret(interpreter, operation, template, interpreter.get_components,
                                               GET_COMPONENTS_FAILED)
        elif operation is Operation.INTERPRET_REPLICA:
            result = await self._interpret(interpreter, operation, template, interpreter.get_replicas,
                                           GET_REPLICAS_FAILED)
            replicas, requirements = result.replicas, result.requirements
        return build_binding(template, policy, replicas=replicas, replica_requirements=requirements,
                             components=components, schedule_priority=await self._schedule_priority(policy))

    async def _schedule_priority(self, policy: Mapping[str, Any]) -> int | None:
        sp = spec_of(policy).get("schedulePriority")
        if not isinstance(sp, Mapping) or not self.options.gate("PriorityBasedScheduling"):
            return None
        source = sp.get("priorityClassSource")
        if source != "KubePriorityClass":
            raise ApiException(422, "Invalid", f"schedulePriority: priority class source {source!r} is not supported")
        res = await self.client.resource_for("scheduling.k8s.io/v1", "PriorityClass")
        pc = await self.client.get(res, str(sp.get("priorityClassName") or ""))
        value = pc.get("value")
        return int(value) if isinstance(value, int) else 0

    async def _create_or_update_binding(self, desired: dict[str, Any]) -> str:
        """Create the binding or patch the detector's fields of it; ``created``/``updated``/``unchanged``."""
        cluster_scoped = desired["kind"] == "ClusterResourceBinding"
        res = CLUSTER_RESOURCE_BINDINGS if cluster_scoped else RESOURCE_BINDINGS
        cache = self.crbs if cluster_scoped else self.rbs
        name = desired["metadata"]["name"]
        namespace = None if cluster_scoped else desired["metadata"]["namespace"]
        existing = cache.store.get(_obj_key(namespace, name))
        for _ in range(_PATCH_ATTEMPTS):
            if existing is None:
                try:
                    await self.client.create(res, desired, namespace)
                    return "created"
                except ApiException as e:
                    if not is_already_exists(e):
                        raise
                existing = await self._live(res, name, namespace)
                continue
            patch = binding_update_patch(existing, desired)
            if patch is None:
                return "unchanged"
            try:
                await self.client.patch(res, name, patch, namespace=namespace)
                return "updated"
            except ApiException as e:
                if not (is_conflict(e) or is_not_found(e)):
                    raise
            existing = await self._live(res, name, namespace)
        raise ApiException(409, "Conflict", f"binding {_obj_key(namespace, name)} keeps changing; will retry")

    async def _live(self, res: Resource, name: str, namespace: str | None) -> dict[str, Any] | None:
        return await self.client.get_or_none(res, name, namespace)

    def _unclaimer(self, cluster_scoped_claim: bool,
                   claim_labels: Mapping[str, str]) -> Callable[[Mapping[str, Any]], dict[str, Any] | None]:
        """``make_patch`` removing a policy's claim from an object still carrying that policy's id."""
        def make(obj: Mapping[str, Any]) -> dict[str, Any] | None:
            return self._with_rv(unclaim_patch(obj, cluster_scoped_claim, only_if=claim_labels), obj)

        return make

    async def _release(self, res: Resource, template: Mapping[str, Any], cluster_scoped_claim: bool,
                       claim_labels: Mapping[str, str]) -> None:
        """Remove a policy's claim from the template's binding first, then from the template (both only
        if they still carry that policy's id), so a failure half-way is retried from the binding."""
        meta = meta_of(template)
        namespace = meta.get("namespace") or None
        bres = RESOURCE_BINDINGS if binding_kind_for(template) == "ResourceBinding" else CLUSTER_RESOURCE_BINDINGS
        bcache = self.rbs if bres is RESOURCE_BINDINGS else self.crbs
        bname = binding_name_for(template)
        unclaim = self._unclaimer(cluster_scoped_claim, claim_labels)
        await patch_with_retry(self.client, bres, bcache.store.get(_obj_key(namespace, bname)), bname, namespace,
                               unclaim)
        await patch_with_retry(self.client, res, template, str(meta.get("name")), namespace, unclaim)

    # ------------------------------------------------------------------ policies

    async def _reconcile_policy(self, key: str, res: Resource, namespace: str | None, name: str) -> float | None:
        cache = self.pps if res is PROPAGATION_POLICIES else self.cpps
        policy = cache.store.get(_obj_key(namespace, name))
        if await settle_deleted(self._deleted_policies, key, policy, self._handle_policy_deletion):
            return None
        retry: float | None = None
        scopes = selector_scopes(policy)
        for api_version, kind, _ in scopes:
            if detector_watches(api_version, kind) and await self._template_informer(api_version, kind) is None:
                retry = _RETRY_DISCOVERY
        if is_deleting(policy):
            await self._handle_policy_deletion(policy)
            finalizer = (L.CLUSTER_PROPAGATION_POLICY_CONTROLLER_FINALIZER if res is CLUSTER_PROPAGATION_POLICIES
                         else L.PROPAGATION_POLICY_CONTROLLER_FINALIZER)
            await patch_with_retry(self.client, res, policy, name, namespace,
                                   lambda p: self._remove_finalizer(p, finalizer))
            return None
        await self._handle_policy_change(policy)
        return retry

    @staticmethod
    def _remove_finalizer(obj: Mapping[str, Any], finalizer: str) -> dict[str, Any] | None:
        finalizers = meta_of(obj).get("finalizers") or []
        if finalizer not in finalizers:
            return None
        kept = [f for f in finalizers if f != finalizer]
        return with_precondition({"metadata": {"finalizers": kept or None}}, obj)

    def _policy_bindings(self, policy: Mapping[str, Any]) -> list[dict[str, Any]]:
        labels = policy_claim_label(policy)
        if not labels:
            return []
        ((label, value),) = labels.items()
        index = _CPP_ID_INDEX if label == L.CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL else _PP_ID_INDEX
        out = self.rbs.store.by_index(index, value)
        if is_cluster_policy(policy):
            out += self.crbs.store.by_index(index, value)
        return out

    def _templates_in_scope(self, api_version: str, kind: str, namespace: str) -> list[dict[str, Any]]:
        inf = self._templates.started(api_version, kind)
        if inf is None:
            return []
        return inf.store.by_index("namespace", namespace) if namespace else inf.store.list()

    async def _handle_policy_change(self, policy: Mapping[str, Any]) -> None:
        bindings = self._policy_bindings(policy)
        unclaim = self._unclaimer(is_cluster_policy(policy), policy_claim_label(policy))
        # 1. templates the policy no longer selects are released (template first, then binding)
        for binding, template in unmatched_bindings(policy, bindings, self._cached_template):
            tkey = template_key(template)
            res = self._templates.resource(tkey.api_version, tkey.kind)
            if res is None:
                continue
            bmeta = meta_of(binding)
            await patch_with_retry(self.client, res, template, tkey.name, tkey.namespace or None, unclaim)
            bres = RESOURCE_BINDINGS if bmeta.get("namespace") else CLUSTER_RESOURCE_BINDINGS
            await patch_with_retry(self.client, bres, binding, str(bmeta.get("name")),
                                   bmeta.get("namespace") or None, unclaim)
        # 2. templates still bound to it pick up the policy's new content
        lazy = is_lazy_activation(policy)
        for tkey in bound_template_keys(policy, bindings):
            self._enqueue_template(tkey, karmada_change=True if lazy else None)
        # 3. templates nobody claimed yet that it matches
        matched = []
        for api_version, kind, namespace in selector_scopes(policy):
            matched += unclaimed_matching(policy, self._templates_in_scope(api_version, kind, namespace))
        if matched:
            await self._check_dependent_overrides(policy)
        for t in matched:
            self._enqueue_template(template_key(t), karmada_change=True if lazy else None)
        # 4. preemption
        if spec_of(policy).get("preemption") == PREEMPT_ALWAYS:
            await self._preempt(policy)

    async def _preempt(self, policy: Mapping[str, Any]) -> None:
        gate = self.options.gate("PolicyPreemption")
        if not gate:
            pkey = self._policy_key(policy)
            if pkey not in self._warned_preemption:
                self._warned_preemption.add(pkey)
                log.warning("detector: %s asks for preemption, but the PolicyPreemption feature gate is off", pkey)
            return
        candidates: list[dict[str, Any]] = []
        for api_version, kind, namespace in selector_scopes(policy):
            candidates += self._templates_in_scope(api_version, kind, namespace)
        pmeta = meta_of(policy)
        me = _obj_key(None if is_cluster_policy(policy) else str(pmeta.get("namespace")), str(pmeta.get("name")))
        for template in preemption_targets(policy, candidates, self._claimer, feature_gate_enabled=gate):
            claim = claim_of(template)
            before = "" if claim is None else _obj_key(claim.namespace or None, claim.name)
            tkey = template_key(template)
            res = self._templates.resource(tkey.api_version, tkey.kind)
            assert res is not None  # the template came from its informer
            try:
                await patch_with_retry(self.client, res, template, tkey.name, tkey.namespace or None,
                                       lambda t: self._with_rv(claim_patch(t, policy), t))
            except ApiException as e:
                self.ctx.recorder.event(template, WARNING, PREEMPT_POLICY_FAILED,
                                        f"Policy {me} failed to preempt policy {before}: {e}")
                raise
            self.ctx.recorder.event(template, NORMAL, PREEMPT_POLICY_SUCCEED,
                                    f"Policy {me} preempted policy {before}")

    def _claimer(self, template: Mapping[str, Any]) -> Mapping[str, Any] | None:
        claim = claim_of(template)
        return None if claim is None else self._claiming_policy(claim)

    async def _handle_policy_deletion(self, policy: Mapping[str, Any]) -> None:
        """Release every template the policy claims and its binding; the bindings and Works stay."""
        labels = policy_claim_label(policy)
        if not labels:
            return
        cluster_scoped = is_cluster_policy(policy)
        ((label, value),) = labels.items()
        index = _CPP_ID_INDEX if cluster_scoped else _PP_ID_INDEX
        for api_version, kind, namespace in selector_scopes(policy):
            inf = await self._template_informer(api_version, kind)
            res = self._templates.resource(api_version, kind)
            if inf is None or res is None:
                continue
            for template in inf.store.by_index(index, value):
                if namespace and meta_of(template).get("namespace") != namespace:
                    continue
                await self._release(res, template, cluster_scoped, labels)
        # bindings still labelled with the policy (their template is gone or was released already)
        unclaim = self._unclaimer(cluster_scoped, labels)
        for binding in self._policy_bindings(policy):
            bmeta = meta_of(binding)
            bres = RESOURCE_BINDINGS if bmeta.get("namespace") else CLUSTER_RESOURCE_BINDINGS
            await patch_with_retry(self.client, bres, binding, str(bmeta.get("name")),
                                   bmeta.get("namespace") or None, unclaim)
