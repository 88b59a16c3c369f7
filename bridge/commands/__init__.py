"""The command path: Kafka ``iot.commands`` -> MQTT devices, replies and statuses back to Kafka.

Pure:
- `bridge.commands.model`: command records, their states and the state machine
- `bridge.commands.status`: status records (``iot.command-status``) and their encoding
- `bridge.commands.mapping`: command -> MQTT publish, MQTT reply -> `Reply`
- `bridge.commands.tracker`: pending set, timeouts, redelivery, reply matching; it returns
  `bridge.commands.actions` for the service to carry out
- `bridge.commands.ordered_completion`, `offsets`, `reply_acks`: what may be committed or
  acknowledged, in order

Adapters (one outside system each):
- `bridge.commands.mqtt_link` (one MQTT connection), `link_pool` (the pool), `publisher`
- `bridge.commands.command_consumer` (``iot.commands``), `record_writer` (status, replies,
  dead letters), `status_snapshot` (reading ``iot.command-status`` at start), `client`

- `bridge.commands.service`: `CommandService`, the worker thread that composes them
- `bridge.commands.metrics`, `bridge.commands.cli`: Prometheus/health, the ``iot-cmd`` script
"""
