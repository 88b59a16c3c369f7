"""MR's error body and codes (contract §1.1-1.2), and the service's own error root.

Every error leaves as ``{"mrstatus", "helpURL", "message", "status"}`` with
``Content-Type: application/json`` (contract DEV: never the reference's 1-field bodies).
"""

from __future__ import annotations

HELP_URL = "http://onap.readthedocs.io"

# mrstatus codes, as the reference's DMaaPResponseCode sends them (not api.rst's labels)
RESOURCE_NOT_FOUND = 3001
SERVER_UNAVAILABLE = 3002
METHOD_NOT_ALLOWED = 3003
GENERIC_INTERNAL_ERROR = 1004
INVALID_CREDENTIALS = 4001
ACCESS_NOT_PERMITTED = 4002
MSG_SIZE_EXCEEDS_BATCH_LIMIT = 5001
INCORRECT_BATCHING_FORMAT = 5003
MSG_SIZE_EXCEEDS_MSG_LIMIT = 5004
INCORRECT_JSON = 5005
PARTIAL_PUBLISH_MSGS = 5007
CONSUME_MSG_ERROR = 5008
PUBLISH_MSG_ERROR = 5009
TOO_MANY_REQUESTS = 5012
GET_TOPICS_FAIL = 6001
GET_TOPICS_DETAILS_FAIL = 6002
CREATE_TOPIC_FAIL = 6003
DELETE_TOPIC_FAIL = 6004

# the reference's standard texts (DMaaPErrorMessages defaults)
TOPIC_NOT_EXIST = "No such topic exists."
NOT_FOUND = "The requested resource was not found.Please verify the URL and try again"
SERVER_UNAV = (
    "Server is temporarily unavailable or busy.Try again later, or try another server in the "
    "cluster."
)
METHOD_NOT_ALLOWED_TEXT = (
    "The specified HTTP method is not allowed for the requested resource.Enter a valid HTTP "
    "method and try again."
)
INCORRECT_JSON_TEXT = (
    "Incorrect JSON object.Could not parse JSON. Please correct the JSON format and try again."
)
PUBLISH_MSG_ERROR_TEXT = "Error while publishing data to topic."
PUBLISH_MSG_COUNT = "Successfully published number of messages :"
MSG_SIZE_EXCEEDS = "Message size exceeds the default size."
AUTH_FAILURE = (
    "Access Denied: Invalid Credentials. Enter a valid MechId and Password and try again."
)


class ApiError(Exception):
    """An answer other than success: HTTP status, MR code and text."""

    def __init__(self, status: int, mrstatus: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.mrstatus = mrstatus
        self.message = message

    def body(self) -> dict[str, object]:
        return error_body(self.status, self.mrstatus, self.message)


class ConfigError(Exception):
    """Settings that cannot run."""


def error_body(status: int, mrstatus: int, message: str) -> dict[str, object]:
    """MR's 4-field error object (ErrorResponse.getErrMapperStr)."""
    return {"mrstatus": mrstatus, "helpURL": HELP_URL, "message": message, "status": status}


def bad_framing(message: str) -> ApiError:
    """A body that does not follow its Content-Type's framing: 400 with the reader's text."""
    return ApiError(400, INCORRECT_BATCHING_FORMAT, message)


def no_such_topic(topic: str) -> ApiError:
    return ApiError(404, RESOURCE_NOT_FOUND, f"{TOPIC_NOT_EXIST}-[{topic}]")


def partial_publish(topic: str, acked: int, detail: str, status: int = 503) -> ApiError:
    """Kafka failed after some records: mrstatus 5007 with the count Kafka acknowledged."""
    return ApiError(
        status,
        PARTIAL_PUBLISH_MSGS,
        f"{PUBLISH_MSG_ERROR_TEXT}:{topic}.{PUBLISH_MSG_COUNT}{acked}.{detail}",
    )
