"""`flotilla join` of members that authenticate their clients, as managed clusters do: a client certificate (kind,
kubeadm), an exec credential plugin (EKS ``aws eks get-token``, GKE ``gke-gcloud-auth-plugin``), and no
credentials at all. The members are simulated members serving TLS with token and client-certificate
authentication; the exec plugin is a small Python script that prints an ExecCredential and counts its runs. The
controller-manager (every controller) then reaches each member with what join stored and propagates a ConfigMap
to it."""

from __future__ import annotations

import argparse
import asyncio
import base64
import csv
import json
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from flotilla.apiserver.server import ApiServer, ApiServerConfig
from flotilla.apiserver.tls import CertPaths, issue_client_cert
from flotilla.cli.cluster_commands import add_cluster_parsers
from flotilla.client import Client, Resource
from flotilla.kube.conditions import find_condition
from flotilla.kube.resources import NAMESPACES, SECRETS
from flotilla.member.runner import MemberGroup
from flotilla.member.simulated import MemberConfig
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.members import CLUSTERS, MemberClients
from flotilla.runtime.options import ControllerOptions
from tests.support.controllers import Eventually, get_or_none

pytestmark = pytest.mark.timeout(120)

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
POLICIES = Resource("policy.karmada.io", "v1alpha1", "propagationpolicies", "PropagationPolicy", True)
eventually = Eventually(timeout=30.0, retry_on=())


@dataclass
class Env:
    tmp: Path
    server: ApiServer
    members: MemberGroup
    client: Client

    @property
    def kubeconfig(self) -> Path:
        assert self.server.kubeconfig_path is not None
        return self.server.kubeconfig_path

    def member(self, name: str) -> Any:
        return self.members.members[name]

    def admin_token(self, name: str) -> str:
        rows = csv.reader(line for line in (self.member(name).config.member_dir / "tokens.csv").read_text()
                          .splitlines() if line and not line.startswith("#"))
        return next(row[0] for row in rows if row)

    def member_kubeconfig(self, name: str, user: dict[str, Any], file: str) -> Path:
        """A kubeconfig for member ``name`` (its server and CA) with ``user`` as the credentials."""
        base = yaml.safe_load(self.member(name).kubeconfig_path.read_text())
        cluster = base["clusters"][0]["cluster"]
        doc = {"apiVersion": "v1", "kind": "Config", "current-context": name,
               "clusters": [{"name": name, "cluster": cluster}], "users": [{"name": "u", "user": user}],
               "contexts": [{"name": name, "context": {"cluster": name, "user": "u"}}]}
        path = self.tmp / file
        path.write_text(yaml.safe_dump(doc))
        return path


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    server = await ApiServer(ApiServerConfig(storage_url="memory://", data_dir=tmp_path / "cp", port=0,
                                             compaction_interval=0)).start()
    configs = [MemberConfig(name=n, data_dir=tmp_path / "members", simulators=[], secure=True, nodes=1)
               for n in ("m-cert", "m-exec", "m-none")]
    group = MemberGroup(configs, write_admin_files=False)
    try:
        await group.start()
        assert server.kubeconfig_path is not None
        client = Client.from_kubeconfig(server.kubeconfig_path)
        try:
            yield Env(tmp_path, server, group, client)
        finally:
            await client.close()
    finally:
        await group.stop()
        await server.stop()


def join(env: Env, name: str, kubeconfig: Path) -> Callable[[], int]:
    parser = argparse.ArgumentParser(prog="flotilla")
    add_cluster_parsers(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["join", name, "--cluster-kubeconfig", str(kubeconfig), "--kubeconfig",
                              str(env.kubeconfig)])
    return lambda: int(args.fn(args))


def write_plugin(tmp: Path, token: str, *, expires_in: float | None, bad_first: bool = False) -> tuple[Path, Path]:
    """An exec plugin (a Python script) printing an ExecCredential with ``token`` that expires ``expires_in``
    seconds after each run (None: no expiry); ``bad_first``: the first run prints a token the member refuses.
    Each run appends a line to the returned count file, with the KUBERNETES_EXEC_INFO it was given."""
    count = tmp / "plugin-runs"
    script = tmp / "plugin.py"
    script.write_text(f"""#!{sys.executable}
import datetime, json, os, sys
count = {str(count)!r}
with open(count, "a") as f:
    f.write(os.environ.get("KUBERNETES_EXEC_INFO", "") + "\\n")
runs = len(open(count).read().splitlines())
status = {{"token": "wrong" if {bad_first!r} and runs == 1 else os.environ["MEMBER_TOKEN"]}}
if {expires_in!r} is not None:
    at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds={expires_in!r})
    status["expirationTimestamp"] = at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
json.dump({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}},
          sys.stdout)
""")
    script.chmod(0o755)
    return script, count


def exec_user(script: Path, token: str, **extra: Any) -> dict[str, Any]:
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(script), "args": ["get-token"],
                     "env": [{"name": "MEMBER_TOKEN", "value": token}], "interactiveMode": "Never",
                     "provideClusterInfo": True, **extra}}


def runs(count: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in count.read_text().splitlines()] if count.exists() else []


async def secret_data(env: Env, name: str) -> dict[str, str]:
    secret = await env.client.get(SECRETS, name, "karmada-cluster")
    return dict(secret.get("data") or {})


async def member_client_reads(env: Env, name: str) -> str:
    """What the controller-manager's client for ``name`` (built from the Cluster and its Secret) reads:
    the UID of the member's kube-system namespace."""
    clients = MemberClients(env.client, request_timeout=5.0)
    try:
        cluster = await env.client.get(CLUSTERS, name)
        member = await clients.client_for(cluster)
        ns = await member.get(NAMESPACES, "kube-system")
        return str(ns["metadata"]["uid"])
    finally:
        await clients.close()


async def propagates_to(env: Env, name: str) -> None:
    """A ConfigMap with a PropagationPolicy to ``name`` lands in the member, written by the controller-manager."""
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{name}", "namespace": "default"},
          "data": {"k": "v"}}
    policy = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
              "metadata": {"name": f"to-{name}", "namespace": "default"},
              "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "name": f"cm-{name}"}],
                       "placement": {"clusterAffinity": {"clusterNames": [name]}}}}
    await env.client.create(POLICIES, policy, "default")
    await env.client.create(CONFIGMAPS, cm, "default")

    async with Client.from_kubeconfig(env.member(name).kubeconfig_path) as admin:  # the member's own admin
        async def landed() -> bool:
            return await get_or_none(admin, CONFIGMAPS, f"cm-{name}", "default") is not None

        await eventually(landed, what=f"the ConfigMap in member {name}")


async def kube_system_uid(env: Env, name: str) -> str:
    async with Client.from_kubeconfig(env.member(name).kubeconfig_path) as admin:
        return str((await admin.get(NAMESPACES, "kube-system"))["metadata"]["uid"])


async def ready(env: Env, name: str) -> bool:
    c = await get_or_none(env.client, CLUSTERS, name, None)
    cond = find_condition(((c or {}).get("status") or {}).get("conditions"), "Ready")
    return bool(cond and cond["status"] == "True")


async def test_join_with_a_client_certificate_stores_it_and_the_member_client_authenticates_with_it(
        env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    paths = CertPaths.under(env.member("m-cert").config.member_dir / "pki")
    cert, key = issue_client_cert(paths, "kubernetes-admin", ["system:masters"])
    (env.tmp / "admin.crt").write_bytes(cert)
    (env.tmp / "admin.key").write_bytes(key)
    kubeconfig = env.member_kubeconfig("m-cert", {"client-certificate": "admin.crt", "client-key": "admin.key"},
                                       "cert.kubeconfig")  # file references, relative to the kubeconfig

    rc = await asyncio.to_thread(join(env, "m-cert", kubeconfig))
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "cluster(m-cert) is joined successfully" in out.out
    assert "without credentials" not in out.err
    data = await secret_data(env, "m-cert")
    assert sorted(data) == ["caBundle", "tls.crt", "tls.key"]
    assert (base64.b64decode(data["tls.crt"]), base64.b64decode(data["tls.key"])) == (cert, key)
    assert await member_client_reads(env, "m-cert") == await kube_system_uid(env, "m-cert")


async def test_join_with_embedded_certificate_data_and_a_propagated_object_lands(env: Env) -> None:
    paths = CertPaths.under(env.member("m-cert").config.member_dir / "pki")
    cert, key = issue_client_cert(paths, "kubernetes-admin", ["system:masters"])
    kubeconfig = env.member_kubeconfig("m-cert", {"client-certificate-data": base64.b64encode(cert).decode(),
                                                  "client-key-data": base64.b64encode(key).decode()},
                                       "cert-data.kubeconfig")
    assert await asyncio.to_thread(join(env, "m-cert", kubeconfig)) == 0
    manager = await ControllerManager(env.client, fast_options()).start()
    try:
        await eventually(lambda: ready(env, "m-cert"), what="m-cert Ready")
        await propagates_to(env, "m-cert")
    finally:
        await manager.stop()


def fast_options() -> ControllerOptions:
    return ControllerOptions(cluster_status_update_frequency=0.2, cluster_success_threshold=0.4,
                             cluster_failure_threshold=5.0)


async def test_join_with_an_exec_plugin_stores_it_and_the_controller_manager_runs_it_again_after_expiry(
        env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    script, count = write_plugin(env.tmp, env.admin_token("m-exec"), expires_in=1.0)
    kubeconfig = env.member_kubeconfig("m-exec", exec_user(script, env.admin_token("m-exec")), "exec.kubeconfig")

    rc = await asyncio.to_thread(join(env, "m-exec", kubeconfig))
    out = capsys.readouterr()
    assert rc == 0, out.err
    joined = runs(count)
    assert len(joined) >= 1
    info = joined[0]
    assert info["apiVersion"] == "client.authentication.k8s.io/v1" and info["kind"] == "ExecCredential"
    assert info["spec"]["interactive"] is False
    assert info["spec"]["cluster"]["server"] == env.member("m-exec").url  # provideClusterInfo
    assert "certificate-authority-data" in info["spec"]["cluster"]
    data = await secret_data(env, "m-exec")
    assert sorted(data) == ["caBundle", "exec"]  # the stanza, not a token that would expire
    stored = json.loads(base64.b64decode(data["exec"]))
    assert stored["command"] == str(script) and stored["args"] == ["get-token"]

    manager = await ControllerManager(env.client, fast_options()).start()
    try:
        await eventually(lambda: ready(env, "m-exec"), what="m-exec Ready")
        await propagates_to(env, "m-exec")
        before, started = len(runs(count)), time.monotonic()

        async def ran_again() -> bool:
            return len(runs(count)) >= before + 2

        await eventually(ran_again, what="the plugin run again after its credential expired")
        elapsed = time.monotonic() - started
        # run when the credential expires (once a second), not on every request (several a second)
        assert len(runs(count)) - before <= 2 * elapsed + 4, (len(runs(count)) - before, elapsed)
        assert await member_client_reads(env, "m-exec") == await kube_system_uid(env, "m-exec")
    finally:
        await manager.stop()


async def test_a_client_runs_the_exec_plugin_again_when_the_member_refuses_its_token(env: Env) -> None:
    script, count = write_plugin(env.tmp, env.admin_token("m-exec"), expires_in=None, bad_first=True)
    kubeconfig = env.member_kubeconfig("m-exec", exec_user(script, env.admin_token("m-exec")), "exec.kubeconfig")
    async with Client.from_kubeconfig(kubeconfig) as member:
        assert (await member.get(NAMESPACES, "kube-system"))["metadata"]["uid"]
        assert len(runs(count)) == 2  # "wrong" was refused (401); the second run's token was accepted
        await member.get(NAMESPACES, "default")
        assert len(runs(count)) == 2  # no expiry: the accepted credential is kept


async def run_join(env: Env, name: str, user: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    kubeconfig = env.member_kubeconfig(name, user, f"{name}-{len(list(env.tmp.iterdir()))}.kubeconfig")
    rc = await asyncio.to_thread(join(env, name, kubeconfig))
    return rc, capsys.readouterr().err


async def test_join_fails_saying_what_to_fix_when_the_member_cannot_be_authenticated(
        env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    rc, err = await run_join(env, "m-none", {}, capsys)
    assert rc == 1
    assert "has no credentials" in err and "refuses anonymous requests (401" in err
    assert "add a token, tokenFile, client-certificate/client-key or an exec plugin" in err

    missing = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "no-such-plugin-xyz",
                        "installHint": "install no-such-plugin-xyz from your provider"}}
    rc, err = await run_join(env, "m-none", missing, capsys)
    assert rc == 1 and "command 'no-such-plugin-xyz' not found" in err
    assert "install no-such-plugin-xyz from your provider" in err

    failing = env.tmp / "failing.py"
    failing.write_text(f"#!{sys.executable}\nimport sys\nsys.stderr.write('no AWS credentials found')\n"
                       "sys.exit(3)\n")
    failing.chmod(0o755)
    rc, err = await run_join(env, "m-none", {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                       "command": str(failing), "interactiveMode": "Never"}}, capsys)
    assert rc == 1 and "failed with exit code 3: no AWS credentials found" in err

    rc, err = await run_join(env, "m-none", {"auth-provider": {"name": "gcp"}}, capsys)
    assert rc == 1 and "auth-provider 'gcp' is not supported" in err and "gke-gcloud-auth-plugin" in err

    rc, err = await run_join(env, "m-none", {"token": "not-a-token"}, capsys)
    assert rc == 1 and "refused the kubeconfig's credentials" in err

    assert await get_or_none(env.client, CLUSTERS, "m-none", None) is None
    assert await get_or_none(env.client, SECRETS, "m-none", "karmada-cluster") is None


async def test_an_exec_plugin_may_answer_with_a_client_certificate(env: Env) -> None:
    paths = CertPaths.under(env.member("m-exec").config.member_dir / "pki")
    cert, key = issue_client_cert(paths, "plugin-user", ["system:masters"])
    answer = env.tmp / "credential.json"
    answer.write_text(json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                                  "status": {"clientCertificateData": cert.decode(),
                                             "clientKeyData": key.decode()}}))
    script = env.tmp / "cert-plugin.py"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write(open({str(answer)!r}).read())\n")
    script.chmod(0o755)
    kubeconfig = env.member_kubeconfig("m-exec", {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                                           "command": str(script)}}, "cert-exec.kubeconfig")
    async with Client.from_kubeconfig(kubeconfig) as member:  # no token: only the certificate authenticates
        assert (await member.get(NAMESPACES, "kube-system"))["metadata"]["uid"] == \
            await kube_system_uid(env, "m-exec")
