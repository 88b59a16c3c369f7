"""The appliance's HTTP door (`iot-api`): DMaaP Message Router compatible pub/sub on Kafka."""

__version__ = "0.1.0"
