"""The command benchmark's one failure: a part did not start or the condition was not set up."""

from __future__ import annotations


class BenchError(Exception):
    """A process of the benchmark did not start, or the condition could not be set up."""
