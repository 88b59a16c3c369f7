"""The command path: Kafka ``iot.commands`` -> MQTT devices, replies and statuses back to Kafka.

A package of its own beside ``bridge`` (it may import the bridge, the bridge never imports it).

Pure:
- `commands.config`: `CommandConfig`, the bridge's settings and the command path's own
- `commands.kafka_settings`: librdkafka settings of its producer and ``iot.commands`` consumer
- `commands.model`: command records, their states and the state machine
- `commands.status`: status records (``iot.command-status``) and their encoding
- `commands.mapping`: command -> MQTT publish, MQTT reply -> `Reply`
- `commands.tracker`: pending set, timeouts, redelivery, reply matching; it returns
  `commands.actions` for the service to carry out
- `commands.ordered_completion`, `offsets`, `reply_acks`: what may be committed or
  acknowledged, in order

Adapters (one outside system each):
- `commands.mqtt_link` (one MQTT connection), `link_pool` (the pool), `publisher`
- `commands.command_consumer` (``iot.commands``), `record_writer` (status, replies,
  dead letters), `status_snapshot` (reading ``iot.command-status`` at start), `client`

- `commands.service`: `CommandService`, the worker thread that composes them
- `commands.metrics`, `commands.cli`: Prometheus/health, the ``iot-cmd`` script
- `commands.inline`: the ``iot-bridge`` script, the bridge with the command path in its process
"""
