"""Long-lived Kafka consumers watched for a silent stall and replaced (issue 32), shared by
every service: the pure judge (``stall``), the Kafka questions it needs (``consumer``) and the
reaper that frees a replaced client off its owner's thread or event loop (``retired``)."""
