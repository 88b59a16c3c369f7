"""Typed settings shared by the services: one frozen dataclass per service, its fields declared
with :func:`appconfig.settings.setting`, read from defaults < ``IOT_*`` environment < flags."""
