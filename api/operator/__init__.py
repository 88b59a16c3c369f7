"""The operator API (``/ops``): commands, devices and tenants over HTTP."""
