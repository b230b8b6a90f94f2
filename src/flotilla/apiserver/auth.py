"""Authentication and authorisation for the Flotilla API server.

* :class:`TokenAuthenticator` authenticates a request from a verified TLS client certificate (CN = user, each O =
  a group) or a static bearer token (Kubernetes' ``--token-auth-file`` CSV format).
* :class:`Authorizer` is a deliberately small policy: admins may do anything, a viewers group may read all but
  Secrets, everyone authenticated may read discovery/non-resource paths, anonymous requests are denied unless
  enabled.
* :func:`request_attributes` derives Kubernetes-style request attributes (verb, API group, namespace, resource,
  subresource, name) from method + path + query, mirroring the apiserver's RequestInfo resolution.
* :func:`auth_middleware` wires them into aiohttp and answers 401/403 with Kubernetes-shaped Status bodies.
"""

from __future__ import annotations

import csv
import hashlib
import io
import secrets
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import orjson
from aiohttp import web

from flotilla.apiserver.agent_scope import agent_cluster_of, agent_may
from flotilla.files import create_exclusive

__all__ = [
    "ADMIN_ONLY_PATHS",
    "ADMIN_USER",
    "ALWAYS_ALLOWED_PATHS",
    "ANONYMOUS",
    "ANONYMOUS_USER",
    "AUTHENTICATED_GROUP",
    "DEFAULT_VIEWERS_GROUP",
    "MASTERS_GROUP",
    "READ_ONLY_EXCLUDED_RESOURCES",
    "READ_ONLY_SUBRESOURCES",
    "READ_VERBS",
    "UNAUTHENTICATED_GROUP",
    "AuthenticationError",
    "Authorizer",
    "RequestAttributes",
    "TokenAuthenticator",
    "TokenFileError",
    "UserInfo",
    "attributes_from_access_review",
    "auth_middleware",
    "ensure_token_file",
    "forbidden_message",
    "forbidden_status",
    "format_token_line",
    "is_always_allowed_path",
    "may_read_secrets",
    "parse_token_file",
    "read_only_may_read",
    "request_attributes",
    "request_attributes_of",
    "unauthorized_status",
]

ANONYMOUS_USER = "system:anonymous"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
AUTHENTICATED_GROUP = "system:authenticated"
MASTERS_GROUP = "system:masters"
DEFAULT_VIEWERS_GROUP = "flotilla:viewers"
ADMIN_USER = "admin"
TOKEN_FILE_NAME = "tokens.csv"

READ_VERBS = frozenset({"get", "list", "watch"})
#: Non-resource paths that every client, even an unauthenticated one, may read.
ALWAYS_ALLOWED_PATHS = ("/healthz", "/readyz", "/livez", "/version")
#: Non-resource paths only admins may read (kube-apiserver grants ``/metrics`` to its monitoring role, not to
#: every authenticated user): they tell about every client's requests.
ADMIN_ONLY_PATHS = ("/metrics",)

#: What the read-only roles (the viewers, read-only anonymous access) may not read, as Kubernetes' built-in ``view``
#: ClusterRole leaves it out: Secrets (the ``karmada-cluster`` Secrets hold every member's admin token, and
#: reading a Secret's content hands out whatever it protects), keyed by (API group, resource).
READ_ONLY_EXCLUDED_RESOURCES = frozenset({("", "secrets")})
#: The subresources the read-only roles may read (``view`` grants ``*/status``, ``*/scale`` and ``pods/log``);
#: anything else (``serviceaccounts/token``, ``pods/exec``, ``pods/attach``, ``pods/portforward``, ``*/proxy``)
#: reaches credentials or a workload and stays an admin's.
READ_ONLY_SUBRESOURCES = frozenset({"", "status", "scale", "log"})

# Resources every authenticated user may create (kubectl auth can-i / auth whoami).
_SELF_REVIEWS = frozenset(
    {
        ("authorization.k8s.io", "selfsubjectaccessreviews"),
        ("authorization.k8s.io", "selfsubjectrulesreviews"),
        ("authentication.k8s.io", "selfsubjectreviews"),
    }
)


# ============================================================================================ users


@dataclass(frozen=True)
class UserInfo:
    """An authenticated (or anonymous) user, as in Kubernetes' ``user.Info``."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()

    @property
    def is_anonymous(self) -> bool:
        return self.name == ANONYMOUS_USER

    def with_group(self, group: str) -> UserInfo:
        if group in self.groups:
            return self
        return UserInfo(self.name, self.uid, (*self.groups, group))

    def to_user_info_json(self) -> dict[str, Any]:
        """The ``userInfo`` object of a SelfSubjectReview / TokenReview status."""
        out: dict[str, Any] = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        return out


ANONYMOUS = UserInfo(ANONYMOUS_USER, "", (UNAUTHENTICATED_GROUP,))


class AuthenticationError(Exception):
    """Credentials were presented but are not valid (-> 401, never anonymous)."""


class TokenFileError(ValueError):
    """The static token file is malformed."""


# ============================================================================================ token file


def parse_token_file(text: str, source: str = "<token file>") -> dict[str, UserInfo]:
    """Parse ``token,user,uid[,"group1,group2"]`` lines into {token: UserInfo}.

    Blank lines and lines starting with ``#`` are skipped; records with an empty token are ignored (as
    Kubernetes does); a later duplicate token replaces an earlier one.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    # Blank out comment lines before CSV parsing (keeps line numbers; comments may contain quotes).
    text = "".join("\n" if ln.lstrip().startswith("#") else ln for ln in text.splitlines(keepends=True))
    tokens: dict[str, UserInfo] = {}
    reader = csv.reader(io.StringIO(text), skipinitialspace=True, strict=True)
    try:
        for record in reader:
            lineno = reader.line_num
            if not record or (len(record) == 1 and not record[0].strip()):
                continue
            if len(record) < 3:
                raise TokenFileError(
                    f"{source}:{lineno}: token file must have at least 3 columns "
                    f"(token, user name, user uid), found {len(record)}"
                )
            token, name, uid = record[0].strip(), record[1].strip(), record[2].strip()
            if not token:
                continue
            if not name:
                raise TokenFileError(f"{source}:{lineno}: empty user name")
            groups: tuple[str, ...] = ()
            if len(record) >= 4:
                groups = tuple(g.strip() for g in record[3].split(",") if g.strip())
            tokens[token] = UserInfo(name, uid, groups)
    except csv.Error as e:
        raise TokenFileError(f"{source}:{reader.line_num}: {e}") from e
    return tokens


def format_token_line(token: str, user: str, uid: str = "", groups: Iterable[str] = ()) -> str:
    """One CSV line (with trailing newline) in the token-file format; groups are quoted when needed."""
    if not token or any(c in token for c in ',"\r\n \t'):
        raise ValueError("token must be non-empty and contain no commas, quotes or whitespace")
    buf = io.StringIO()
    row = [token, user, uid]
    group_list = [g for g in groups if g]
    if group_list:
        row.append(",".join(group_list))
    csv.writer(buf, lineterminator="\n").writerow(row)
    return buf.getvalue()


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def ensure_token_file(data_dir: Path) -> tuple[Path, str | None]:
    """Create ``data_dir/tokens.csv`` (0600) holding a random admin token if it does not exist yet.

    Returns the path and the admin token: the freshly generated one, or for an existing file the token of the
    first ``admin`` user (else of the first ``system:masters`` member). None if an existing file has neither;
    the file is never modified once it exists.
    """
    path = Path(data_dir) / TOKEN_FILE_NAME
    token = secrets.token_urlsafe(32)
    line = format_token_line(token, ADMIN_USER, str(uuid.uuid4()), [MASTERS_GROUP])
    header = '# token,user,uid,"group1,group2"  (Kubernetes --token-auth-file format)\n'
    if create_exclusive(path, (header + line).encode()):
        return path, token
    tokens = parse_token_file(path.read_text(encoding="utf-8"), str(path))
    for tok, info in tokens.items():
        if info.name == ADMIN_USER:
            return path, tok
    for tok, info in tokens.items():
        if MASTERS_GROUP in info.groups:
            return path, tok
    return path, None


# ============================================================================================ authentication


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    lower = name.lower()
    for k, v in headers.items():  # plain dicts are case-sensitive; HTTP headers are not
        if k.lower() == lower:
            return v
    return None


def _cert_subject(peercert: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    """(CN, O...) from an ``ssl.SSLSocket.getpeercert()`` dict."""
    cn = ""
    orgs: list[str] = []
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and not cn:
                cn = value
            elif key == "organizationName" and value:
                orgs.append(value)
    return cn, tuple(orgs)


class TokenAuthenticator:
    """Static bearer tokens plus x509 client certificates.

    ``authenticate`` returns the user, ``None`` when no credentials were presented, and raises
    :class:`AuthenticationError` when credentials were presented but are invalid. As in Kubernetes, a
    verified client certificate takes precedence over the bearer token, and every authenticated user gets the
    ``system:authenticated`` group.
    """

    def __init__(
        self,
        tokens: Mapping[str, UserInfo] | None = None,
        *,
        path: Path | None = None,
        client_certs: bool = True,
        dynamic: Callable[[bytes], UserInfo | None] | None = None,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.client_certs = client_certs
        #: asked (with the token's SHA-256) for a token the static ones do not know: the agents' tokens
        #: (:class:`flotilla.apiserver.agent_tokens.AgentTokenIndex`)
        self.dynamic = dynamic
        self._tokens: dict[bytes, UserInfo] = {}
        if tokens:
            self.set_tokens(tokens)

    @classmethod
    def from_file(cls, path: Path, *, client_certs: bool = True,
                  dynamic: Callable[[bytes], UserInfo | None] | None = None) -> TokenAuthenticator:
        auth = cls(path=path, client_certs=client_certs, dynamic=dynamic)
        auth.reload()
        return auth

    def reload(self) -> None:
        """Re-read the token file (if this authenticator has one)."""
        if self.path is not None:
            self.set_tokens(parse_token_file(self.path.read_text(encoding="utf-8"), str(self.path)))

    def set_tokens(self, tokens: Mapping[str, UserInfo]) -> None:
        self._tokens = {_digest(tok): info for tok, info in tokens.items() if tok}

    def add_token(self, token: str, user: UserInfo) -> None:
        if not token:
            raise ValueError("empty token")
        self._tokens[_digest(token)] = user

    def authenticate_token(self, token: str) -> UserInfo | None:
        digest = _digest(token)
        info = self._tokens.get(digest)
        if info is None and self.dynamic is not None:
            info = self.dynamic(digest)
        return info.with_group(AUTHENTICATED_GROUP) if info is not None else None

    def authenticate(
        self, headers: Mapping[str, str], peercert: Mapping[str, Any] | None = None
    ) -> UserInfo | None:
        """Authenticate a request.

        ``peercert`` must be the dict from ``getpeercert()`` of a connection whose TLS layer verified the
        certificate against the CA (``server_ssl_context`` does: CERT_OPTIONAL); it is trusted as-is.
        """
        if self.client_certs and peercert:
            cn, orgs = _cert_subject(peercert)
            if cn:  # a certificate without CN identifies nobody: fall through to other credentials
                return UserInfo(cn, "", orgs).with_group(AUTHENTICATED_GROUP)

        auth = (_header(headers, "Authorization") or "").strip()
        if not auth:
            return None
        parts = auth.split(" ", 2)
        if len(parts) < 2 or parts[0].lower() != "bearer":
            return None  # another scheme (e.g. Basic) is not ours: treated as "no credentials"
        token = parts[1]
        if not token:
            raise AuthenticationError("invalid bearer token")
        user = self.authenticate_token(token)
        if user is None:
            raise AuthenticationError("invalid bearer token")
        return user


# ============================================================================================ request attributes


@dataclass(frozen=True)
class RequestAttributes:
    """What a request does, in Kubernetes authorizer terms."""

    verb: str
    path: str
    resource_request: bool = False
    api_prefix: str = ""
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    parts: tuple[str, ...] = field(default=(), compare=False)

    @property
    def qualified_resource(self) -> str:
        """``resource.group`` (or just ``resource`` for the core group), as used in error messages."""
        return f"{self.resource}.{self.api_group}" if self.api_group else self.resource


_SPECIAL_VERBS = frozenset({"proxy", "watch"})
_SPECIAL_VERBS_NO_SUBRESOURCES = frozenset({"proxy"})
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_METHOD_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
_FALSE_VALUES = frozenset({"0", "f", "false"})


def _query_first(query: Mapping[str, str] | str | None, key: str) -> str | None:
    if query is None:
        return None
    if isinstance(query, str):
        for k, v in parse_qsl(query.lstrip("?"), keep_blank_values=True):
            if k == key:
                return v
        return None
    value = query.get(key)
    if isinstance(value, list | tuple):  # e.g. urllib.parse.parse_qs output
        return str(value[0]) if value else None
    return value


def _field_selector_exact(selector: str, field_name: str) -> str | None:
    """Value required by ``field=value`` / ``field==value`` in a field selector (backslash escapes honoured)."""
    terms: list[str] = []
    buf: list[str] = []
    escaped = False
    for ch in selector:
        if escaped:
            buf.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            terms.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
    terms.append("".join(buf))
    for term in terms:
        for op in ("==", "="):
            prefix = field_name + op
            if term.startswith(prefix) and not term.startswith(field_name + "!="):
                raw = term[len(prefix) :]
                out: list[str] = []
                i = 0
                while i < len(raw):
                    if raw[i] == "\\" and i + 1 < len(raw):
                        out.append(raw[i + 1])
                        i += 2
                    else:
                        out.append(raw[i])
                        i += 1
                return "".join(out)
    return None


def _valid_path_segment(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "%" not in name


def request_attributes(
    method: str, path: str, query: Mapping[str, str] | str | None = None
) -> RequestAttributes:
    """Derive authorizer attributes from a request, following the Kubernetes apiserver's RequestInfo rules.

    ``/api/v1/...`` is the core group, ``/apis/<group>/<version>/...`` the others; anything shorter or outside
    those prefixes (``/api``, ``/apis/apps/v1``, ``/version``, ``/openapi/v3``...) is a non-resource request whose
    verb is the lower-cased HTTP method. For resources: POST=create, GET/HEAD=get (list/watch on a collection,
    watch with ``?watch=true`` or the legacy ``/watch/`` prefix), PUT=update, PATCH=patch, DELETE=delete
    (deletecollection on a collection).
    """
    method = method.upper()
    non_resource = RequestAttributes(verb=method.lower(), path=path)
    parts = path.strip("/").split("/") if path.strip("/") else []
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return non_resource
    prefix = parts[0]
    rest = parts[1:]
    group = ""
    if prefix == "apis":
        if len(rest) < 3:
            return non_resource
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]

    if rest[0] in _SPECIAL_VERBS:
        if len(rest) < 2:
            return non_resource  # "/api/v1/watch": Kubernetes rejects it; nothing to authorise as a resource
        verb, rest = rest[0], rest[1:]
    else:
        verb = _METHOD_VERBS.get(method, "")

    namespace = ""
    if rest[0] == "namespaces":
        if len(rest) > 1:
            namespace = rest[1]
            if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
                rest = rest[2:]

    resource = name = subresource = ""
    if len(rest) >= 3 and verb not in _SPECIAL_VERBS_NO_SUBRESOURCES:
        subresource = rest[2]
    if len(rest) >= 2:
        name = rest[1]
    if len(rest) >= 1:
        resource = rest[0]

    if not name and verb == "get":
        watch = _query_first(query, "watch")
        verb = "watch" if watch is not None and watch.strip().lower() not in _FALSE_VALUES | {""} else "list"
        selector = _query_first(query, "fieldSelector")
        if selector:
            selected = _field_selector_exact(selector, "metadata.name")
            if selected is not None and _valid_path_segment(selected):
                name = selected
    if not name and verb == "delete":
        verb = "deletecollection"

    return RequestAttributes(
        verb=verb,
        path=path,
        resource_request=True,
        api_prefix=prefix,
        api_group=group,
        api_version=version,
        namespace=namespace,
        resource=resource,
        subresource=subresource,
        name=name,
        parts=tuple(rest),
    )


def attributes_from_access_review(spec: Mapping[str, Any]) -> RequestAttributes:
    """Attributes from a (Self)SubjectAccessReview ``spec`` (``resourceAttributes`` or
    ``nonResourceAttributes``), for answering ``kubectl auth can-i``."""
    res = spec.get("resourceAttributes")
    if isinstance(res, Mapping):
        return RequestAttributes(
            verb=str(res.get("verb") or ""),
            path="",
            resource_request=True,
            api_group=str(res.get("group") or ""),
            api_version=str(res.get("version") or ""),
            namespace=str(res.get("namespace") or ""),
            resource=str(res.get("resource") or ""),
            subresource=str(res.get("subresource") or ""),
            name=str(res.get("name") or ""),
        )
    non = spec.get("nonResourceAttributes")
    if isinstance(non, Mapping):
        return RequestAttributes(verb=str(non.get("verb") or ""), path=str(non.get("path") or ""))
    raise ValueError("exactly one of resourceAttributes or nonResourceAttributes must be specified")


def request_attributes_of(request: web.Request) -> RequestAttributes:
    """Default ``request_attrs`` callable for :func:`auth_middleware`."""
    return request_attributes(request.method, request.path, request.query)


def is_always_allowed_path(path: str) -> bool:
    """Health and version endpoints: readable by anyone, even without credentials."""
    path = path.rstrip("/") or "/"
    return any(path == p or path.startswith(p + "/") for p in ALWAYS_ALLOWED_PATHS)


# ============================================================================================ authorisation


def _admin_only(attrs: RequestAttributes) -> bool:
    if attrs.resource_request:
        return False
    path = attrs.path.rstrip("/") or "/"
    return any(path == p or path.startswith(p + "/") for p in ADMIN_ONLY_PATHS)


def read_only_may_read(attrs: RequestAttributes) -> bool:
    """Whether a read-only role may get/list/watch what ``attrs`` names (the verb is checked by the caller).

    Everything but :data:`READ_ONLY_EXCLUDED_RESOURCES` and subresources outside :data:`READ_ONLY_SUBRESOURCES`;
    a wildcard resource or group (``kubectl auth can-i list '*'``) covers Secrets, so it is not granted either.
    """
    if not attrs.resource_request:
        return True
    if attrs.resource == "*" or attrs.api_group == "*" or attrs.subresource == "*":
        return False
    if (attrs.api_group, attrs.resource) in READ_ONLY_EXCLUDED_RESOURCES:
        return False
    return attrs.subresource in READ_ONLY_SUBRESOURCES


class Authorizer:
    """A small fixed policy.

    1. ``/healthz``, ``/readyz``, ``/livez``, ``/version`` (GET/HEAD): allowed for everyone.
    2. Anonymous requests: denied unless ``anonymous`` is enabled; then allowed in full, or only reads
       (get/list/watch and non-resource GET, with the viewers' exclusions) with ``anonymous_read_only``.
    3. Users named in ``admins`` or in one of ``admin_groups`` (default ``system:masters``): everything.
    4. Every authenticated user: non-resource GET/HEAD (discovery, OpenAPI) except :data:`ADMIN_ONLY_PATHS`
       (``/metrics``), and creating self reviews (``kubectl auth can-i`` / ``kubectl auth whoami``).
    5. Members of ``viewers_group`` (or named in ``viewers``): get/list/watch on every resource but Secrets, and
       on the status, scale and log subresources only (:func:`read_only_may_read`, like Kubernetes' ``view``).
    6. A Pull cluster's agent (``system:karmada:agent:<cluster>`` in ``system:karmada:agents``): its one
       cluster's scope (:func:`flotilla.apiserver.agent_scope.agent_may`), nothing else.
    7. Everything else is denied.

    ``authorize`` returns ``(allowed, reason)``. As with Kubernetes RBAC, the reason of an ordinary denial is
    empty so the 403 message is exactly the standard "... is forbidden: User ... cannot ..." text.
    """

    def __init__(
        self,
        *,
        admins: Iterable[str] = (),
        admin_groups: Iterable[str] = (MASTERS_GROUP,),
        viewers: Iterable[str] = (),
        viewers_group: str | None = DEFAULT_VIEWERS_GROUP,
        anonymous: bool = False,
        anonymous_read_only: bool = False,
    ) -> None:
        self.admins = frozenset(admins)
        self.admin_groups = frozenset(admin_groups)
        self.viewers = frozenset(viewers)
        self.viewers_group = viewers_group
        self.anonymous = anonymous
        self.anonymous_read_only = anonymous_read_only

    @staticmethod
    def _is_read(verb: str, attrs: RequestAttributes) -> bool:
        if attrs.resource_request:
            return verb in READ_VERBS
        return verb in ("get", "head")

    def authorize(self, user: UserInfo, verb: str, attrs: RequestAttributes) -> tuple[bool, str]:
        if not attrs.resource_request and verb in ("get", "head") and is_always_allowed_path(attrs.path):
            return True, "public health/version endpoint"
        if user.is_anonymous or UNAUTHENTICATED_GROUP in user.groups:
            if not self.anonymous:
                return False, ""
            if self.anonymous_read_only and not (self._is_read(verb, attrs) and read_only_may_read(attrs)
                                                 and not _admin_only(attrs)):
                return False, ""
            return True, "anonymous access is enabled"
        if user.name in self.admins:
            return True, f'user "{user.name}" is an admin'
        for group in user.groups:
            if group in self.admin_groups:
                return True, f'user "{user.name}" is in admin group "{group}"'
        if not attrs.resource_request:
            if verb in ("get", "head") and not _admin_only(attrs):
                return True, "non-resource read by an authenticated user"
            return False, ""
        if verb == "create" and (attrs.api_group, attrs.resource) in _SELF_REVIEWS and not attrs.subresource:
            return True, "self review by an authenticated user"
        agent_of = agent_cluster_of(user)
        if agent_of is not None:
            return agent_may(attrs, verb, agent_of)
        if verb in READ_VERBS and read_only_may_read(attrs) and (
            user.name in self.viewers
            or (self.viewers_group is not None and self.viewers_group in user.groups)
        ):
            return True, f'user "{user.name}" is a viewer'
        return False, ""


#: What :func:`may_read_secrets` asks the authorizer: reading every Secret (any namespace).
_READ_SECRETS = RequestAttributes(verb="get", path="/api/v1/secrets", resource_request=True, api_prefix="api",
                                  api_version="v1", resource="secrets")


def may_read_secrets(authorizer: Authorizer, user: UserInfo) -> bool:
    """Whether ``user`` may read Secrets: else the objects that embed a Secret's content (Works) are served to it
    redacted (:mod:`flotilla.apiserver.redaction`). Asked once per request, as a get of Secrets at the cluster
    scope, so a role that reads Secrets in some namespaces only still gets the redacted view. A Pull cluster's
    agent reads its cluster's Works whole: it applies the Secrets they carry to its cluster."""
    if agent_cluster_of(user) is not None:
        # an agent reads only its own cluster's Works, and applies the Secrets they carry to that cluster
        return True
    allowed, _ = authorizer.authorize(user, _READ_SECRETS.verb, _READ_SECRETS)
    return allowed


def forbidden_message(user: UserInfo, verb: str, attrs: RequestAttributes, reason: str = "") -> str:
    """Kubernetes' 403 message, e.g. ``configmaps is forbidden: User "bob" cannot list resource "configmaps"
    in API group "" in the namespace "default"``."""
    if not attrs.resource_request:
        detail = f'User "{user.name}" cannot {verb} path "{attrs.path}"'
    else:
        resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
        scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
        detail = (
            f'User "{user.name}" cannot {verb} resource "{resource}" in API group "{attrs.api_group}" {scope}'
        )
    if reason:
        detail = f"{detail}: {reason}"
    if not attrs.resource_request or not attrs.resource:
        return f"forbidden: {detail}"
    if attrs.name:
        return f'{attrs.qualified_resource} "{attrs.name}" is forbidden: {detail}'
    return f"{attrs.qualified_resource} is forbidden: {detail}"


def unauthorized_status() -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


def forbidden_status(user: UserInfo, verb: str, attrs: RequestAttributes, reason: str = "") -> dict[str, Any]:
    details: dict[str, Any] = {}
    if attrs.resource_request and attrs.resource:
        if attrs.name:
            details["name"] = attrs.name
        if attrs.api_group:
            details["group"] = attrs.api_group
        details["kind"] = attrs.resource
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": forbidden_message(user, verb, attrs, reason),
        "reason": "Forbidden",
        "details": details,
        "code": 403,
    }


def _status_response(body: dict[str, Any]) -> web.Response:
    return web.Response(
        status=int(body["code"]),
        body=orjson.dumps(body),
        content_type="application/json",
        headers={"X-Content-Type-Options": "nosniff"},
    )


# ============================================================================================ middleware

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def auth_middleware(
    authenticator: TokenAuthenticator,
    authorizer: Authorizer,
    *,
    anonymous: bool,
    request_attrs: Callable[[web.Request], RequestAttributes] = request_attributes_of,
    dashboard: Any = None,
) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """aiohttp middleware: authenticate, authorise, then call the handler.

    Sets ``request["user"]`` (a :class:`UserInfo`) and ``request["request_attributes"]``. Invalid credentials
    give 401 everywhere; missing credentials give the anonymous user when ``anonymous`` is true (the authorizer
    decides what it may do) and 401 otherwise, except on the always-allowed health/version paths.

    ``dashboard`` (a :class:`flotilla.dashboard.server.Dashboard`): on its paths only, a request without
    credentials may be authenticated by its session cookie (reads only: :meth:`session_user` answers GET and
    HEAD alone), the few paths it says are public (static files, the login form, a one-time token's exchange)
    reach it without credentials, and a 401 is its login page.
    """

    @web.middleware
    async def _auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        transport = request.transport
        peercert = transport.get_extra_info("peercert") if transport is not None else None
        on_dashboard = dashboard is not None and dashboard.owns(request.path)
        try:
            user = authenticator.authenticate(
                request.headers, peercert if isinstance(peercert, dict) else None
            )
        except AuthenticationError:
            if on_dashboard:
                return dashboard.unauthorized(request, "That token is not valid.")
            return _status_response(unauthorized_status())
        if user is None and on_dashboard:
            user = dashboard.session_user(request)
            if user is None and dashboard.is_public(request):
                return await handler(request)
        attrs = request_attrs(request)
        if user is None:
            if not anonymous and not is_always_allowed_path(attrs.path):
                if on_dashboard:
                    return dashboard.unauthorized(request)
                return _status_response(unauthorized_status())
            user = ANONYMOUS
        request["user"] = user
        request["request_attributes"] = attrs
        request["authorizer"] = authorizer  # what a SelfSubjectAccessReview asks
        allowed, reason = authorizer.authorize(user, attrs.verb, attrs)
        if not allowed:
            return _status_response(forbidden_status(user, attrs.verb, attrs, reason))
        return await handler(request)

    return _auth
