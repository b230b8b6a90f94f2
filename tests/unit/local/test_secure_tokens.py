"""``flotilla up`` (secure by default): the control plane's admin and read-only tokens, made once and kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from flotilla.apiserver.auth import parse_token_file
from flotilla.local.layout import DataDirError, Layout, StackRecord
from flotilla.local.secure import VIEWER_GROUP, ensure_tokens
from flotilla.local.stack import LocalStack, StackConfig


def test_tokens_are_an_admin_and_a_viewer_made_once_and_kept(tmp_path: Path) -> None:
    admin, viewer = ensure_tokens(tmp_path)
    assert admin != viewer
    assert ensure_tokens(tmp_path) == (admin, viewer)  # a restart keeps both
    users = parse_token_file((tmp_path / "tokens.csv").read_text(), "tokens.csv")
    assert users[viewer].name == "viewer" and list(users[viewer].groups) == [VIEWER_GROUP]
    assert "system:masters" in users[admin].groups
    assert (tmp_path / "tokens.csv").stat().st_mode & 0o077 == 0


def test_a_token_file_without_an_admin_is_refused_with_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "tokens.csv").write_text("sometoken,bob,1\n")
    with pytest.raises(ValueError, match="has no admin user"):
        ensure_tokens(tmp_path)


@pytest.mark.parametrize("secure", [True, False])
def test_the_up_record_remembers_its_mode(secure: bool) -> None:
    again = StackRecord.from_json(StackRecord(api_port=6443, secure=secure).to_json(), Path("/d/flotilla-up.json"))
    assert again.secure is secure


def test_a_record_of_a_version_without_the_mode_reads_as_insecure() -> None:
    assert StackRecord.from_json(b'{"format": 1, "apiPort": 1}', Path("/d/x")).secure is False
    assert StackRecord().secure is True  # a new data directory is secure


async def test_a_data_dir_made_insecure_is_not_resumed_secure(tmp_path: Path) -> None:
    Layout(tmp_path).save_record(StackRecord(api_port=6443, secure=False))
    stack = LocalStack(StackConfig(data_dir=tmp_path, tune_gc=False, metrics_address=None))
    with pytest.raises(DataDirError, match="cannot be resumed secure: pass --insecure to resume it as it is"):
        await stack.start()


async def test_a_secure_data_dir_is_not_resumed_insecure(tmp_path: Path) -> None:
    Layout(tmp_path).save_record(StackRecord(api_port=6443, secure=True))
    stack = LocalStack(StackConfig(data_dir=tmp_path, secure=False, tune_gc=False, metrics_address=None))
    with pytest.raises(DataDirError, match="was created secure .* cannot be resumed with --insecure: drop --insecure"):
        await stack.start()
