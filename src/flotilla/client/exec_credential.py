"""Exec credential plugins (``users[].user.exec`` of a kubeconfig), as kubectl runs them.

A kubeconfig user may name a command that prints the credential: ``aws eks get-token`` (EKS),
``gke-gcloud-auth-plugin`` (GKE), ``kubelogin`` (AKS, OIDC). The command prints an ``ExecCredential``
(``client.authentication.k8s.io/v1`` or ``v1beta1``) whose ``status`` holds a bearer ``token`` or a
``clientCertificateData``/``clientKeyData`` pair, and optionally an ``expirationTimestamp``.

The decisions are pure functions here: reading the kubeconfig stanza (:meth:`ExecConfig.from_kubeconfig`), the
``KUBERNETES_EXEC_INFO`` the command gets (:func:`exec_info`), reading its output (:func:`parse_exec_credential`)
and when a credential must be fetched again (:meth:`ExecResult.expired`). :class:`ExecCredentialSource` runs the
command (asyncio subprocess, stdin closed) and caches its answer until it expires or the server refuses it (401).

The plugin is never given a terminal: ``interactiveMode: Always`` is refused, ``IfAvailable`` and ``Never`` run
with ``spec.interactive: false``, as kubectl does when its standard input is not a terminal.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flotilla.kube.times import parse_time

__all__ = [
    "EXEC_API_VERSIONS",
    "ClusterInfo",
    "ExecConfig",
    "ExecConfigError",
    "ExecResult",
    "exec_info",
    "parse_exec_credential",
]

#: the ExecCredential versions kubectl still speaks (v1alpha1 was removed in Kubernetes 1.24)
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
#: the cluster extension whose ``extension`` is passed to the plugin as ``spec.cluster.config``
EXEC_CLUSTER_EXTENSION = "client.authentication.k8s.io/exec"
#: how long the plugin may take (``aws eks get-token`` and ``gke-gcloud-auth-plugin`` answer in about a second)
DEFAULT_EXEC_TIMEOUT = 60.0
_OUTPUT_LIMIT = 1 << 20  # bytes of stdout read; a credential is a few KiB


class ExecConfigError(ValueError):
    """The exec stanza is malformed, or the plugin failed or printed something that is not a credential."""


@dataclass(frozen=True)
class ClusterInfo:
    """What ``provideClusterInfo: true`` passes to the plugin (``spec.cluster`` of KUBERNETES_EXEC_INFO)."""

    server: str
    ca_pem: bytes | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    config: Any = None  # the cluster's ``client.authentication.k8s.io/exec`` extension

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"server": self.server}
        if self.tls_server_name:
            out["tls-server-name"] = self.tls_server_name
        if self.insecure:
            out["insecure-skip-tls-verify"] = True
        if self.ca_pem:
            out["certificate-authority-data"] = base64.b64encode(self.ca_pem).decode("ascii")
        out["config"] = self.config  # kubectl sends null without the cluster extension
        return out


@dataclass(frozen=True)
class ExecConfig:
    """A kubeconfig user's ``exec`` stanza (``command`` resolved as kubectl resolves it)."""

    command: str
    api_version: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    interactive_mode: str = "IfAvailable"
    provide_cluster_info: bool = False
    install_hint: str = ""
    #: the cluster's ``client.authentication.k8s.io/exec`` extension (``spec.cluster.config`` for the plugin)
    cluster_config: Any = None

    @classmethod
    def from_kubeconfig(cls, section: Any, *, base: Path | None = None, where: str = "exec",
                        cluster_config: Any = None) -> ExecConfig:
        """Read a kubeconfig ``exec`` stanza; a command with a path separator is resolved against ``base`` (the
        kubeconfig's directory), one without is looked up on ``PATH`` when run. Raises ExecConfigError."""
        if not isinstance(section, Mapping):
            raise ExecConfigError(f"{where} must be a mapping")
        command = section.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ExecConfigError(f"{where}.command must be set (the credential plugin to run)")
        api_version = section.get("apiVersion")
        if api_version not in EXEC_API_VERSIONS:
            raise ExecConfigError(f"{where}.apiVersion {api_version!r} is not supported: use one of "
                                  f"{', '.join(EXEC_API_VERSIONS)}")
        args = section.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ExecConfigError(f"{where}.args must be a list of strings")
        env: list[tuple[str, str]] = []
        for i, item in enumerate(section.get("env") or []):
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item.get("name") \
                    or not isinstance(item.get("value", ""), str):
                raise ExecConfigError(f"{where}.env[{i}] must have a name and a string value")
            env.append((item["name"], item.get("value") or ""))
        mode = section.get("interactiveMode")
        if mode is None or mode == "":
            if api_version.endswith("/v1"):
                raise ExecConfigError(f"{where}.interactiveMode must be set for {api_version} "
                                      f"(one of {', '.join(INTERACTIVE_MODES)})")
            mode = "IfAvailable"
        if mode not in INTERACTIVE_MODES:
            raise ExecConfigError(f"{where}.interactiveMode {mode!r} is not one of {', '.join(INTERACTIVE_MODES)}")
        if mode == "Always":
            raise ExecConfigError(f"{where}.interactiveMode is Always, but the plugin would get no terminal: use "
                                  "a plugin mode that prints a credential without asking (IfAvailable or Never)")
        provide = section.get("provideClusterInfo", False)
        if not isinstance(provide, bool):
            raise ExecConfigError(f"{where}.provideClusterInfo must be true or false")
        hint = section.get("installHint") or ""
        cmd = os.path.expanduser(command.strip())
        if os.sep in cmd and not os.path.isabs(cmd) and base is not None:
            cmd = str(base / cmd)
        return cls(command=cmd, api_version=str(api_version), args=tuple(args), env=tuple(env),
                   interactive_mode=str(mode), provide_cluster_info=provide, install_hint=str(hint),
                   cluster_config=cluster_config)

    # ---------------------------------------------------------------- the stored form (a Secret's data.exec)
    def to_stored(self) -> dict[str, Any]:
        """The stanza in kubeconfig form (command already resolved), for a cluster's credentials Secret."""
        out: dict[str, Any] = {"apiVersion": self.api_version, "command": self.command,
                               "interactiveMode": self.interactive_mode}
        if self.args:
            out["args"] = list(self.args)
        if self.env:
            out["env"] = [{"name": n, "value": v} for n, v in self.env]
        if self.provide_cluster_info:
            out["provideClusterInfo"] = True
        if self.install_hint:
            out["installHint"] = self.install_hint
        if self.cluster_config is not None:
            out["clusterConfig"] = self.cluster_config
        return out

    @classmethod
    def from_stored(cls, data: Any, where: str = "exec") -> ExecConfig:
        if not isinstance(data, Mapping):
            raise ExecConfigError(f"{where} must be a JSON object")
        return cls.from_kubeconfig(data, where=where, cluster_config=data.get("clusterConfig"))

    def describe(self) -> str:
        """The command line, for messages (arguments shown; the environment never is)."""
        return " ".join([self.command, *self.args])


def exec_info(config: ExecConfig, cluster: ClusterInfo | None) -> dict[str, Any]:
    """The ExecCredential the plugin gets in ``KUBERNETES_EXEC_INFO``."""
    spec: dict[str, Any] = {"interactive": False}
    if config.provide_cluster_info and cluster is not None:
        spec["cluster"] = cluster.to_json()
    return {"apiVersion": config.api_version, "kind": "ExecCredential", "spec": spec}


@dataclass(frozen=True)
class ExecResult:
    """The credential a plugin printed."""

    token: str | None = field(default=None, repr=False)
    client_cert_pem: bytes | None = field(default=None, repr=False)
    client_key_pem: bytes | None = field(default=None, repr=False)
    expires_at: dt.datetime | None = None  # None: valid until the server refuses it

    def expired(self, now: dt.datetime) -> bool:
        return self.expires_at is not None and now >= self.expires_at


def _parse_time(value: str, where: str) -> dt.datetime:
    parsed = parse_time(value)
    if parsed is None:
        raise ExecConfigError(f"{where}: status.expirationTimestamp {value!r} is not an RFC 3339 time")
    return parsed


def parse_exec_credential(output: bytes, api_version: str, where: str = "exec plugin") -> ExecResult:
    """The credential in a plugin's standard output; ExecConfigError when it is not a usable ExecCredential of
    ``api_version`` (the version kubeconfig asked for)."""
    try:
        doc = json.loads(output)
    except (ValueError, UnicodeDecodeError):
        text = output[:200].decode("utf-8", errors="replace").strip()
        raise ExecConfigError(f"{where} printed no ExecCredential JSON (got {text!r})") from None
    if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential":
        raise ExecConfigError(f"{where} printed JSON that is not an ExecCredential")
    if doc.get("apiVersion") != api_version:
        raise ExecConfigError(f"{where} printed an ExecCredential of apiVersion {doc.get('apiVersion')!r}, "
                              f"but the kubeconfig asks for {api_version!r}")
    status = doc.get("status")
    if not isinstance(status, dict):
        raise ExecConfigError(f"{where} printed an ExecCredential without status")
    token = status.get("token") or None
    cert = status.get("clientCertificateData") or None
    key = status.get("clientKeyData") or None
    for name, value in (("token", token), ("clientCertificateData", cert), ("clientKeyData", key)):
        if value is not None and not isinstance(value, str):
            raise ExecConfigError(f"{where}: status.{name} must be a string")
    if bool(cert) != bool(key):
        raise ExecConfigError(f"{where}: status.clientCertificateData and status.clientKeyData must be given "
                              "together")
    if not token and not cert:
        raise ExecConfigError(f"{where} printed an ExecCredential with neither status.token nor "
                              "status.clientCertificateData/clientKeyData")
    expires = status.get("expirationTimestamp")
    if expires is not None and not isinstance(expires, str):
        raise ExecConfigError(f"{where}: status.expirationTimestamp must be a string")
    return ExecResult(token=token, client_cert_pem=cert.encode() if cert else None,
                      client_key_pem=key.encode() if key else None,
                      expires_at=_parse_time(expires, where) if expires else None)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass
class ExecCredentialSource:
    """Runs the plugin when there is no credential yet, when it has expired, or after the server refused it;
    callers that ask together share one run."""

    config: ExecConfig
    cluster: ClusterInfo | None = None
    timeout: float = DEFAULT_EXEC_TIMEOUT
    runs: int = 0
    _current: ExecResult | None = None
    _lock: asyncio.Lock | None = field(default=None, repr=False)

    @property
    def current(self) -> ExecResult | None:
        return self._current

    def invalidate(self, seen: ExecResult | None) -> None:
        """The server refused ``seen`` (401): the next :meth:`get` runs the plugin again (unless another caller
        already replaced it)."""
        if seen is not None and self._current is seen:
            self._current = None

    async def get(self) -> ExecResult:
        current = self._current
        if current is not None and not current.expired(_now()):
            return current
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            current = self._current
            if current is not None and not current.expired(_now()):
                return current
            self._current = await self._run()
            return self._current

    async def _run(self) -> ExecResult:
        cfg = self.config
        where = f"exec plugin {cfg.describe()!r}"
        env = dict(os.environ)
        env.update(dict(cfg.env))
        env["KUBERNETES_EXEC_INFO"] = json.dumps(exec_info(cfg, self.cluster))
        self.runs += 1
        try:
            proc = await asyncio.create_subprocess_exec(
                cfg.command, *cfg.args, env=env, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        except FileNotFoundError:
            hint = f" ({cfg.install_hint.strip()})" if cfg.install_hint.strip() else ""
            raise ExecConfigError(f"{where}: command {cfg.command!r} not found: install it or fix the kubeconfig's "
                                  f"exec.command{hint}") from None
        except OSError as e:
            raise ExecConfigError(f"{where}: cannot run {cfg.command!r}: {e.strerror or e}") from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise ExecConfigError(f"{where} did not answer within {self.timeout:g}s") from None
        if proc.returncode != 0:
            detail = err[-500:].decode("utf-8", errors="replace").strip()
            raise ExecConfigError(f"{where} failed with exit code {proc.returncode}"
                                  + (f": {detail}" if detail else ""))
        return parse_exec_credential(out[:_OUTPUT_LIMIT], cfg.api_version, where)
