"""sawmill's door: its publish, range reads, realtime event streams and topic listing."""
