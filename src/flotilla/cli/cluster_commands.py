"""``flotilla join`` and ``flotilla unjoin``: register and remove a Push-mode member cluster, as ``karmadactl
join``/``unjoin`` do.

``join NAME --cluster-kubeconfig FILE`` reads the member's kubeconfig, checks that the member answers (its
health endpoint; its credentials are tried on ``kube-system``), then writes to the control plane (``--kubeconfig``,
default ``$KUBECONFIG`` or ``~/.kube/config``) the namespace ``karmada-cluster`` if missing, a Secret ``NAME``
there with the member's credentials and the Cluster (``syncMode: Push``, ``apiEndpoint``, ``secretRef``,
``insecureSkipTLSVerification`` when the kubeconfig skips verification, ``id`` = UID of the member's
``kube-system``). The Secret is owned by the Cluster. Joining again updates what changed.

Unlike karmadactl, nothing is installed in the member (no ServiceAccount, no RBAC): the control plane uses the
kubeconfig's own credentials, stored in the Secret: ``token`` (a token or tokenFile's content) and ``caBundle`` as
in Karmada, ``tls.crt``/``tls.key`` for a client certificate, ``exec`` for an exec credential plugin (EKS, GKE,
AKS), which the controller-manager runs whenever it needs a fresh credential. A kubeconfig user with no
credentials joins only a member that lets anonymous requests read it; otherwise join fails and says what to add.

``unjoin NAME`` deletes the Cluster and waits (``--wait``, default 60 s; 0 = do not wait) until the cluster
controller has cleaned up (Works, execution namespace) and removed its finalizer, then deletes the Secret. Without
waiting, the Secret goes with the Cluster (garbage collection through its ownerReference). ``--force`` removes
the Cluster's finalizers when the wait times out (the cleanup is then abandoned, as with karmadactl).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flotilla.cli.argtypes import duration
from flotilla.cli.control_plane import (
    add_control_plane_args,
    control_plane_client,
    create_unless_exists,
    run_client_command,
)
from flotilla.cli.flags import add_command
from flotilla.cluster.join import (
    DEFAULT_CLUSTER_NAMESPACE,
    JoinSpec,
    cluster_object,
    cluster_spec_patch,
    namespace_object,
    owner_references_patch,
    secret_data_patch,
    secret_object,
    validate_join,
)
from flotilla.kube.resources import NAMESPACES, SECRETS

if TYPE_CHECKING:
    pass

if TYPE_CHECKING:
    from flotilla.client import Client
    from flotilla.client.kubeconfig import ClusterCredentials

__all__ = [
    "ClusterCommandError",
    "JoinResult",
    "add_cluster_parsers",
    "join_cluster",
    "join_spec_from_credentials",
    "run_join_command",
    "run_unjoin_command",
    "unjoin_cluster",
]

Out = Callable[[str], None]


class ClusterCommandError(Exception):
    """The command cannot do what was asked; the message says why and what to do."""


# ============================================================================================ parsing


def add_cluster_parsers(subparsers: Any) -> None:
    """Add ``join`` and ``unjoin`` to the ``flotilla`` command's sub-parsers."""
    j = add_command(
        subparsers, "join", help="register a member cluster in Push mode (as karmadactl join)",
        description="Register a member cluster in Push mode: Secret with its credentials and a Cluster object in "
                    "the control plane. Joining again updates the endpoint and credentials.",
        examples=["flotilla join member1 --cluster-kubeconfig ./members/member1/kubeconfig "
                  "--kubeconfig ./cp/kubeconfig"])
    j.add_argument("name", help="the member cluster's name in the control plane")
    j.add_argument("--cluster-kubeconfig", required=True, help="kubeconfig of the member cluster")
    j.add_argument("--cluster-context", default=None, help="context in --cluster-kubeconfig (default: current)")
    _control_plane_args(j)
    j.add_argument("--cluster-provider", default=None, help="spec.provider of the Cluster")
    j.add_argument("--cluster-region", default=None, help="spec.region of the Cluster")
    j.add_argument("--cluster-zones", default=None, help="spec.zones of the Cluster, comma-separated")
    j.add_argument("--timeout", type=duration, default=10.0,
                   help="timeout of each request to the member and the control plane (default 10s)")
    j.set_defaults(fn=run_join_command)

    u = add_removal_command(
        subparsers, "unjoin", help="remove a Push-mode member cluster (as karmadactl unjoin)",
        description="Delete the Cluster, wait until the controllers have cleaned up (Works, execution namespace), "
                    "then delete its Secret.",
        example="flotilla unjoin member1 --kubeconfig ./cp/kubeconfig --wait 60s", flags=_control_plane_args,
        unwaited="the Secret then goes with the Cluster")
    u.set_defaults(fn=run_unjoin_command)


def add_removal_command(subparsers: Any, name: str, *, help: str, description: str, example: str,
                        flags: Callable[[argparse.ArgumentParser], None], unwaited: str = "") -> argparse.ArgumentParser:
    """A command that deletes a member's Cluster and waits for its cleanup (``unjoin``, ``unregister``): the
    cluster's NAME, the control plane's flags (``flags``), ``--wait`` and ``--force``."""
    p = add_command(subparsers, name, help=help, description=description, examples=[example])
    p.add_argument("name", help="the member cluster's name in the control plane")
    flags(p)
    add_removal_args(p, unwaited)
    return p


def add_removal_args(p: argparse.ArgumentParser, unwaited: str = "") -> None:
    """``--wait`` and ``--force`` of a command that deletes a Cluster; ``unwaited``: what happens with --wait 0."""
    p.add_argument("--wait", type=duration, nargs="?", const=60.0, default=60.0,
                   help="how long to wait for the Cluster to be gone (default 60s; 0: do not wait"
                        + (f", {unwaited})" if unwaited else ")"))
    p.add_argument("--force", action="store_true",
                   help="when the wait times out, remove the Cluster's finalizers (its cleanup is abandoned)")


def _control_plane_args(p: argparse.ArgumentParser) -> None:
    add_control_plane_args(p)
    p.add_argument("--cluster-namespace", default=DEFAULT_CLUSTER_NAMESPACE,
                   help="control-plane namespace of the cluster's Secret (default "
                        f"{DEFAULT_CLUSTER_NAMESPACE}; unjoin uses the Cluster's spec.secretRef when it has one)")


# ============================================================================================ join


@dataclass
class JoinResult:
    cluster: dict[str, Any]
    created: bool
    updated: bool
    kubernetes_version: str | None = None
    warnings: list[str] = field(default_factory=list)


def join_spec_from_credentials(name: str, creds: ClusterCredentials, *,
                               cluster_namespace: str = DEFAULT_CLUSTER_NAMESPACE, cluster_id: str | None = None,
                               provider: str | None = None, region: str | None = None,
                               zones: tuple[str, ...] = ()) -> JoinSpec:
    """The join of a member reached with ``creds``: the Secret carries its token (a tokenFile's content), client
    certificate and exec plugin, whichever the kubeconfig has."""
    token = creds.token
    if creds.token_file is not None:
        token = creds.auth_headers().get("Authorization", "").removeprefix("Bearer ") or token
    return JoinSpec(name=name, api_endpoint=creds.server, token=token or None, ca_pem=creds.ca_pem,
                    client_cert_pem=creds.client_cert_pem, client_key_pem=creds.client_key_pem,
                    exec_config=creds.exec.to_stored() if creds.exec is not None else None,
                    insecure_skip_tls_verification=creds.insecure, cluster_namespace=cluster_namespace,
                    cluster_id=cluster_id, provider=provider, region=region, zones=zones)


_NO_CREDENTIALS = ("add a token, tokenFile, client-certificate/client-key or an exec plugin to the kubeconfig's "
                   "user (for EKS `aws eks update-kubeconfig`, for GKE `gcloud container clusters get-credentials` "
                   "writes one)")


async def inspect_member(member: Client, name: str, *,
                         authenticated: bool = True) -> tuple[str | None, str | None, list[str]]:
    """Check the member answers and accepts the kubeconfig's credentials (``authenticated``: it has some); returns
    ``(kubernetes version, kube-system UID, warnings)``."""
    from flotilla.client import ApiException, is_not_found
    from flotilla.client.errors import ConnectionFailed
    from flotilla.client.http import HttpTransport
    from flotilla.cluster.health import Health
    from flotilla.controllers.cluster_status import fetch_version, probe_health

    warnings: list[str] = []
    if isinstance(member.transport, HttpTransport):
        try:
            await member.transport.ensure_credentials()  # an exec plugin runs here
        except ConnectionFailed as e:
            raise ClusterCommandError(f"member cluster {name}: {e.message} (run the command yourself to see why, "
                                      "then fix the kubeconfig's exec stanza or the plugin's setup)") from None
    obs = await probe_health(member)
    if obs.health is Health.OFFLINE:
        raise ClusterCommandError(f"cannot reach member cluster {name} at {member.server}: {obs.detail}")
    if obs.health is Health.UNHEALTHY:
        warnings.append(f"member cluster {name} answers but is not ready ({obs.detail}); it joins and becomes "
                        "Ready once its health endpoint answers ok")
    cluster_id = None
    try:
        ns = await member.get(NAMESPACES, "kube-system")
        cluster_id = (ns.get("metadata") or {}).get("uid")
    except ApiException as e:
        if not authenticated and e.status in (401, 403):
            raise ClusterCommandError(
                f"the member kubeconfig's user has no credentials and member cluster {name} at {member.server} "
                f"refuses anonymous requests ({e.status} {e.reason}): {_NO_CREDENTIALS}") from None
        if e.status == 401:
            raise ClusterCommandError(f"member cluster {name} at {member.server} refused the kubeconfig's "
                                      f"credentials: {e}") from None
        if not is_not_found(e):
            warnings.append(f"cannot read namespace kube-system of member cluster {name} ({e}); spec.id not set")
    return await fetch_version(member), cluster_id, warnings


async def join_cluster(control_plane: Client, spec: JoinSpec) -> JoinResult:
    """Write the namespace, Secret and Cluster of ``spec`` to the control plane (idempotent)."""
    from flotilla.client import ApiException, is_conflict
    from flotilla.runtime.members import CLUSTERS

    problems = validate_join(spec)
    if problems:
        raise ClusterCommandError("; ".join(problems))
    await create_unless_exists(control_plane, NAMESPACES, namespace_object(spec.cluster_namespace))

    existing = await _get_or_none(control_plane, CLUSTERS, spec.name)
    if existing is not None:
        md, ex_spec = existing.get("metadata") or {}, existing.get("spec") or {}
        if md.get("deletionTimestamp"):
            raise ClusterCommandError(f"cluster {spec.name} is being deleted; join again once it is gone")
        if ex_spec.get("syncMode") == "Pull":
            raise ClusterCommandError(f"cluster {spec.name} is registered in Pull mode; unregister it first")

    secret = await _get_or_none(control_plane, SECRETS, spec.secret_name, spec.cluster_namespace)
    secret_created = secret is None
    secret_updated = False
    if secret is None:
        secret = await control_plane.create(SECRETS, secret_object(spec), spec.cluster_namespace)
    elif (p := secret_data_patch(secret, spec)) is not None:
        secret = await control_plane.patch(SECRETS, spec.secret_name, p, namespace=spec.cluster_namespace)
        secret_updated = True

    created = updated = False
    try:
        if existing is None:
            cluster = await control_plane.create(CLUSTERS, cluster_object(spec))
            created = True
        else:
            cluster, updated = await _update_cluster(control_plane, existing, spec)
    except ApiException:
        if secret_created:  # do not leave a Secret behind for a Cluster that was refused
            try:
                await control_plane.delete(SECRETS, spec.secret_name, spec.cluster_namespace)
            except ApiException:
                pass
        raise

    for _ in range(3):
        owner = owner_references_patch(secret, cluster)
        if owner is None:
            break
        try:
            await control_plane.patch(SECRETS, spec.secret_name, owner, namespace=spec.cluster_namespace)
            break
        except ApiException as e:
            if not is_conflict(e):
                raise
            secret = await control_plane.get(SECRETS, spec.secret_name, spec.cluster_namespace)
    return JoinResult(cluster=cluster, created=created,
                      updated=not created and (updated or secret_updated or secret_created))


async def _update_cluster(cp: Client, existing: dict[str, Any], spec: JoinSpec) -> tuple[dict[str, Any], bool]:
    from flotilla.client import ApiException, is_conflict
    from flotilla.runtime.members import CLUSTERS

    for _ in range(5):
        patch = cluster_spec_patch(existing, spec)
        if patch is None:
            return existing, False
        try:
            return await cp.patch(CLUSTERS, spec.name, patch), True
        except ApiException as e:
            if not is_conflict(e):
                raise
            existing = await cp.get(CLUSTERS, spec.name)
    raise ClusterCommandError(f"cluster {spec.name} kept changing while it was being updated; try again")


async def _get_or_none(client: Client, res: Any, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    return await client.get_or_none(res, name, namespace)


# ============================================================================================ unjoin


async def unjoin_cluster(control_plane: Client, name: str, *, wait: float = 60.0, force: bool = False,
                         cluster_namespace: str = DEFAULT_CLUSTER_NAMESPACE, poll: float = 0.25,
                         out: Out = print) -> None:
    """Delete the Cluster, wait until it is gone (``wait`` seconds; 0: do not wait), then delete its Secret."""
    from flotilla.client import ApiException, is_not_found
    from flotilla.runtime.members import CLUSTERS

    cluster = await _get_or_none(control_plane, CLUSTERS, name)
    if cluster is None:
        raise ClusterCommandError(f"cluster {name} not found")
    spec = cluster.get("spec") or {}
    if spec.get("syncMode") == "Pull":
        raise ClusterCommandError(f"cluster {name} is registered in Pull mode; unjoin handles Push clusters only")
    ref = spec.get("secretRef") or {}
    try:
        await control_plane.delete(CLUSTERS, name)
    except ApiException as e:
        if not is_not_found(e):
            raise
    if wait <= 0:
        out(f"cluster({name}) is being deleted; its Secret goes with it")
        return
    remaining = await _wait_gone(control_plane, name, wait, poll)
    if remaining is not None:
        finalizers = (remaining.get("metadata") or {}).get("finalizers") or []
        if not force:
            raise ClusterCommandError(
                f"cluster {name} is still being deleted after {wait:g}s (finalizers: {', '.join(finalizers)}). "
                f"The cluster controller removes karmada.io/cluster-controller once the Works in karmada-es-{name} "
                f"are gone and no binding targets the cluster: `kubectl describe cluster {name}` shows what it "
                "waits for (is the controller-manager running?); --force removes the finalizers")
        out(f"cluster {name} is still being deleted after {wait:g}s; removing its finalizers "
            f"({', '.join(finalizers)}) as --force asks")
        await _strip_finalizers(control_plane, name)
        if await _wait_gone(control_plane, name, 10.0, poll) is not None:
            raise ClusterCommandError(f"cluster {name} is still there after its finalizers were removed")
    if ref.get("name"):
        try:
            await control_plane.delete(SECRETS, ref["name"], ref.get("namespace") or cluster_namespace)
        except ApiException as e:
            if not is_not_found(e):
                raise
    out(f"cluster({name}) is unjoined successfully")


async def _wait_gone(cp: Client, name: str, within: float, poll: float) -> dict[str, Any] | None:
    """None once the Cluster is gone; the Cluster as last seen if it is still there after ``within`` seconds."""
    import asyncio

    from flotilla.cli.progress import Progress
    from flotilla.runtime.members import CLUSTERS

    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    with Progress(f"waiting for cluster {name} to be cleaned up and deleted") as line:
        while True:
            current = await _get_or_none(cp, CLUSTERS, name)
            if current is None:
                return None
            if loop.time() >= deadline:
                return current
            finalizers = (current.get("metadata") or {}).get("finalizers") or []
            line.update(status=f" (finalizers: {', '.join(finalizers)})" if finalizers else None)
            await asyncio.sleep(min(poll, max(0.0, deadline - loop.time())))


async def _strip_finalizers(cp: Client, name: str) -> None:
    from flotilla.runtime.members import CLUSTERS
    from flotilla.runtime.patching import patch_with_retry

    def drop(obj: Mapping[str, Any]) -> dict[str, Any]:
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        return {"metadata": {"finalizers": None, "resourceVersion": rv}}

    await patch_with_retry(cp, CLUSTERS, None, name, None, drop)


# ============================================================================================ commands


def _control_plane(args: argparse.Namespace) -> Client:
    return control_plane_client(args, ClusterCommandError, getattr(args, "timeout", 10.0) or 10.0)


async def _join_main(args: argparse.Namespace) -> int:
    import ssl

    from flotilla.client import Client
    from flotilla.client.kubeconfig import KubeconfigError, load_kubeconfig

    try:
        creds = load_kubeconfig(args.cluster_kubeconfig, args.cluster_context)
    except KubeconfigError as e:
        raise ClusterCommandError(f"member cluster: {e}") from None
    warnings: list[str] = []
    try:
        member = Client.from_credentials(creds, request_timeout=args.timeout, read_retries=0)
    except ssl.SSLError as e:
        raise ClusterCommandError(f"member cluster: the kubeconfig's client certificate and key cannot be used "
                                  f"({e}): check client-certificate and client-key") from None
    async with member:
        version, cluster_id, more = await inspect_member(member, args.name, authenticated=creds.has_credentials)
    warnings += more
    zones = tuple(z.strip() for z in (args.cluster_zones or "").split(",") if z.strip())
    spec = join_spec_from_credentials(args.name, creds, cluster_namespace=args.cluster_namespace,
                                      cluster_id=cluster_id, provider=args.cluster_provider,
                                      region=args.cluster_region, zones=zones)
    async with _control_plane(args) as cp:
        result = await join_cluster(cp, spec)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    what = "joined" if result.created else "updated" if result.updated else "joined (unchanged)"
    suffix = f" (Kubernetes {version})" if version else ""
    if what == "joined":
        print(f"cluster({args.name}) is joined successfully{suffix}")
    else:
        print(f"cluster({args.name}) is {what}{suffix}")
    return 0


async def _unjoin_main(args: argparse.Namespace) -> int:
    async with _control_plane(args) as cp:
        await unjoin_cluster(cp, args.name, wait=args.wait, force=args.force,
                             cluster_namespace=args.cluster_namespace)
    return 0


def run_join_command(args: argparse.Namespace) -> int:
    return run_client_command(lambda: _join_main(args), (ClusterCommandError,))


def run_unjoin_command(args: argparse.Namespace) -> int:
    return run_client_command(lambda: _unjoin_main(args), (ClusterCommandError,))
