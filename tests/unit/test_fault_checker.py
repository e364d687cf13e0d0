"""The fault tests' checker (tests/cluster/checker.py) on hand-made histories: each anomaly it exists to
find is found, and a clean history passes. Without this, a checker that reports nothing would make every
fault test pass."""

from __future__ import annotations

from tests.cluster.checker import History, check_history


def clean() -> tuple[list[tuple[int, int, bytes]], dict[int, list[tuple[int, bytes]]]]:
    """Two partitions, three acknowledged writes each, read back as written."""
    acked = [(0, 0, b"v-0"), (1, 0, b"v-1"), (0, 1, b"v-2"), (1, 1, b"v-3"), (0, 2, b"v-4"), (1, 2, b"v-5")]
    read = {0: [(0, b"v-0"), (1, b"v-2"), (2, b"v-4")], 1: [(0, b"v-1"), (1, b"v-3"), (2, b"v-5")]}
    return acked, read


def test_a_clean_history_passes():
    acked, read = clean()
    consumed = [(p, o, v) for p, records in read.items() for o, v in records]
    report = check_history(acked, read, consumed, expect_all_consumed=True)
    assert report.ok, str(report)
    assert "clean" in str(report) and "6 acknowledged" in str(report)


def test_unacknowledged_records_in_the_log_are_no_anomaly():
    # a write whose acknowledgement never arrived (the producer timed out) may well be committed
    acked, read = clean()
    read[0].append((3, b"v-6"))
    assert check_history(acked, read, [(0, 3, b"v-6")]).ok


def test_a_lost_acknowledged_write_is_reported():
    acked, read = clean()
    del read[1][2]
    report = check_history(acked, read)
    assert not report.ok and report.lost == [(1, 2, b"v-5")]
    assert "lost 1" in str(report)


def test_an_acknowledged_write_at_another_offset_is_lost_there():
    acked, read = clean()
    read[0] = [(0, b"v-0"), (1, b"v-4"), (2, b"v-2")]
    report = check_history(acked, read)
    assert report.lost == [(0, 1, b"v-2"), (0, 2, b"v-4")]


def test_a_duplicate_is_reported():
    acked, read = clean()
    read[0].append((3, b"v-4"))
    report = check_history(acked, read)
    assert report.duplicated == [b"v-4"] and not report.ok
    assert "duplicated 1" in str(report)


def test_reordering_within_a_partition_is_reported():
    # v-4 written before v-2 though the producer sent v-2 first: acknowledged at those offsets, still wrong
    acked = [(0, 0, b"v-0"), (0, 1, b"v-4"), (0, 2, b"v-2")]
    read = {0: [(0, b"v-0"), (1, b"v-4"), (2, b"v-2")]}
    report = check_history(acked, read)
    assert report.reordered == [(0, b"v-4", b"v-2")] and not report.ok
    assert "reordered 1" in str(report)


def test_values_of_different_producers_are_ordered_separately():
    acked = [(0, 0, b"a-5"), (0, 1, b"b-1"), (0, 2, b"a-6"), (0, 3, b"b-2")]
    read = {0: [(0, b"a-5"), (1, b"b-1"), (2, b"a-6"), (3, b"b-2")]}
    assert check_history(acked, read).ok


def test_a_dirty_read_of_a_record_that_vanished_is_reported():
    # the consumer was given t-7 at offset 3, never acknowledged; afterwards offset 3 holds something else
    acked, read = clean()
    read[0].append((3, b"v-6"))
    report = check_history(acked, read, [(0, 0, b"v-0"), (0, 3, b"t-7")])
    assert report.dirty == [(0, 3, b"t-7")] and not report.ok
    assert "dirty 1" in str(report)


def test_an_aborted_record_returned_is_a_dirty_read_even_if_it_stays_in_the_log():
    acked, read = clean()
    report = check_history(acked, read, [(1, 3, b"t-1")], aborted=[b"t-1"])
    assert report.dirty == [(1, 3, b"t-1")]
    # and a read_committed read afterwards that returns it is caught too
    read[1].append((3, b"t-1"))
    report = check_history(acked, read, [], aborted=[b"t-1"])
    assert report.dirty == [(1, 3, b"t-1")]


def test_an_acknowledged_record_the_group_never_read_is_reported():
    acked, read = clean()
    consumed = [(p, o, v) for p, records in read.items() for o, v in records if v != b"v-3"]
    report = check_history(acked, read, consumed, expect_all_consumed=True)
    assert report.unconsumed == [(1, 1, b"v-3")] and not report.ok
    assert "unconsumed 1" in str(report)
    # not asked for, it is no anomaly (a consumer that ran only part of the time)
    assert check_history(acked, read, consumed).ok


def test_a_group_reading_twice_after_a_rebalance_is_no_anomaly():
    acked, read = clean()
    consumed = [(p, o, v) for p, records in read.items() for o, v in records]
    assert check_history(acked, read, consumed + consumed[:3], expect_all_consumed=True).ok


def test_client_errors_fail_the_report():
    acked, read = clean()
    report = check_history(acked, read, producer_errors=["KafkaError{code=NOT_ENOUGH_REPLICAS}"])
    assert not report.ok and "producer errors 1" in str(report)
    report = check_history(acked, read, consumer_errors=["KafkaError{code=GROUP_AUTHORIZATION_FAILED}"])
    assert not report.ok and "consumer errors 1" in str(report)


def test_every_anomaly_at_once_is_named():
    report = History(lost=[(0, 1, b"v-1")], duplicated=[b"v-2"], reordered=[(0, b"v-4", b"v-3")],
                     dirty=[(0, 5, b"t-1")], unconsumed=[(0, 0, b"v-0")])
    text = str(report)
    for name in ("lost", "duplicated", "reordered", "dirty", "unconsumed"):
        assert f"{name} 1" in text


def test_a_record_the_reading_consumer_skipped_is_explained(broker, topic_name):
    """A record missing from the final read although the partition holds it (what a consumer that skips an
    offset leaves behind): the report names the gap in the read, the reading client's log about it, and what a
    fresh consumer placed at that offset returns, so a skip is told apart from a loss."""
    from tests.cluster.checker import PartitionRead, read_partitions
    from tests.interop.helpers import assert_delivered, produce_messages

    reports = assert_delivered(produce_messages(broker.bootstrap, topic_name,
                                                [{"value": f"v-{i}".encode(), "partition": 0} for i in range(5)]))
    acked = [(0, msg.offset(), bytes(msg.value())) for msg in reports]
    read = read_partitions(broker.bootstrap, topic_name, 1)
    assert isinstance(read, PartitionRead) and read.gaps == {0: []}
    assert any("Fetch topic" in line for line in read.client_log), read.client_log[-5:]
    assert check_history(acked, read).ok
    # the read as a consumer that skipped offset 2 would have returned it
    skipped = PartitionRead({0: [r for r in read[0] if r[0] != 2]}, read.bootstrap, read.topic, read.config,
                            read.client_log)
    assert skipped.gaps == {0: [(1, 3)]}
    report = check_history(acked, skipped)
    assert report.lost == [(0, 2, b"v-2")]
    text = str(report)
    assert "the reading consumer returned offset 1 and then 3" in text, text
    assert "re-read at offset 2: offset 2 value b'v-2'" in text, text
    assert "client: " in text, text
