"""Reading and writing kubeconfig files.

Writing produces files that kubectl, client-go and the official Python client accept (embedded
``certificate-authority-data`` / ``client-certificate-data`` / ``client-key-data``, base64 of the PEM).
Files are written 0600 and atomically (temporary file + rename).

Reading resolves one context into :class:`ClusterCredentials` for Flotilla's own async client. Supported user
credentials: ``token``, ``tokenFile``, ``client-certificate(-data)`` + ``client-key(-data)``, and ``exec``
credential plugins (:mod:`flotilla.client.exec_credential`; the HTTP transport runs them); cluster trust:
``certificate-authority(-data)``, ``insecure-skip-tls-verify``, ``tls-server-name``. Relative file references
are resolved against the kubeconfig's directory, as kubectl does. ``auth-provider`` (removed from kubectl in 1.26)
raises :class:`KubeconfigError` naming the exec plugin that replaces it.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from flotilla.client.exec_credential import EXEC_CLUSTER_EXTENSION, ClusterInfo, ExecConfig, ExecConfigError
from flotilla.files import atomic_write

__all__ = [
    "ClusterCredentials",
    "KubeconfigEntry",
    "KubeconfigError",
    "SERVERS_EXTENSION",
    "default_kubeconfig_path",
    "load_kubeconfig",
    "merge_contexts",
    "write_kubeconfig",
]


class KubeconfigError(ValueError):
    """The kubeconfig is missing, malformed, or uses an unsupported feature."""


# ============================================================================================ writing


#: the kubeconfig cluster extension that lists every API server of a control plane (HA: several replicas)
SERVERS_EXTENSION = "servers.flotilla.io"


@dataclass(frozen=True)
class KubeconfigEntry:
    """One context (with its cluster and user) to put into a kubeconfig.

    ``cluster`` and ``user`` default to the context name. PEM values are bytes (or str).
    """

    context: str
    server: str
    cluster: str | None = None
    user: str | None = None
    token: str | None = None
    ca_pem: bytes | str | None = None
    client_cert_pem: bytes | str | None = None
    client_key_pem: bytes | str | None = None
    namespace: str | None = "default"
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    #: other API servers of the same control plane (replicas), tried in turn when ``server`` cannot be reached;
    #: kept in the cluster's ``extensions`` (``servers.flotilla.io``), which kubectl ignores
    fallback_servers: tuple[str, ...] = ()

    @property
    def cluster_name(self) -> str:
        return self.cluster or self.context

    @property
    def user_name(self) -> str:
        return self.user or self.context

    def validate(self) -> None:
        if not self.context:
            raise KubeconfigError("context name must not be empty")
        if not self.server:
            raise KubeconfigError(f"context {self.context!r}: server must not be empty")
        if self.ca_pem and self.insecure_skip_tls_verify:
            # kubectl refuses a cluster with both set.
            raise KubeconfigError(
                f"context {self.context!r}: certificate-authority-data and insecure-skip-tls-verify are exclusive"
            )
        if bool(self.client_cert_pem) != bool(self.client_key_pem):
            raise KubeconfigError(
                f"context {self.context!r}: client certificate and key must be given together"
            )

    def cluster_dict(self) -> dict[str, Any]:
        c: dict[str, Any] = {"server": self.server}
        if self.ca_pem:
            c["certificate-authority-data"] = _b64(self.ca_pem)
        if self.insecure_skip_tls_verify:
            c["insecure-skip-tls-verify"] = True
        if self.tls_server_name:
            c["tls-server-name"] = self.tls_server_name
        if self.fallback_servers:
            c["extensions"] = [{"name": SERVERS_EXTENSION,
                                "extension": {"servers": [self.server, *self.fallback_servers]}}]
        return c

    def user_dict(self) -> dict[str, Any]:
        u: dict[str, Any] = {}
        if self.token:
            u["token"] = self.token
        if self.client_cert_pem and self.client_key_pem:
            u["client-certificate-data"] = _b64(self.client_cert_pem)
            u["client-key-data"] = _b64(self.client_key_pem)
        return u

    def context_dict(self) -> dict[str, Any]:
        c: dict[str, Any] = {"cluster": self.cluster_name, "user": self.user_name}
        if self.namespace:
            c["namespace"] = self.namespace
        return c


def _b64(data: bytes | str) -> str:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return base64.b64encode(raw).decode("ascii")


def _dump(config: Mapping[str, Any]) -> bytes:
    return yaml.safe_dump(dict(config), sort_keys=False, default_flow_style=False).encode("utf-8")


def _empty_config() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [],
        "users": [],
        "contexts": [],
        "current-context": "",
    }


def _upsert(items: list[Any], name: str, key: str, value: dict[str, Any]) -> None:
    entry = {"name": name, key: value}
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("name") == name:
            items[i] = entry
            return
    items.append(entry)


def _build(config: dict[str, Any], entries: Iterable[KubeconfigEntry]) -> list[str]:
    names: list[str] = []
    for e in entries:
        e.validate()
        _upsert(config["clusters"], e.cluster_name, "cluster", e.cluster_dict())
        _upsert(config["users"], e.user_name, "user", e.user_dict())
        _upsert(config["contexts"], e.context, "context", e.context_dict())
        names.append(e.context)
    return names


def _fallback_servers(cluster: Mapping[str, Any], server: str, name: str, kpath: Any) -> tuple[str, ...]:
    """The other servers listed in the cluster's ``servers.flotilla.io`` extension (``server`` itself excluded)."""
    for ext in cluster.get("extensions") or []:
        if not isinstance(ext, Mapping) or ext.get("name") != SERVERS_EXTENSION:
            continue
        body = ext.get("extension")
        servers = body.get("servers") if isinstance(body, Mapping) else None
        if not isinstance(servers, list) or not all(isinstance(x, str) and x for x in servers):
            raise KubeconfigError(f"{kpath}: cluster {name!r}: extension {SERVERS_EXTENSION} needs "
                                  f"'servers: [URL, ...]'")
        main = server.rstrip("/")
        out: list[str] = []
        for url in servers:
            url = url.rstrip("/")
            if url != main and url not in out:
                out.append(url)
        return tuple(out)
    return ()


def write_kubeconfig(
    path: str | os.PathLike[str],
    *,
    server: str,
    context: str = "flotilla",
    cluster: str | None = None,
    user: str | None = None,
    token: str | None = None,
    ca_pem: bytes | str | None = None,
    client_cert_pem: bytes | str | None = None,
    client_key_pem: bytes | str | None = None,
    namespace: str | None = "default",
    insecure_skip_tls_verify: bool = False,
    tls_server_name: str | None = None,
    fallback_servers: tuple[str, ...] = (),
) -> Path:
    """Write (replacing any existing file) a kubeconfig with one context, which becomes current."""
    entry = KubeconfigEntry(
        context=context,
        server=server,
        cluster=cluster,
        user=user,
        token=token,
        ca_pem=ca_pem,
        client_cert_pem=client_cert_pem,
        client_key_pem=client_key_pem,
        namespace=namespace,
        insecure_skip_tls_verify=insecure_skip_tls_verify,
        tls_server_name=tls_server_name,
        fallback_servers=tuple(fallback_servers),
    )
    config = _empty_config()
    _build(config, [entry])
    config["current-context"] = context
    out = Path(path)
    atomic_write(out, _dump(config), 0o600)
    return out


def merge_contexts(
    path: str | os.PathLike[str],
    entries: Iterable[KubeconfigEntry],
    *,
    current_context: str | None = None,
    replace: bool = False,
) -> Path:
    """Write several contexts into ONE kubeconfig.

    Clusters, users and contexts are upserted by name into the existing file (unless ``replace``), so other
    entries survive. ``current-context`` becomes ``current_context`` if given; otherwise it keeps a still-valid
    existing value, or else the first of ``entries``.
    """
    out = Path(path)
    config = _empty_config()
    if not replace and out.exists():
        loaded = _read_yaml(out)
        for key in ("clusters", "users", "contexts"):
            value = loaded.get(key)
            if value is not None and not isinstance(value, list):
                raise KubeconfigError(f"{out}: {key} must be a list")
        config.update({k: v for k, v in loaded.items() if v is not None})
        for key in ("clusters", "users", "contexts"):
            config[key] = list(config.get(key) or [])
    names = _build(config, entries)
    known = {c.get("name") for c in config["contexts"] if isinstance(c, dict)}
    if current_context is not None:
        if current_context not in known:
            raise KubeconfigError(f"current context {current_context!r} is not among the contexts")
        config["current-context"] = current_context
    elif config.get("current-context") not in known:
        config["current-context"] = names[0] if names else ""
    atomic_write(out, _dump(config), 0o600)
    return out


# ============================================================================================ reading


@dataclass(frozen=True)
class ClusterCredentials:
    """Everything needed to talk to one cluster, resolved from a kubeconfig context."""

    server: str
    token: str | None = None
    ca_pem: bytes | None = None
    client_cert_pem: bytes | None = None
    client_key_pem: bytes | None = None
    insecure: bool = False
    namespace: str = "default"
    tls_server_name: str | None = None
    context: str = ""
    token_file: Path | None = None
    #: the control plane's other API servers (the ``servers.flotilla.io`` extension of the kubeconfig's cluster)
    fallback_servers: tuple[str, ...] = ()
    #: an exec credential plugin (the user's ``exec`` stanza); the transport runs it for a token or certificate
    exec: ExecConfig | None = None

    @property
    def is_https(self) -> bool:
        return self.server.lower().startswith("https://")

    @property
    def has_credentials(self) -> bool:
        """Does the user present anything: a token, a token file, a client certificate or an exec plugin?"""
        return bool(self.token or self.token_file is not None or self.client_cert_pem or self.exec is not None)

    def cluster_info(self) -> ClusterInfo:
        """What an exec plugin with ``provideClusterInfo`` is told about the cluster."""
        return ClusterInfo(server=self.server, ca_pem=self.ca_pem, insecure=self.insecure,
                           tls_server_name=self.tls_server_name,
                           config=self.exec.cluster_config if self.exec is not None else None)

    def auth_headers(self) -> dict[str, str]:
        """``Authorization`` header for the bearer token (re-reading ``tokenFile`` if there is one).

        Note: kubectl sends no credentials at all over plain http; this helper does not second-guess that and
        returns the header regardless of scheme.
        """
        token = self.token
        if self.token_file is not None:
            try:
                token = self.token_file.read_text(encoding="utf-8").strip() or token
            except OSError:
                pass
        return {"Authorization": f"Bearer {token}"} if token else {}

    def ssl_context(self) -> ssl.SSLContext | None:
        """Client TLS context (CA trust, optional client certificate); None for http servers.

        With ``tls_server_name`` set, pass ``server_hostname=creds.tls_server_name`` to aiohttp requests.
        """
        if not self.is_https:
            return None
        if self.insecure:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif self.ca_pem:
            ctx = ssl.create_default_context(cadata=self.ca_pem.decode("ascii", errors="strict"))
        else:
            ctx = ssl.create_default_context()
        ctx.set_alpn_protocols(["http/1.1"])
        if self.client_cert_pem and self.client_key_pem:
            _load_cert_chain_from_memory(ctx, self.client_cert_pem, self.client_key_pem)
        return ctx


def _load_cert_chain_from_memory(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    # ssl only loads certificate chains from files: use a private temporary directory, removed at once.
    with tempfile.TemporaryDirectory(prefix="flotilla-tls-") as d:
        cert_path = Path(d) / "client.crt"
        key_path = Path(d) / "client.key"
        for p, data in ((cert_path, cert_pem), (key_path, key_pem)):
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        ctx.load_cert_chain(str(cert_path), str(key_path))


def default_kubeconfig_path() -> Path:
    """The first entry of ``$KUBECONFIG`` if set, else ``~/.kube/config`` (no multi-file merging)."""
    env = os.environ.get("KUBECONFIG", "")
    for part in env.split(os.pathsep):
        if part:
            return Path(part).expanduser()
    return Path.home() / ".kube" / "config"


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise KubeconfigError(f"cannot read kubeconfig {path}: {e}") from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise KubeconfigError(f"{path}: invalid YAML: {e}") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise KubeconfigError(f"{path}: kubeconfig must be a mapping")
    return data


def _named(config: Mapping[str, Any], list_key: str, item_key: str, name: str, path: Path) -> dict[str, Any]:
    for item in config.get(list_key) or []:
        if isinstance(item, dict) and item.get("name") == name:
            value = item.get(item_key) or {}
            if not isinstance(value, dict):
                raise KubeconfigError(f"{path}: {list_key} entry {name!r} is malformed")
            return value
    raise KubeconfigError(f"{path}: no {item_key} named {name!r}")


def _decode_data(value: Any, what: str, path: Path) -> bytes:
    if not isinstance(value, str):
        raise KubeconfigError(f"{path}: {what} must be a base64 string")
    try:
        return base64.b64decode("".join(value.split()), validate=True)
    except (binascii.Error, ValueError) as e:
        raise KubeconfigError(f"{path}: {what} is not valid base64") from e


def _read_ref(value: Any, what: str, base: Path, path: Path) -> tuple[bytes, Path]:
    if not isinstance(value, str) or not value:
        raise KubeconfigError(f"{path}: {what} must be a file path")
    ref = Path(value).expanduser()
    if not ref.is_absolute():
        ref = base / ref
    try:
        return ref.read_bytes(), ref
    except OSError as e:
        raise KubeconfigError(f"{path}: cannot read {what} {ref}: {e}") from e


def _data_or_file(section: Mapping[str, Any], key: str, base: Path, path: Path) -> bytes | None:
    if section.get(f"{key}-data"):
        return _decode_data(section[f"{key}-data"], f"{key}-data", path)
    if section.get(key):
        return _read_ref(section[key], key, base, path)[0]
    return None


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1", "on")
    return bool(value)


def load_kubeconfig(
    path: str | os.PathLike[str] | None = None, context: str | None = None
) -> ClusterCredentials:
    """Resolve ``context`` (default: ``current-context``) of the kubeconfig at ``path`` (default:
    :func:`default_kubeconfig_path`).

    If both ``token`` and ``tokenFile`` are set, the file's content wins (client-go semantics); ``token_file`` is
    kept so long-running clients can re-read it.
    """
    kpath = Path(path).expanduser() if path is not None else default_kubeconfig_path()
    config = _read_yaml(kpath)
    base = kpath.resolve().parent

    ctx_name = context or config.get("current-context") or ""
    if not ctx_name:
        raise KubeconfigError(f"{kpath}: no context given and current-context is not set")
    ctx = _named(config, "contexts", "context", ctx_name, kpath)
    cluster_name = ctx.get("cluster")
    if not cluster_name:
        raise KubeconfigError(f"{kpath}: context {ctx_name!r} has no cluster")
    cluster = _named(config, "clusters", "cluster", cluster_name, kpath)
    user_name = ctx.get("user")
    user: dict[str, Any] = _named(config, "users", "user", user_name, kpath) if user_name else {}

    server = cluster.get("server")
    if not server or not isinstance(server, str):
        raise KubeconfigError(f"{kpath}: cluster {cluster_name!r} has no server")
    insecure = _truthy(cluster.get("insecure-skip-tls-verify", False))
    ca_pem = _data_or_file(cluster, "certificate-authority", base, kpath)
    if insecure and ca_pem:
        raise KubeconfigError(
            f"{kpath}: cluster {cluster_name!r}: certificate-authority and insecure-skip-tls-verify are exclusive"
        )

    provider = user.get("auth-provider")
    if provider:
        pname = provider.get("name") if isinstance(provider, dict) else None
        instead = _AUTH_PROVIDER_PLUGINS.get(str(pname), "the exec credential plugin of your provider")
        raise KubeconfigError(f"{kpath}: user {user_name!r}: auth-provider {pname!r} is not supported (kubectl "
                              f"dropped auth-provider plugins in 1.26): use {instead} in an 'exec' stanza")
    exec_config: ExecConfig | None = None
    if user.get("exec"):
        try:
            exec_config = ExecConfig.from_kubeconfig(user["exec"], base=base, where=f"user {user_name!r}: exec",
                                                     cluster_config=_exec_cluster_config(cluster))
        except ExecConfigError as e:
            raise KubeconfigError(f"{kpath}: {e}") from None

    token = user.get("token") or None
    if token is not None and not isinstance(token, str):
        raise KubeconfigError(f"{kpath}: user {user_name!r}: token must be a string")
    token_file: Path | None = None
    if user.get("tokenFile"):
        data, token_file = _read_ref(user["tokenFile"], "tokenFile", base, kpath)
        token = data.decode("utf-8").strip() or token

    client_cert = _data_or_file(user, "client-certificate", base, kpath)
    client_key = _data_or_file(user, "client-key", base, kpath)
    if bool(client_cert) != bool(client_key):
        raise KubeconfigError(
            f"{kpath}: user {user_name!r}: client certificate and key must be given together"
        )

    tls_server_name = cluster.get("tls-server-name") or None
    fallbacks = _fallback_servers(cluster, server, cluster_name, kpath)
    return ClusterCredentials(
        server=server.rstrip("/"),
        fallback_servers=fallbacks,
        token=token,
        ca_pem=ca_pem,
        client_cert_pem=client_cert,
        client_key_pem=client_key,
        insecure=insecure,
        namespace=str(ctx.get("namespace") or "default"),
        tls_server_name=str(tls_server_name) if tls_server_name else None,
        context=ctx_name,
        token_file=token_file,
        exec=exec_config,
    )


#: the exec plugins that replace kubectl's removed auth-provider plugins
_AUTH_PROVIDER_PLUGINS = {
    "gcp": "gke-gcloud-auth-plugin (gcloud components install gke-gcloud-auth-plugin; then gcloud container "
           "clusters get-credentials writes the stanza)",
    "azure": "kubelogin (kubelogin convert-kubeconfig writes the stanza)",
    "oidc": "an OIDC exec plugin such as kubelogin (kubectl oidc-login)",
}


def _exec_cluster_config(cluster: Mapping[str, Any]) -> Any:
    for ext in cluster.get("extensions") or []:
        if isinstance(ext, Mapping) and ext.get("name") == EXEC_CLUSTER_EXTENSION:
            return ext.get("extension")
    return None
