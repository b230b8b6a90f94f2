"""File helpers shared by the server and the client.

Flotilla's data (stores, kubeconfigs, tokens, keys, logs, the members' data) is private to the user running it:
files are created 0600 in directories created 0700 (:data:`PRIVATE_FILE`, :data:`PRIVATE_DIR`), and
:func:`make_private_tree` corrects a data directory made by an older version (or copied with a wider mode).
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
from pathlib import Path
from typing import Final

log = logging.getLogger(__name__)

__all__ = [
    "PRIVATE_DIR", "PRIVATE_FILE", "atomic_write", "create_exclusive", "make_private", "make_private_tree", "private_dir",
]

PRIVATE_FILE: Final = 0o600
PRIVATE_DIR: Final = 0o700


def private_dir(path: str | os.PathLike[str]) -> Path:
    """``mkdir -p`` with every directory it creates 0700; an existing ``path`` itself is narrowed to 0700."""
    path = Path(path)
    missing: list[Path] = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:
            pass
        os.chmod(d, PRIVATE_DIR)  # mkdir's mode is filtered by the umask; 0700 is never wider than it
    make_private(path)
    return path


def make_private(path: str | os.PathLike[str]) -> bool:
    """Take group's and others' access away from an existing file (0644 -> 0600) or directory (-> 0700); True if
    it changed anything.

    Symbolic links are left alone (neither the link nor what it points to), as is a file of another user."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid():
        return False
    mode = stat.S_IMODE(st.st_mode)
    if not mode & 0o077:
        return False
    os.chmod(path, PRIVATE_DIR if stat.S_ISDIR(st.st_mode) else mode & 0o700)
    return True


def make_private_tree(root: str | os.PathLike[str]) -> int:
    """:func:`make_private` on ``root`` and everything under it (symbolic links not followed); how many changed."""
    root = Path(root)
    if not root.is_dir():
        return 0
    changed = int(make_private(root))
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in (*dirnames, *filenames):
            try:
                changed += make_private(os.path.join(dirpath, name))
            except OSError as e:  # vanished meanwhile, or not ours to change: said, not fatal
                log.warning("cannot narrow the mode of %s: %s", os.path.join(dirpath, name), e)
    if changed:
        log.info("%s: narrowed the mode of %d files and directories to the owner only", root, changed)
    return changed


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _synced_temp_file(path: Path, data: bytes, mode: int) -> str:
    """A new file beside ``path`` (created 0700 if missing) holding ``data`` with ``mode``, synced to disk: its
    name, for the caller to rename or link into place."""
    if not path.parent.exists():
        private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        _remove(tmp)
        raise
    return tmp


def atomic_write(path: Path, data: bytes, mode: int = PRIVATE_FILE) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same directory, fsync, rename) with ``mode``;
    a missing parent directory is created 0700."""
    path = Path(path)
    tmp = _synced_temp_file(path, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


def create_exclusive(path: Path, data: bytes, mode: int = PRIVATE_FILE) -> bool:
    """Create ``path`` holding ``data`` with ``mode`` unless it exists, atomically (no reader ever sees it half
    written); True if this call created it. A missing parent directory is created 0700."""
    path = Path(path)
    tmp = _synced_temp_file(path, data, mode)
    try:
        try:
            os.link(tmp, path)  # fails if path exists
        except FileExistsError:
            return False
        except OSError:  # a filesystem without hard links
            if path.exists():
                return False
            os.replace(tmp, path)
        return True
    finally:
        _remove(tmp)
