"""The dashboard's HTTP side (aiohttp): pages, fragments, Server-Sent Events, static files, login.

Served by the API server itself under ``/dashboard/``, behind its authentication (:mod:`flotilla.apiserver.auth`
asks :meth:`Dashboard.session_user`, :meth:`Dashboard.is_public` and :meth:`Dashboard.unauthorized`):

* ``GET /dashboard/`` fleet, ``/dashboard/workloads`` (paged, filtered, searched on the server),
  ``/dashboard/workloads/<namespace>/<name>`` one workload (``-`` for a ClusterResourceBinding's namespace),
  ``/dashboard/timeline``: a whole page, or with ``HX-Request`` only its live fragment;
* ``GET /dashboard/events?topic=...&since=N``: a ``text/event-stream`` that sends ``changed`` as soon as what the
  topic's page shows changed, then at most every :data:`COALESCE` seconds while changes go on (a burst of changes
  makes a few notifications, not one per change), and a comment every :data:`KEEPALIVE` seconds;
* ``?token=<one-time token>`` on any page: spent for a session cookie, then a redirect to the same URL without it;
* ``POST /dashboard/login``: a login form for a bearer token (or a one-time token), for a browser that has neither
  the printed URL nor a session.

Only reads: the session cookie is accepted for GET and HEAD of these paths only (never for the API, never for a
write), it is HttpOnly and SameSite=Strict, and the login form checks the request's Origin.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources
from typing import Any, Final
from urllib.parse import urlencode

import jinja2
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from flotilla.dashboard.model import (
    DashboardModel,
    QueryError,
    WorkloadQuery,
    cluster_views,
    event_views,
    work_views,
    workload_row,
    workload_topic,
)
from flotilla.dashboard.sessions import SESSION_COOKIE, Sessions
from flotilla.dashboard.timeline import STEP_KINDS, WINDOWS, axis_start_of, parse_window, timeline
from flotilla.kube.objects import as_map

__all__ = ["COALESCE", "KEEPALIVE", "PREFIX", "Dashboard"]

log = logging.getLogger(__name__)

PREFIX: Final = "/dashboard"
COALESCE: Final = 0.3  # seconds: changes within this long make one notification
KEEPALIVE: Final = 15.0  # seconds between comments on a quiet event stream
_STATIC: Final = {"htmx.min.js": "text/javascript", "sse.min.js": "text/javascript",
                  "dashboard.js": "text/javascript", "dashboard.css": "text/css"}
_HEADERS: Final = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                               "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _now() -> datetime:
    return datetime.now(UTC)


class Dashboard:
    """The dashboard of one API server: the model, its feed, the sessions and the routes.

    ``secure``: the API server authenticates (then the pages need a session or a token); ``authenticate_token``
    turns a bearer token into its user (None: unknown); ``may_view`` says whether a user may see the dashboard
    (it shows Clusters, bindings, Works and Events: the API server's authorizer decides whether the user may list
    them).
    """

    def __init__(self, client: Any, *, secure: bool,
                 authenticate_token: Callable[[str], Any] | None = None,
                 may_view: Callable[[Any], bool] | None = None) -> None:
        from flotilla.dashboard.feed import DashboardFeed

        self.model = DashboardModel()
        self.feed = DashboardFeed(client, self.model)
        self.client = client
        self.secure = secure
        self.authenticate_token = authenticate_token
        self.may_view = may_view or (lambda user: True)
        self.sessions: Sessions[Any] = Sessions()
        self.env = jinja2.Environment(loader=jinja2.PackageLoader("flotilla.dashboard", "templates"),
                                      autoescape=True, undefined=jinja2.StrictUndefined)
        self.env.globals.update(prefix=PREFIX, step_kinds=STEP_KINDS, windows=list(WINDOWS))
        self.env.filters["q"] = lambda params: ("?" + urlencode(params)) if params else ""
        self._streams: set[asyncio.Task[Any]] = set()
        self.closing = False
        self._following: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Nothing is followed yet: the informers start with the first request a user may see (:meth:`follow`),
        so that a control plane whose dashboard nobody opens pays nothing for it."""

    async def follow(self) -> None:
        """Start following the API (once; later calls wait for the same start) and return once the lists arrived."""
        if self._following is None:
            self._following = asyncio.get_running_loop().create_task(self.feed.start())
        await asyncio.shield(self._following)

    async def stop(self) -> None:
        self.closing = True
        for task in list(self._streams):
            task.cancel()
        if self._streams:
            await asyncio.wait(list(self._streams), timeout=2.0)
        if self._following is not None and not self._following.done():
            self._following.cancel()
            await asyncio.wait([self._following], timeout=2.0)
        await self.feed.stop()
        await self.client.close()

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get(PREFIX, self._redirect_root)
        router.add_get(PREFIX + "/", self.fleet)
        router.add_get(PREFIX + "/workloads", self.workloads)
        router.add_get(PREFIX + "/workloads/{namespace}/{name}", self.workload)
        router.add_get(PREFIX + "/timeline", self.timeline)
        router.add_get(PREFIX + "/events", self.events)
        router.add_get(PREFIX + "/static/{file}", self.static)
        router.add_post(PREFIX + "/login", self.login)

    # ------------------------------------------------------------------ what the authentication asks
    def issue_login(self, user: Any) -> str:
        """A one-time token that opens a session for ``user`` (the URL ``flotilla up`` prints)."""
        return self.sessions.issue_login(user, time.time())

    @staticmethod
    def owns(path: str) -> bool:
        return path == PREFIX or path.startswith(PREFIX + "/")

    def session_user(self, request: web.Request) -> Any:
        """The user of the request's session cookie: only for reads of the dashboard's own paths."""
        if request.method not in ("GET", "HEAD") or not self.owns(request.path):
            return None
        session = request.cookies.get(SESSION_COOKIE)
        return self.sessions.user_of(session, time.time()) if session else None

    def is_public(self, request: web.Request) -> bool:
        """What needs no credentials: the static files, the login form's POST and a page carrying a one-time
        token (each handler then decides)."""
        path = request.path
        if path.startswith(PREFIX + "/static/") and request.method in ("GET", "HEAD"):
            return True
        if path == PREFIX + "/login" and request.method == "POST":
            return True
        return self.owns(path) and request.method in ("GET", "HEAD") and "token" in request.query

    def unauthorized(self, request: web.Request, message: str = "") -> web.Response:
        """401: the login page (a fragment or event-stream request gets plain text); never any data."""
        if request.headers.get("HX-Request") or request.path == PREFIX + "/events":
            return web.Response(status=401, text="Unauthorized: log in again\n", headers=_HEADERS)
        return self._html("login.html", status=401, message=message, next=_clean_path(request))

    # ------------------------------------------------------------------ responses
    def _html(self, template: str, status: int = 200, **context: Any) -> web.Response:
        body = self.env.get_template(template).render(**context)
        return web.Response(text=body, status=status, content_type="text/html", charset="utf-8",
                            headers=_HEADERS)

    def _error(self, status: int, message: str) -> web.Response:
        return self._html("error.html", status=status, status_code=status, message=message)

    def _cookie(self, response: web.StreamResponse, session: str, request: web.Request) -> None:
        response.set_cookie(SESSION_COOKIE, session, path=PREFIX, httponly=True, samesite="Strict",
                            secure=request.secure, max_age=int(self.sessions.session_ttl))

    async def _admit(self, request: web.Request, allowed: set[str]) -> web.Response | None:
        """:meth:`_check`, and once the request may have its page, the model is followed (:meth:`follow`)."""
        denied = self._check(request, allowed)
        if denied is None:
            await self.follow()
        return denied

    def _check(self, request: web.Request, allowed: set[str]) -> web.Response | None:
        """The answer for a request that cannot have its page: the one-time token's exchange, a user who may not
        see the dashboard, an unknown query parameter. None: serve it."""
        if "token" in request.query:
            return self._redeem(request)
        if self.secure:
            user = request.get("user")
            if user is None:
                return self.unauthorized(request)
            if not self.may_view(user):
                if getattr(user, "is_anonymous", False):  # anonymous reads allowed, but not these: log in
                    return self.unauthorized(request)
                return self._error(403, f'user "{getattr(user, "name", user)}" may not list Clusters, bindings, '
                                        "Works and Events, which the dashboard shows")
        unknown = sorted(set(request.query) - allowed)
        if unknown:
            return self._error(400, f"unknown query parameter {unknown[0]!r}"
                                    + (f": use {', '.join(sorted(allowed))}" if allowed else ""))
        return None

    def _redeem(self, request: web.Request) -> web.Response:
        redeemed = self.sessions.redeem(request.query.get("token", ""), time.time())
        target = _clean_path(request)
        if redeemed is None:
            if not self.secure or self.session_user(request) is not None:
                return _see_other(target)  # nothing to exchange: just the clean URL
            return self.unauthorized(request, "This link was used already or has expired. Log in with a token, "
                                              "or start the dashboard from a new link.")
        session, _user = redeemed
        response = _see_other(target)
        self._cookie(response, session, request)
        return response

    def _page(self, request: web.Request, page: str, topic: str, **context: Any) -> web.Response:
        """The whole page, or with ``HX-Request`` only its live fragment (a page the browser restores from its
        history is whole again)."""
        version = self.model.versions.of(topic)
        context.update(topic=topic, since=version, self_url=str(request.rel_url), page=page,
                       secure=self.secure)
        if request.headers.get("HX-Request") and not request.headers.get("HX-History-Restore-Request"):
            response = self._html(f"{page}_live.html", **context)
        else:
            response = self._html(f"{page}.html", **context)
        response.headers["Vary"] = "HX-Request, Cookie"
        return response

    # ------------------------------------------------------------------ pages
    async def _redirect_root(self, request: web.Request) -> web.Response:
        raise web.HTTPFound(PREFIX + "/" + (f"?{request.query_string}" if request.query_string else ""))

    async def fleet(self, request: web.Request) -> web.Response:
        denied = await self._admit(request, set())
        if denied is not None:
            return denied
        now = _now()
        clusters = cluster_views(self.model, now)
        return self._page(request, "fleet", "fleet", clusters=clusters, workloads=len(self.model.bindings),
                          moving=len(self.model.moving))

    async def workloads(self, request: web.Request) -> web.Response:
        denied = await self._admit(request, {"q", "namespace", "cluster", "state", "page", "size"})
        if denied is not None:
            return denied
        try:
            query = WorkloadQuery.parse(request.query)
        except QueryError as e:
            return self._error(400, str(e))
        from flotilla.dashboard.model import PAGE_SIZES, STATES, workload_page

        result = workload_page(self.model, query, _now())
        return self._page(request, "workloads", "workloads", result=result, clusters=sorted(self.model.clusters),
                          states=STATES, sizes=PAGE_SIZES)

    async def workload(self, request: web.Request) -> web.Response:
        denied = await self._admit(request, set())
        if denied is not None:
            return denied
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        key = f"{'' if namespace == '-' else namespace}/{name}"
        binding = self.model.bindings.get(key)
        if binding is None:
            return self._error(404, f"no workload {key.lstrip('/')}: there is no ResourceBinding (or "
                                    "ClusterResourceBinding) of that name")
        now = _now()
        row = workload_row(key, binding, now)
        resource = as_map(as_map(binding.get("spec")).get("resource"))
        events = (self.model.events_about(row.kind, row.namespace, row.name)
                  + self.model.events_about(str(resource.get("kind") or ""), row.namespace,
                                            str(resource.get("name") or "")))
        from flotilla.display.rows import failover_row
        from flotilla.failover.history import parse_history

        history = [failover_row(binding, e, now, wide=True)
                   for e in parse_history(as_map(as_map(binding.get("metadata")).get("annotations")))
                   if isinstance(e, dict)]
        steps = timeline(self.model.bindings, self.model.all_events(), now, WINDOWS["24h"], only=key)
        return self._page(request, "workload", workload_topic(key), row=row, works=work_views(self.model, binding, now),
                          events=event_views(events, now), history=history, steps=steps,
                          axis_start=_clock(axis_start_of(steps, now, WINDOWS["24h"])))

    async def timeline(self, request: web.Request) -> web.Response:
        denied = await self._admit(request, {"window", "cluster"})
        if denied is not None:
            return denied
        window_name = request.query.get("window", "1h") or "1h"
        try:
            window = parse_window(window_name)
        except ValueError as e:
            return self._error(400, str(e))
        cluster = request.query.get("cluster", "")
        if cluster and cluster not in self.model.clusters:
            return self._error(400, f"cluster: no cluster named {cluster[:60]!r}")
        now = _now()
        steps = timeline(self.model.bindings, self.model.all_events(), now, window, cluster=cluster,
                         with_history=self.model.with_history)
        return self._page(request, "timeline", "timeline", steps=steps, window=window_name, cluster=cluster,
                          clusters=sorted(self.model.clusters), axis_start=_clock(axis_start_of(steps, now, window)))

    # ------------------------------------------------------------------ live
    async def events(self, request: web.Request) -> web.StreamResponse:
        denied = await self._admit(request, {"topic", "since"})
        if denied is not None:
            return denied
        topic = request.query.get("topic", "")
        if not (topic in ("fleet", "workloads", "timeline") or topic.startswith("workload:")):
            return web.Response(status=400, text="topic: fleet, workloads, timeline or workload:<namespace>/<name>\n",
                                headers=_HEADERS)
        since_text = request.query.get("since", "")
        if since_text and not (since_text.isascii() and since_text.isdigit() and len(since_text) <= 18):
            return web.Response(status=400, text="since: a whole number\n", headers=_HEADERS)
        sent = int(since_text) if since_text else self.model.versions.of(topic)
        if request.method == "HEAD":  # the headers of a stream, without holding one open
            return web.Response(headers={**_HEADERS, "Content-Type": "text/event-stream"})
        response = web.StreamResponse(headers={**_HEADERS, "Content-Type": "text/event-stream",
                                               "X-Accel-Buffering": "no"})
        await response.prepare(request)
        this = asyncio.current_task()
        if this is not None:
            self._streams.add(this)
        try:
            await response.write(b"retry: 2000\n\n")
            while not self.closing:
                current = self.model.versions.of(topic)
                if current != sent:
                    sent = current
                    await response.write(f"event: changed\ndata: {current}\n\n".encode())
                    await asyncio.sleep(COALESCE)  # changes meanwhile make the next notification
                    continue
                if not await self.feed.wait_change(KEEPALIVE):
                    await response.write(b": keep-alive\n\n")
        except (ConnectionResetError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if this is not None:
                self._streams.discard(this)
        return response

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["file"]
        ctype = _STATIC.get(name)
        if ctype is None:
            raise web.HTTPNotFound(text="no such file\n")
        body = resources.files("flotilla.dashboard").joinpath("static").joinpath(name).read_bytes()
        return web.Response(body=body, headers={"Content-Type": ctype, "Cache-Control": "max-age=3600",
                                                "X-Content-Type-Options": "nosniff"})

    async def login(self, request: web.Request) -> web.Response:
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"{request.scheme}://{request.host}":
            return web.Response(status=403, text="cross-origin login refused\n", headers=_HEADERS)
        try:
            form = await request.post()
        except (ValueError, UnicodeDecodeError, HttpProcessingError):
            return web.Response(status=400, text="the login form could not be read\n", headers=_HEADERS)
        token = str(form.get("token") or "").strip()
        target = str(form.get("next") or PREFIX + "/")
        if not target.startswith(PREFIX + "/") or "//" in target or "\\" in target:
            target = PREFIX + "/"
        now = time.time()
        redeemed = self.sessions.redeem(token, now) if token else None
        if redeemed is not None:
            session = redeemed[0]
        else:
            user = self.authenticate_token(token) if token and self.authenticate_token is not None else None
            if user is None and self.secure:
                return self.unauthorized(request, "That token is not valid.")
            if user is not None and not self.may_view(user):
                return self._error(403, f'user "{getattr(user, "name", user)}" may not see the dashboard')
            session = self.sessions.open(user, now)
        response = _see_other(target)
        self._cookie(response, session, request)
        return response


def _see_other(target: str) -> web.Response:
    return web.Response(status=303, headers={**_HEADERS, "Location": target})


def _clock(t: datetime) -> str:
    return t.strftime("%H:%M:%S")


def _clean_path(request: web.Request) -> str:
    """The request's path and query without ``token``."""
    query = [(k, v) for k, v in request.query.items() if k != "token"]
    return request.path + (("?" + urlencode(query)) if query else "")
