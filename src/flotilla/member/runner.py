"""Several simulated members in one process, plus the process's admin HTTP endpoint.

The admin endpoint listens on its own loopback port (not a member's API port, so it stays reachable while a
member is ``down``):

* ``GET  /members`` - ``{"members": [{name, url, port, kubeconfig, mode, latency, ready, workloads}, ...]}``
* ``GET  /members/<name>`` - one of them
* ``POST /members/<name>/fault`` with ``{"mode": "down|off|unready|slow|partition|recover", "latency": 2.0,
  "boot_delay": 0.0}`` (both optional) - apply a fault; answers the member's new state (400 for a bad mode,
  latency or boot delay, 404 for an unknown member)
* ``POST /fault`` with the same body - the fault applied to every member of this process at once (``{"members":
  [...]}``, each one's new state); ``partition`` there cuts the control plane off from all of them. With
  ``"members": [names]`` in the body, to those members only (404 naming any this process does not run)
* ``POST /members/<name>/agent`` with ``{"mode": "kill|freeze|thaw|start"}`` - control the member's agent, when the
  process runs one (``flotilla up``'s Pull members; 400 otherwise); answers ``{"state", "pid", "starts"}``
* ``POST /controlplane`` with ``{"mode": "restart"}`` - restart the controller-manager, when the process runs the
  control plane (``flotilla up``; 400 otherwise)
* ``GET  /history[?kind=&namespace=&name=]`` - running intervals recorded by this process and their overlaps
* ``GET  /healthz``

Each member's directory ``D/<name>/`` gets ``kubeconfig`` (one context named after the member) and
``admin.json`` (``{"member", "url", "admin_url", "kubeconfig", "pid"}``), which ``flotilla sim fault`` reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import orjson
from aiohttp import web

from flotilla.files import atomic_write
from flotilla.member.faults import FaultError
from flotilla.member.history import HistoryRecorder, overlaps
from flotilla.member.simulated import MemberCluster, MemberConfig
from flotilla.signals import stop_on_signals

log = logging.getLogger(__name__)

__all__ = ["MemberGroup", "admin_file", "admin_urls", "read_admin_file", "run_members", "send_admin",
           "send_fault"]


class AgentControl(Protocol):
    """What the admin endpoint drives for ``POST /members/<name>/agent`` (:class:`flotilla.local.agents.AgentProcess`)."""

    async def control(self, mode: str) -> dict[str, object]: ...

    def state(self) -> dict[str, object]: ...


ControlPlaneHook = Callable[[str], Awaitable[dict[str, Any]]]


#: where ``flotilla up`` keeps its members under its own data directory (``D/members``, flotilla.local.layout)
UP_MEMBERS_DIR = "members"


def admin_file(data_dir: Path, name: str) -> Path:
    return Path(data_dir) / name / "admin.json"


def members_dirs(data_dir: Path) -> list[Path]:
    """Where members' files may be for ``--data-dir D``: ``D`` itself (``flotilla member --data-dir D``), then
    ``D/members`` (``flotilla up --data-dir D``)."""
    return [Path(data_dir), Path(data_dir) / UP_MEMBERS_DIR]


def _not_found_hint(data_dir: Path) -> str:
    return (f"pass the --data-dir given to `flotilla up` or to `flotilla member` (now {data_dir}), and check that "
            "it is running")


def read_admin_file(data_dir: Path, name: str) -> dict[str, Any]:
    """Member ``name``'s admin file, under ``data_dir`` or ``data_dir/members`` (:func:`members_dirs`)."""
    tried = [admin_file(d, name) for d in members_dirs(data_dir)]
    path = next((t for t in tried if t.exists()), None)
    if path is None:
        raise FileNotFoundError(f"no admin file for member {name!r}: tried {' and '.join(map(str, tried))}; "
                                + _not_found_hint(data_dir))
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read {path}: {e}") from None
    if not isinstance(data, dict) or "admin_url" not in data:
        raise ValueError(f"{path} is not a member admin file")
    return data


class MemberGroup:
    """N members sharing one history recorder, and the admin endpoint that controls them."""

    def __init__(self, configs: Sequence[MemberConfig], *, history_file: Path | None = None,
                 admin_host: str = "127.0.0.1", admin_port: int = 0, write_admin_files: bool = True) -> None:
        names = [c.name for c in configs]
        if len(set(names)) != len(names):
            raise ValueError(f"member names must be unique: {names}")
        self.configs = list(configs)
        self.history = HistoryRecorder(history_file)
        self.members: dict[str, MemberCluster] = {c.name: MemberCluster(c, self.history) for c in configs}
        self.admin_host = admin_host
        self.admin_port = admin_port
        self.admin_url = ""
        self._write_admin_files = write_admin_files
        self._runner: web.AppRunner | None = None
        self.agents: dict[str, AgentControl] = {}  # member -> its agent, when this process runs one
        self.control_plane: ControlPlaneHook | None = None  # restarts the control plane's parts, when it runs here

    async def start(self) -> MemberGroup:
        try:
            await asyncio.gather(*(m.start() for m in self.members.values()))
            await self._start_admin()
            if self._write_admin_files:
                for m in self.members.values():
                    atomic_write(admin_file(m.config.data_dir, m.name), orjson.dumps({
                        "member": m.name, "url": m.url, "admin_url": self.admin_url,
                        "kubeconfig": str(m.kubeconfig_path), "pid": os.getpid()}, option=orjson.OPT_INDENT_2))
        except BaseException:
            await self.stop()
            raise
        return self

    async def stop(self) -> None:
        if self._write_admin_files:
            for m in self.members.values():
                path = admin_file(m.config.data_dir, m.name)
                with contextlib.suppress(OSError, ValueError):
                    if json.loads(path.read_text()).get("pid") == os.getpid():
                        path.unlink()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await asyncio.gather(*(m.stop() for m in self.members.values()), return_exceptions=True)
        self.history.close()

    async def __aenter__(self) -> MemberGroup:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ admin endpoint
    async def _start_admin(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/members", self._list)
        app.router.add_get("/members/{name}", self._get)
        app.router.add_post("/members/{name}/fault", self._fault)
        app.router.add_post("/fault", self._fault_all)
        app.router.add_post("/members/{name}/agent", self._agent)
        app.router.add_post("/controlplane", self._control_plane)
        app.router.add_get("/history", self._history)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.admin_host, self.admin_port, reuse_address=True)
        await site.start()
        port = self._runner.addresses[0][1]
        self.admin_url = f"http://{self.admin_host}:{port}"

    @staticmethod
    def _json(data: Any, status: int = 200) -> web.Response:
        return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    def _state(self, m: MemberCluster) -> dict[str, Any]:
        state = m.state()
        agent = self.agents.get(m.name)
        if agent is not None:
            state["agent"] = agent.state()
        return state

    async def _list(self, request: web.Request) -> web.Response:
        return self._json({"members": [self._state(m) for m in self.members.values()]})

    def _member(self, request: web.Request) -> MemberCluster:
        name = request.match_info["name"]
        m = self.members.get(name)
        if m is None:
            raise web.HTTPNotFound(text=f"no member named {name!r} in this process "
                                        f"(it runs {', '.join(self.members)})")
        return m

    async def _get(self, request: web.Request) -> web.Response:
        return self._json(self._state(self._member(request)))

    @staticmethod
    async def _mode_body(request: web.Request, usage: str) -> dict[str, Any] | web.Response:
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("mode"), str):
            return MemberGroup._json({"error": f"send {usage}"}, 400)
        return body

    _FAULT_USAGE = ('{"mode": "down|off|unready|slow|partition|partition-to-member|partition-from-member|recover", '
                    '"latency": seconds, "boot_delay": seconds}')

    async def _fault(self, request: web.Request) -> web.Response:
        m = self._member(request)
        body = await self._mode_body(request, self._FAULT_USAGE)
        if isinstance(body, web.Response):
            return body
        try:
            await m.set_fault(body["mode"], body.get("latency"), body.get("boot_delay"))
        except FaultError as e:
            return self._json({"error": str(e)}, 400)
        return self._json(self._state(m))

    async def _fault_all(self, request: web.Request) -> web.Response:
        """One fault for every member of this process, or for those the body names: checked on all of them first
        (one refusing refuses it for all), then applied to each in turn without yielding to the network in
        between."""
        body = await self._mode_body(request, self._FAULT_USAGE)
        if isinstance(body, web.Response):
            return body
        names = body.get("members")
        if names is None:
            chosen = list(self.members.values())
        elif not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            return self._json({"error": '"members" must be a non-empty list of member names'}, 400)
        else:
            unknown = [n for n in names if n not in self.members]
            if unknown:
                return self._json({"error": f"no member named {', '.join(unknown)} in this process "
                                            f"(it runs {', '.join(self.members)})"}, 404)
            chosen = [self.members[n] for n in dict.fromkeys(names)]
        states = []
        try:
            for m in chosen:
                m.faults.check(body["mode"], body.get("latency"), body.get("boot_delay"))
            for m in chosen:
                await m.set_fault(body["mode"], body.get("latency"), body.get("boot_delay"))
                states.append(self._state(m))
        except FaultError as e:
            return self._json({"error": str(e)}, 400)
        return self._json({"members": states})

    async def _agent(self, request: web.Request) -> web.Response:
        m = self._member(request)
        body = await self._mode_body(request, '{"mode": "kill|freeze|thaw|start"}')
        if isinstance(body, web.Response):
            return body
        agent = self.agents.get(m.name)
        if agent is None:
            return self._json({"error": f"member {m.name} has no agent run by this process (only the Pull "
                                        "members of flotilla up have one)"}, 400)
        try:
            return self._json(await agent.control(body["mode"]))
        except ValueError as e:
            return self._json({"error": str(e)}, 400)
        except OSError as e:
            return self._json({"error": f"cannot start the agent of {m.name}: {e}"}, 500)

    async def _control_plane(self, request: web.Request) -> web.Response:
        body = await self._mode_body(request, '{"mode": "restart"}')
        if isinstance(body, web.Response):
            return body
        if self.control_plane is None:
            return self._json({"error": "this process runs no control plane (only flotilla up does)"}, 400)
        try:
            return self._json(await self.control_plane(body["mode"]))
        except ValueError as e:
            return self._json({"error": str(e)}, 400)

    async def _history(self, request: web.Request) -> web.Response:
        q = request.query
        ivs = self.history.intervals(kind=q.get("kind"), namespace=q.get("namespace"), name=q.get("name"))
        return self._json({"intervals": [i.to_dict() for i in ivs],
                           "overlaps": [[a.to_dict(), b.to_dict()] for a, b in overlaps(ivs)]})


async def run_members(configs: Sequence[MemberConfig], *, history_file: Path | None, admin_host: str = "127.0.0.1",
                      admin_port: int = 0, announce: Any = print) -> None:
    """Run members until SIGTERM/SIGINT (the ``flotilla member`` command)."""
    group = MemberGroup(configs, history_file=history_file, admin_host=admin_host, admin_port=admin_port)
    stop = stop_on_signals()
    await group.start()
    from flotilla.apiserver.gctune import tune_gc

    tune_gc()  # a long-running process from here on (see flotilla.apiserver.gctune)
    try:
        for m in group.members.values():
            announce(f"flotilla member: {m.name} serving {m.url} (kubeconfig: {m.kubeconfig_path})")
        announce(f"flotilla member: admin endpoint {group.admin_url} (pid {os.getpid()}); "
                 f"history: {history_file or 'memory only'}")
        await stop.wait()
    finally:
        await group.stop()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)


def send_fault(data_dir: Path, name: str, mode: str, latency: float | None = None, *,
               boot_delay: float | None = None, admin_url: str | None = None,
               timeout: float = 15.0) -> dict[str, Any]:
    """POST a fault to the admin endpoint of the process running member ``name`` (blocking; for the CLI)."""
    url = admin_url or read_admin_file(data_dir, name)["admin_url"]
    body: dict[str, Any] = {"mode": mode}
    if latency is not None:
        body["latency"] = latency
    if boot_delay is not None:
        body["boot_delay"] = boot_delay
    return send_admin(url, f"/members/{name}/fault", body, what=f"member {name}", timeout=timeout)


def admin_urls(data_dir: Path) -> list[str]:
    """The admin endpoints of the processes running the members of ``data_dir`` (one per process, in the order of
    the members' names), from their ``D/<name>/admin.json``."""
    urls: list[str] = []
    for directory in members_dirs(data_dir):
        for path in sorted(directory.glob("*/admin.json")):
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                url = read_admin_file(directory, path.parent.name)["admin_url"]
                if isinstance(url, str) and url not in urls:
                    urls.append(url)
        if urls:
            return urls
    tried = " and ".join(str(d / "<name>" / "admin.json") for d in members_dirs(data_dir))
    raise FileNotFoundError(f"no member admin file: tried {tried}; {_not_found_hint(data_dir)}")


def send_admin(url: str, path: str, body: dict[str, Any], *, what: str, timeout: float = 15.0) -> dict[str, Any]:
    """POST ``body`` to ``path`` of a members' admin endpoint (blocking; for the CLI); an error answer or an
    unreachable endpoint raises :class:`RuntimeError` saying so."""
    req = urllib.request.Request(f"{url.rstrip('/')}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            result: dict[str, Any] = json.loads(resp.read())
            return result
    except urllib.error.HTTPError as e:
        detail = e.read().decode(errors="replace")
        with contextlib.suppress(ValueError, AttributeError):
            detail = json.loads(detail).get("error", detail)
        raise RuntimeError(f"{what}: {detail}") from None
    except urllib.error.URLError as e:
        raise RuntimeError(f"cannot reach the admin endpoint {url} of {what} ({e.reason}): "
                           "is its `flotilla member` (or `flotilla up`) process running?") from None
