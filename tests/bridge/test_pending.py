from bridge.pending import AckWindow, Entry


def test_only_the_confirmed_prefix_is_released_in_arrival_order() -> None:
    w = AckWindow()
    entries = [Entry(mid, 1, 10, "telemetry", 1.0) for mid in (5, 6, 7, 8)]
    for e in entries:
        w.add(e)
    assert (w.count, w.bytes) == (4, 40)
    entries[1].delivered(None)  # partition B confirms first
    entries[3].delivered(None)
    assert w.pop_done() == []  # 5 not confirmed: nothing may be acked
    entries[0].delivered(None)
    assert [e.packet_id for e in w.pop_done()] == [5, 6]
    assert (w.count, w.bytes) == (2, 20)
    entries[2].delivered("boom")
    done = w.pop_done()
    assert [(e.packet_id, e.error) for e in done] == [(7, "boom"), (8, None)]
    assert (w.count, w.bytes, w.high_water_count, w.high_water_bytes) == (0, 0, 4, 40)
    assert w.oldest_age() == 0.0
