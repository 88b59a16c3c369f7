"""DMaaP Message Router's door: consumer groups for long polls, ``/apiKeys``, MR's metrics."""
