from __future__ import annotations

from api.errors import ApiError, error_body, no_such_topic, partial_publish


def test_error_body_has_mrs_four_fields() -> None:
    assert error_body(404, 3001, "x") == {
        "mrstatus": 3001,
        "helpURL": "http://onap.readthedocs.io",
        "message": "x",
        "status": 404,
    }
    assert ApiError(413, 5004, "big").body()["status"] == 413


def test_standard_messages() -> None:
    assert no_such_topic("t").message == "No such topic exists.-[t]"
    assert (no_such_topic("t").status, no_such_topic("t").mrstatus) == (404, 3001)
    error = partial_publish("t", 3, "timed out")
    assert (error.status, error.mrstatus) == (503, 5007)
    assert error.message == (
        "Error while publishing data to topic.:t.Successfully published number of messages :3."
        "timed out"
    )
