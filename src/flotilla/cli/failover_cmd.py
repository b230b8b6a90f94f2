"""``flotilla failover preview KIND/NAME``: what a failover of a live workload would preserve and inject now.

The command reads the workload and its (Cluster)ResourceBinding from the control plane and runs the pure
:func:`flotilla.failover.preview.preview` on them: for each trigger of the
binding's ``spec.failover`` and each state-preservation rule, the value the rule would preserve from the
reflected status of the cluster the workload runs in, or the error that would block the eviction (D6) with a
hint, and whether the state would be injected into the new cluster, and if not why.

``KIND`` is resolved as kubectl resolves a resource type, through discovery: plural, singular, short name or
kind, optionally qualified by group (``deployments.apps``) or version and group (``deployments.v1.apps``).
The binding's name is Karmada's (``<name>-<kind>``, lower case); a cluster-scoped kind has a
ClusterResourceBinding.

Exit status: 0 when every rule extracts a value, 1 when some rule would block an eviction now, 2 for a usage
or lookup error (unknown kind, workload or binding not found, no ``failover`` block, no reflected status
collected yet, unusable kubeconfig, control plane unreachable or answering an error).

Decisions (argument parsing, kind resolution, cluster choice, exit status, messages) are pure functions;
:func:`load_preview` does the reading and :func:`run_failover_preview` the printing.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TextIO

from flotilla.api import labels as L
from flotilla.api.resources import CLUSTER_RESOURCE_BINDINGS, CLUSTERS, RESOURCE_BINDINGS
from flotilla.cli.flags import add_command
from flotilla.failover.purge import PURGE_MODE_GRACEFULLY
from flotilla.kube.objects import as_map
from flotilla.kube.resources import api_path, group_version

if TYPE_CHECKING:
    from flotilla.failover.preview import PreviewReport

if TYPE_CHECKING:
    from flotilla.client import Client, Resource

__all__ = [
    "EXIT_BLOCKED",
    "EXIT_OK",
    "EXIT_USAGE",
    "ApiResource",
    "PreviewCommandError",
    "PreviewResult",
    "ResourceArg",
    "add_failover_parsers",
    "api_resources",
    "check_to_cluster",
    "choose_from_cluster",
    "cluster_names",
    "exit_code",
    "feature_gates",
    "group_versions",
    "load_preview",
    "no_binding_message",
    "no_failover_message",
    "no_status_message",
    "parse_resource_arg",
    "parse_target",
    "resolve_kind",
    "run_failover_preview",
]

EXIT_OK: Final = 0
EXIT_BLOCKED: Final = 1
EXIT_USAGE: Final = 2

_VERSION: Final = re.compile(r"^v[1-9][0-9]*(?:(?:alpha|beta)[1-9][0-9]*)?$")
_OUTPUTS: Final = ("text", "json", "yaml")

_EPILOG: Final = """\
examples:
  flotilla failover preview deployment/web -n shop
  flotilla failover preview flinkdeployments.flink.apache.org/orders -n shop --to-cluster member2 -o json
  flotilla failover preview deploy/web --feature-gates StatefulFailoverInjection=false

exit status:
  0  every state-preservation rule extracts a value now
  1  some rule fails now: an eviction would wait (Warning Event StatePreservationFailed) until it succeeds
  2  usage or lookup error: unknown kind, workload or binding not found, no failover block on the binding,
     --from-cluster not a cluster of the workload, --to-cluster not a registered cluster, no status
     collected from the cluster yet, unusable kubeconfig, control plane unreachable
"""


class PreviewCommandError(Exception):
    """A usage or lookup error (``preview``: exit status 2, as kubectl diff's errors; ``move``: 1); the message says
    what to fix."""


# ============================================================================================ parser


def feature_gates(spec: str) -> dict[str, bool]:
    """``--feature-gates`` as the controller-manager reads it (``Name=true,Other=false``)."""
    from flotilla.runtime.options import ControllerOptions

    options = ControllerOptions()
    try:
        options.set_gates(spec)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--feature-gates: ")) from None
    return options.feature_gates


def add_failover_parsers(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``failover`` command group (``preview``, ``move``) to the ``flotilla`` command's sub-parsers."""
    from flotilla.failover.state import PURGE_MODE_DIRECTLY

    group = add_command(
        subparsers, "failover", help="inspect how workloads would fail over; move a workload to another cluster",
        description="Inspect how workloads would fail over between member clusters, or move one (planned move).",
        examples=["flotilla failover preview flinkdeployment/wordcount -n default"])
    sub = group.add_subparsers(dest="failover_command", required=True)
    p: argparse.ArgumentParser = sub.add_parser(
        "preview", help="show the state a failover of a workload would preserve and inject now",
        description="For a live workload, show for each failover trigger of its binding (cluster, application)\n"
                    "and each statePreservation rule the value the rule would preserve now from the status the\n"
                    "binding holds, or the error that would block the eviction (with a hint), and whether the\n"
                    "state would be injected into the new cluster and, if not, why. Nothing is changed.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG)
    p.add_argument("target", metavar="KIND/NAME",
                   help="the workload, as for kubectl: deployment/web, deploy/web, deployments.apps/web, "
                        "flinkdeployments.flink.apache.org/orders")
    p.add_argument("-n", "--namespace", default=None,
                   help="the workload's namespace (default: the kubeconfig context's namespace, else default)")
    p.add_argument("--kubeconfig", default=None,
                   help="kubeconfig of the control plane (default: $KUBECONFIG, else ~/.kube/config)")
    p.add_argument("--context", default=None, help="context in --kubeconfig (default: current)")
    p.add_argument("--from-cluster", default=None, metavar="CLUSTER",
                   help="the cluster that fails (default: the only cluster the workload runs in)")
    p.add_argument("--to-cluster", default=None, metavar="CLUSTER",
                   help="the cluster it would move to (default: a new cluster the scheduler picks)")
    p.add_argument("--feature-gates", type=feature_gates, default=None, metavar="GATES",
                   help="the controller-manager's --feature-gates, e.g. StatefulFailoverInjection=false "
                        "(default: its defaults)")
    p.add_argument("--no-execute-taint-eviction-purge-mode", default=PURGE_MODE_GRACEFULLY,
                   choices=(PURGE_MODE_GRACEFULLY, PURGE_MODE_DIRECTLY),
                   help="the controller-manager's flag, used by taint evictions when failover.cluster is not set "
                        "(default: Gracefully)")
    p.add_argument("-o", "--output", default="text", choices=_OUTPUTS, help="output format (default: text)")
    p.set_defaults(fn=run_failover_preview)
    _add_move_parser(sub)
    sub.metavar = "{" + ",".join(sub.choices) + "}"  # named in "the following arguments are required"
    return p


# ============================================================================================ kind resolution


@dataclass(frozen=True)
class ResourceArg:
    """One reading of a kubectl resource type: ``resource[.version][.group]``."""

    resource: str
    group: str | None = None
    version: str | None = None


@dataclass(frozen=True)
class ApiResource:
    """A collection from discovery, with what kubectl matches a resource type against."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    short_names: tuple[str, ...]
    namespaced: bool
    preferred: bool

    @property
    def resource(self) -> Resource:
        from flotilla.client import Resource

        return Resource(self.group, self.version, self.plural, self.kind, self.namespaced)

    @property
    def api_version(self) -> str:
        return group_version(self.group, self.version)


def parse_target(text: str) -> tuple[str, str]:
    """``KIND/NAME`` into ``(KIND, NAME)``."""
    kind, sep, name = text.strip().partition("/")
    if not sep or not kind or not name:
        raise PreviewCommandError(f"expected KIND/NAME (e.g. deployment/web), got {text!r}")
    if "/" in name:
        raise PreviewCommandError(f"expected KIND/NAME with a single '/', got {text!r}")
    return kind, name


def parse_resource_arg(text: str) -> list[ResourceArg]:
    """The readings of a resource type, most specific first (kubectl's ``ParseResourceArg``).

    ``deployments.v1.apps`` reads as version ``v1`` of group ``apps``, then as group ``v1.apps``;
    ``flinkdeployments.flink.apache.org`` as group ``flink.apache.org``; ``deploy`` as any group.
    """
    resource, _, rest = text.strip().lower().partition(".")
    if not resource:
        raise PreviewCommandError(f"expected a resource type before the '.', got {text!r}")
    if not rest:
        return [ResourceArg(resource)]
    readings = []
    version, _, group = rest.partition(".")
    if group and _VERSION.match(version):
        readings.append(ResourceArg(resource, group, version))
    readings.append(ResourceArg(resource, rest))
    return readings


def group_versions(core: Mapping[str, Any], apis: Mapping[str, Any]) -> list[tuple[str, str, bool]]:
    """``(group, version, preferred)`` for every group-version in the ``/api`` and ``/apis`` documents."""
    out: list[tuple[str, str, bool]] = []
    core_versions = [v for v in core.get("versions") or [] if isinstance(v, str)]
    out.extend(("", v, i == 0) for i, v in enumerate(core_versions))
    for g in apis.get("groups") or []:
        if not isinstance(g, Mapping) or not g.get("name"):
            continue
        preferred = (g.get("preferredVersion") or {}).get("version")
        versions = [v.get("version") for v in g.get("versions") or [] if isinstance(v, Mapping) and v.get("version")]
        preferred = preferred if preferred in versions else (versions[0] if versions else None)
        out.extend((str(g["name"]), str(v), v == preferred) for v in versions)
    return out


def api_resources(group: str, version: str, preferred: bool, doc: Mapping[str, Any]) -> list[ApiResource]:
    """The collections of an ``APIResourceList`` (subresources left out)."""
    out = []
    for r in doc.get("resources") or []:
        if not isinstance(r, Mapping):
            continue
        name = str(r.get("name") or "")
        if not name or "/" in name:
            continue
        out.append(ApiResource(group, version, name, str(r.get("singularName") or ""), str(r.get("kind") or ""),
                               tuple(str(s) for s in r.get("shortNames") or ()), bool(r.get("namespaced")),
                               preferred))
    return out


def _match(arg: ResourceArg, r: ApiResource) -> int | None:
    """0: plural, singular or kind; 1: short name; None: no match."""
    if arg.group is not None and r.group != arg.group:
        return None
    if arg.version is not None and r.version != arg.version:
        return None
    if arg.resource in (r.plural, r.singular.lower(), r.kind.lower()):
        return 0
    if arg.resource in (s.lower() for s in r.short_names):
        return 1
    return None


def resolve_kind(text: str, resources: Sequence[ApiResource]) -> ApiResource:
    """The collection ``text`` names, as kubectl resolves it; an unknown type raises with suggestions.

    Full names win over short names, the preferred version over others, and earlier groups in discovery order
    (the core group first) over later ones.
    """
    for arg in parse_resource_arg(text):
        ranked = []
        for index, r in enumerate(resources):
            rank = _match(arg, r)
            if rank is not None:
                ranked.append(((rank, not r.preferred, index), r))
        if ranked:
            return min(ranked, key=lambda item: item[0])[1]
    message = f'the server doesn\'t have a resource type "{text}"'
    owners: dict[str, tuple[str, str]] = {}
    for r in resources:
        for n in (r.singular, r.plural, r.kind, *r.short_names):
            owners.setdefault(n.lower(), (r.group, r.plural))
    close = difflib.get_close_matches(parse_resource_arg(text)[-1].resource, sorted(owners), n=10, cutoff=0.6)
    suggestions: dict[tuple[str, str], str] = {}
    for n in close:  # the closest name of each collection
        suggestions.setdefault(owners[n], n)
    if suggestions:
        message += f"; did you mean {' or '.join(list(suggestions.values())[:3])}?"
    raise PreviewCommandError(message + " (`kubectl api-resources` lists the types the control plane serves)")


async def discover(client: Client) -> list[ApiResource]:
    """Every collection the control plane serves (legacy discovery, all group-versions)."""
    import asyncio

    from flotilla.client import ApiException, is_not_found

    core = await client.transport.discovery("/api")
    apis = await client.transport.discovery("/apis")
    gvs = group_versions(core, apis)

    async def fetch(group: str, version: str) -> dict[str, Any]:
        try:
            return await client.transport.discovery(api_path(group, version))
        except ApiException as e:
            if is_not_found(e):
                return {}
            raise

    docs = await asyncio.gather(*(fetch(g, v) for g, v, _ in gvs))
    return [r for (g, v, preferred), doc in zip(gvs, docs, strict=True) for r in api_resources(g, v, preferred, doc)]


# ============================================================================================ decisions


def _where(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def choose_from_cluster(binding: Mapping[str, Any], requested: str | None, to_cluster: str | None = None) -> str:
    """The cluster that fails in the preview: ``requested``, else the only cluster the binding schedules to."""
    spec = as_map(binding.get("spec"))
    clusters = [str(as_map(c).get("name")) for c in spec.get("clusters") or [] if as_map(c).get("name")]
    listing = ", ".join(clusters)
    if requested is not None:
        if requested not in clusters:
            where = f"it runs in: {listing}" if clusters else "it is not scheduled to any cluster yet"
            raise PreviewCommandError(f"--from-cluster {requested}: the workload does not run there ({where})")
        chosen = requested
    elif not clusters:
        raise PreviewCommandError("the binding is not scheduled to any cluster yet (spec.clusters is empty): there "
                                  "is no cluster to fail over from; check the placement of its PropagationPolicy "
                                  "and that the clusters are Ready")
    elif len(clusters) > 1:
        raise PreviewCommandError(f"the workload runs in {len(clusters)} clusters ({listing}): say which one fails "
                                  f"with --from-cluster (e.g. --from-cluster {clusters[0]})")
    else:
        chosen = clusters[0]
    if to_cluster is not None and to_cluster == chosen:
        raise PreviewCommandError(f"--to-cluster {to_cluster} is the cluster that fails: give another cluster")
    return chosen


def check_to_cluster(to_cluster: str | None, known: Sequence[str]) -> None:
    """Refuse a ``--to-cluster`` that names no Cluster object, listing the clusters there are."""
    if to_cluster is None or to_cluster in known:
        return
    if not known:
        raise PreviewCommandError(f"--to-cluster {to_cluster}: no such cluster, and no cluster is registered yet "
                                  "(`flotilla join` registers one)")
    close = difflib.get_close_matches(to_cluster, known, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    raise PreviewCommandError(f"--to-cluster {to_cluster}: no such cluster (known clusters: "
                              f"{', '.join(sorted(known))}){hint}")


async def cluster_names(client: Client) -> list[str]:
    """The names of the Cluster objects of the control plane."""
    names: list[str] = []
    token = ""
    while True:
        page = await client.list(CLUSTERS, limit=500, continue_=token)
        names += [str(as_map(c.get("metadata")).get("name")) for c in page.get("items") or [] if isinstance(c, Mapping)]
        token = str(as_map(page.get("metadata")).get("continue") or "")
        if not token:
            return names


def _policy_of(*objects: Mapping[str, Any]) -> str | None:
    for obj in objects:
        annotations = as_map(as_map(obj.get("metadata")).get("annotations"))
        name = annotations.get(L.PROPAGATION_POLICY_NAME_ANNOTATION)
        if name:
            return f"PropagationPolicy {_where(annotations.get(L.PROPAGATION_POLICY_NAMESPACE_ANNOTATION), name)}"
        name = annotations.get(L.CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION)
        if name:
            return f"ClusterPropagationPolicy {name}"
    return None


def no_binding_message(res: ApiResource, name: str, namespace: str | None, binding_name: str) -> str:
    binding_kind = "ResourceBinding" if res.namespaced else "ClusterResourceBinding"
    policy = "PropagationPolicy" if res.namespaced else "ClusterPropagationPolicy"
    return (f"no {binding_kind} {_where(namespace, binding_name)}: {res.kind} {_where(namespace, name)} is not "
            f"propagated yet. Create a {policy} whose resourceSelectors select it (apiVersion: {res.api_version}, "
            f"kind: {res.kind}, name: {name}) and make sure `flotilla controller-manager` is running")


def no_failover_message(binding_kind: str, binding_ref: str, binding: Mapping[str, Any],
                        workload: Mapping[str, Any]) -> str:
    policy = _policy_of(binding, workload) or "the PropagationPolicy that propagates the workload"
    return (f"{binding_kind} {binding_ref} has no failover block (spec.failover): there is nothing to preview. "
            f"Add one to {policy}, e.g.\n"
            "  spec:\n"
            "    failover:\n"
            "      cluster:                # or application: (with decisionConditions.tolerationSeconds)\n"
            "        purgeMode: Directly   # only Directly injects the preserved state\n"
            "        statePreservation:\n"
            "          rules:\n"
            "          - aliasLabelName: example.io/job-id\n"
            "            jsonPath: \"{.jobStatus.jobId}\"   # on the reflected status: no .status prefix\n"
            "and run the preview again once the binding carries it")


def no_status_message(binding_kind: str, binding_ref: str, cluster: str) -> str:
    return (f"{binding_kind} {binding_ref} holds no status from cluster {cluster} yet (no status in its "
            f"status.aggregatedStatus item): the rules cannot be checked, and a failover now would wait for the "
            f"status (D6). Check that the Work is applied and the cluster is Ready, then run the preview again")


def exit_code(report: PreviewReport) -> int:
    """0 when every configured rule extracts a value, 1 when some rule would block an eviction."""
    return EXIT_OK if report.ok else EXIT_BLOCKED


def _failover_configured(binding: Mapping[str, Any]) -> bool:
    failover = as_map(as_map(binding.get("spec")).get("failover"))
    return any(isinstance(failover.get(t), Mapping) for t in ("cluster", "application"))


# ============================================================================================ reading


@dataclass(frozen=True)
class PreviewResult:
    """The report for one workload, with what it was computed from."""

    workload: dict[str, Any]
    binding: dict[str, Any]
    report: PreviewReport

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "FailoverPreview", "workload": self.workload, "binding": self.binding,
                **self.report.to_dict()}

    def header(self) -> str:
        w, b = self.workload, self.binding
        return (f"{w['kind']} {_where(w['namespace'], w['name'])} "
                f"({b['kind']} {_where(b['namespace'], b['name'])})\n")


async def _get(client: Client, res: Resource, name: str, namespace: str | None, missing: str) -> dict[str, Any]:
    from flotilla.client import ApiException, is_not_found

    try:
        return await client.get(res, name, namespace)
    except ApiException as e:
        if is_not_found(e):
            raise PreviewCommandError(missing) from None
        raise


async def load_preview(client: Client, target: str, namespace: str | None, *, from_cluster: str | None = None,
                       to_cluster: str | None = None, gate: bool = True,
                       no_execute_taint_eviction_purge_mode: str = PURGE_MODE_GRACEFULLY) -> PreviewResult:
    """Read the workload and its binding and compute the preview; lookup errors raise PreviewCommandError."""
    from flotilla.failover.preview import preview
    from flotilla.failover.state import reflected_status
    from flotilla.policy.naming import generate_binding_name

    kind_text, name = parse_target(target)
    res = resolve_kind(kind_text, await discover(client))
    ns = (namespace or client.namespace or "default") if res.namespaced else None
    in_ns = f" in namespace {ns}" if ns else ""
    workload = await _get(client, res.resource, name, ns,
                          f"{res.kind} {name} not found{in_ns} (`kubectl get {res.plural}"
                          f"{f' -n {ns}' if ns else ''}` lists them)")
    binding_name = generate_binding_name(res.kind, name)
    binding_res = RESOURCE_BINDINGS if res.namespaced else CLUSTER_RESOURCE_BINDINGS
    binding = await _get(client, binding_res, binding_name, ns, no_binding_message(res, name, ns, binding_name))
    binding_ref = _where(ns, binding_name)
    if to_cluster is not None:
        check_to_cluster(to_cluster, await cluster_names(client))
    if not _failover_configured(binding):
        raise PreviewCommandError(no_failover_message(binding_res.kind, binding_ref, binding, workload))
    source = choose_from_cluster(binding, from_cluster, to_cluster)
    spec = as_map(binding.get("spec"))
    status = reflected_status(binding, source)
    report = preview(as_map(spec.get("failover")), status, spec, to_cluster, from_cluster=source, gate=gate,
                     no_execute_taint_eviction_purge_mode=no_execute_taint_eviction_purge_mode)
    if not report.status_collected and any(block.rules for block in report.blocks):
        raise PreviewCommandError(no_status_message(binding_res.kind, binding_ref, source))
    return PreviewResult(
        {"apiVersion": res.api_version, "kind": res.kind, "namespace": ns, "name": name},
        {"apiVersion": binding_res.api_version, "kind": binding_res.kind, "namespace": ns, "name": binding_name},
        report)


# ============================================================================================ command


def render(result: PreviewResult, output: str) -> str:
    """The result in the ``-o`` format."""
    import yaml

    from flotilla.failover.preview import render_preview

    if output == "json":
        return json.dumps(result.to_dict(), indent=2) + "\n"
    if output == "yaml":
        return yaml.safe_dump(result.to_dict(), sort_keys=False, default_flow_style=False)
    failing = len(result.report.failing_rules)
    verdict = ("every rule extracts a value (exit status 0)" if not failing
               else f"{failing} rule(s) fail now: an eviction would wait (exit status 1)")
    return result.header() + render_preview(result.report) + f"\nResult: {verdict}\n"


async def _main(args: argparse.Namespace) -> PreviewResult:
    from flotilla.client import Client
    from flotilla.client.kubeconfig import KubeconfigError
    from flotilla.failover.state import STATEFUL_FAILOVER_INJECTION_GATE
    from flotilla.runtime.options import ControllerOptions

    try:
        client = Client.from_kubeconfig(args.kubeconfig, args.context, request_timeout=10.0)
    except KubeconfigError as e:
        raise PreviewCommandError(f"control plane: {e} (use --kubeconfig)") from None
    gates = args.feature_gates or ControllerOptions().feature_gates
    async with client:
        return await load_preview(client, args.target, args.namespace, from_cluster=args.from_cluster,
                                  to_cluster=args.to_cluster, gate=gates[STATEFUL_FAILOVER_INJECTION_GATE],
                                  no_execute_taint_eviction_purge_mode=args.no_execute_taint_eviction_purge_mode)


def _run_command(main: Callable[[], Coroutine[Any, Any, None]], err: TextIO, error_status: int) -> int | None:
    """Run ``main``; None when it returned, else ``error_status`` after printing the usage or lookup error, the
    control plane's answer or why it could not be reached."""
    import asyncio

    from flotilla.cli.control_plane import unreachable_hint
    from flotilla.client import ApiException

    try:
        asyncio.run(main())
    except PreviewCommandError as e:
        err.write(f"error: {e}\n")
        return error_status
    except ApiException as e:
        if e.status == 0:  # no response: the connection failed or timed out
            err.write(f"error: cannot reach the control plane: {e.message} ({unreachable_hint()})\n")
        else:
            err.write(f"error: the control plane answered: {e}\n")
        return error_status
    except KeyboardInterrupt:
        return 130
    return None


def run_failover_preview(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``flotilla failover preview``; returns the exit status (see the module docstring)."""
    out = out or sys.stdout
    err = err or sys.stderr
    results: list[PreviewResult] = []

    async def main() -> None:
        results.append(await _main(args))

    code = _run_command(main, err, EXIT_USAGE)  # as kubectl diff: 1 is an answer, an error is above it
    if code is not None:
        return code
    result = results[0]
    out.write(render(result, args.output))
    out.flush()
    return exit_code(result.report)


# ============================================================================================ failover move

_MOVE_EPILOG: Final = """\
examples:
  flotilla failover move flinkdeployment/orders -n shop --to member2
  flotilla failover move fdep/orders -n shop --to member2 --wait --timeout 5m

A FlinkDeployment whose cluster is Ready first stops with a savepoint there; the new copy starts from it
(docs/failover.md, "Planned moves"). Other kinds, or an old cluster that is not Ready, move as a failover does.

exit status:
  0  the move is requested (with --wait: the new copy runs, Healthy, in the target cluster)
  1  the move cannot be done (the message says why), or with --wait: the savepoint failed (the workload goes on
     moving as an unplanned failover, from its newest checkpoint) or --timeout passed; or any other error, as
     kubectl: unknown kind, workload or binding not found, unusable kubeconfig, control plane unreachable
  2  usage error (a missing --to, a bad duration)
"""


def _duration(text: str) -> float:
    from flotilla.cli.argtypes import parse_duration

    try:
        seconds = parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected a duration such as 90s or 5m, got {text!r} ({e})") from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"expected a duration greater than 0, got {text!r}")
    return seconds


def _add_move_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "move", help="move a workload to another cluster (a FlinkDeployment with a savepoint)",
        description="Move a workload that runs in one cluster to CLUSTER. The target must be Ready and fit the\n"
                    "placement (the scheduler keeps it there). A FlinkDeployment whose cluster is Ready is first\n"
                    "stopped with a savepoint there; the new copy starts from that savepoint.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_MOVE_EPILOG)
    p.add_argument("target", metavar="KIND/NAME", help="the workload, as for kubectl: flinkdeployment/orders")
    p.add_argument("--to", required=True, metavar="CLUSTER", help="the cluster to move it to")
    p.add_argument("-n", "--namespace", default=None,
                   help="the workload's namespace (default: the kubeconfig context's namespace, else default)")
    p.add_argument("--kubeconfig", default=None,
                   help="kubeconfig of the control plane (default: $KUBECONFIG, else ~/.kube/config)")
    p.add_argument("--context", default=None, help="context in --kubeconfig (default: current)")
    p.add_argument("--wait", action="store_true",
                   help="follow the move and print its steps until the new copy is Healthy (default: return once "
                        "the move is requested)")
    p.add_argument("--timeout", type=_duration, default=300.0, metavar="DURATION",
                   help="with --wait: give up waiting after this long (default 5m; the move itself goes on)")
    p.set_defaults(fn=run_failover_move)


class MoveFailed(Exception):
    """The move cannot be done or did not succeed (exit status 1)."""


@dataclass
class _Target:
    res: ApiResource
    namespace: str | None
    name: str
    binding_res: Resource
    binding_name: str

    @property
    def binding_ref(self) -> str:
        return _where(self.namespace, self.binding_name)


async def _policy(client: Client, binding: Mapping[str, Any]) -> dict[str, Any] | None:
    from flotilla.api.resources import CLUSTER_PROPAGATION_POLICIES, PROPAGATION_POLICIES
    from flotilla.client import ApiException

    annotations = as_map(as_map(binding.get("metadata")).get("annotations"))
    try:
        if annotations.get(L.PROPAGATION_POLICY_NAME_ANNOTATION):
            return await client.get_or_none(PROPAGATION_POLICIES, str(annotations[L.PROPAGATION_POLICY_NAME_ANNOTATION]),
                                            str(annotations.get(L.PROPAGATION_POLICY_NAMESPACE_ANNOTATION) or ""))
        if annotations.get(L.CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION):
            return await client.get_or_none(CLUSTER_PROPAGATION_POLICIES,
                                            str(annotations[L.CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION]), None)
    except ApiException:
        return None
    return None


def _preserved_state(binding: Mapping[str, Any], source: str) -> dict[str, str] | None:
    """The state the binding's cluster-failover rules preserve from ``source`` now (None: none, or it fails)."""
    from flotilla.failover.state import StateExtractionError, extract_state, reflected_status, rules_of

    spec = as_map(binding.get("spec"))
    rules = rules_of(as_map(spec.get("failover")), "cluster")
    if not rules:
        return None
    try:
        return extract_state(rules, reflected_status(as_map(binding.get("status")).get("aggregatedStatus"), source),
                             cluster=source) or None
    except StateExtractionError:
        return None


async def _request_move(client: Client, args: argparse.Namespace, out: TextIO) -> _Target:
    from datetime import UTC, datetime

    from flotilla.client import ApiException, is_conflict
    from flotilla.failover.moves import MoveRequestError, plan_move_request
    from flotilla.policy.naming import generate_binding_name

    kind_text, name = parse_target(args.target)
    res = resolve_kind(kind_text, await discover(client))
    ns = (args.namespace or client.namespace or "default") if res.namespaced else None
    in_ns = f" in namespace {ns}" if ns else ""
    workload = await _get(client, res.resource, name, ns, f"{res.kind} {name} not found{in_ns}")
    binding_res = RESOURCE_BINDINGS if res.namespaced else CLUSTER_RESOURCE_BINDINGS
    target = _Target(res, ns, name, binding_res, generate_binding_name(res.kind, name))
    policy: dict[str, Any] | None = None
    for _ in range(3):
        binding = await _get(client, binding_res, target.binding_name, ns,
                             no_binding_message(res, name, ns, target.binding_name))
        clusters = (await client.list(CLUSTERS)).get("items") or []
        policy = policy or await _policy(client, binding)
        spec = as_map(binding.get("spec"))
        sources = [str(as_map(c).get("name")) for c in spec.get("clusters") or [] if as_map(c).get("name")]
        preserved = _preserved_state(binding, sources[0]) if len(sources) == 1 else None
        try:
            request = plan_move_request(binding, clusters, args.to, datetime.now(UTC), template=workload,
                                        policy=policy, preserved_label_state=preserved)
        except MoveRequestError as e:
            raise MoveFailed(f"cannot move {res.kind} {_where(ns, name)}: {e}") from None
        try:
            await client.patch(binding_res, target.binding_name, request.patch, namespace=ns)
        except ApiException as e:
            if is_conflict(e):
                continue  # the binding changed meanwhile: check again
            raise
        how = ("its job stops with a savepoint first, the new copy starts from it" if request.savepoint
               else f"without a savepoint ({request.why_no_savepoint})")
        out.write(f"{res.kind} {_where(ns, name)}: move from {request.from_cluster} to {request.to_cluster} "
                  f"requested; {how}\n")
        out.flush()
        return target
    raise MoveFailed(f"{binding_res.kind} {target.binding_ref} kept changing; try again")


async def _follow_move(client: Client, target: _Target, to: str, wait_for: float, out: TextIO) -> None:
    import asyncio
    import time

    from flotilla.cli.progress import Progress
    from flotilla.cli.progress import say as say_above
    from flotilla.failover.moves import PHASE_DONE, PHASE_FAILED, PHASE_SAVEPOINTING, parse_move

    deadline = time.monotonic() + wait_for
    said: set[str] = set()

    def say(key: str, text: str) -> None:
        if key not in said:
            said.add(key)
            say_above(f"  {text}", out)

    with Progress(f"  moving to {to}", file=out) as line:
        while True:
            line.update()
            binding = await _get(client, target.binding_res, target.binding_name, target.namespace,
                                 f"{target.binding_res.kind} {target.binding_ref} is gone")
            move = parse_move(binding)
            items = {str(as_map(i).get("clusterName")): as_map(i)
                     for i in as_map(binding.get("status")).get("aggregatedStatus") or []}
            if move is not None and move.to_cluster == to:
                if move.phase == PHASE_SAVEPOINTING:
                    say("savepointing", f"stopping the job in {move.from_cluster} with a savepoint")
                elif move.phase == PHASE_DONE:
                    say("savepointing", f"stopping the job in {move.from_cluster} with a savepoint")
                    say("done", f"savepoint taken: {move.path}")
                elif move.phase == PHASE_FAILED:
                    raise MoveFailed(f"the planned move failed: {move.reason}. The workload goes on moving to {to} as "
                                     "an unplanned failover, from its newest checkpoint; follow it with `kubectl get "
                                     f"{target.binding_res.plural} {target.binding_name}"
                                     f"{f' -n {target.namespace}' if target.namespace else ''} -o yaml`")
                if move.from_cluster not in items and "done" in said:
                    say("old-gone", f"old copy removed from {move.from_cluster}")
            item = items.get(to)
            if item is not None and item.get("applied") is True:
                say("applied", f"new copy applied in {to}")
            if item is not None and item.get("applied") is True and item.get("health") == "Healthy":
                say("healthy", f"new copy Healthy in {to}")
                return
            if time.monotonic() >= deadline:
                raise MoveFailed(f"the new copy is not Healthy in {to} after {wait_for:g}s (--timeout); the move goes on: "
                                 f"follow it with `kubectl get {target.binding_res.plural} {target.binding_name}"
                                 f"{f' -n {target.namespace}' if target.namespace else ''} -o yaml`")
            await asyncio.sleep(0.5)


async def _move_main(args: argparse.Namespace, out: TextIO) -> None:
    from flotilla.client import Client
    from flotilla.client.kubeconfig import KubeconfigError

    try:
        client = Client.from_kubeconfig(args.kubeconfig, args.context, request_timeout=10.0)
    except KubeconfigError as e:
        raise PreviewCommandError(f"control plane: {e} (use --kubeconfig)") from None
    async with client:
        target = await _request_move(client, args, out)
        if args.wait:
            await _follow_move(client, target, args.to, args.timeout, out)
            out.write(f"{target.res.kind} {_where(target.namespace, target.name)} runs in {args.to}\n")


def run_failover_move(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``flotilla failover move``; returns the exit status (0 done, 1 an error or a failed move, as kubectl's)."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        code = _run_command(lambda: _move_main(args, out), err, EXIT_BLOCKED)
    except MoveFailed as e:
        err.write(f"error: {e}\n")
        return EXIT_BLOCKED
    return EXIT_OK if code is None else code
