"""``make bench-fleet`` (``python -m bench.fleet``): a scripted fleet run at scale (issue 19).

A private Mosquitto + Kafka (the launcher, free ports), the real bridge, and ``--devices``
simulated devices, each its own MQTT connection, connecting at ``--connect-rate`` and holding
their connections for ``--duration`` seconds of traffic. Recorded: connect time, throughput,
end-to-end latency percentiles over time, CPU and RSS of the bridge, Mosquitto, Kafka and the
simulator over time, the verifier's verdict; written with plots to ``bench/results``.
"""
