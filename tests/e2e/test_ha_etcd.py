"""HA on etcd (short version of ``flotilla soak ha``; ``make soak`` runs it with 200 workloads): two API servers
on a three-member etcd, two leader-elected controller-managers. During a mass failover the leading
controller-manager is killed: the standby takes the lease within the lease duration and completes the failover
with every invariant; then an etcd member and an API server are killed and new workloads still become Healthy."""

from __future__ import annotations

import pytest

from flotilla.reliability.ha import HaParams, run_ha_trial

pytestmark = pytest.mark.timeout(300)


async def test_the_standby_controller_manager_finishes_a_failover_and_etcd_or_apiserver_loss_is_survived(
        tmp_path) -> None:
    p = HaParams(workloads=45, members=3, kind="mix", kill_at=0.3, lease_duration=3.0, extra=3, timeout=120,
                 setup_timeout=120)
    result = await run_ha_trial(p, tmp_path)
    assert result["problems"] == [], result
    assert result["new_leader"] != result["first_leader"]
    assert result["recovered_after_kill_s"] is not None
    assert result["healthy_after_etcd_member_loss_s"] is not None
    assert result["healthy_after_apiserver_loss_s"] is not None
    # the driver's client moved to the surviving API server
    assert result["driver_server_after"] == result["api_servers"][1]
