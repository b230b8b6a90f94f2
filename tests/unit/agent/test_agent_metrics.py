"""The agent's metrics and the flag that serves them: the names, their HELP, what each recording call moves."""

from __future__ import annotations

import argparse

import pytest

from flotilla.agent.metrics import AgentMetrics
from flotilla.cli.agent import add_agent_parser, config_from_args
from flotilla.failover.peer_quorum import Quorum
from flotilla.failover.run_permit import PermitRoute
from flotilla.observability.metrics import MetricsRegistry

NAMES = ("flotilla_agent_lease_renewals_total", "flotilla_agent_control_plane_reachable",
         "flotilla_agent_run_permit_renewals_total", "flotilla_agent_run_permit_withheld",
         "flotilla_agent_run_permit_age_seconds", "flotilla_agent_peer_votes", "flotilla_agent_peer_total",
         "flotilla_agent_peer_requests_total", "flotilla_agent_fence_acknowledgements")


def samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def test_agent_metrics_each_have_help_and_type_and_start_at_zero_with_the_permit_age_unknown() -> None:
    text = AgentMetrics().render()
    for name in NAMES:
        assert f"# HELP {name} " in text, name
        kind = "counter" if name.endswith("s_total") else "gauge"  # flotilla_agent_peer_total is a gauge
        assert f"# TYPE {name} {kind}" in text, name
    got = samples(text)
    assert got['flotilla_agent_lease_renewals_total{result="success"}'] == 0
    assert got['flotilla_agent_lease_renewals_total{result="failure"}'] == 0
    assert got['flotilla_agent_run_permit_renewals_total{route="control-plane"}'] == 0
    assert got['flotilla_agent_run_permit_renewals_total{route="peers"}'] == 0
    assert got["flotilla_agent_run_permit_age_seconds"] == -1
    assert got["flotilla_agent_control_plane_reachable"] == 0
    assert got["flotilla_agent_run_permit_withheld"] == 0


def test_agent_metrics_recording_calls_move_their_metric_only() -> None:
    m = AgentMetrics(MetricsRegistry())
    m.lease_renewed(True)
    m.lease_renewed(True)
    m.lease_renewed(False)
    m.set_control_plane_reachable(True)
    m.permit_renewed(PermitRoute.CONTROL_PLANE)
    m.permit_renewed(PermitRoute.PEERS)
    m.permit_renewed(PermitRoute.PEERS)
    m.set_permit_withheld(True)
    m.quorum_evaluated(Quorum(True, 2, 3, "2 of 3"))
    m.peer_asked("m2", True)
    m.peer_asked("m2", False)
    m.peer_asked("m3", False)
    m.set_fence_acknowledgements(1)
    got = samples(m.render())
    assert got['flotilla_agent_lease_renewals_total{result="success"}'] == 2
    assert got['flotilla_agent_lease_renewals_total{result="failure"}'] == 1
    assert got["flotilla_agent_control_plane_reachable"] == 1
    assert got['flotilla_agent_run_permit_renewals_total{route="control-plane"}'] == 1
    assert got['flotilla_agent_run_permit_renewals_total{route="peers"}'] == 2
    assert got["flotilla_agent_run_permit_withheld"] == 1
    assert (got["flotilla_agent_peer_votes"], got["flotilla_agent_peer_total"]) == (2, 3)
    assert got['flotilla_agent_peer_requests_total{peer="m2",result="success"}'] == 1
    assert got['flotilla_agent_peer_requests_total{peer="m2",result="failure"}'] == 1
    assert got['flotilla_agent_peer_requests_total{peer="m3",result="failure"}'] == 1
    assert got["flotilla_agent_fence_acknowledgements"] == 1
    m.set_permit_withheld(False)
    m.set_control_plane_reachable(False)
    got = samples(m.render())
    assert (got["flotilla_agent_run_permit_withheld"], got["flotilla_agent_control_plane_reachable"]) == (0, 0)


def test_agent_permit_age_is_read_at_every_scrape() -> None:
    m = AgentMetrics()
    clock = {"age": None}
    m.watch_permit_age(lambda: clock["age"])
    assert samples(m.render())["flotilla_agent_run_permit_age_seconds"] == -1
    clock["age"] = 2.5
    assert samples(m.render())["flotilla_agent_run_permit_age_seconds"] == 2.5
    clock["age"] = 7.0
    assert samples(m.render())["flotilla_agent_run_permit_age_seconds"] == 7.0


def _parse(*extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="flotilla")
    add_agent_parser(parser.add_subparsers())
    return parser.parse_args(["agent", "--karmada-kubeconfig", "cp", "--cluster-name", "edge1", *extra])


def test_agent_metrics_bind_address_defaults_like_the_controller_manager_and_0_disables() -> None:
    assert config_from_args(_parse()).metrics_address == ("127.0.0.1", 8080)
    assert config_from_args(_parse("--metrics-bind-address", "0")).metrics_address is None
    assert config_from_args(_parse("--metrics-bind-address", ":9100")).metrics_address == ("0.0.0.0", 9100)
    assert config_from_args(_parse("--metrics-bind-address", "[::1]:0")).metrics_address == ("::1", 0)


@pytest.mark.parametrize("bad", ["8080", "localhost", "host:port", "127.0.0.1:70000", "::1:8080"])
def test_agent_metrics_bind_address_refuses_a_bad_value_as_a_usage_error(
        bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        _parse("--metrics-bind-address", bad)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--metrics-bind-address" in err and repr(bad) in err


async def test_agent_metrics_on_a_port_in_use_are_reported_and_the_agent_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    import socket
    from typing import cast

    import aiohttp

    from flotilla.agent.runtime import Agent, AgentConfig
    from flotilla.client import Client

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        # the clients are never used by start_metrics
        agent = Agent(cast(Client, None), cast(Client, None),
                      AgentConfig("edge1", metrics_address=("127.0.0.1", port)))
        await agent.start_metrics()
        assert agent.metrics_server is None
        assert f"cannot serve metrics on 127.0.0.1:{port}" in caplog.text and "--metrics-bind-address" in caplog.text
    free = Agent(cast(Client, None), cast(Client, None), AgentConfig("edge1", metrics_address=("127.0.0.1", 0)))
    await free.start_metrics()
    assert free.metrics_server is not None
    try:
        async with aiohttp.ClientSession() as session, session.get(f"{free.metrics_server.url}/metrics") as resp:
            assert resp.status == 200 and "flotilla_agent_run_permit_withheld 0" in await resp.text()
    finally:
        await free.metrics_server.stop()
