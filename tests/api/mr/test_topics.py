"""/topics on the real Kafka: list, listAll, details, create (string or int numbers), delete."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.api.harness import Client

pytestmark = pytest.mark.integration


def test_create_list_details_delete(api: Client) -> None:
    name = f"api.created.{uuid.uuid4().hex[:10]}"
    body = (
        f'{{"topicName":"{name}","topicDescription":"pumps","partitionCount":"2",'
        '"replicationCount":"1","transactionEnabled":"false"}'
    )
    created = api.request("POST", "/topics/create", body, "application/json")
    assert created.status == 200, created.body
    assert created.json() == {
        "name": name,
        "description": "pumps",
        "owner": "",
        "readerAcl": {"enabled": True, "users": []},
        "writerAcl": {"enabled": True, "users": []},
    }
    again = api.request("POST", "/topics/create", body, "application/json")
    assert again.status == 409
    assert again.json()["mrstatus"] == 6003
    assert again.json()["message"] == (
        f"Failed to create topic:Could not create topic [{name}]. Topic Alreay exists."
    )
    assert name in api.request("GET", "/topics").json()["topics"]
    listed = api.request("GET", "/topics/listAll").json()["topics"]
    assert {"topicName": name, "owner": "", "txenabled": False} in listed
    details = api.request("GET", f"/topics/{name}")
    assert details.status == 200
    assert details.json()["name"] == name
    assert details.json()["description"] == "pumps"
    # the topic is real: publish and it holds the record in one of its 2 partitions
    assert api.publish(name, "x", "text/plain").status == 200

    deleted = api.request("DELETE", f"/topics/{name}")
    assert deleted.status == 200
    assert deleted.headers["Content-Type"].startswith("text/html")
    assert deleted.body.decode() == f"Topic [{name}] deleted successfully"
    deadline = time.monotonic() + 30
    while name in api.request("GET", "/topics").json()["topics"]:
        assert time.monotonic() < deadline, "the topic is still listed"
        time.sleep(0.5)
    missing = api.request("GET", f"/topics/{name}")
    assert missing.status == 404
    assert missing.json()["mrstatus"] == 6002
    assert missing.json()["message"] == (
        f"Failed to retrieve details of topic:{name}Topic [{name}] does not exist."
    )


def test_create_with_integer_numbers(api: Client) -> None:
    name = f"api.ints.{uuid.uuid4().hex[:10]}"
    body = f'{{"topicName":"{name}","partitionCount":3,"replicationCount":1}}'
    assert api.request("POST", "/topics/create", body, "application/json").status == 200
    assert api.request("DELETE", f"/topics/{name}").status == 200


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"topicName":"t1","replicationCount":"4"}', "The replica count must be between 1 and 3."),
        ('{"topicName":"t1","partitionCount":0}', "The partition count must be at least 1."),
        ("{not json", "Incorrect JSON object.Could not parse JSON."),
        ('{"partitionCount":1}', "Incorrect JSON object.Could not parse JSON."),
    ],
)
def test_bad_create_bodies_are_400(api: Client, body: str, message: str) -> None:
    reply = api.request("POST", "/topics/create", body, "application/json")
    assert reply.status == 400
    assert reply.json()["mrstatus"] == 5005
    assert reply.json()["message"].startswith(message)


def test_delete_of_a_missing_topic_is_404(api: Client) -> None:
    name = f"api.missing.{uuid.uuid4().hex[:10]}"
    reply = api.request("DELETE", f"/topics/{name}")
    assert reply.status == 404
    assert reply.json() == {
        "mrstatus": 6004,
        "helpURL": "http://onap.readthedocs.io",
        "message": f"Failed to delete topic:{name}Failed to delete topic. "
        f"Topic [{name}] does not exist.",
        "status": 404,
    }
