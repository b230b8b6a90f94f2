"""`flotilla failover preview`: argument parsing, kubectl-like kind resolution and the command's decisions."""

from __future__ import annotations

import argparse
import io
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from flotilla.cli.failover_cmd import (
    EXIT_BLOCKED,
    EXIT_OK,
    EXIT_USAGE,
    ApiResource,
    PreviewCommandError,
    PreviewResult,
    ResourceArg,
    add_failover_parsers,
    api_resources,
    check_to_cluster,
    choose_from_cluster,
    exit_code,
    group_versions,
    no_binding_message,
    no_failover_message,
    no_status_message,
    parse_resource_arg,
    parse_target,
    render,
    resolve_kind,
    run_failover_preview,
)
from flotilla.failover.preview import preview
from flotilla.main import build_parser

# Discovery documents shaped as the API server serves them (/api, /apis, /api/v1, /apis/<g>/<v>).
CORE = {"kind": "APIVersions", "versions": ["v1"]}
APIS = {"kind": "APIGroupList", "groups": [
    {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
     "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}},
    {"name": "events.k8s.io", "versions": [{"groupVersion": "events.k8s.io/v1", "version": "v1"}],
     "preferredVersion": {"groupVersion": "events.k8s.io/v1", "version": "v1"}},
    {"name": "flink.apache.org", "versions": [{"groupVersion": "flink.apache.org/v1beta1", "version": "v1beta1"},
                                              {"groupVersion": "flink.apache.org/v1alpha1", "version": "v1alpha1"}],
     "preferredVersion": {"groupVersion": "flink.apache.org/v1beta1", "version": "v1beta1"}},
    {"name": "example.io", "versions": [{"groupVersion": "example.io/v1", "version": "v1"}],
     "preferredVersion": {"groupVersion": "example.io/v1", "version": "v1"}},
]}


def _entry(plural: str, kind: str, namespaced: bool = True, short: tuple[str, ...] = ()) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": plural, "singularName": kind.lower(), "namespaced": namespaced, "kind": kind,
                             "verbs": ["get", "list"]}
    if short:
        entry["shortNames"] = list(short)
    return entry


DOCS: dict[tuple[str, str], dict[str, Any]] = {
    ("", "v1"): {"resources": [_entry("pods", "Pod", short=("po",)), _entry("pods/status", "Pod"),
                               _entry("events", "Event", short=("ev",)),
                               _entry("namespaces", "Namespace", namespaced=False, short=("ns",))]},
    ("apps", "v1"): {"resources": [_entry("deployments", "Deployment", short=("deploy",)),
                                   _entry("deployments/scale", "Scale"),
                                   _entry("statefulsets", "StatefulSet", short=("sts",))]},
    ("events.k8s.io", "v1"): {"resources": [_entry("events", "Event", short=("ev",))]},
    ("flink.apache.org", "v1beta1"): {"resources": [_entry("flinkdeployments", "FlinkDeployment",
                                                           short=("flinkdep",))]},
    ("flink.apache.org", "v1alpha1"): {"resources": [_entry("flinkdeployments", "FlinkDeployment",
                                                            short=("flinkdep",)),
                                                     _entry("flinksessionjobs", "FlinkSessionJob")]},
    # a CRD whose short name is another collection's full name: the full name wins
    ("example.io", "v1"): {"resources": [_entry("widgets", "Widget", short=("deployment",))]},
}


def _resources() -> list[ApiResource]:
    return [r for g, v, preferred in group_versions(CORE, APIS) for r in api_resources(g, v, preferred, DOCS[g, v])]


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="flotilla")
    add_failover_parsers(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(list(argv))


# ------------------------------------------------------------------------------------------------ arguments


def test_target_splits_into_kind_and_name() -> None:
    assert parse_target("deployment/web") == ("deployment", "web")
    assert parse_target("flinkdeployments.flink.apache.org/orders") == ("flinkdeployments.flink.apache.org",
                                                                        "orders")


@pytest.mark.parametrize("text", ["web", "deployment/", "/web", "deployment/web/x", ""])
def test_target_without_exactly_kind_slash_name_is_rejected_with_an_example(text: str) -> None:
    with pytest.raises(PreviewCommandError, match="KIND/NAME"):
        parse_target(text)


def test_resource_arg_readings_follow_kubectl() -> None:
    assert parse_resource_arg("deploy") == [ResourceArg("deploy")]
    assert parse_resource_arg("Deployments.apps") == [ResourceArg("deployments", "apps")]
    assert parse_resource_arg("deployments.v1.apps") == [ResourceArg("deployments", "apps", "v1"),
                                                         ResourceArg("deployments", "v1.apps")]
    assert parse_resource_arg("flinkdeployments.flink.apache.org") == [
        ResourceArg("flinkdeployments", "flink.apache.org")]
    with pytest.raises(PreviewCommandError):
        parse_resource_arg(".apps")


def test_group_versions_mark_the_preferred_version() -> None:
    gvs = group_versions(CORE, APIS)
    assert ("", "v1", True) in gvs and ("apps", "v1", True) in gvs
    assert ("flink.apache.org", "v1beta1", True) in gvs and ("flink.apache.org", "v1alpha1", False) in gvs
    assert gvs[0] == ("", "v1", True)


def test_api_resources_leave_out_subresources() -> None:
    plurals = [r.plural for r in api_resources("apps", "v1", True, DOCS["apps", "v1"])]
    assert plurals == ["deployments", "statefulsets"]


# ------------------------------------------------------------------------------------------------ kinds


@pytest.mark.parametrize("text", ["deployment", "deploy", "deployments", "Deployment", "deployments.apps",
                                  "deployment.apps", "deployments.v1.apps"])
def test_deployment_resolves_like_kubectl(text: str) -> None:
    r = resolve_kind(text, _resources())
    assert (r.group, r.version, r.plural, r.kind, r.namespaced) == ("apps", "v1", "deployments", "Deployment", True)


@pytest.mark.parametrize("text", ["flinkdeployment", "flinkdeployments", "flinkdep", "FlinkDeployment",
                                  "flinkdeployments.flink.apache.org"])
def test_flink_deployment_resolves_to_its_preferred_version(text: str) -> None:
    r = resolve_kind(text, _resources())
    assert (r.group, r.version, r.kind) == ("flink.apache.org", "v1beta1", "FlinkDeployment")
    assert r.api_version == "flink.apache.org/v1beta1"


def test_an_explicit_version_is_honoured() -> None:
    r = resolve_kind("flinkdeployments.v1alpha1.flink.apache.org", _resources())
    assert r.version == "v1alpha1"
    # a kind served only in a version that is not preferred is still found
    assert resolve_kind("flinksessionjob", _resources()).version == "v1alpha1"


def test_core_group_wins_and_a_group_selects_the_other() -> None:
    assert resolve_kind("events", _resources()).group == ""
    assert resolve_kind("events.events.k8s.io", _resources()).group == "events.k8s.io"


def test_cluster_scoped_kind_is_recognised() -> None:
    r = resolve_kind("ns", _resources())
    assert r.kind == "Namespace" and not r.namespaced and r.resource.plural == "namespaces"


def test_unknown_kind_names_the_closest_types() -> None:
    with pytest.raises(PreviewCommandError) as info:
        resolve_kind("deploymnt", _resources())
    message = str(info.value)
    assert 'doesn\'t have a resource type "deploymnt"' in message
    assert "did you mean deployment" in message and "kubectl api-resources" in message


def test_a_known_resource_in_an_unknown_group_is_unknown() -> None:
    with pytest.raises(PreviewCommandError, match='resource type "deployments.batch"'):
        resolve_kind("deployments.batch", _resources())


# ------------------------------------------------------------------------------------------------ decisions


def _binding(*clusters: str, failover: dict[str, Any] | None = None, **annotations: str) -> dict[str, Any]:
    return {"metadata": {"name": "web-deployment", "namespace": "shop", "annotations": annotations},
            "spec": {"clusters": [{"name": c} for c in clusters], **({"failover": failover} if failover else {})}}


def test_from_cluster_is_the_only_cluster_or_the_one_asked_for() -> None:
    assert choose_from_cluster(_binding("member1"), None) == "member1"
    assert choose_from_cluster(_binding("member1", "member2"), "member2", "member3") == "member2"


@pytest.mark.parametrize(("clusters", "requested", "to", "expected"), [
    (("member1", "member2"), None, None, "--from-cluster member1"),
    (("member1",), "member9", None, "does not run there (it runs in: member1)"),
    ((), None, None, "not scheduled to any cluster"),
    ((), "member1", None, "not scheduled to any cluster"),
    (("member1",), None, "member1", "--to-cluster member1 is the cluster that fails"),
])
def test_from_cluster_errors_say_what_to_pass(clusters: tuple[str, ...], requested: str | None, to: str | None,
                                             expected: str) -> None:
    with pytest.raises(PreviewCommandError) as info:
        choose_from_cluster(_binding(*clusters), requested, to)
    assert expected in str(info.value)


def test_to_cluster_must_be_a_registered_cluster() -> None:
    check_to_cluster(None, [])
    check_to_cluster("member2", ["member1", "member2"])
    with pytest.raises(PreviewCommandError) as info:
        check_to_cluster("membr2", ["member2", "member1"])
    assert str(info.value) == ("--to-cluster membr2: no such cluster (known clusters: member1, member2); "
                               "did you mean member2?")
    with pytest.raises(PreviewCommandError) as info:
        check_to_cluster("zzz", ["member1"])
    assert str(info.value) == "--to-cluster zzz: no such cluster (known clusters: member1)"
    with pytest.raises(PreviewCommandError, match="no cluster is registered yet"):
        check_to_cluster("member1", [])


def test_missing_failover_block_says_how_to_add_it_to_the_policy() -> None:
    binding = _binding("member1", **{"propagationpolicy.karmada.io/namespace": "shop",
                                     "propagationpolicy.karmada.io/name": "web-pp"})
    message = no_failover_message("ResourceBinding", "shop/web-deployment", binding, {})
    assert "nothing to preview" in message and "PropagationPolicy shop/web-pp" in message
    assert "failover:" in message and "purgeMode: Directly" in message and "{.jobStatus.jobId}" in message
    cpp = {"metadata": {"annotations": {"clusterpropagationpolicy.karmada.io/name": "all"}}}
    assert "ClusterPropagationPolicy all" in no_failover_message("ClusterResourceBinding", "x", {}, cpp)
    assert "the PropagationPolicy that propagates" in no_failover_message("ResourceBinding", "x", {}, {})


def test_missing_binding_and_status_messages_name_the_objects() -> None:
    deploy = resolve_kind("deploy", _resources())
    message = no_binding_message(deploy, "web", "shop", "web-deployment")
    assert "no ResourceBinding shop/web-deployment" in message and "Deployment shop/web" in message
    assert "PropagationPolicy" in message and "kind: Deployment" in message
    ns = resolve_kind("ns", _resources())
    assert "no ClusterResourceBinding shop-namespace" in no_binding_message(ns, "shop", None, "shop-namespace")
    assert "ClusterPropagationPolicy" in no_binding_message(ns, "shop", None, "shop-namespace")
    assert "no status from cluster member1" in no_status_message("ResourceBinding", "shop/web-deployment",
                                                                  "member1")


STATUS = {"readyReplicas": 2, "replicas": 2}


def _failover(*paths: str, mode: str = "Directly") -> dict[str, Any]:
    rules = [{"aliasLabelName": f"example.io/r{i}", "jsonPath": p} for i, p in enumerate(paths)]
    return {"cluster": {"purgeMode": mode, "statePreservation": {"rules": rules}}}


def test_exit_status_is_1_only_when_a_rule_would_block_an_eviction() -> None:
    spec = {"clusters": [{"name": "member1"}]}
    assert exit_code(preview(_failover("{.readyReplicas}"), STATUS, spec, "member2")) == EXIT_OK
    assert exit_code(preview(_failover("{.readyReplicas}", "{.readyreplicas}"), STATUS, spec)) == EXIT_BLOCKED
    # Gracefully never injects, but the extraction still runs and still blocks (D6)
    assert exit_code(preview(_failover("{.readyreplicas}", mode="Gracefully"), STATUS, spec)) == EXIT_BLOCKED


def test_json_and_text_renderings() -> None:
    report = preview(_failover("{.readyReplicas}"), STATUS, {"clusters": [{"name": "member1"}]}, "member2")
    result = PreviewResult({"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "web"},
                           {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
                            "namespace": "shop", "name": "web-deployment"}, report)
    doc = json.loads(render(result, "json"))
    assert doc["kind"] == "FailoverPreview" and doc["workload"]["name"] == "web" and doc["ok"] is True
    assert doc["triggers"][0]["state"] == {"example.io/r0": "2"}
    text = render(result, "text")
    assert text.startswith("Deployment shop/web (ResourceBinding shop/web-deployment)\n")
    assert "value: 2" in text and text.endswith("Result: every rule extracts a value (exit status 0)\n")


# ------------------------------------------------------------------------------------------------ parser


def test_preview_defaults() -> None:
    args = _parse("failover", "preview", "deployment/web")
    assert args.target == "deployment/web" and args.fn is run_failover_preview
    assert args.namespace is None and args.kubeconfig is None and args.context is None
    assert args.from_cluster is None and args.to_cluster is None and args.feature_gates is None
    assert args.output == "text" and args.no_execute_taint_eviction_purge_mode == "Gracefully"


def test_preview_options() -> None:
    args = _parse("failover", "preview", "deploy/web", "-n", "shop", "--kubeconfig", "kc", "--context", "cp",
                  "--from-cluster", "m1", "--to-cluster", "m2", "--feature-gates",
                  "StatefulFailoverInjection=false", "-o", "json")
    assert (args.namespace, args.kubeconfig, args.context) == ("shop", "kc", "cp")
    assert (args.from_cluster, args.to_cluster, args.output) == ("m1", "m2", "json")
    assert args.feature_gates["StatefulFailoverInjection"] is False and args.feature_gates["Failover"] is True


@pytest.mark.parametrize(("argv", "expected"), [
    (["--feature-gates", "Nope=true"], "unknown gate 'Nope'"),
    (["--feature-gates", "StatefulFailoverInjection"], "expected Name=true|false"),
    (["-o", "wide"], "invalid choice: 'wide'"),
    (["--no-execute-taint-eviction-purge-mode", "Never"], "invalid choice: 'Never'"),
])
def test_bad_options_are_usage_errors(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        _parse("failover", "preview", "deployment/web", *argv)
    assert info.value.code == EXIT_USAGE and expected in capsys.readouterr().err


def test_failover_needs_a_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["failover"])
    assert info.value.code == EXIT_USAGE and "preview" in capsys.readouterr().err


def test_wired_into_flotilla() -> None:
    args = build_parser().parse_args(["failover", "preview", "deploy/web", "-n", "shop"])
    assert args.fn is run_failover_preview and args.target == "deploy/web" and args.namespace == "shop"


def test_unusable_kubeconfig_is_a_usage_error(tmp_path: Path) -> None:
    args = _parse("failover", "preview", "deployment/web", "--kubeconfig", str(tmp_path / "missing"))
    out, err = io.StringIO(), io.StringIO()
    assert run_failover_preview(args, out=out, err=err) == EXIT_USAGE
    assert err.getvalue().startswith("error: control plane: ") and "--kubeconfig" in err.getvalue()
    assert out.getvalue() == ""


def _unreachable_kubeconfig(tmp_path: Path) -> Path:
    """A kubeconfig pointing at a port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "cp",
        "clusters": [{"name": "cp", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "cp", "user": {}}],
        "contexts": [{"name": "cp", "context": {"cluster": "cp", "user": "cp"}}]}))
    return kubeconfig


def test_bad_target_is_a_usage_error_before_anything_is_read(tmp_path: Path) -> None:
    args = _parse("failover", "preview", "web", "--kubeconfig", str(_unreachable_kubeconfig(tmp_path)))
    err = io.StringIO()
    assert run_failover_preview(args, out=io.StringIO(), err=err) == EXIT_USAGE
    assert "expected KIND/NAME (e.g. deployment/web)" in err.getvalue()


def test_unreachable_control_plane_is_a_lookup_error(tmp_path: Path) -> None:
    args = _parse("failover", "preview", "deploy/web", "--kubeconfig", str(_unreachable_kubeconfig(tmp_path)))
    out, err = io.StringIO(), io.StringIO()
    assert run_failover_preview(args, out=out, err=err) == EXIT_USAGE
    assert err.getvalue().startswith("error: cannot reach the control plane: ") and out.getvalue() == ""
