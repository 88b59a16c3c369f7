"""AckTracker: which packet ids (tagged by our seqs) Mosquitto acknowledged."""

from __future__ import annotations

from device_sim.ack_tracker import AckTracker


def test_ack_tracker_maps_packet_ids_to_tags() -> None:
    acked: list[int] = []
    tracker = AckTracker(acked.append)
    tracker.tag = 7
    tracker.push_message(1, b"p1")
    tracker.tag = 8
    tracker.push_message(2, b"p2")
    tracker.tag = None
    tracker.push_message(3, b"status")  # untagged (e.g. the status message)
    assert tracker.pending == 2
    tracker.remove_message_by_mid(2)
    tracker.remove_message_by_mid(3)
    tracker.remove_message_by_mid(99)  # unknown: ignored
    assert acked == [8]
    tracker.clear()  # the broker lost the session: mid 1 will never be acked
    tracker.remove_message_by_mid(1)
    assert acked == [8]
    assert tracker.is_empty
