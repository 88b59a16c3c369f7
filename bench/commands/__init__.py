"""Command round trip benchmark: ``python -m bench.commands_rtt`` (``make bench-commands``).

The issue's condition: command round-trip latency and commands/s with 1,000 online devices while
telemetry flows through the same bridge at HALF THE BRIDGE'S MAXIMUM. What runs (all on
loopback, all bounded in time):

1. Mosquitto + Kafka: a private stack on free ports (``StackConfig.servers_on_free_ports``), or
   ``--mqtt-port`` and ``--kafka-bootstrap`` of servers you run; fresh topics for this run.
2. The command path, ``--command-path separate`` (default, what ``iot-stack`` runs):
   ``iot-bridge`` with commands disabled plus ``iot-cmd serve`` as its own process (same
   ``IOT_*`` settings); ``inline``: ``iot-bridge`` with ``IOT_COMMANDS_ENABLED=1``.
3. ``--devices`` command-answering devices: ``bench/responder.py`` (raw-socket MQTT 5, PUBACK and
   reply in one write; default) or ``--responder sim`` (``iot-sim``, gmqtt, as before).
4. Telemetry: ``bench.load.LoadGenerator`` (raw-socket MQTT 3.1.1, QoS 1, 1 KiB, its own device
   ids). ``--telemetry-rate half`` (default) first measures the bridge's maximum in this run
   (publisher unpaced and window-bounded, delivered = the telemetry topic's Kafka high
   watermarks, ``--max-duration`` s with the first 2 s left out), then keeps the telemetry at
   half that rate from before the command warm-up to the end of the drain.
5. This process writes commands to ``iot.commands`` at ``--rate`` per second (first
   ``--warmup-load`` s not measured, then ``--duration`` s measured), spread over the devices,
   and follows ``iot.command-status``.

Round trip = from just before the command is handed to the Kafka producer to the moment this
process reads the command's ``succeeded`` status from Kafka: Kafka -> command path -> Mosquitto
-> device -> Mosquitto -> command path -> Kafka -> reader. Prints the result as JSON (p50 / p90 /
p99 / max, commands/s, the telemetry maximum and the rate achieved in the measured window, CPU
seconds of every process in the measured window, a stage breakdown); ``--out-dir`` writes
``commands.json`` and ``commands.md`` there. Exit 1 if any measured command got no final state.

Modules, one job each: ``options`` (the command line), ``stack_setup`` (servers, topics,
settings), ``processes`` (the command path and iot-sim as child processes), ``telemetry`` (the
telemetry load and its Kafka-side count), ``sender`` (commands sent at the rate, statuses
followed), ``cpu_window`` (CPU seconds per process group), ``broker_saves`` (Mosquitto's saves
in the measured window, from its disk writes), ``measure`` (round trips, stages,
timeline: pure), ``result`` (the figures of one run), ``report`` (JSON and Markdown), ``run``
(one run, composed of the above), ``cli`` (``main``).
"""
