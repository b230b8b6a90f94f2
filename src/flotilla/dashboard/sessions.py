"""The dashboard's one-time login tokens and browser sessions (no I/O; the clock is passed in).

``flotilla up`` prints a dashboard URL with a one-time token, as Jupyter does: the first request that carries it
exchanges it for a session (an HttpOnly, SameSite=Strict cookie) and is sent on to the URL without the token;
the token is spent then, and a second use is refused. A session stands for the user the token was issued for
and is accepted for the dashboard's reads only (never for the API, never for a write).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

__all__ = ["LOGIN_TTL", "SESSION_COOKIE", "SESSION_TTL", "Sessions"]

#: how long a one-time token stays usable (seconds)
LOGIN_TTL: Final = 24 * 3600.0
#: how long a session lasts (seconds)
SESSION_TTL: Final = 12 * 3600.0
SESSION_COOKIE: Final = "flotilla-dashboard"
_MAX_PENDING: Final = 1000  # one-time tokens waiting at once; the oldest goes first

U = TypeVar("U")


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "replace")).digest()


@dataclass
class _Entry(Generic[U]):
    user: U
    expires: float


class Sessions(Generic[U]):
    """One-time tokens and sessions, kept by their SHA-256 only (a memory dump shows no usable token)."""

    def __init__(self, login_ttl: float = LOGIN_TTL, session_ttl: float = SESSION_TTL) -> None:
        self.login_ttl = login_ttl
        self.session_ttl = session_ttl
        self._logins: dict[bytes, _Entry[U]] = {}
        self._sessions: dict[bytes, _Entry[U]] = {}

    def issue_login(self, user: U, now: float) -> str:
        """A new one-time token for ``user``."""
        self._expire(now)
        while len(self._logins) >= _MAX_PENDING:
            del self._logins[next(iter(self._logins))]
        token = secrets.token_urlsafe(32)
        self._logins[_digest(token)] = _Entry(user, now + self.login_ttl)
        return token

    def redeem(self, token: str, now: float) -> tuple[str, U] | None:
        """Spend a one-time token: (session id, user), or None when it is unknown, spent or expired."""
        entry = self._logins.pop(_digest(token), None)
        if entry is None or entry.expires <= now:
            return None
        return self.open(entry.user, now), entry.user

    def open(self, user: U, now: float) -> str:
        """A new session for ``user`` (a login with a bearer token); its id goes into the cookie."""
        self._expire(now)
        session = secrets.token_urlsafe(32)
        self._sessions[_digest(session)] = _Entry(user, now + self.session_ttl)
        return session

    def user_of(self, session: str, now: float) -> U | None:
        entry = self._sessions.get(_digest(session))
        if entry is None or entry.expires <= now:
            return None
        return entry.user

    def _expire(self, now: float) -> None:
        for table in (self._logins, self._sessions):
            for key in [k for k, e in table.items() if e.expires <= now]:
                del table[key]
