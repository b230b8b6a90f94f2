"""``--etcd-cafile``, ``--etcd-certfile``, ``--etcd-keyfile`` (kube-apiserver's names) for commands whose
``--storage`` may be an ``etcds://`` URL (etcd over TLS)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flotilla.storage.etcd import EtcdTLS

__all__ = ["add_etcd_tls_arguments", "etcd_tls_from_args"]


def add_etcd_tls_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--etcd-cafile", default=None, metavar="FILE",
                        help="with --storage etcds://: the CA that signed etcd's serving certificate (PEM; "
                             "default: the system's CAs)")
    parser.add_argument("--etcd-certfile", default=None, metavar="FILE",
                        help="with --storage etcds://: the client certificate (PEM) for an etcd that checks "
                             "client certificates (--client-cert-auth)")
    parser.add_argument("--etcd-keyfile", default=None, metavar="FILE",
                        help="with --storage etcds://: the key of --etcd-certfile (PEM)")


def etcd_tls_from_args(args: argparse.Namespace, storage_url: str) -> EtcdTLS | None:
    """The TLS settings for ``storage_url`` from the flags (None: not an ``etcds://`` URL and no flag given).
    ValueError saying what to change: a file missing, a certificate without its key, flags without etcds://."""
    from flotilla.storage.etcd import EtcdTLS

    cafile, certfile, keyfile = args.etcd_cafile, args.etcd_certfile, args.etcd_keyfile
    if not storage_url.startswith("etcds://"):
        if cafile or certfile or keyfile:
            raise ValueError(f"--etcd-cafile, --etcd-certfile and --etcd-keyfile are for etcd over TLS: use "
                             f"--storage etcds://host:port instead of {storage_url!r}")
        return None
    tls = EtcdTLS(cafile, certfile, keyfile)
    tls.ssl_context()  # files that are not PEM fail here, as a usage error, not once the server starts
    return tls
