"""Where a Flink job keeps its checkpoints and savepoints, read from its ``flinkConfiguration`` (pure).

Keys read (Flink's names; flat ``a.b: v`` or nested YAML ``a: {b: v}``)::

    execution.checkpointing.dir            the checkpoint directory (preferred)
    state.checkpoints.dir                  the same, older name
    execution.checkpointing.savepoint-dir  the default savepoint directory (preferred)
    state.savepoints.dir                   the same, older name
    s3.endpoint                            S3-compatible endpoint URL (MinIO, Ceph...); AWS when unset
    s3.path.style.access                   "true": path-style bucket addressing
    s3.access-key, s3.secret-key           credentials (a Secret's data given as ``secret`` wins)

A directory is a URI (``s3://bucket/prefix``, ``file:///data/ck``; Flink's ``s3a://`` and ``s3p://`` are S3
too) or an absolute path (a local file system). The result is a :class:`StorageConfig` with fsspec storage
options; :meth:`StorageConfig.describe` is what logs and Events may show: it never holds a credential.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "CHECKPOINT_DIR_KEYS", "SAVEPOINT_DIR_KEYS", "S3_SCHEMES", "StorageConfig", "StorageConfigError",
    "conf_value", "fsspec_protocol", "split_uri", "storage_config",
]

CHECKPOINT_DIR_KEYS = ("execution.checkpointing.dir", "state.checkpoints.dir")
SAVEPOINT_DIR_KEYS = ("execution.checkpointing.savepoint-dir", "state.savepoints.dir")
KEY_ENDPOINT = "s3.endpoint"
KEY_PATH_STYLE = "s3.path.style.access"
KEY_ACCESS = "s3.access-key"
KEY_SECRET = "s3.secret-key"
S3_SCHEMES = frozenset({"s3", "s3a", "s3p", "s3n"})
_URI_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$")
# botocore settings: fail fast so a caller's timeout means "unreachable", not a long retry loop
_S3_CONFIG_KWARGS = {"connect_timeout": 3, "read_timeout": 10, "retries": {"max_attempts": 1}}


class StorageConfigError(ValueError):
    """The configuration cannot be used; the message names the key to fix and never holds a credential."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


def conf_value(conf: Any, key: str) -> Any:
    """A Flink option from spec.flinkConfiguration: flat (``a.b.c: v``) or nested YAML (``a: {b: {c: v}}``);
    None when unset (or when ``key`` names a whole section)."""
    if not isinstance(conf, Mapping):
        return None
    if key in conf:
        return conf[key]
    node: Any = conf
    parts = key.split(".")
    for i, part in enumerate(parts):
        if not isinstance(node, Mapping):
            return None
        rest = ".".join(parts[i:])
        if rest in node and not isinstance(node[rest], Mapping):
            return node[rest]
        node = node.get(part)
    return node if not isinstance(node, Mapping) else None


def split_uri(uri: str) -> tuple[str, str]:
    """``(scheme, path)`` of a directory URI or plain path (scheme ``file`` for a path)."""
    m = _URI_RE.match(uri)
    if not m:
        return "file", uri
    scheme, rest = m.group(1).lower(), m.group(2)
    if scheme == "file" and not rest.startswith("/"):
        rest = "/" + rest.split("/", 1)[1] if "/" in rest else ""  # file://host/path -> /path
    return scheme, rest


def fsspec_protocol(scheme: str) -> str:
    """The fsspec protocol that serves one of Flink's URI schemes."""
    scheme = scheme.lower()
    return "s3" if scheme in S3_SCHEMES else scheme


def _protocol_available(protocol: str) -> bool:
    import fsspec

    try:
        fsspec.get_filesystem_class(protocol)
    except (ImportError, ValueError):
        return False
    return True


def _directory(key: str, value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise StorageConfigError(key, f"must be a URI or an absolute path, got a {type(value).__name__}")
    uri = value.strip()
    m = _URI_RE.match(uri)
    if not m:
        if not uri.startswith("/"):
            raise StorageConfigError(key, f"{uri!r} is neither a URI (scheme://...) nor an absolute path")
        return uri.rstrip("/") or "/"
    scheme, rest = split_uri(uri)
    protocol = fsspec_protocol(scheme)
    if not _protocol_available(protocol):
        raise StorageConfigError(key, f"no file system is installed for the scheme {scheme!r} "
                                      "(supported: file, s3/s3a/s3p, and the ones fsspec has installed)")
    if protocol == "s3":
        bucket = rest.split("/", 1)[0]
        if not bucket:
            raise StorageConfigError(key, f"{uri!r} names no bucket (s3://<bucket>/<prefix>)")
    elif protocol == "file" and not rest.startswith("/"):
        raise StorageConfigError(key, f"{uri!r} is not an absolute file:// URI")
    return uri.rstrip("/")


def _flag(key: str, value: Any) -> bool | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise StorageConfigError(key, "must be true or false")


def _text(key: str, value: Any, *, secret: bool = False) -> str | None:
    if value is None:
        return None
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise StorageConfigError(key, "must be a string")  # the value itself is never repeated
    text = str(value).strip()
    return text or None


@dataclass(frozen=True)
class StorageConfig:
    """Where one job's checkpoints and savepoints are, and the fsspec options to reach them."""

    checkpoint_dir: str | None
    savepoint_dir: str | None
    storage_options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def describe(self) -> str:
        """Safe for logs and Events: the directories and the endpoint, never a credential."""
        parts = [f"checkpoints={self.checkpoint_dir or '-'}", f"savepoints={self.savepoint_dir or '-'}"]
        client = self.storage_options.get("client_kwargs")
        endpoint = client.get("endpoint_url") if isinstance(client, Mapping) else None
        endpoint = endpoint or self.storage_options.get("endpoint_url")
        if endpoint:
            parts.append(f"endpoint={endpoint}")
        if any(k in self.storage_options for k in ("key", "secret")):
            parts.append("credentials=given")
        return " ".join(parts)

    def __repr__(self) -> str:  # never print the storage options (they hold credentials)
        return f"StorageConfig({self.describe()})"

    def options_for(self, uri: str) -> dict[str, Any]:
        """The fsspec options for the file system of ``uri`` (S3 options only for S3 URIs)."""
        scheme, _ = split_uri(uri)
        return dict(self.storage_options) if fsspec_protocol(scheme) == "s3" else {}


def storage_config(flink_configuration: Mapping[str, Any] | None, secret: Mapping[str, str] | None = None,
                   *, default_checkpoint_dir: str | None = None) -> StorageConfig:
    """The storage a job with this ``flinkConfiguration`` uses. ``secret`` (a Secret's decoded data) may give
    ``s3.access-key`` / ``s3.secret-key``; it wins over the configuration. Raises :class:`StorageConfigError`."""
    conf = flink_configuration if isinstance(flink_configuration, Mapping) else {}
    checkpoint_dir = savepoint_dir = None
    for key in CHECKPOINT_DIR_KEYS:
        if (checkpoint_dir := _directory(key, conf_value(conf, key))) is not None:
            break
    if checkpoint_dir is None and default_checkpoint_dir:
        checkpoint_dir = _directory("default checkpoint directory", default_checkpoint_dir)
    for key in SAVEPOINT_DIR_KEYS:
        if (savepoint_dir := _directory(key, conf_value(conf, key))) is not None:
            break
    options: dict[str, Any] = {}
    uses_s3 = any(d and fsspec_protocol(split_uri(d)[0]) == "s3" for d in (checkpoint_dir, savepoint_dir))
    endpoint = _text(KEY_ENDPOINT, conf_value(conf, KEY_ENDPOINT))
    path_style = _flag(KEY_PATH_STYLE, conf_value(conf, KEY_PATH_STYLE))
    access = _text(KEY_ACCESS, conf_value(conf, KEY_ACCESS), secret=True)
    secret_key = _text(KEY_SECRET, conf_value(conf, KEY_SECRET), secret=True)
    if isinstance(secret, Mapping):
        access = _text(f"secret {KEY_ACCESS}", secret.get(KEY_ACCESS), secret=True) or access
        secret_key = _text(f"secret {KEY_SECRET}", secret.get(KEY_SECRET), secret=True) or secret_key
    if endpoint is not None:
        if not _URI_RE.match(endpoint):
            endpoint = "https://" + endpoint  # Flink accepts a bare host[:port]
        if split_uri(endpoint)[0] not in ("http", "https"):
            raise StorageConfigError(KEY_ENDPOINT, f"{endpoint!r} is not an http(s) URL")
    if uses_s3 or endpoint or access or secret_key:
        config_kwargs: dict[str, Any] = dict(_S3_CONFIG_KWARGS)
        if path_style:
            config_kwargs["s3"] = {"addressing_style": "path"}
        options["config_kwargs"] = config_kwargs
        options.update({k: v for k, v in (("endpoint_url", endpoint), ("key", access), ("secret", secret_key)) if v})
        if (access is None) != (secret_key is None):
            raise StorageConfigError(KEY_SECRET if access else KEY_ACCESS,
                                     f"{KEY_ACCESS} and {KEY_SECRET} must be given together")
    return StorageConfig(checkpoint_dir, savepoint_dir, MappingProxyType(options))
