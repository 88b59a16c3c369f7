"""Small socket helpers: free ports for tests, reachability for readiness checks."""

from __future__ import annotations

import random
import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free now (another process may still take it before we bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct free ports (all held open while choosing, so none repeats)."""
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
