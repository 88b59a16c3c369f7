"""Benchmarks of the IoT appliance (run on demand: ``python -m bench run --suite ingest``)."""
