from __future__ import annotations

import pytest
from proton import Message, symbol

from amqp.wire import encode_message

PARTITION, OFFSET = "x-opt-kafka-partition", "x-opt-kafka-offset"


def proton_bytes(body: bytes, ann: dict[str, int], props: dict[str, str], ms: int,
                 content_type: str | None, durable: bool) -> bytes:  # fmt: skip
    msg = Message(body=body, creation_time=ms / 1000, durable=durable, inferred=True)
    if content_type is not None:
        msg.content_type = content_type
    msg.properties = props  # type: ignore[assignment]
    msg.annotations = {symbol(k): v for k, v in ann.items()}
    return bytes(msg.encode())


@pytest.mark.parametrize(
    ("body", "ann", "props", "content_type", "durable"),
    [
        (b'{"a":1}', {PARTITION: 2, OFFSET: 123456}, {"device_id": "d1", "tenant_id": "default"},
         "application/json", False),
        (b"x" * 1000, {PARTITION: 0, OFFSET: 0}, {"device_id": "d\u00e9", "tenant_id": "acme",
         "orig_adapter": "amqp", "received_at": "1764400000123"}, "application/json", True),
        (b"", {PARTITION: 127, OFFSET: -1}, {}, None, False),  # an MR topic record, no key
        (b"y" * 70_000, {PARTITION: 128, OFFSET: 2**40}, {"k": "v" * 300}, None, False),
    ],
)  # fmt: skip
def test_bytes_are_protons(
    body: bytes, ann: dict[str, int], props: dict[str, str], content_type: str | None,
    durable: bool,
) -> None:  # fmt: skip
    ms = 1764400000000  # whole seconds: proton's seconds -> ms truncation loses nothing
    ours = encode_message(body, annotations=ann, properties=props, creation_ms=ms,
                          content_type=content_type, durable=durable)  # fmt: skip
    assert ours == proton_bytes(body, ann, props, ms, content_type, durable)


def test_decoded_by_proton_with_the_exact_millisecond() -> None:
    ms = 1764400000123
    raw = encode_message(b"{}", annotations={PARTITION: 1, OFFSET: 99},
                         properties={"device_id": "d1"}, creation_ms=ms,
                         content_type="application/json", durable=True)  # fmt: skip
    msg = Message()
    msg.decode(raw)
    assert bytes(msg.body) == b"{}"  # type: ignore[arg-type]  # a memoryview here
    assert msg.durable is True
    assert msg.content_type == "application/json"
    assert round(msg.creation_time * 1000) == ms
    assert msg.properties == {"device_id": "d1"}
    assert msg.annotations == {symbol(PARTITION): 1, symbol(OFFSET): 99}
