"""``--cluster-api-timeout``: the timeout of every request to a member reaches the member clients, so a
member that accepts connections and never answers (frozen) is seen failing after it; a bad value is refused.

The member here is a TCP listener on 127.0.0.1 that accepts and never answers. With a 0.5 s timeout its first
probe fails after 0.5 s and the cluster-status controller publishes Ready=False (the first observation is taken
as is); with the default 10 s it would not within the 5 s this test waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from flotilla.apiserver.server import ApiServer, ApiServerConfig
from flotilla.cli.cluster_commands import join_cluster
from flotilla.cli.controller_manager import build_parser, config_from_args
from flotilla.client import Client
from flotilla.client.http import HttpTransport
from flotilla.cluster.join import JoinSpec
from flotilla.kube.resources import EVENTS
from flotilla.runtime.manager import ControllerManager
from flotilla.runtime.members import CLUSTERS
from flotilla.runtime.options import ControllerOptions
from tests.integration.controllers.test_cluster_lifecycle import eventually, ready_of

TIMEOUT = 0.5


@pytest.fixture
async def silent_member() -> AsyncIterator[str]:
    """``https``-less endpoint of a listener that accepts connections and never answers (a frozen member)."""
    held: list[asyncio.StreamWriter] = []

    async def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # keep the connection open, answer nothing

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for w in held:
            w.close()
        server.close()


async def test_cluster_api_timeout_reaches_the_member_clients_and_a_frozen_member_fails_after_it(
        tmp_path: Path, silent_member: str) -> None:
    server = await ApiServer(ApiServerConfig(storage_url="memory://", data_dir=tmp_path / "cp", port=0,
                                             compaction_interval=0)).start()
    assert server.kubeconfig_path is not None
    client = Client.from_kubeconfig(server.kubeconfig_path)
    options = ControllerOptions(cluster_status_update_frequency=0.2, cluster_success_threshold=0.6,
                                cluster_failure_threshold=0.6, cluster_api_timeout=TIMEOUT)
    manager = ControllerManager(client, options, controllers=["cluster", "cluster-status"])
    try:
        await manager.start()
        assert manager.ctx is not None and manager.ctx.members.request_timeout == TIMEOUT
        await join_cluster(client, JoinSpec(name="frozen", api_endpoint=silent_member, token="t"))

        async def not_ready() -> dict[str, Any] | None:
            c = await client.get(CLUSTERS, "frozen")
            r = ready_of(c)
            return c if r and r["status"] == "False" else None

        cluster = await eventually(not_ready, timeout=5.0)
        assert ready_of(cluster)["reason"] == "ClusterNotReachable"  # type: ignore[index]
        member = await manager.ctx.members.client_for(cluster)
        assert isinstance(member.transport, HttpTransport) and member.transport.request_timeout == TIMEOUT

        async def timed_out_event() -> list[str]:
            listed = await client.list(EVENTS)
            return [str(e.get("message")) for e in listed.get("items") or []
                    if (e.get("involvedObject") or {}).get("name") == "frozen" and "timed out" in
                    str(e.get("message"))]

        assert await eventually(timed_out_event, timeout=5.0)
    finally:
        await manager.stop()
        await client.close()
        await server.stop()


def test_cluster_api_timeout_flag_default_value_and_bad_values(capsys: pytest.CaptureFixture[str]) -> None:
    assert ControllerOptions().cluster_api_timeout == 10.0
    cfg = config_from_args(build_parser().parse_args(["--cluster-api-timeout", "32s"]))
    assert cfg.options.cluster_api_timeout == 32.0
    assert config_from_args(build_parser().parse_args(["--cluster-api-timeout", "1.5"])).options \
        .cluster_api_timeout == 1.5
    with pytest.raises(ValueError, match=r'Options.ClusterAPITimeout: Invalid value: "0s": must be greater than 0'):
        config_from_args(build_parser().parse_args(["--cluster-api-timeout", "0"]))
    for bad, needle in (("-1s", "duration must not be negative"), ("soon", "invalid duration 'soon'")):
        with pytest.raises(SystemExit) as exit_info:
            build_parser().parse_args([f"--cluster-api-timeout={bad}"])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert "--cluster-api-timeout" in err and needle in err, err
    assert "--cluster-api-timeout" in build_parser().format_help()


def test_flotilla_up_passes_cluster_api_timeout_to_its_controllers(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from flotilla.local.up_command import add_up_parsers
    from flotilla.local.up_command import config_from_args as up_config

    parser = argparse.ArgumentParser(prog="flotilla")
    add_up_parsers(parser.add_subparsers(dest="command"))
    cfg = up_config(parser.parse_args(["up", "--cluster-api-timeout", "3"]))
    assert ControllerOptions(**cfg.timings).cluster_api_timeout == 3.0  # what LocalStack starts the controllers with
    assert up_config(parser.parse_args(["up"])).timings["cluster_api_timeout"] == 10.0
    with pytest.raises(SystemExit):
        parser.parse_args(["up", "--cluster-api-timeout", "0"])
    err = capsys.readouterr().err
    assert "--cluster-api-timeout" in err and "must be greater than 0" in err, err
