"""The command path's MQTT link facing a peer that breaks the protocol (no broker needed:
Mosquitto never sends such packets, so a socket on loopback plays the misbehaving server)."""

from __future__ import annotations

import socket
import threading

import pytest

from commands.mqtt_link import CommandLink, LinkLostError


def test_a_malformed_packet_drops_the_connection_not_the_worker() -> None:
    """A packet the link cannot read ends that connection with LinkLostError (the pool then
    reconnects), never the command worker with another exception."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def serve() -> None:
        conn, _ = server.accept()
        conn.recv(1024)  # CONNECT
        conn.sendall(b"\x20\x03\x00\x00\x00")  # CONNACK: success, no properties
        accepted.append(conn)

    link = CommandLink(
        host="127.0.0.1",
        port=server.getsockname()[1],
        client_id="bad-peer",
        subscription=None,
        keepalive=30,
        session_expiry=0,
        receive_maximum=10,
        clean_start=True,
    )
    server.settimeout(10)
    thread = threading.Thread(target=serve)
    thread.start()
    try:
        link.connect()
        thread.join(10)
        assert link.connected
        accepted[0].sendall(b"\xf0\x00")  # AUTH: a packet type this client never expects
        with pytest.raises(LinkLostError, match="protocol error"):
            _poll_until_lost(link)
        assert not link.connected
    finally:
        link.close()
        for conn in accepted:
            conn.close()
        server.close()


def _poll_until_lost(link: CommandLink) -> None:
    for _ in range(200):  # 10 s at most
        link.poll(0.05)
