"""iot-amqp: the AMQP 1.0 door (docs/amqp.md). Devices publish telemetry and events as to
Eclipse Hono's AMQP adapter; records are the bridge's, byte for byte, plus ``orig_adapter``."""

__version__ = "0.1.0"
