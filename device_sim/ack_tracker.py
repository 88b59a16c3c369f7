"""Which QoS 1 publishes Mosquitto acknowledged: gmqtt's in-flight store, tagged by our seqs."""

from __future__ import annotations

from collections.abc import Callable

from gmqtt.storage import PersistentStorage


class AckTracker(PersistentStorage):
    """gmqtt's in-flight store, also mapping packet ids to our tags to see which are acked."""

    def __init__(self, on_ack: Callable[[int], None]) -> None:
        super().__init__()
        self.tag: int | None = None  # set by the publisher around client.publish()
        self._tags: dict[int, int] = {}
        self._on_ack = on_ack

    def push_message(self, mid: int, raw_package: bytes) -> None:
        super().push_message(mid, raw_package)
        if self.tag is not None:
            self._tags[mid] = self.tag

    def remove_message_by_mid(self, mid: int) -> None:
        super().remove_message_by_mid(mid)
        tag = self._tags.pop(mid, None)
        if tag is not None:
            self._on_ack(tag)

    def clear(self) -> None:
        # the broker has no session: these will never be resent nor acked
        self._tags.clear()
        super().clear()

    @property
    def pending(self) -> int:
        return len(self._tags)
