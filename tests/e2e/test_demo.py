"""``flotilla demo`` (what ``make demo`` runs) passes: a real run, every check held, the summary printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FLOTILLA = str(Path(sys.executable).parent / "flotilla")


def test_demo_moves_the_flink_job_with_its_state_and_every_check_holds(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    r = subprocess.run([FLOTILLA, "demo", "--data-dir", str(data_dir)], capture_output=True, text=True, timeout=240)
    out = r.stdout
    assert r.returncode == 0, f"demo failed ({r.returncode}):\n{out}\n{r.stderr}"
    assert "every check held" in out
    for step in ("member1 loses power", "member1 is not Ready", "tainted member1 cluster.karmada.io/not-ready:NoExecute",
                 "evicted: graceful eviction task from member1, purgeMode Directly", "flotilla fence member1",
                 "created with label failover.flink.io/job-id=", "member1 holds no copy of the job any more"):
        assert step in out, f"missing step {step!r} in:\n{out}"
    assert "copies running at once                       never two" in out
    assert "FAILED" not in out
    assert (data_dir / "demo.log").is_file()


def test_demo_refuses_a_data_dir_it_did_not_make(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.txt").write_text("do not delete")
    r = subprocess.run([FLOTILLA, "demo", "--data-dir", str(precious)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "was not made by flotilla; pass another --data-dir" in r.stdout
    assert (precious / "thesis.txt").read_text() == "do not delete"
