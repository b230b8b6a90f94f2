"""The agents' metrics and permit Events under ``flotilla up --guard``, read as an operator would.

``flotilla up --detach --members 2 --pull-members 1 --guard --metrics-bind-address 127.0.0.1:0``: each agent (member2's
Pull agent, member1's lease-only agent) serves ``/metrics`` on a port of its own, printed in ``D/up.log``. Scraped
over HTTP they show Lease and permit renewals on the control plane and a permit that is not withheld; the real
kubectl shows one ``RunPermitRenewed`` Event on each member's permit Lease, however many renewals follow.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator

import pytest

from tests.e2e.test_automatic_fencing import FENCE_AFTER, PERMIT_HOLD, Up, start, stop

pytestmark = pytest.mark.kubectl

MEMBERS = ("member1", "member2")
RENEWALS = 'flotilla_agent_run_permit_renewals_total{route="control-plane"}'
#: how long the test lets the permits be renewed (every 1 s) before counting their Events again
SETTLE = 4.0


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    root = tmp_path_factory.mktemp("agent-metrics") / "flotilla"
    try:
        yield start(root, "--members", "2", "--pull-members", "1", "--guard", "--fence-after", str(FENCE_AFTER),
                    "--permit-hold", str(PERMIT_HOLD), "--metrics-bind-address", "127.0.0.1:0")
    finally:
        stop(root)


def metrics_urls(up: Up) -> dict[str, str]:
    """Each agent's metrics address, as ``flotilla up`` printed it."""
    text = up.layout.log_file.read_text()
    found = dict(re.findall(r"cluster (member\d): .* metrics (http://127\.0\.0\.1:\d+/metrics)", text))
    assert set(found) == set(MEMBERS), text
    return found


def scrape(url: str) -> dict[str, float]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - a loopback URL of the test's own stack
            assert resp.status == 200
            text = resp.read().decode()
    except OSError as e:  # the agent process not listening yet
        raise AssertionError(f"{url}: {e}") from e
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def permit_events(up: Up, member: str) -> list[dict[str, object]]:
    out = up.members[member].run("get", "events", "-n", "flotilla-system", "-o", "json").stdout
    return [ev for ev in json.loads(out)["items"]
            if (ev.get("involvedObject") or {}).get("name") == "flotilla-run-permit"]


def test_each_agent_under_up_serves_its_metrics_and_records_one_permit_event(up: Up) -> None:
    urls = metrics_urls(up)
    assert len(set(urls.values())) == len(MEMBERS)  # a port each

    def renewing(member: str) -> dict[str, float]:
        got = scrape(urls[member])
        assert got['flotilla_agent_lease_renewals_total{result="success"}'] >= 1, got
        assert got[RENEWALS] >= 1 and got["flotilla_agent_run_permit_withheld"] == 0, got
        assert got["flotilla_agent_control_plane_reachable"] == 1, got
        return got

    for member in MEMBERS:
        up.eventually(lambda member=member: renewing(member), what=f"{member}'s agent renewing its permit")
        up.eventually(lambda member=member: _one(permit_events(up, member)),
                      what=f"the RunPermitRenewed Event in {member}")
    before = {member: scrape(urls[member])[RENEWALS] for member in MEMBERS}
    time.sleep(SETTLE)
    for member in MEMBERS:
        got = scrape(urls[member])
        assert got[RENEWALS] >= before[member] + 2, (member, got)
        assert 0 <= got["flotilla_agent_run_permit_age_seconds"] < 3.0, got
        [event] = permit_events(up, member)
        assert (event["reason"], event["type"], event["count"]) == ("RunPermitRenewed", "Normal", 1), event


def _one(events: list[dict[str, object]]) -> None:
    assert [ev["reason"] for ev in events] == ["RunPermitRenewed"], events

