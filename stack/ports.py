"""Small socket helpers: free ports for tests, reachability for readiness checks.

A port found free is only free *now*: between the choice and the server's bind, another process
may take it. Two sources of such thefts: Linux gives the same ephemeral range (32768-60999)
to every outgoing connection (a Kafka client connecting takes the port a test just chose), and
several test processes choosing at once. A test run closes both with a *port pool*: the
environment variable ``PORT_POOL_ENV`` names a file shared by every process of the run (the
pytest workers and the servers they start); ports are then handed out in turn from below the
ephemeral range, under a file lock, so no two choosers get the same port until the pool wraps.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
from collections.abc import Iterator
from contextlib import contextmanager

PORT_POOL_ENV = "TEST_PORT_POOL_FILE"  # not IOT_: tests strip IOT_* from servers' env
POOL_FIRST, POOL_LAST = 20000, 32767  # below Linux's ephemeral range


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free now (another process may still take it before we bind)."""
    return free_ports(1, host)[0]


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct free ports (all held open while choosing, so none repeats)."""
    pooled = _from_pool(count, host, consecutive=False)
    if pooled is not None:
        return pooled
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in socks:
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def free_port_run(count: int, host: str = "127.0.0.1", tries: int = 200) -> int:
    """The first of `count` consecutive ports that are all free now (for a local Kafka cluster,
    whose nodes take consecutive ports).

    Searched below Linux's ephemeral range (32768+), where every outgoing connection takes a
    port and a run of free ones is rare on a busy machine; SO_REUSEADDR as the servers bind.
    """
    pooled = _from_pool(count, host, consecutive=True)
    if pooled is not None:
        return pooled[0]
    rng = random.Random()
    for _ in range(tries):
        base = rng.randrange(20000, 32768 - count)
        socks: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((host, port))
            return base
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise OSError(f"no run of {count} free ports found in {tries} tries")


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


@contextmanager
def _locked_cursor(path: str) -> Iterator[list[int]]:
    """The pool's next port, as a one-element list to update, under an exclusive lock."""
    with open(path, "a+", encoding="ascii") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        text = f.read().strip()
        cursor = [int(text) if text.isdigit() else POOL_FIRST]
        yield cursor
        f.seek(0)
        f.truncate()
        f.write(str(cursor[0]))


def _from_pool(count: int, host: str, *, consecutive: bool) -> list[int] | None:
    """`count` ports from the run's pool (consecutive ones if asked), or None without a pool."""
    path = os.environ.get(PORT_POOL_ENV)
    if not path:
        return None
    span = POOL_LAST - POOL_FIRST + 1
    with _locked_cursor(path) as cursor:
        found: list[int] = []
        for _ in range(span):
            port = cursor[0]
            cursor[0] = POOL_FIRST if port >= POOL_LAST else port + 1
            if consecutive and found and port != found[-1] + 1:
                found = []  # wrapped: start the run again
            if _bindable(host, port):
                found.append(port)
            else:
                found = [] if consecutive else found
            if len(found) == count:
                return found
    raise OSError(f"the port pool {path} has no {count} free ports")
