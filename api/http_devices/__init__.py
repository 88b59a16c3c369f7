"""HTTP devices (Hono's HTTP adapter): telemetry, events, commands over HTTP."""
