"""The services' metrics and health endpoint, shared by the bridge, the command path and the
analytics job (stdlib HTTP server and prometheus_client; imports nothing first-party)."""
