"""Cutting a byte stream into MQTT packets (fixed header: type and flags, remaining length).

The framing is the same in MQTT 3.1.1 and 5, so every reader here serves both.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqtt_codec.varint import decode_varint


def split_packets(buf: bytearray) -> tuple[list[tuple[int, bytes]], int]:
    """Cut complete packets off the front of ``buf``: ([(first byte, body)], bytes consumed).

    An incomplete packet at the end is left for the next call (nothing consumed of it);
    a remaining length longer than four bytes raises :class:`MqttProtocolError`.
    """
    out: list[tuple[int, bytes]] = []
    pos = 0
    size = len(buf)
    while size - pos >= 2:
        first = buf[pos]
        length = buf[pos + 1]
        start = pos + 2
        if length & 0x80:
            decoded = decode_varint(buf, pos + 1)
            if decoded is None:
                break
            length, start = decoded
        end = start + length
        if end > size:
            break
        out.append((first, bytes(buf[start:end])))
        pos = end
    return out, pos


@dataclass(frozen=True, slots=True)
class Packet:
    """One packet: its type (high nibble), flags (low nibble) and body (after the header)."""

    kind: int
    flags: int
    body: bytes


class StreamReader:
    """Splits a byte stream into :class:`Packet` s; :meth:`feed` returns the complete ones."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Packet]:
        buf = self._buf
        buf += data
        packets, used = split_packets(buf)
        del buf[:used]
        return [Packet(first >> 4, first & 0x0F, body) for first, body in packets]
