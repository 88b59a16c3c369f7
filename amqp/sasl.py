"""The SASL layer of AMQP 1.0, done in Python in front of proton's engine (pure: bytes in,
bytes out). proton's own server SASL offers only ANONYMOUS and EXTERNAL, and the registry's
scrypt hashes are no Cyrus store, so iot-amqp speaks SASL itself: it offers its mechanisms,
reads ``sasl-init``, lets the registry decide and answers ``sasl-outcome``; every later byte
(the client's ``AMQP 0 1 0 0`` header on) goes to proton's transport.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from proton import Data, Described, symbol

from amqp.errors import SaslError

SASL_HEADER: Final = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER: Final = b"AMQP\x00\x01\x00\x00"
HEADER_SIZE: Final = 8
MAX_SASL_FRAME: Final = 4096  # sasl-init with a PLAIN response: user, password, host name
_MECHANISMS: Final = 0x40
_INIT: Final = 0x41
_OUTCOME: Final = 0x44
_SASL_FRAME_TYPE: Final = 1
OK: Final = 0
AUTH: Final = 1  # authentication failed: bad credentials


def _frame(body: bytes) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, _SASL_FRAME_TYPE, 0) + body


def mechanisms_frame(mechanisms: tuple[str, ...]) -> bytes:
    """``sasl-mechanisms`` offering ``mechanisms``."""
    data = Data()
    data.put_described()
    data.enter()
    data.put_ulong(_MECHANISMS)
    data.put_list()
    data.enter()
    data.put_array(False, Data.SYMBOL)
    data.enter()
    for name in mechanisms:
        data.put_symbol(symbol(name))
    data.exit()
    data.exit()
    data.exit()
    return _frame(data.encode())


def outcome_frame(code: int) -> bytes:
    """``sasl-outcome`` with ``code`` (0 ok, 1 auth)."""
    data = Data()
    data.put_described()
    data.enter()
    data.put_ulong(_OUTCOME)
    data.put_list()
    data.enter()
    data.put_ubyte(code)
    data.exit()
    data.exit()
    return _frame(data.encode())


def take_frame(buffer: bytes) -> tuple[bytes | None, int]:
    """The body of the first SASL frame in ``buffer`` and the bytes it took; (None, 0) while
    the frame is incomplete. SaslError for a frame that is no SASL frame or too large."""
    if len(buffer) < 8:
        return None, 0
    size, doff, kind, _channel = struct.unpack(">IBBH", buffer[:8])
    if kind != _SASL_FRAME_TYPE or doff < 2 or size < doff * 4 or size > MAX_SASL_FRAME:
        raise SaslError(f"not a SASL frame (size {size}, doff {doff}, type {kind})")
    if len(buffer) < size:
        return None, 0
    return buffer[doff * 4 : size], size


@dataclass(frozen=True, slots=True)
class SaslInit:
    mechanism: str
    response: bytes
    hostname: str | None


def parse_init(body: bytes) -> SaslInit:
    """A ``sasl-init`` frame's body; SaslError for anything else."""
    data = Data()
    try:
        data.decode(body)
        data.rewind()
        data.next()
        found = data.get_object()
    except Exception as exc:  # proton's codec errors have no common root
        raise SaslError(f"undecodable SASL frame: {exc}") from exc
    if not isinstance(found, Described) or found.descriptor != _INIT:
        raise SaslError("expected sasl-init")
    fields = list(found.value) if isinstance(found.value, list | tuple) else []
    if not fields or not isinstance(fields[0], str):
        raise SaslError("sasl-init without a mechanism")
    response = fields[1] if len(fields) > 1 else None
    if response is not None and not isinstance(response, bytes | memoryview):
        raise SaslError("sasl-init's initial response is no binary")
    hostname = fields[2] if len(fields) > 2 and isinstance(fields[2], str) else None
    return SaslInit(str(fields[0]), bytes(response or b""), hostname)
