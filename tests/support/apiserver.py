"""Run a Flotilla API server for tests: in a background thread (fast) or as a real subprocess."""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flotilla.apiserver.server import ApiServer, ApiServerConfig

KUBECTL = str(Path(sys.executable).parent / "kubectl")


class ServerThread:
    """An ApiServer on its own event loop in a daemon thread; ``url`` and ``kubeconfig`` once started."""

    def __init__(self, data_dir: Path, storage_url: str = "memory://", **config: Any) -> None:
        self.config = ApiServerConfig(storage_url=storage_url, data_dir=data_dir, port=0, **config)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: ApiServer | None = None

    def start(self) -> ServerThread:
        self.thread.start()
        self.server = self.call(ApiServer(self.config).start())
        return self

    def call(self, coro: Any, timeout: float = 30) -> Any:
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(timeout)

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    @property
    def kubeconfig(self) -> Path:
        assert self.server is not None and self.server.kubeconfig_path is not None
        return self.server.kubeconfig_path

    def stop(self) -> None:
        if self.server is not None:
            self.call(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@dataclass
class Kubectl:
    kubeconfig: Path
    home: Path

    def env(self) -> dict[str, str]:
        return dict(os.environ, KUBECONFIG=str(self.kubeconfig), HOME=str(self.home))

    def run(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [KUBECTL, *args], input=input, capture_output=True, text=True, env=self.env(), timeout=timeout
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({proc.returncode}):\n"
                f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
            )
        return proc

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [KUBECTL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env()
        )


class ServerProcess:
    """``flotilla apiserver`` as a real child process: secure (https, tokens; reach it through ``kubeconfig``)
    unless ``extra`` holds ``--insecure`` (plain http at ``url``, for a test that speaks raw HTTP)."""

    def __init__(
        self, data_dir: Path, storage_url: str = "sqlite://", extra: list[str] | None = None
    ) -> None:
        self.data_dir = data_dir
        self.storage_url = storage_url
        self.extra = extra or []
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self, port: int = 0) -> ServerProcess:
        import socket

        if port == 0:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        exe = str(Path(sys.executable).parent / "flotilla")
        self.proc = subprocess.Popen(
            [
                exe,
                "apiserver",
                "--storage",
                self.storage_url,
                "--data-dir",
                str(self.data_dir),
                "--port",
                str(port),
                *self.extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        scheme = "http" if "--insecure" in self.extra else "https"  # secure unless told otherwise, as the command
        self.url = f"{scheme}://127.0.0.1:{port}"
        unverified = ssl.create_default_context()  # only asks whether it answers: /readyz needs no credentials
        unverified.check_hostname = False
        unverified.verify_mode = ssl.CERT_NONE
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"apiserver exited: {self.proc.stdout.read() if self.proc.stdout else ''}")
            if (self.data_dir / "kubeconfig").exists():
                try:
                    urllib.request.urlopen(self.url + "/readyz", timeout=1,
                                           context=unverified if scheme == "https" else None).read()
                    return self
                except OSError:
                    pass
            time.sleep(0.1)
        raise RuntimeError("apiserver did not become ready in 30s")

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubeconfig"

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
