"""Console sessions (pure): random tokens kept only as hashes, CSRF tokens, expiry.

A session lives ``ttl_s`` after login at most, and ends sooner when unused for ``idle_s``.
The cookie carries the token; the store keeps its SHA-256, so a dump of the store logs no one in.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from registry.permissions import Actor

COOKIE = "iot_console"


@dataclass(frozen=True, slots=True)
class Session:
    actor: Actor
    csrf: str
    created: float
    seen: float


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class SessionStore:
    def __init__(
        self, ttl_s: float, idle_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl_s = ttl_s
        self.idle_s = idle_s
        self._clock = clock
        self._sessions: dict[bytes, Session] = {}

    def create(self, actor: Actor) -> tuple[str, Session]:
        """A new session for ``actor``: (cookie token, session)."""
        self._expire()
        token = secrets.token_urlsafe(32)
        now = self._clock()
        session = Session(actor, secrets.token_urlsafe(32), now, now)
        self._sessions[_digest(token)] = session
        return token, session

    def get(self, token: str | None) -> Session | None:
        """The live session of ``token`` (its idle clock restarts), or None."""
        if not token:
            return None
        key = _digest(token)
        session = self._sessions.get(key)
        if session is None:
            return None
        now = self._clock()
        if now - session.created > self.ttl_s or now - session.seen > self.idle_s:
            del self._sessions[key]
            return None
        session = replace(session, seen=now)
        self._sessions[key] = session
        return session

    def end(self, token: str | None) -> None:
        if token:
            self._sessions.pop(_digest(token), None)

    def end_actor(self, name: str) -> int:
        """End every session of an operator (account disabled or rotated)."""
        gone = [k for k, s in self._sessions.items() if s.actor.name == name]
        for key in gone:
            del self._sessions[key]
        return len(gone)

    def _expire(self) -> None:
        now = self._clock()
        for key, s in list(self._sessions.items()):
            if now - s.created > self.ttl_s or now - s.seen > self.idle_s:
                del self._sessions[key]

    def __len__(self) -> int:
        return len(self._sessions)


def csrf_ok(session: Session, presented: str | None) -> bool:
    return presented is not None and hmac.compare_digest(session.csrf, presented)
