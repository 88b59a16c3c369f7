"""The codec's one error: what the peer sent is not a packet this codec accepts."""

from __future__ import annotations


class MqttProtocolError(Exception):
    """A malformed or unsupported MQTT packet (MQTT 5.0 4.13: the connection must close).

    Encoders raise :class:`ValueError` for out-of-range arguments (a caller's bug); decoders
    raise this for bad bytes, whoever sent them.
    """
