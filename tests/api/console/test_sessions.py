from __future__ import annotations

from api.console.sessions import SessionStore, csrf_ok
from registry.model import Role
from registry.permissions import Actor

ALICE = Actor("svc/alice", (Role.OPERATOR,))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_is_found_by_its_token_only() -> None:
    store = SessionStore(3600, 600, Clock())
    token, session = store.create(ALICE)
    assert store.get(token) is not None
    assert store.get(token + "x") is None
    assert store.get(None) is None
    assert token not in repr(store._sessions)  # only the token's hash is kept
    assert session.csrf != token


def test_idle_and_absolute_expiry() -> None:
    clock = Clock()
    store = SessionStore(ttl_s=100, idle_s=30, clock=clock)
    token, _ = store.create(ALICE)
    for _ in range(3):  # used every 25 s: idle never ends it ...
        clock.now += 25
        assert store.get(token) is not None
    clock.now += 26  # ... but 101 s after login it ends
    assert store.get(token) is None
    token2, _ = store.create(ALICE)
    clock.now += 31
    assert store.get(token2) is None


def test_logout_and_end_actor() -> None:
    store = SessionStore(3600, 600, Clock())
    t1, _ = store.create(ALICE)
    t2, _ = store.create(ALICE)
    t3, _ = store.create(Actor("svc/bob", (Role.VIEWER,)))
    store.end(t1)
    assert store.get(t1) is None
    assert store.end_actor("svc/alice") == 1
    assert store.get(t2) is None
    assert store.get(t3) is not None


def test_csrf_check() -> None:
    _, session = SessionStore(3600, 600, Clock()).create(ALICE)
    assert csrf_ok(session, session.csrf)
    assert not csrf_ok(session, None)
    assert not csrf_ok(session, session.csrf[:-1] + "A" if session.csrf[-1] != "A" else "B")
