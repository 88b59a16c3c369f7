"""The operator console: a browser UI served by iot-api under ``/console`` (docs/console.md)."""
