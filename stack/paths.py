"""Where the launcher finds its jars and templates.

The project is used from a checkout (`pip install -e .`), so templates and the Maven-fetched jars
live beside the packages; `IOT_HOME` points elsewhere for an installed copy (the Docker image).
"""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    env = os.environ.get("IOT_HOME")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1]


def broker_libs_dir() -> Path:
    return Path(os.environ.get("IOT_KAFKA_LIBS", project_root() / "kafka" / "broker" / "libs"))


def kafka_config_dir() -> Path:
    return project_root() / "kafka" / "config"


def mosquitto_template() -> Path:
    return project_root() / "mosquitto" / "mosquitto.conf.template"


def auth_metrics_plugin() -> Path:
    """The Mosquitto plugin counting refused log-ins and publishes (built by the set-up)."""
    return project_root() / "mosquitto" / "plugins" / "build" / "iot_auth_metrics.so"


def front_auth_plugin() -> Path:
    """The shard plugin logging in devices HAProxy's TLS front checked (built by the set-up)."""
    return project_root() / "mosquitto" / "plugins" / "build" / "iot_front_auth.so"
