"""The --etcd-cafile/--etcd-certfile/--etcd-keyfile flags and etcds:// endpoints: what is refused, and why."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from flotilla.cli.etcd_flags import etcd_tls_from_args
from flotilla.main import build_parser
from flotilla.storage.etcd import EtcdTLS, _endpoint_url


def _args(**kw: str | None) -> argparse.Namespace:
    return argparse.Namespace(**{"etcd_cafile": None, "etcd_certfile": None, "etcd_keyfile": None, **kw})


def test_the_apiserver_and_member_commands_take_the_flags() -> None:
    for command in ("apiserver", "member"):
        args = build_parser().parse_args([command, "--storage", "etcds://127.0.0.1:2379", "--etcd-cafile", "ca.crt",
                                          "--etcd-certfile", "c.crt", "--etcd-keyfile", "c.key"])
        assert (args.etcd_cafile, args.etcd_certfile, args.etcd_keyfile) == ("ca.crt", "c.crt", "c.key")


def test_no_flags_and_no_etcds_url_is_no_tls() -> None:
    assert etcd_tls_from_args(_args(), "etcd://127.0.0.1:2379") is None


def test_flags_without_an_etcds_url_say_to_use_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="use --storage etcds://host:port instead of 'etcd://h:1'"):
        etcd_tls_from_args(_args(etcd_cafile=str(tmp_path)), "etcd://h:1")


def test_a_certificate_without_its_key_and_missing_files_are_named(tmp_path: Path) -> None:
    cert = tmp_path / "c.crt"
    cert.write_text("x")
    with pytest.raises(ValueError, match="--etcd-certfile needs --etcd-keyfile too"):
        etcd_tls_from_args(_args(etcd_certfile=str(cert)), "etcds://h:1")
    with pytest.raises(ValueError, match="--etcd-keyfile needs --etcd-certfile too"):
        etcd_tls_from_args(_args(etcd_keyfile=str(cert)), "etcds://h:1")
    with pytest.raises(ValueError, match=r"--etcd-cafile .*missing.crt: no such file"):
        etcd_tls_from_args(_args(etcd_cafile=str(tmp_path / "missing.crt")), "etcds://h:1")


def test_files_that_are_not_pem_are_refused_before_anything_starts(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    with pytest.raises(ValueError, match=r"--etcd-cafile .*junk.pem: not a PEM CA certificate"):
        etcd_tls_from_args(_args(etcd_cafile=str(junk)), "etcds://h:1")
    with pytest.raises(ValueError, match="not a PEM certificate and its key"):
        etcd_tls_from_args(_args(etcd_certfile=str(junk), etcd_keyfile=str(junk)), "etcds://h:1")


def test_etcds_endpoints_are_https_and_the_schemes_do_not_mix() -> None:
    assert _endpoint_url("127.0.0.1:2379", secure=True) == "https://127.0.0.1:2379"
    assert _endpoint_url("https://127.0.0.1:2379/", secure=True) == "https://127.0.0.1:2379"
    assert _endpoint_url("127.0.0.1:2379") == "http://127.0.0.1:2379"
    with pytest.raises(ValueError, match="needs TLS settings"):
        _endpoint_url("https://127.0.0.1:2379")
    with pytest.raises(ValueError, match="plain http endpoint"):
        _endpoint_url("http://127.0.0.1:2379", secure=True)
    assert not EtcdTLS().given
