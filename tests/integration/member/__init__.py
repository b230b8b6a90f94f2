"""Helpers for the simulated-member tests: a member (or group) on its own event loop in a daemon thread, so
tests can drive it with blocking tools (the real kubectl, the official Python client)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from flotilla.member.history import HistoryRecorder
from flotilla.member.simulated import MemberCluster, MemberConfig
from flotilla.member.simulator import SimulatorFactory
from tests.support.apiserver import Kubectl


class MemberThread:
    """A MemberCluster on a background loop; ``call`` runs a coroutine there."""

    def __init__(self, config: MemberConfig, history: HistoryRecorder | None = None,
                 simulators: Sequence[SimulatorFactory] | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.member = MemberCluster(config, history, simulators)

    def start(self) -> MemberThread:
        self.thread.start()
        self.call(self.member.start())
        return self

    def call(self, coro: Any, timeout: float = 30) -> Any:
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(timeout)

    def fault(self, mode: str, latency: float | None = None) -> dict[str, Any]:
        result: dict[str, Any] = self.call(self.member.set_fault(mode, latency))
        return result

    @property
    def url(self) -> str:
        return self.member.url

    @property
    def kubeconfig(self) -> Path:
        return self.member.kubeconfig_path

    def stop(self) -> None:
        try:
            self.call(self.member.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


def kubectl_for(member: MemberThread, home: Path) -> Kubectl:
    return Kubectl(member.kubeconfig, home)


def python_client(kubeconfig: Path) -> Any:
    """An ApiClient of the official Python client for a member's kubeconfig."""
    from kubernetes import client, config

    cfg = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
    return client.ApiClient(cfg)
