"""The bridge: MQTT telemetry into Kafka. The Kafka<->MQTT command path is the package
``commands``, which uses this one (never the reverse)."""

__version__ = "0.1.0"
