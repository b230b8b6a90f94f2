"""``flotilla up --secure``: the control plane's admin and read-only tokens, made once and kept."""

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


def test_the_up_record_remembers_secure_mode() -> None:
    record = StackRecord(api_port=6443, secure=True)
    again = StackRecord.from_json(record.to_json(), Path("/d/flotilla-up.json"))
    assert again.secure is True
    assert StackRecord.from_json(StackRecord(api_port=1).to_json(), Path("/d/x")).secure is False


async def test_a_data_dir_made_without_secure_is_not_resumed_with_it(tmp_path: Path) -> None:
    Layout(tmp_path).root.mkdir(parents=True, exist_ok=True)
    Layout(tmp_path).save_record(StackRecord(api_port=6443, secure=False))
    stack = LocalStack(StackConfig(data_dir=tmp_path, secure=True, tune_gc=False, metrics_address=None))
    with pytest.raises(DataDirError, match="was created without --secure and cannot be resumed with it"):
        await stack.start()
