"""The command path: Kafka ``iot.commands`` -> MQTT devices, replies and statuses back to Kafka.

- `bridge.commands.model`: command/status records and the state machine (pure)
- `bridge.commands.mapping`: command -> MQTT publish, MQTT reply -> `Reply` (pure)
- `bridge.commands.tracker`: pending set, timeouts, redelivery, reply matching (pure)
- `bridge.commands.service`: `CommandService`, the I/O around the tracker
- `bridge.commands.cli`: the ``iot-cmd`` console script
"""
