from bridge.pending import AckWindow, Group, PartitionQueue


def _group(w: AckWindow, *ids: int) -> Group:
    g = Group(1, "telemetry", 1.0)
    for mid in ids:
        g.packet_ids.append(mid)
        g.count += 1
        g.size += 10
        w.count += 1
        w.bytes += 10
    w.add(g)
    return g


def test_only_the_confirmed_prefix_is_released_in_arrival_order() -> None:
    w = AckWindow()
    groups = [_group(w, 5), _group(w, 6, 7), _group(w, 8), _group(w, 9)]
    for g in groups:
        g.pending = 1
    w.note_high_water()
    assert (w.count, w.bytes) == (5, 50)
    groups[1].delivered(None)  # partition B confirms first
    groups[3].delivered(None)
    assert w.pop_done() == []  # 5 not confirmed: nothing may be acked
    groups[0].delivered(None)
    assert [g.packet_ids for g in w.pop_done()] == [[5], [6, 7]]
    assert (w.count, w.bytes) == (2, 20)
    groups[2].delivered("boom")
    done = w.pop_done()
    assert [(g.packet_ids, g.error) for g in done] == [([8], "boom"), ([9], None)]
    assert (w.count, w.bytes, w.high_water_count, w.high_water_bytes) == (0, 0, 5, 50)
    assert w.oldest_age() == 0.0


def test_a_group_is_done_when_its_last_report_came_and_keeps_the_first_error() -> None:
    g = Group(1, "telemetry", 1.0)
    a, b = PartitionQueue("t", 0), PartitionQueue("t", 1)
    a.join(g)
    a.join(g)  # a second record on the same partition: no second report to wait for
    b.join(g)
    assert g.pending == 2
    g.pending += 1  # and one record with a report of its own
    seg_a, seg_b = a.close_segment(), b.close_segment()
    assert (a.groups, b.groups) == ([], [])
    seg_a.delivered("first")
    g.delivered(None)
    assert not g.done_at
    seg_b.delivered("second")
    assert g.done_at > 0
    assert g.error == "first"
