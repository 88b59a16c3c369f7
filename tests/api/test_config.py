from __future__ import annotations

import pytest

from api.config import ApiConfig
from api.errors import ConfigError


def test_defaults_env_flags_precedence() -> None:
    assert ApiConfig.load([], environ={}).api_port == 3904
    env = {"IOT_API_PORT": "4000", "IOT_INSECURE_ANONYMOUS": "yes"}
    assert ApiConfig.load([], environ=env).api_port == 4000
    cfg = ApiConfig.load(["--api-port", "4001"], environ=env)
    assert cfg.api_port == 4001
    assert cfg.insecure_anonymous is True
    assert ApiConfig.load(["--no-insecure-anonymous"], environ=env).insecure_anonymous is False


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="api_port"):
        ApiConfig.load(["--api-port", "70000"], environ={})
    with pytest.raises(ConfigError, match="cannot read"):
        ApiConfig.load([], environ={"IOT_MAX_MESSAGE_BYTES": "lots"})
    with pytest.raises(ConfigError, match="max_request_bytes"):
        ApiConfig.load(["--max-request-bytes", "10"], environ={})
    with pytest.raises(ConfigError, match="unknown"):
        ApiConfig.load([], environ={}, nope=1)


def test_never_anonymous_by_default() -> None:
    with pytest.raises(ConfigError, match="--insecure-anonymous"):
        ApiConfig.load([], environ={}).check_can_start()
    ApiConfig.load(["--insecure-anonymous"], environ={}).check_can_start()
    ApiConfig.load(["--registry-auth"], environ={}).check_can_start()


def test_queue_and_stream_settings_are_checked() -> None:
    cfg = ApiConfig.load([], environ={"IOT_QUEUE_MAX_DELIVERIES": "3"})
    assert (cfg.queue_max_deliveries, cfg.queue_visibility_s) == (3, 30.0)
    for flags, name in (
        (["--queue-visibility-s", "0"], "queue_visibility_s"),
        (["--queue-visibility-s", "100", "--queue-visibility-max-s", "50"], "queue_visibility"),
        (["--queue-max-deliveries", "0"], "queue_max_deliveries"),
        (["--queue-markers-topic", "bad name"], "queue_markers_topic"),
        (["--sse-heartbeat-s", "0"], "sse_heartbeat_s"),
    ):
        with pytest.raises(ConfigError, match=name):
            ApiConfig.load(flags, environ={})
