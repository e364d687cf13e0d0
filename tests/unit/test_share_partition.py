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


# ------------------------------------------------------------------------------- the coordinator around it

class _Topic:
    def __init__(self, name: str, topic_id: bytes, partitions: int) -> None:
        self.name, self.topic_id, self.partitions, self.is_internal = name, topic_id, partitions, False


class _Metadata:
    def __init__(self, *topics: _Topic) -> None:
        self.topics = {t.name: t for t in topics}

    def topic(self, name):
        return self.topics.get(name)

    def topic_by_id(self, topic_id):
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)


def _coordinator(**config):
    from odradek.coordinator.share_groups import ShareGroupConfig, ShareGroupCoordinator
    from odradek.coordinator.timers import FakeScheduler
    from odradek.storage.flusher import completed_future

    stored = []  # (key, value) of the share-partition states written
    woken = []

    def append_state(key, value):
        stored.append((key, value))
        return completed_future()

    metadata = _Metadata(_Topic("t", b"T" * 16, 2))
    coordinator = ShareGroupCoordinator(ShareGroupConfig(**config), FakeScheduler(),
                                        lambda group_id, records: completed_future(), append_state, metadata,
                                        lambda topic, p: woken.append((topic, p)))
    return coordinator, metadata, stored, woken


def test_heartbeats_assign_every_partition_to_every_member_with_epochs():
    coordinator, metadata, _, _ = _coordinator()
    a = coordinator.heartbeat("g", "a", 0, None, ["t", "later"], "c", "h")
    b = coordinator.heartbeat("g", "b", 0, None, ["t"], "c", "h")
    for body in (a, b):
        assert body["error_code"] == 0
        assert body["assignment"] == {"topic_partitions": [{"topic_id": b"T" * 16, "partitions": [0, 1]}]}
    assert (a["member_epoch"], b["member_epoch"]) == (1, 2)
    same = coordinator.heartbeat("g", "a", 1, None, None, "c", "h")
    assert (same["member_epoch"], same["assignment"]) == (1, None)
    metadata.topics["later"] = _Topic("later", b"L" * 16, 1)  # a subscribed topic appears
    grown = coordinator.heartbeat("g", "a", 1, None, None, "c", "h")
    assert grown["member_epoch"] == 3 and len(grown["assignment"]["topic_partitions"]) == 2
    lost = coordinator.heartbeat("g", "a", 1, None, None, "c", "h")  # the answer above was lost
    assert lost["member_epoch"] == 3 and lost["assignment"] is not None
    assert coordinator.heartbeat("g", "a", 7, None, None, "c", "h")["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
    assert coordinator.heartbeat("g", "x", 1, None, None, "c", "h")["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    assert coordinator.heartbeat("g", "b", 0, None, None, "c", "h")["error_code"] == ErrorCode.INVALID_REQUEST


def test_session_epochs_and_a_timed_out_member_releases_its_records():
    from odradek.coordinator.share_groups import ShareError

    coordinator, _, appended, woken = _coordinator(session_timeout_ms=5000)
    coordinator.heartbeat("g", "a", 0, None, ["t"], "c", "h")
    session = coordinator.begin_session("g", "a", 0, acknowledge_only=False)
    assert session.epoch == 1
    for epoch, code in ((0, ErrorCode.INVALID_SHARE_SESSION_EPOCH), (2, ErrorCode.INVALID_SHARE_SESSION_EPOCH)):
        try:
            coordinator.begin_session("g", "a", epoch, acknowledge_only=True)
            raise AssertionError("accepted")
        except ShareError as exc:
            assert exc.error_code == code
    coordinator.begin_session("g", "a", 1, acknowledge_only=True)
    assert session.epoch == 2
    sp = coordinator.share_partition("g", b"T" * 16, 0, 0, 10)
    assert sp.start == 10  # share.auto.offset.reset latest by default
    sp.acquire("a", batches((10, 12)), 10, coordinator.scheduler.now_ms(), 30_000)
    coordinator.scheduler.advance(5000)  # no heartbeat: the member is removed, its records released
    assert "a" not in coordinator.groups["g"].members and ("g", "a") not in coordinator.sessions
    assert sp.count(AVAILABLE) == 3 and woken == [("t", 0)]
    assert appended and appended[-1][0] == ("g", b"T" * 16, 0)  # its new state is stored


def test_lock_timer_releases_expired_records_and_stores_the_state():
    coordinator, _, appended, woken = _coordinator()
    coordinator.heartbeat("g", "a", 0, None, ["t"], "c", "h")
    coordinator.set_group_configs("g", {"share.auto.offset.reset": "earliest",
                                        "share.record.lock.duration.ms": "2000"})
    key = ("g", b"T" * 16, 1)
    sp = coordinator.share_partition(*key, 0, 5)
    assert sp.start == 0
    sp.acquire("a", batches((0, 4)), 10, coordinator.scheduler.now_ms(), coordinator.lock_duration_ms("g"))
    coordinator.acquired(key, sp)
    before = len(appended)
    coordinator.scheduler.advance(1999)
    assert sp.count(AVAILABLE) == 0
    coordinator.scheduler.advance(1)
    assert sp.count(AVAILABLE) == 5 and woken == [("t", 1)] and len(appended) == before + 1
    results, _ = coordinator.acknowledge("g", "a", [(b"T" * 16, 1, [
        {"first_offset": 0, "last_offset": 0, "acknowledge_types": [ACK_ACCEPT]}])])
    assert results == {(b"T" * 16, 1): ErrorCode.INVALID_RECORD_STATE}  # its lock ran out
    assert coordinator.check_configs({"share.auto.offset.reset": "never"}) is not None
    assert coordinator.check_configs({"no.such.config": "1"}) is not None
    assert coordinator.check_configs({"share.isolation.level": "read_committed"}) is None


def test_by_duration_reset_starts_at_the_first_record_that_recent():
    from odradek.coordinator.share_groups import iso_duration_ms

    assert iso_duration_ms("PT1H") == 3_600_000 and iso_duration_ms("P1DT0.5S") == 86_400_500
    for bad in ("P", "PT", "1H", "P1DT", "PT-1S"):
        try:
            iso_duration_ms(bad)
            raise AssertionError(bad)
        except ValueError:
            pass
    coordinator, _, _, _ = _coordinator()
    assert coordinator.check_configs({"share.auto.offset.reset": "by_duration:PT10M"}) is None
    assert coordinator.check_configs({"share.auto.offset.reset": "by_duration:10m"}) is not None
    coordinator.set_group_configs("g", {"share.auto.offset.reset": "by_duration:PT10M"})
    now = coordinator.scheduler.now_ms()
    asked = []
    sp = coordinator.share_partition("g", b"T" * 16, 0, 0, 50, lambda ts: asked.append(ts) or 42)
    assert sp.start == 42 and asked == [now - 600_000]
    none_that_recent = coordinator.share_partition("g", b"T" * 16, 1, 0, 50, lambda ts: -1)
    assert none_that_recent.start == 50  # nothing that recent: from the end


def test_batch_optimized_finishes_the_batch_that_reaches_the_window_cap():
    """Kafka 4.4: one stored batch of 150 with a cap of 100 is acquired whole in batch-optimized mode; record
    limit stops at the cap; no new batch starts while the window is full (issue 40 item 9)."""
    whole = SharePartition(0, max_in_flight=100)
    assert whole.acquire("a", batches((0, 149), (150, 159)), 500, 0, LOCK, whole_batches=True) == [(0, 149, 1)]
    assert whole.next_fetch_offset() is None
    assert whole.acquire("b", batches((150, 159)), 500, 0, LOCK, whole_batches=True) == []
    exact = SharePartition(0, max_in_flight=100)
    assert exact.acquire("a", batches((0, 149)), 500, 0, LOCK) == [(0, 99, 1)]


def test_unacquire_gives_records_back_with_their_delivery_counts():
    sp = SharePartition(0)
    assert sp.acquire("a", batches((0, 4)), 10, 0, LOCK) == [(0, 4, 1)]
    sp.unacquire("a", 0, 4)
    assert sp.count(AVAILABLE) == 5 and all(sp.records[o].delivery_count == 0 for o in range(5))
    sp.unacquire("b", 0, 4)  # not held by b: nothing changes
    assert sp.acquire("b", batches((0, 4)), 10, 0, LOCK) == [(0, 4, 1)]
    sp.unacquire("a", 0, 4)  # held by b now: a cannot give them back
    assert sp.next_fetch_offset() == 5
