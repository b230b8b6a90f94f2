"""`flotilla sim fault` (one-way partitions, --all-members), `flotilla sim agent` and `flotilla sim controlplane`:
bad input is a usage error (exit 2) or a message saying what to fix (exit 1), never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from flotilla.main import main


@pytest.mark.parametrize("argv", [
    ["sim", "fault", "--mode", "partition"],  # neither a member nor --all-members
    ["sim", "fault", "member1", "--all-members", "--mode", "partition"],  # both
    ["sim", "fault", "member1", "member2", "--all-members", "--mode", "partition"],
    ["sim", "fault", "member1", "--mode", "partition-sideways"],
    ["sim", "agent", "member3", "--mode", "pause"],
    ["sim", "agent", "--mode", "kill"],
    ["sim", "controlplane", "--mode", "stop"],
])
def test_usage_errors_exit_2_saying_what_is_wrong(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "usage: flotilla sim" in err and "error:" in err, err


@pytest.mark.parametrize(("argv", "says"), [
    (["sim", "fault", "--all-members", "--mode", "partition"], "no member admin file"),
    (["sim", "fault", "member2", "member4", "--mode", "partition"], "member2/admin.json and "),
    (["sim", "agent", "member3", "--mode", "kill"], "members/member3/admin.json; pass the --data-dir given to `flotilla up`"),
    (["sim", "controlplane", "--mode", "restart"], "no member admin file"),
])
def test_without_a_running_stack_each_command_exits_1_naming_what_is_missing(
        argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--data-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err, err


def test_the_one_way_modes_are_offered(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["sim", "fault", "--help"])
    out = capsys.readouterr().out
    assert "partition-to-member" in out and "partition-from-member" in out and "--all-members" in out


def test_missing_admin_file_names_both_paths_tried(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "fault", "member1", "--mode", "off", "--data-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"tried {tmp_path}/member1/admin.json and {tmp_path}/members/member1/admin.json" in err, err


def test_the_data_dir_of_flotilla_up_finds_its_members(tmp_path: Path) -> None:
    from flotilla.member.runner import admin_urls, read_admin_file

    (tmp_path / "members" / "member1").mkdir(parents=True)
    (tmp_path / "members" / "member1" / "admin.json").write_text('{"admin_url": "http://127.0.0.1:1"}')
    assert read_admin_file(tmp_path, "member1")["admin_url"] == "http://127.0.0.1:1"
    assert read_admin_file(tmp_path / "members", "member1")["admin_url"] == "http://127.0.0.1:1"
    assert admin_urls(tmp_path) == ["http://127.0.0.1:1"]
