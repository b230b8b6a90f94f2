"""``flotilla controller-manager``: flags (Karmada's names, Go durations, booleans, feature gates,
``--controllers``), validation errors, and the process itself (SIGTERM, leader election)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from flotilla.cli.argtypes import parse_duration
from flotilla.cli.controller_manager import (
    add_controller_manager_parser,
    build_parser,
    config_from_args,
    format_duration,
    known_controllers,
    option_flags,
    options_from_args,
    parse_bool,
    select_controllers,
)
from flotilla.runtime.options import DEFAULT_FEATURE_GATES, ControllerOptions
from tests.support.apiserver import Kubectl, ServerThread
from tests.support.processes import LoggedProcess


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def options(*argv: str) -> ControllerOptions:
    return options_from_args(parse(*argv))


def parse_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Parse and validate argv as the command does, expecting a usage error (exit 2); returns stderr."""
    parser = build_parser()
    with pytest.raises(SystemExit) as exc:
        args = parser.parse_args(list(argv))
        try:
            config_from_args(args)
        except ValueError as e:
            parser.error(str(e))  # what run_controller_manager_command does, before connecting
        raise AssertionError(f"{argv} parsed without error")
    assert exc.value.code == 2
    return capsys.readouterr().err


# ----------------------------------------------------------------------------------------------- durations


@pytest.mark.parametrize(("text", "seconds"), [
    ("10s", 10.0), ("1m30s", 90.0), ("500ms", 0.5), ("2h", 7200.0), ("1h2m3.5s", 3723.5), ("1.5s", 1.5),
    ("0", 0.0), ("0s", 0.0), ("0.5", 0.5), ("30", 30.0), ("300us", 0.0003), ("300µs", 0.0003),
    ("100ns", 1e-7), ("+5s", 5.0), (".5s", 0.5), ("10m", 600.0), ("1h0m0s", 3600.0), (" 2s ", 2.0),
    ("1e1", 10.0),
])
def test_go_durations_and_plain_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "10x", "1m30", "10 s", "-1s", "-3", "ten", "1.2.3s", "nan", "inf",
                                  "1e999", "5sec", "1d"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(("seconds", "text"), [
    (10.0, "10s"), (600.0, "10m0s"), (3600.0, "1h0m0s"), (90.0, "1m30s"), (0.5, "500ms"), (0.0, "0s"),
    (1.5, "1.5s"), (3723.5, "1h2m3.5s"),
])
def test_durations_print_as_go_does(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == pytest.approx(seconds)


def test_duration_flags_take_both_forms() -> None:
    o = options("--cluster-status-update-frequency", "500ms", "--cluster-success-threshold", "1m30s",
                "--cluster-failure-threshold=2", "--graceful-eviction-timeout", "10m",
                "--state-preservation-timeout", "0.25")
    assert o.cluster_status_update_frequency == 0.5
    assert o.cluster_success_threshold == 90.0
    assert o.cluster_failure_threshold == 2.0
    assert o.graceful_eviction_timeout == 600.0
    assert o.state_preservation_timeout == 0.25


def test_bad_duration_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    err = parse_error(capsys, "--cluster-status-update-frequency", "10x")
    assert "--cluster-status-update-frequency" in err and "invalid duration '10x'" in err
    err = parse_error(capsys, "--graceful-eviction-timeout=-5s")
    assert "--graceful-eviction-timeout" in err and "negative" in err


# ----------------------------------------------------------------------------------------------- options


def test_every_controller_option_has_a_flag_named_as_in_karmada() -> None:
    parser = build_parser()
    flags = {f.field: f.flag for f in option_flags()}
    for f in dataclasses.fields(ControllerOptions):
        assert f.name in flags, f"ControllerOptions.{f.name} has no flag"
        flag = flags[f.name]
        assert flag == "--" + f.name.replace("_", "-")
        assert flag in parser._option_string_actions, flag
    help_text = parser.format_help()
    for flag in ["--cluster-status-update-frequency", "--cluster-success-threshold", "--cluster-failure-threshold",
                 "--enable-no-execute-taint-eviction", "--no-execute-taint-eviction-purge-mode",
                 "--graceful-eviction-timeout", "--resource-eviction-rate", "--secondary-resource-eviction-rate",
                 "--unhealthy-cluster-threshold", "--state-preservation-timeout", "--concurrent-syncs",
                 "--feature-gates", "--controllers", "--kubeconfig", "--leader-elect",
                 "--leader-elect-lease-duration", "--leader-elect-renew-deadline", "--leader-elect-retry-period",
                 "--leader-elect-resource-namespace"]:
        assert flag in help_text, flag


def test_no_flags_keep_the_option_defaults() -> None:
    assert options() == ControllerOptions()
    args = parse()
    assert args.controllers == "*" and args.leader_elect is False and args.kubeconfig is None


def test_all_option_flags() -> None:
    o = options("--cluster-api-qps", "12.5", "--enable-no-execute-taint-eviction=false",
                "--no-execute-taint-eviction-purge-mode", "Directly", "--resource-eviction-rate", "0.5",
                "--secondary-resource-eviction-rate", "0.01", "--unhealthy-cluster-threshold", "0.3",
                "--concurrent-syncs", "9", "--skipped-propagating-namespaces", "kube-system, ops,",
                "--feature-gates", "Failover=false,PolicyPreemption=true")
    assert o.cluster_api_qps == 12.5
    assert o.enable_no_execute_taint_eviction is False
    assert o.no_execute_taint_eviction_purge_mode == "Directly"
    assert (o.resource_eviction_rate, o.secondary_resource_eviction_rate) == (0.5, 0.01)
    assert o.unhealthy_cluster_threshold == 0.3
    assert o.concurrent_syncs == 9
    assert o.skipped_propagating_namespaces == ("kube-system", "ops")
    assert o.gate("Failover") is False and o.gate("PolicyPreemption") is True
    assert o.gate("GracefulEviction") is DEFAULT_FEATURE_GATES["GracefulEviction"]


@pytest.mark.parametrize(("argv", "value"), [
    (["--enable-no-execute-taint-eviction"], True),
    (["--enable-no-execute-taint-eviction=true"], True),
    (["--enable-no-execute-taint-eviction=false"], False),
    (["--enable-no-execute-taint-eviction=False"], False),
    (["--enable-no-execute-taint-eviction=0"], False),
    (["--enable-no-execute-taint-eviction=1"], True),
    (["--enable-no-execute-taint-eviction", "f"], False),
])
def test_booleans_as_go_pflag(argv: list[str], value: bool) -> None:
    assert options(*argv).enable_no_execute_taint_eviction is value


def test_bool_parser() -> None:
    assert [parse_bool(v) for v in ("1", "t", "T", "TRUE", "true", "True")] == [True] * 6
    assert [parse_bool(v) for v in ("0", "f", "F", "FALSE", "false", "False")] == [False] * 6
    with pytest.raises(ValueError):
        parse_bool("yes")


@pytest.mark.parametrize(("argv", "needle"), [
    (["--enable-no-execute-taint-eviction=maybe"], "invalid boolean 'maybe'"),
    (["--no-execute-taint-eviction-purge-mode", "Never"], "invalid choice: 'Never'"),
    (["--concurrent-syncs", "0"], "--concurrent-syncs"),
    (["--concurrent-syncs", "two"], "--concurrent-syncs"),
    (["--unhealthy-cluster-threshold", "1.5"], "between 0 and 1"),
    (["--resource-eviction-rate", "-1"], "non-negative"),
    (["--leader-elect", "--leader-elect-lease-duration", "10s", "--leader-elect-renew-deadline", "10s"],
     "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline"),
    (["--leader-elect", "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "2s"],
     "--leader-elect-renew-deadline must be greater than --leader-elect-retry-period"),
])
def test_bad_values_are_usage_errors(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    assert needle in parse_error(capsys, *argv)


# ----------------------------------------------------------------------------------------------- feature gates


@pytest.mark.parametrize(("argv", "needle"), [
    (["--cluster-status-update-frequency", "0"],
     'Options.ClusterStatusUpdateFrequency: Invalid value: "0s": must be greater than 0'),
    (["--cluster-status-update-frequency", "0", "--cluster-failure-threshold", "1s"],
     "must be greater than 0"),
])
def test_karmadas_flag_validation_is_a_usage_error(capsys: pytest.CaptureFixture[str], argv: list[str],
                                                   needle: str) -> None:
    assert needle in parse_error(capsys, *argv)


def test_pull_monitor_flags_take_go_durations_with_karmadas_defaults() -> None:
    o = options()
    assert (o.cluster_monitor_period, o.cluster_monitor_grace_period, o.cluster_startup_grace_period) == (
        5.0, 40.0, 60.0)
    o = options("--cluster-monitor-period", "500ms", "--cluster-monitor-grace-period=1m30s",
                "--cluster-startup-grace-period", "2")
    assert (o.cluster_monitor_period, o.cluster_monitor_grace_period, o.cluster_startup_grace_period) == (
        0.5, 90.0, 2.0)


@pytest.mark.parametrize(("flag", "field"), [
    ("--cluster-monitor-period", "ClusterMonitorPeriod"),
    ("--cluster-monitor-grace-period", "ClusterMonitorGracePeriod"),
    ("--cluster-startup-grace-period", "ClusterStartupGracePeriod"),
])
def test_pull_monitor_flags_must_be_positive(capsys: pytest.CaptureFixture[str], flag: str, field: str) -> None:
    assert f'Options.{field}: Invalid value: "0s": must be greater than 0' in parse_error(capsys, flag, "0")
    assert f"argument {flag}: invalid duration 'soon'" in parse_error(capsys, flag, "soon")


def test_feature_gates_repeat_and_accumulate() -> None:
    o = options("--feature-gates", "Failover=false", "--feature-gates=PropagateDeps=false,Failover=true")
    assert o.gate("Failover") is True and o.gate("PropagateDeps") is False
    assert o.feature_gates["GracefulEviction"] is True
    # case-insensitive values as Go's ParseBool for the common spellings; spaces around items ignored
    o = options("--feature-gates", " GracefulEviction=False , StatefulFailoverInjection=TRUE ")
    assert o.gate("GracefulEviction") is False and o.gate("StatefulFailoverInjection") is True


def test_feature_gate_defaults_follow_d1() -> None:
    o = options()
    assert all(o.gate(g) for g in ("Failover", "GracefulEviction", "StatefulFailoverInjection", "PropagateDeps"))
    assert o.gate("PolicyPreemption") is False and o.enable_no_execute_taint_eviction is True


@pytest.mark.parametrize(("spec", "needle"), [
    ("Nope=true", "unknown gate 'Nope'"),
    ("Failover", "expected Name=true|false, got 'Failover'"),
    ("Failover=yes", "expected Name=true|false, got 'Failover=yes'"),
    ("Failover=true,Bogus=false", "unknown gate 'Bogus'"),
])
def test_feature_gate_errors(capsys: pytest.CaptureFixture[str], spec: str, needle: str) -> None:
    err = parse_error(capsys, "--feature-gates", spec)
    assert "--feature-gates" in err and needle in err
    if "unknown" in needle:
        assert "known: " in err and "Failover" in err  # the message lists the gates that exist


def test_bad_feature_gate_exits_2_before_connecting(tmp_path: Path) -> None:
    """The real entry point: a usage error, no attempt to reach the (absent) API server."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "x", "cluster": {"server": "http://127.0.0.1:1"}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
        "users": [{"name": "x", "user": {}}]}))
    proc = subprocess.run([sys.executable, "-m", "flotilla.cli.controller_manager", "--kubeconfig", str(kubeconfig),
                           "--feature-gates", "Failover=maybe"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert "flotilla controller-manager: error: --feature-gates: expected Name=true|false" in proc.stderr


# ----------------------------------------------------------------------------------------------- --controllers

KNOWN = ["cluster", "cluster-status", "detector", "scheduler", "binding"]


@pytest.mark.parametrize(("spec", "start", "missing"), [
    ("*", ["cluster", "cluster-status", "detector", "scheduler"], ["binding"]),
    ("*,-scheduler", ["cluster", "cluster-status", "detector"], ["binding"]),
    ("-scheduler,*", ["cluster", "cluster-status", "detector"], ["binding"]),
    ("scheduler,detector", ["detector", "scheduler"], []),  # start order is the registry's
    ("scheduler,-scheduler", ["scheduler"], []),  # first match wins, as Karmada's IsControllerEnabled
    ("-scheduler,scheduler,*", ["cluster", "cluster-status", "detector"], ["binding"]),
    ("*,-binding", ["cluster", "cluster-status", "detector", "scheduler"], []),
    ("-cluster", [], []),  # no '*': nothing else is on
    (" detector , cluster ", ["cluster", "detector"], []),
])
def test_controllers_selection(spec: str, start: list[str], missing: list[str]) -> None:
    available = ["cluster", "cluster-status", "detector", "scheduler"]
    assert select_controllers(spec, KNOWN, available) == (start, missing)


@pytest.mark.parametrize(("spec", "needle"), [
    ("bogus", "unknown controller(s) bogus"),
    ("*,-bogus", "unknown controller(s) -bogus"),
    ("", "empty list"),
    ("binding", "binding not available"),
])
def test_controllers_errors(spec: str, needle: str) -> None:
    with pytest.raises(ValueError) as err:
        select_controllers(spec, KNOWN, ["cluster", "detector", "scheduler"])
    assert needle in str(err.value)


def test_controller_names_are_karmada_style_and_registry_ordered() -> None:
    names = known_controllers()
    assert names[:4] == ["cluster", "cluster-status", "taint-policy", "detector"]
    for n in ["scheduler", "binding", "execution", "work-status", "binding-status", "dependencies-distributor"]:
        assert n in names
    cfg = config_from_args(parse("--controllers", "*,-scheduler"))
    assert "scheduler" not in cfg.controllers + cfg.unavailable


def test_unknown_controller_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    err = parse_error(capsys, "--controllers", "detector,frobnicator")
    assert "unknown controller(s) frobnicator" in err and "known: cluster, cluster-status" in err


def test_subcommand_wiring() -> None:
    top = argparse.ArgumentParser(prog="flotilla")
    sub = top.add_subparsers(dest="command", required=True)
    add_controller_manager_parser(sub)
    args = top.parse_args(["controller-manager", "--kubeconfig", "k", "--cluster-status-update-frequency", "0.5s",
                           "--leader-elect", "--leader-elect-lease-duration", "1m"])
    assert args.command == "controller-manager" and callable(args.fn)
    cfg = config_from_args(args)
    assert cfg.kubeconfig == "k" and cfg.leader_elect and cfg.lease_duration == 60.0
    assert cfg.options.cluster_status_update_frequency == 0.5
    assert (cfg.lease_namespace, cfg.lease_name) == ("karmada-system", "flotilla-controller-manager")
    assert cfg.identity  # hostname_uuid by default


# ----------------------------------------------------------------------------------------------- the process


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    srv = ServerThread(tmp_path_factory.mktemp("cm-cli")).start()
    yield srv
    srv.stop()


CM = LoggedProcess  # a controller-manager subprocess


def start_cm(kubeconfig: Path, log: Path, *extra: str) -> CM:
    # no controllers: this is about the process, leader election and signals, not about reconciling
    return CM.start([sys.executable, "-m", "flotilla.cli.controller_manager", "--kubeconfig", str(kubeconfig),
                     "--controllers=-cluster", *extra], log)


def wait_for(check, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def lease_holder(kubectl: Kubectl, name: str) -> str | None:
    out = kubectl.run("get", "lease", name, "-n", "karmada-system", "-o", "jsonpath={.spec.holderIdentity}",
                      check=False)
    return out.stdout if out.returncode == 0 else None


def test_sigterm_stops_cleanly(server: ServerThread, tmp_path: Path) -> None:
    cm = start_cm(server.kubeconfig, tmp_path / "cm.log")
    try:
        # SIGTERM once it runs (before its handlers are installed Python's default would just kill it)
        wait_for(lambda: "started 0 controllers" in cm.output() or cm.popen.poll() is not None, 30, "the start")
        assert cm.popen.poll() is None, cm.output()
        cm.popen.send_signal(signal.SIGTERM)
        assert cm.popen.wait(10) == 0, cm.output()
        assert "controllers stopped" in cm.output()
    finally:
        cm.kill()


def test_leader_election_and_release_on_sigterm(server: ServerThread, tmp_path: Path) -> None:
    kubectl = Kubectl(server.kubeconfig, tmp_path)
    if kubectl.run("get", "ns", "karmada-system", check=False).returncode == 0:
        kubectl.run("delete", "ns", "karmada-system", "--wait=false")
    lease = f"lease-{os.getpid()}"
    timing = ["--leader-elect", "--leader-elect-resource-name", lease, "--leader-elect-lease-duration", "3s",
              "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "200ms"]
    a = start_cm(server.kubeconfig, tmp_path / "a.log", *timing, "--leader-elect-identity", "cm-a")
    b: CM | None = None
    try:
        wait_for(lambda: lease_holder(kubectl, lease) == "cm-a", 30, "cm-a to lead")  # namespace created on demand
        wait_for(lambda: "started 0 controllers" in a.output(), 30, "cm-a to start its controllers")
        b = start_cm(server.kubeconfig, tmp_path / "b.log", *timing, "--leader-elect-identity=cm-b")
        wait_for(lambda: b is not None and "leader is cm-a" in b.output(), 30, "cm-b to see cm-a lead")
        assert lease_holder(kubectl, lease) == "cm-a"  # b waits as a standby
        assert "started 0 controllers" not in b.output()
        a.popen.send_signal(signal.SIGTERM)
        assert a.popen.wait(10) == 0, a.output()
        assert "acquired lease karmada-system/" + lease + " as cm-a" in a.output(), a.output()
        # a released the lease on its way out (holder emptied), so b takes over at its next poll
        assert lease_holder(kubectl, lease) in ("", "cm-b"), "cm-a exited still holding the lease"
        wait_for(lambda: lease_holder(kubectl, lease) == "cm-b", 10, "cm-b to take over")
        wait_for(lambda: b is not None and "started 0 controllers" in b.output(), 30, "cm-b to start")
        b.popen.send_signal(signal.SIGTERM)
        assert b.popen.wait(10) == 0, b.output()
        assert lease_holder(kubectl, lease) == ""
    finally:
        for cm in (a, b):
            if cm is not None:
                cm.kill()


def test_flotilla_up_passes_the_pull_monitor_settings_to_its_controllers(capsys: pytest.CaptureFixture[str]) -> None:
    from flotilla.local.up_command import add_up_parsers
    from flotilla.local.up_command import config_from_args as up_config

    parser = argparse.ArgumentParser(prog="flotilla")
    add_up_parsers(parser.add_subparsers(dest="command"))
    cfg = up_config(parser.parse_args(["up", "--cluster-monitor-period", "0.5", "--cluster-monitor-grace-period",
                                       "8", "--cluster-startup-grace-period", "12"]))
    o = ControllerOptions(**cfg.timings)  # what LocalStack starts the controllers with
    assert (o.cluster_monitor_period, o.cluster_monitor_grace_period, o.cluster_startup_grace_period) == (
        0.5, 8.0, 12.0)
    default = up_config(parser.parse_args(["up"])).timings
    assert (default["cluster_monitor_period"], default["cluster_monitor_grace_period"],
            default["cluster_startup_grace_period"]) == (1.0, 40.0, 60.0)
    with pytest.raises(SystemExit):
        parser.parse_args(["up", "--cluster-monitor-grace-period", "0"])
    err = capsys.readouterr().err
    assert "--cluster-monitor-grace-period" in err and "must be greater than 0" in err, err


def test_d20_restore_flags(capsys: pytest.CaptureFixture[str]) -> None:
    o = options("--restore-missing", "fresh", "--restore-hold-timeout", "2m", "--restore-storage-timeout", "3s",
                "--restore-default-checkpoint-dir", "s3://flink/checkpoints")
    assert (o.restore_missing, o.restore_hold_timeout, o.restore_storage_timeout) == ("fresh", 120.0, 3.0)
    assert o.restore_default_checkpoint_dir == "s3://flink/checkpoints"
    defaults = options()
    assert (defaults.restore_missing, defaults.restore_hold_timeout) == ("hold", 300.0)
    err = parse_error(capsys, "--restore-missing", "maybe")
    assert "--restore-missing" in err and "maybe" in err
    assert any("RestoreStorageTimeout" in e for e in ControllerOptions(restore_storage_timeout=0).validate())
    assert any("RestoreMissing" in e for e in ControllerOptions(restore_missing="maybe").validate())
