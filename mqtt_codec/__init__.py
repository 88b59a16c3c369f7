"""The one MQTT packet codec: bytes in, packets out, and back (pure: no sockets, no asyncio).

Why our own codec rather than a client library's: the bridge must send PUBACKs only after
Kafka's delivery report, in arrival order, batched into one socket write per drain. paho-mqtt
writes one PUBACK per ``ack()`` call; gmqtt has no manual-ack API at all (it acks when
``on_message`` returns). The command path publishes (QoS 1 with correlation data, response
topic, message expiry and user properties) and reads PUBACK reason codes: paho spent ~0.3 ms
of Python per command on the same packets, here they are a few struct calls. The benchmarks'
load generator, counting subscriber and command responder must cost less than what they
measure, so they speak raw packets too.

MQTT 5.0 (chapter 3) for the packets a client needs: CONNECT/CONNACK, SUBSCRIBE/SUBACK,
PUBLISH, PUBACK, PINGREQ/PINGRESP and DISCONNECT, with every property type; MQTT 3.1.1 for
CONNECT and PUBLISH. CONNECT is also decoded (tests, fake servers).

Modules: :mod:`~mqtt_codec.varint`, :mod:`~mqtt_codec.framing` (a byte stream into packets),
:mod:`~mqtt_codec.properties`, :mod:`~mqtt_codec.encoders`, :mod:`~mqtt_codec.decoders`,
:mod:`~mqtt_codec.constants`, :mod:`~mqtt_codec.reasons` and :mod:`~mqtt_codec.errors`;
everything public is importable from the package.
"""

from mqtt_codec.constants import (
    CONNACK,
    CONNECT,
    CORRELATION_DATA,
    DISCONNECT,
    DISCONNECT_NORMAL,
    MESSAGE_EXPIRY,
    MQTT_3_1_1,
    MQTT_5,
    PINGREQ,
    PINGREQ_PACKET,
    PINGRESP,
    PROPERTY_TYPES,
    PUBACK,
    PUBLISH,
    PUBLISH_PROPERTIES,
    RECEIVE_MAXIMUM,
    RESPONSE_TOPIC,
    SUBACK,
    SUBSCRIBE,
    USER_PROPERTY,
)
from mqtt_codec.decoders import (
    Connack,
    Connect,
    ParsedPublish,
    Publish,
    decode_connack,
    decode_connect,
    decode_disconnect_reason,
    decode_puback,
    decode_publish,
    decode_suback,
    parse_publish,
)
from mqtt_codec.encoders import (
    encode_connect,
    encode_puback,
    encode_pubacks,
    encode_publish,
    encode_subscribe,
    publish_head,
    set_dup,
)
from mqtt_codec.errors import MqttProtocolError
from mqtt_codec.framing import Packet, StreamReader, split_packets
from mqtt_codec.properties import (
    PropertyValue,
    decode_properties,
    encode_properties,
    iter_properties,
    parse_publish_properties,
    publish_properties,
)
from mqtt_codec.reasons import CONNACK_REASONS, DISCONNECT_REASONS, PERMANENT_CONNACK_REASONS
from mqtt_codec.varint import decode_varint, encode_varint

__all__ = [
    "CONNACK",
    "CONNACK_REASONS",
    "CONNECT",
    "CORRELATION_DATA",
    "DISCONNECT",
    "DISCONNECT_NORMAL",
    "DISCONNECT_REASONS",
    "MESSAGE_EXPIRY",
    "MQTT_3_1_1",
    "MQTT_5",
    "PERMANENT_CONNACK_REASONS",
    "PINGREQ",
    "PINGREQ_PACKET",
    "PINGRESP",
    "PROPERTY_TYPES",
    "PUBACK",
    "PUBLISH",
    "PUBLISH_PROPERTIES",
    "RECEIVE_MAXIMUM",
    "RESPONSE_TOPIC",
    "SUBACK",
    "SUBSCRIBE",
    "USER_PROPERTY",
    "Connack",
    "Connect",
    "MqttProtocolError",
    "Packet",
    "ParsedPublish",
    "PropertyValue",
    "Publish",
    "StreamReader",
    "decode_connack",
    "decode_connect",
    "decode_disconnect_reason",
    "decode_properties",
    "decode_puback",
    "decode_publish",
    "decode_suback",
    "decode_varint",
    "encode_connect",
    "encode_properties",
    "encode_puback",
    "encode_pubacks",
    "encode_publish",
    "encode_subscribe",
    "encode_varint",
    "iter_properties",
    "parse_publish",
    "parse_publish_properties",
    "publish_head",
    "publish_properties",
    "set_dup",
    "split_packets",
]
