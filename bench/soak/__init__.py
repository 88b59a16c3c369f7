"""``make bench-soak``: the bridge at a steady share of its maximum for a long time (issue 18)."""
