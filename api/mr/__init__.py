"""DMaaP Message Router's door: events and topics, consumer groups for long polls, ``/apiKeys``,
MR's metrics."""
