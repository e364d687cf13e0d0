"""The share-partition state machine (coordinator/share_partition.py): acquisition, locks, acknowledgements,
the delivery limit, the in-flight window and its stored form. No processes, no I/O."""

from odradek.coordinator.share_partition import (
    ACK_ACCEPT,
    ACK_GAP,
    ACK_REJECT,
    ACK_RELEASE,
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    LogBatch,
    SharePartition,
)
from odradek.protocol.errors import ErrorCode

LOCK = 1000


def batches(*spans: tuple[int, int]) -> list[LogBatch]:
    return [LogBatch(first, last) for first, last in spans]


def test_members_acquire_distinct_records_and_the_start_moves_over_accepted_ones():
    sp = SharePartition(0)
    assert sp.acquire("a", batches((0, 9)), 4, 0, LOCK) == [(0, 3, 1)]
    assert sp.next_fetch_offset() == 4
    assert sp.acquire("b", batches((0, 9)), 100, 0, LOCK) == [(4, 9, 1)]  # 0-3 are a's
    assert (sp.start, sp.end) == (0, 10)
    assert sp.acknowledge("a", 0, 3, [ACK_ACCEPT]) == ErrorCode.NONE
    assert sp.start == 4 and 0 not in sp.records
    assert sp.acknowledge("a", 4, 4, [ACK_ACCEPT]) == ErrorCode.INVALID_RECORD_STATE  # b holds it
    assert sp.acknowledge("b", 4, 9, [ACK_ACCEPT]) == ErrorCode.NONE
    assert (sp.start, sp.end, sp.records) == (10, 10, {})


def test_release_redelivers_with_a_higher_count_and_reject_archives():
    sp = SharePartition(0)
    sp.acquire("a", batches((0, 2)), 10, 0, LOCK)
    assert sp.acknowledge("a", 0, 2, [ACK_RELEASE, ACK_REJECT, ACK_ACCEPT]) == ErrorCode.NONE
    assert sp.records[0].state == AVAILABLE and sp.records[1].state == ARCHIVED
    assert sp.start == 0 and sp.next_fetch_offset() == 0
    assert sp.acquire("b", batches((0, 2)), 10, 0, LOCK) == [(0, 0, 2)]  # 1 archived, 2 acknowledged
    assert sp.acknowledge("b", 0, 0, [ACK_ACCEPT]) == ErrorCode.NONE
    assert (sp.start, sp.records) == (3, {})


def test_delivery_limit_archives_a_record_released_too_often():
    sp = SharePartition(0, delivery_limit=3)
    for count in (1, 2, 3):
        assert sp.acquire("a", batches((0, 0)), 10, 0, LOCK) == [(0, 0, count)]
        assert sp.acknowledge("a", 0, 0, [ACK_RELEASE]) == ErrorCode.NONE
    assert sp.start == 1 and sp.next_fetch_offset() == 1


def test_expired_locks_release_and_a_closing_member_gives_back_what_it_holds():
    sp = SharePartition(0)
    sp.acquire("a", batches((0, 1)), 10, 0, LOCK)
    sp.acquire("b", batches((0, 3)), 10, 500, LOCK)
    assert sp.next_lock_deadline() == LOCK
    assert not sp.expire_locks(LOCK - 1)
    assert sp.expire_locks(LOCK) and sp.records[0].state == AVAILABLE and sp.records[2].member == "b"
    assert sp.acknowledge("a", 0, 0, [ACK_ACCEPT]) == ErrorCode.INVALID_RECORD_STATE  # its lock ran out
    assert sp.release_member("b") and sp.count(AVAILABLE) == 4


def test_window_bound_and_skipped_batches_and_log_gaps():
    sp = SharePartition(0, max_in_flight=6)
    acquired = sp.acquire("a", [LogBatch(0, 1), LogBatch(2, 2, skip=True), LogBatch(5, 9)], 100, 0, LOCK)
    assert acquired == [(0, 1, 1), (5, 5, 1)]  # 2 is a marker, 3-4 are not in the log; the window ends at 6
    assert [sp.records[o].state for o in (2, 3, 4)] == [ARCHIVED] * 3
    assert sp.next_fetch_offset() is None
    sp.acknowledge("a", 0, 1, [ACK_ACCEPT, ACK_GAP])
    assert sp.start == 5 and sp.next_fetch_offset() == 6
    sp.move_start(7)  # retention deleted 5-6
    assert sp.acquire("a", batches((5, 9)), 100, 0, LOCK) == [(7, 9, 1)]


def test_bad_acknowledgements_change_nothing():
    sp = SharePartition(0)
    sp.acquire("a", batches((0, 3)), 10, 0, LOCK)
    assert sp.acknowledge("a", 0, 3, [ACK_ACCEPT, ACK_ACCEPT]) == ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("a", 0, 0, [9]) == ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("a", 2, 5, [ACK_ACCEPT]) == ErrorCode.INVALID_RECORD_STATE  # 4-5 never acquired
    assert sp.count(ACKNOWLEDGED) == 0 and sp.start == 0


def test_snapshot_restores_finished_records_and_delivery_counts_but_no_locks():
    sp = SharePartition(10)
    sp.acquire("a", batches((10, 15)), 10, 0, LOCK)
    sp.acknowledge("a", 11, 13, [ACK_ACCEPT, ACK_REJECT, ACK_RELEASE])
    start, end, runs = sp.snapshot()
    assert (start, end) == (10, 16)
    assert runs == [(10, 10, AVAILABLE, 1), (11, 11, ACKNOWLEDGED, 1), (12, 12, ARCHIVED, 1),
                    (13, 15, AVAILABLE, 1)]
    back = SharePartition.restore(start, end, runs)
    assert not back.dirty and back.next_fetch_offset() == 10
    assert back.acquire("b", batches((10, 20)), 100, 0, LOCK) == [(10, 10, 2), (13, 15, 2), (16, 20, 1)]
