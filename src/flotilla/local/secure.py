"""``flotilla up`` (secure unless ``--insecure``): the control plane's tokens (an admin and a read-only viewer)
and the kubeconfigs.

The API server reads ``tokens.csv`` when it starts (Kubernetes' ``--token-auth-file`` format); its first start
writes the admin token. ``flotilla up`` adds a read-only user before that start: ``viewer`` in the group
``flotilla:viewers``, which may get, list and watch everything but Secrets (which hold the members' admin tokens)
and nothing else (403 for any write). Both tokens
live only in that file (mode 0600) and in the kubeconfigs written for them (mode 0600): ``D/kubeconfig`` (admin,
plus one context per member) and ``D/viewer.kubeconfig``.
"""

from __future__ import annotations

import secrets
import uuid
from pathlib import Path

from flotilla.apiserver.auth import (
    DEFAULT_VIEWERS_GROUP,
    ensure_token_file,
    format_token_line,
    parse_token_file,
)
from flotilla.files import make_private, private_dir

__all__ = ["VIEWER_GROUP", "VIEWER_USER", "ensure_tokens"]

VIEWER_USER = "viewer"
VIEWER_GROUP = DEFAULT_VIEWERS_GROUP


def ensure_tokens(data_dir: Path) -> tuple[str, str]:
    """(admin token, viewer token) of the control plane in ``data_dir``, creating what is missing."""
    private_dir(data_dir)
    path, admin = ensure_token_file(data_dir)
    if admin is None:
        raise ValueError(f"{path} has no admin user (a member of system:masters): add one or remove the file")
    make_private(path)  # an older version's, or one copied in with a wider mode
    tokens = parse_token_file(path.read_text(encoding="utf-8"), str(path))
    for token, info in tokens.items():
        if info.name == VIEWER_USER and VIEWER_GROUP in info.groups:
            return admin, token
    viewer = secrets.token_urlsafe(32)
    with open(path, "a", encoding="utf-8") as f:
        f.write(format_token_line(viewer, VIEWER_USER, str(uuid.uuid4()), [VIEWER_GROUP]))
    return admin, viewer
