"""What every door of iot-api shares: Kafka producer/admin/health/batch reads, the publish
framings, request parameters, authentication and topic access, limits, TLS."""
