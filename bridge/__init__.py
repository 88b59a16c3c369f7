"""The bridge: MQTT telemetry into Kafka, and the Kafka<->MQTT command path."""

__version__ = "0.1.0"
