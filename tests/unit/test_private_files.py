"""Data files are the owner's: created 0600 in 0700 directories, and a wider tree is narrowed on start."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from flotilla.files import atomic_write, create_exclusive, make_private, make_private_tree, private_dir


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_private_dir_creates_every_missing_level_0700_and_narrows_an_existing_one(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        made = private_dir(tmp_path / "a" / "b" / "c")
        assert [mode(p) for p in (tmp_path / "a", tmp_path / "a" / "b", made)] == [0o700] * 3
        wide = tmp_path / "wide"
        wide.mkdir(mode=0o755)
        private_dir(wide)
        assert mode(wide) == 0o700
    finally:
        os.umask(old)


def test_atomic_write_is_0600_by_default(tmp_path: Path) -> None:
    atomic_write(tmp_path / "new" / "f.json", b"{}")
    assert mode(tmp_path / "new" / "f.json") == 0o600 and mode(tmp_path / "new") == 0o700


def test_create_exclusive_creates_once_and_never_replaces(tmp_path: Path) -> None:
    path = tmp_path / "new" / "tokens.csv"
    assert create_exclusive(path, b"first")
    assert path.read_bytes() == b"first"
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    assert not create_exclusive(path, b"second", 0o644)
    assert path.read_bytes() == b"first" and mode(path) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["tokens.csv"]  # no temporary file left behind


def test_make_private_tree_narrows_files_and_directories_but_not_what_a_link_points_to(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not ours to change")
    outside.chmod(0o644)
    root = tmp_path / "data"
    (root / "members" / "m1").mkdir(parents=True)
    for d in (root, root / "members", root / "members" / "m1"):
        d.chmod(0o755)
    (root / "members" / "m1" / "flotilla.db").write_bytes(b"x")
    (root / "members" / "m1" / "flotilla.db").chmod(0o644)
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "already").write_text("")
    (root / "already").chmod(0o600)
    (root / "link").symlink_to(outside)

    assert make_private_tree(root) == 5  # three directories, the database, the script
    assert mode(root) == mode(root / "members") == mode(root / "members" / "m1") == 0o700
    assert mode(root / "members" / "m1" / "flotilla.db") == 0o600
    assert mode(root / "run.sh") == 0o700  # the owner keeps what it had
    assert mode(root / "already") == 0o600
    assert mode(outside) == 0o644  # a symbolic link is not followed
    assert make_private_tree(root) == 0  # idempotent
    assert make_private(tmp_path / "missing") is False
