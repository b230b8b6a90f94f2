"""What ``flotilla register`` decides for a Pull-mode cluster, as pure functions.

Registering a cluster gives its agent a credential and says how to start it; the agent itself creates (or adopts)
the Cluster (``spec.syncMode: Pull``) and renews its Lease. The files live next to the agent kubeconfig ``OUT``
(default ``<NAME>-agent.kubeconfig``): ``OUT`` with the suffix ``.pid`` (the agent ``--start`` launched) and
``.log`` (its output).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flotilla.api.agents import AGENT_USER_PREFIX
from flotilla.cluster.names import cluster_name_errors

__all__ = [
    "AgentFiles",
    "agent_argv",
    "agent_files",
    "agent_kubeconfig_context",
    "agent_process_matches",
    "agent_user_name",
    "default_agent_kubeconfig",
    "existing_cluster_problem",
    "register_name_problems",
]


@dataclass(frozen=True)
class AgentFiles:
    kubeconfig: Path
    pid: Path
    log: Path


def default_agent_kubeconfig(name: str) -> Path:
    return Path(f"{name}-agent.kubeconfig")


def agent_files(name: str, kubeconfig: str | Path | None = None) -> AgentFiles:
    """The agent kubeconfig of cluster ``name`` and, next to it, its pid and log files (absolute paths)."""
    out = Path(kubeconfig).expanduser() if kubeconfig else default_agent_kubeconfig(name)
    out = out.absolute()
    return AgentFiles(out, out.with_suffix(".pid"), out.with_suffix(".log"))


def agent_kubeconfig_context(name: str) -> str:
    return f"{name}-agent"


def register_name_problems(name: str) -> list[str]:
    return [f"invalid cluster name {name!r}: {e}" for e in cluster_name_errors(name)]


def existing_cluster_problem(cluster: Mapping[str, Any] | None, name: str, *, unregistering: bool = False) -> str | None:
    """Why ``register`` (or ``unregister``) must not touch the Cluster already named ``name``, or None."""
    if cluster is None:
        return None
    md, spec = cluster.get("metadata") or {}, cluster.get("spec") or {}
    if spec.get("syncMode") != "Pull":
        if unregistering:
            return f"cluster {name} is joined in Push mode; use `flotilla unjoin {name}`"
        return f"cluster {name} is joined in Push mode; unjoin it first (`flotilla unjoin {name}`)"
    if md.get("deletionTimestamp") and not unregistering:
        return f"cluster {name} is being deleted; register it again once it is gone"
    return None


def agent_argv(executable: Sequence[str], name: str, files: AgentFiles, member_kubeconfig: str | Path,
               member_context: str | None = None) -> list[str]:
    """The ``flotilla agent`` command line of cluster ``name`` (the plan's flags; defaults left out)."""
    argv = [*executable, "agent", "--karmada-kubeconfig", str(files.kubeconfig), "--cluster-name", name,
            "--kubeconfig", str(Path(member_kubeconfig).expanduser().absolute())]
    if member_context:
        argv += ["--context", member_context]
    return argv


def agent_process_matches(cmdline: Sequence[str], name: str) -> bool:
    """Whether a process's command line (``/proc/PID/cmdline``) is the agent of cluster ``name``: a pid file may
    outlive its process and the pid be reused."""
    args = list(cmdline)
    if "agent" not in args:
        return False
    for i, arg in enumerate(args):
        if arg == "--cluster-name" and i + 1 < len(args) and args[i + 1] == name:
            return True
        if arg == f"--cluster-name={name}":
            return True
    return False


def agent_user_name(name: str) -> str:
    """The user an agent's token authenticates as."""
    return AGENT_USER_PREFIX + name
