"""Partition (cluster/partition.py) and ReplicaManager (cluster/replica_manager.py) on real logs.

Every log here is a real PartitionLog in tmp_path (opened directly, or through a LogManager for the
ReplicaManager); batches are built with records.codec.build_batch and validated with validate_v2 as a
Produce request's are. Times are explicit ``now_ms`` values wherever the API takes them.

ISR changes go through ``ReplicaManager.isr_writer``, the seam where cluster mode writes the partition's
state znode: here a small async function (`IsrWriterStub`) records each call and answers with a znode
version (or None: the znode moved on), driven inside an asyncio event loop.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Awaitable, Callable

import pytest

from odradek.cluster.metadata import BrokerInfo, MetadataCache, PartitionInfo
from odradek.cluster.partition import NotLeaderError, Partition, ReplicationError, durable_and_committed
from odradek.cluster.replica_manager import (HW_CHECKPOINT_FILE, IsrWritten, PartitionStateChange, ReplicaManager,
                                             encode_hw_checkpoint, read_hw_checkpoint)
from odradek.protocol.errors import ErrorCode
from odradek.records.batch import iter_batches, validate_v2
from odradek.records.codec import build_batch
from odradek.storage import LogConfig, PartitionLog
from odradek.storage.leader_epoch import LeaderEpochCache
from odradek.storage.manager import LogManager

TS = 1_700_000_000_000
T0 = 1_000_000  # an explicit "now" for the Partition tests


def records(count: int = 1, tag: bytes = b"v", **fields) -> bytearray:
    return bytearray(build_batch([(None, tag + b"%d" % i, None, TS) for i in range(count)], **fields))


def produce(partition: Partition, count: int = 1, **fields):
    """Append one batch of ``count`` records as the Produce path does (validated, then appended as leader)."""
    buf = records(count, **fields)
    return partition.append_as_leader(buf, validate_v2(buf))


def stored_epochs(plog: PartitionLog) -> list[tuple[int, int]]:
    """(base offset, partition leader epoch) of every stored batch."""
    data = plog.read(plog.log_start_offset, 1 << 24)
    validate_v2(data)  # stamping the epoch left the CRCs valid (it is outside the CRC)
    return [(h.base_offset, h.partition_leader_epoch) for _, h in iter_batches(data)]


class Notes:
    """The partition-changed callback (the broker wakes Fetch long-polls and delayed produces with it)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def __call__(self, topic: str, index: int) -> None:
        self.calls.append((topic, index))


@pytest.fixture
def plog(tmp_path: Path) -> PartitionLog:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), clock=lambda: TS)
    yield log
    log.close()


def make_partition(plog: PartitionLog, local_id: int = 1, notes: Notes | None = None) -> Partition:
    return Partition("t", 0, local_id, plog, notes or Notes())


def leader(plog: PartitionLog, isr: list[int], replicas: list[int] | None = None, epoch: int = 0,
           now: int = T0, notes: Notes | None = None) -> Partition:
    partition = make_partition(plog, notes=notes)
    partition.make_leader(epoch, isr, replicas or list(isr), zk_version=0, now_ms=now)
    return partition


# == Partition: becoming leader ============================================================================


def test_make_leader_assigns_the_epoch_at_the_log_end_in_the_leader_epoch_cache(plog: PartitionLog,
                                                                                  tmp_path: Path) -> None:
    partition = make_partition(plog)
    assert partition.make_leader(3, [1, 2], [1, 2], zk_version=0, now_ms=T0) is True
    assert partition.is_leader and partition.leader_epoch == 3 and partition.leader_epoch_start == 0
    assert plog.leader_epoch_cache.entries == [(3, 0)]
    assert (tmp_path / "t-0" / LeaderEpochCache.FILE_NAME).read_text() == "0\n1\n3 0\n"
    produce(partition, 4)
    # Leadership moves away and comes back in a later epoch: the new epoch starts at the log end.
    partition.make_follower(2, 4, [1, 2], [1, 2], zk_version=1)
    assert partition.make_leader(5, [1, 2], [1, 2], zk_version=2, now_ms=T0) is True
    assert partition.leader_epoch_start == 4
    assert plog.leader_epoch_cache.entries == [(3, 0), (5, 4)]
    assert (tmp_path / "t-0" / LeaderEpochCache.FILE_NAME).read_text() == "0\n2\n3 0\n5 4\n"


def test_make_leader_in_the_same_epoch_is_an_update_not_a_new_term(plog: PartitionLog) -> None:
    partition = leader(plog, [1, 2], [1, 2, 3], epoch=2)
    produce(partition, 3)
    partition.update_follower(2, 3, T0 + 10)
    assert partition.make_leader(2, [1, 2, 3], [1, 2, 3, 4], zk_version=1, now_ms=T0 + 20) is False
    assert plog.leader_epoch_cache.entries == [(2, 0)]
    assert partition.leader_epoch_start == 0
    assert partition.isr == [1, 2, 3] and partition.replicas == [1, 2, 3, 4] and partition.zk_version == 1
    # the followers keep what they reported; a new replica starts unknown
    assert partition.followers[2].log_end_offset == 3
    assert sorted(partition.followers) == [2, 3, 4] and partition.followers[4].log_end_offset == -1
    # a replica that is no longer assigned is forgotten
    partition.make_leader(2, [1, 2], [1, 2], zk_version=2, now_ms=T0 + 30)
    assert sorted(partition.followers) == [2]


def test_make_leader_resets_follower_progress_in_a_new_term(plog: PartitionLog) -> None:
    partition = leader(plog, [1, 2, 3], epoch=0)
    produce(partition, 2)
    partition.update_follower(2, 2, T0 + 5)
    partition.make_leader(1, [1, 2], [1, 2, 3], zk_version=1, now_ms=T0 + 100)
    # every follower must report again in the new epoch; ISR members count as caught up from now on
    assert partition.followers[2].log_end_offset == -1 and partition.followers[2].last_caught_up_ms == T0 + 100
    assert partition.followers[3].log_end_offset == -1 and partition.followers[3].last_caught_up_ms == 0


def test_appends_as_leader_are_stamped_with_the_leader_epoch(plog: PartitionLog) -> None:
    partition = leader(plog, [1], epoch=7)
    produce(partition, 2)  # clients send partitionLeaderEpoch -1
    produce(partition, 1, partition_leader_epoch=3)  # an older epoch in the client's batch is replaced too
    assert stored_epochs(plog) == [(0, 7), (2, 7)]
    assert plog.leader_epoch_cache.entries == [(7, 0)]
    partition.make_leader(9, [1], [1], zk_version=1, now_ms=T0)
    produce(partition, 1)
    assert stored_epochs(plog)[-1] == (3, 9)
    assert plog.leader_epoch_cache.entries == [(7, 0), (9, 3)]
    assert plog.end_offset_for_epoch(7) == (7, 3)


def test_a_clients_partition_leader_epoch_never_reaches_the_leader_epoch_cache(plog: PartitionLog) -> None:
    """The leader stamps its own epoch on a produced batch, in the bytes and in what the log records: a
    client's partitionLeaderEpoch (a tool re-producing fetched batches, or a hostile client) must not add an
    entry to leader-epoch-checkpoint, where it would hide every later real epoch below it."""
    partition = leader(plog, [1], epoch=7)
    produce(partition, 2)
    produce(partition, 1, partition_leader_epoch=42)
    assert stored_epochs(plog) == [(0, 7), (2, 7)]
    assert plog.leader_epoch_cache.entries == [(7, 0)]
    partition.make_leader(9, [1], [1], zk_version=1, now_ms=T0)
    assert plog.leader_epoch_cache.entries == [(7, 0), (9, 3)]


def test_broker_written_batches_and_markers_carry_the_leader_epoch(plog: PartitionLog) -> None:
    from odradek.records.codec import COMMIT, build_control_batch

    partition = leader(plog, [1], epoch=4)
    buf = records(2)
    result = partition.append_records_unchecked(buf, validate_v2(buf))
    assert (result.base_offset, result.last_offset) == (0, 1)
    txn = records(1, producer_id=77, producer_epoch=0, base_sequence=0, transactional=True)
    partition.append_as_leader(txn, validate_v2(txn))
    marker = bytearray(build_control_batch(COMMIT, 77, 0, 3, TS))
    assert partition.append_marker(marker, validate_v2(marker)[0][1], aborted=False, coordinator_epoch=3) == 3
    assert stored_epochs(plog) == [(0, 4), (2, 4), (3, 4)]


def test_appends_and_markers_refused_when_not_leading(plog: PartitionLog) -> None:
    partition = make_partition(plog)
    partition.make_follower(2, 1, [2, 1], [2, 1], zk_version=0)
    buf = records(1)
    with pytest.raises(NotLeaderError) as info:
        partition.append_as_leader(buf, validate_v2(buf))
    assert info.value.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(NotLeaderError):
        partition.append_records_unchecked(buf, validate_v2(buf))
    assert plog.log_end_offset == 0


# == Partition: the high watermark =========================================================================


def test_hw_is_the_minimum_log_end_offset_over_the_isr(plog: PartitionLog) -> None:
    partition = leader(plog, [1, 2, 3], epoch=0)
    produce(partition, 5)
    assert plog.high_watermark == 0  # no follower has reported yet
    assert partition.update_follower(2, 5, T0 + 1) is False
    assert plog.high_watermark == 0  # 3 is still unknown
    assert partition.update_follower(3, 3, T0 + 1) is True
    assert plog.high_watermark == 3
    assert partition.update_follower(3, 5, T0 + 2) is True
    assert plog.high_watermark == 5


def test_hw_never_goes_backwards(plog: PartitionLog) -> None:
    partition = leader(plog, [1, 2, 3], epoch=0)
    produce(partition, 6)
    partition.update_follower(2, 4, T0)
    partition.update_follower(3, 4, T0)
    assert plog.high_watermark == 4
    # a follower that reports less (it truncated, or a reordered fetch) does not pull the HW back
    assert partition.update_follower(2, 1, T0 + 1) is False
    assert plog.high_watermark == 4
    assert partition.maybe_increment_hw() is False
    # nor does a new ISR whose members have not reported yet
    partition.set_isr([1, 2, 3], zk_version=1)
    partition.make_leader(0, [1, 2, 3], [1, 2, 3, 4], zk_version=2, now_ms=T0 + 2)
    partition.make_leader(1, [1, 2, 3], [1, 2, 3], zk_version=3, now_ms=T0 + 3)
    assert plog.high_watermark == 4


def test_an_isr_of_one_follows_every_append(plog: PartitionLog) -> None:
    notes = Notes()
    partition = leader(plog, [1], epoch=0, notes=notes)
    produce(partition, 3)
    assert plog.high_watermark == 3
    produce(partition, 2)
    assert plog.high_watermark == 5
    assert notes.calls == [("t", 0), ("t", 0)]


def test_replicas_outside_the_isr_do_not_hold_the_hw_back(plog: PartitionLog) -> None:
    partition = leader(plog, [1, 2], [1, 2, 3], epoch=0)
    produce(partition, 4)
    partition.update_follower(3, 0, T0)
    partition.update_follower(2, 4, T0)
    assert plog.high_watermark == 4


def test_fetches_of_unknown_replicas_or_on_a_follower_are_ignored(plog: PartitionLog) -> None:
    partition = leader(plog, [1, 2], epoch=0)
    produce(partition, 2)
    assert partition.update_follower(9, 2, T0) is False
    assert 9 not in partition.followers
    partition.make_follower(2, 1, [2, 1], [1, 2], zk_version=1)
    assert partition.update_follower(2, 2, T0) is False
    assert partition.maybe_increment_hw() is False


def test_shrinking_the_isr_can_move_the_hw(plog: PartitionLog) -> None:
    notes = Notes()
    partition = leader(plog, [1, 2, 3], epoch=0, notes=notes)
    produce(partition, 4)
    partition.update_follower(2, 4, T0)
    assert plog.high_watermark == 0  # 3 holds it back
    notes.calls.clear()
    partition.set_isr([1, 2], zk_version=1)
    assert plog.high_watermark == 4 and partition.zk_version == 1
    assert notes.calls == [("t", 0)]


# == Partition: acks=all waiters ===========================================================================


def test_when_committed_completes_futures_in_offset_order(plog: PartitionLog) -> None:
    partition = leader(plog, [1, 2], epoch=0)
    ends = [produce(partition, n).last_offset + 1 for n in (1, 2, 3)]  # 1, 3, 6
    assert ends == [1, 3, 6]
    done: list[int] = []
    futures = {}
    for end in (6, 1, 3):  # registered out of order
        future = partition.when_committed(end)
        future.add_done_callback(lambda _, end=end: done.append(end))
        futures[end] = future
    partition.update_follower(2, 2, T0)
    assert done == [1]
    partition.update_follower(2, 6, T0)
    assert done == [1, 3, 6]
    assert all(f.result() is None for f in futures.values())


def test_when_committed_is_none_once_the_hw_is_there(plog: PartitionLog) -> None:
    partition = leader(plog, [1, 2], epoch=0)
    produce(partition, 2)
    partition.update_follower(2, 2, T0)
    assert partition.when_committed(2) is None
    assert partition.when_committed(1) is None
    assert isinstance(partition.when_committed(3), Future)


def test_when_committed_on_a_follower_raises_not_leader(plog: PartitionLog) -> None:
    partition = make_partition(plog)
    partition.make_follower(2, 0, [2, 1], [2, 1], zk_version=0)
    with pytest.raises(NotLeaderError):
        partition.when_committed(5)


def test_min_isr_fails_a_write_committed_by_a_shrunken_isr(plog: PartitionLog) -> None:
    partition = leader(plog, [1, 2, 3], epoch=0)
    end = produce(partition, 2).last_offset + 1
    strict = partition.when_committed(end, min_isr=2)
    lenient = partition.when_committed(end, min_isr=1)
    # follower 3 falls out of the ISR and then 2 as well: the ISR of one commits the write by itself
    partition.set_isr([1, 2], zk_version=1)
    assert not strict.done()
    partition.set_isr([1], zk_version=2)
    assert plog.high_watermark == end
    error = strict.exception()
    assert isinstance(error, ReplicationError)
    assert error.error_code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert lenient.result() is None


def test_min_isr_is_met_when_the_isr_holds_at_commit_time(plog: PartitionLog) -> None:
    partition = leader(plog, [1, 2, 3], epoch=0)
    end = produce(partition, 1).last_offset + 1
    future = partition.when_committed(end, min_isr=3)
    partition.update_follower(2, end, T0)
    partition.update_follower(3, end, T0)
    assert future.result() is None


def test_losing_leadership_fails_waiting_writes_with_not_leader(plog: PartitionLog) -> None:
    partition = leader(plog, [1, 2], epoch=0)
    produce(partition, 3)
    waiting = [partition.when_committed(1), partition.when_committed(3)]
    assert partition.make_follower(2, 1, [2, 1], [1, 2], zk_version=1) is True
    for future in waiting:
        assert isinstance(future.exception(), NotLeaderError)
        assert future.exception().error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert not partition.is_leader and partition.leader_id == 2 and partition.followers == {}


def test_stop_fails_waiting_writes(plog: PartitionLog) -> None:
    partition = leader(plog, [1, 2], epoch=0)
    produce(partition, 1)
    future = partition.when_committed(1)
    partition.stop()
    assert isinstance(future.exception(), NotLeaderError)
    assert partition.leader_id == -1


def test_make_follower_reports_whether_leader_or_epoch_changed(plog: PartitionLog) -> None:
    partition = make_partition(plog)
    assert partition.make_follower(2, 1, [2, 1], [2, 1], zk_version=0) is True
    assert partition.make_follower(2, 1, [2], [2, 1], zk_version=1) is False  # only the ISR changed
    assert partition.isr == [2] and partition.zk_version == 1
    assert partition.make_follower(3, 1, [3], [2, 3, 1], zk_version=2) is True
    assert partition.make_follower(3, 2, [3], [2, 3, 1], zk_version=3) is True


def test_prune_waiters_forgets_futures_given_up_on(plog: PartitionLog) -> None:
    partition = leader(plog, [1, 2], epoch=0)
    produce(partition, 3)
    given_up = partition.when_committed(2)
    kept = partition.when_committed(3)
    given_up.cancel()
    partition.prune_waiters()
    partition.update_follower(2, 3, T0)
    assert kept.result() is None and given_up.cancelled()


# == Partition: followers and the ISR ======================================================================


def test_lagging_isr_with_explicit_times(plog: PartitionLog) -> None:
    partition = leader(plog, [1, 2, 3], epoch=0, now=1000)
    produce(partition, 10)
    partition.update_follower(2, 10, 5000)  # caught up at 5000
    partition.update_follower(3, 4, 5000)  # behind: its last catch-up stays at 1000 (becoming leader)
    assert partition.followers[3].last_caught_up_ms == 1000
    assert partition.lagging_isr(11_000, max_lag_ms=10_000) == []  # exactly max_lag is not too long
    assert partition.lagging_isr(11_001, max_lag_ms=10_000) == [3]
    # 2 holds the whole log: in sync however long ago it fetched (Kafka's rule), until the log grows past it
    assert partition.lagging_isr(15_001, max_lag_ms=10_000) == [3]
    produce(partition, 1)
    assert partition.lagging_isr(15_001, max_lag_ms=10_000) == [2, 3]
    assert partition.lagging_isr(1_000_000, max_lag_ms=10_000_000) == []


def test_a_follower_holding_the_whole_log_stays_in_sync_when_its_fetches_are_late(plog: PartitionLog) -> None:
    # A follower on a loaded host fetches late, but an idle partition has nothing it could lag behind: Kafka
    # counts a replica at the leader's log end as caught up whatever its last catch-up time.
    partition = leader(plog, [1, 2], epoch=0, now=1000)
    produce(partition, 5)
    partition.update_follower(2, 5, 2000)
    assert partition.lagging_isr(60_000, max_lag_ms=10_000) == []
    produce(partition, 1)
    assert partition.lagging_isr(60_000, max_lag_ms=10_000) == [2]


def test_a_follower_reaching_the_previous_fetchs_leader_end_counts_as_caught_up_then(plog: PartitionLog) -> None:
    # Kafka's rule: a fetch at or past the leader's log end as of the previous fetch means the follower was
    # caught up at the time of that previous fetch, even if the leader has moved on since.
    partition = leader(plog, [1, 2], epoch=0, now=1000)
    produce(partition, 10)
    partition.update_follower(2, 4, 5000)  # leader end 10 at this fetch
    assert partition.followers[2].last_caught_up_ms == 1000
    produce(partition, 5)  # leader end 15
    partition.update_follower(2, 10, 8000)  # reached 10, not 15
    assert partition.followers[2].last_caught_up_ms == 5000
    partition.update_follower(2, 12, 9000)  # below the leader end at the previous fetch (15)
    assert partition.followers[2].last_caught_up_ms == 5000
    assert partition.lagging_isr(15_001, 10_000) == [2]
    partition.update_follower(2, 15, 16_000)
    assert partition.followers[2].last_caught_up_ms == 16_000
    assert partition.lagging_isr(16_000, 10_000) == []


def test_an_isr_member_the_leader_has_no_progress_for_is_lagging(plog: PartitionLog) -> None:
    # The ISR names a replica that is not (any more) assigned: the leader cannot vouch for it.
    partition = leader(plog, [1, 2, 5], [1, 2], epoch=0, now=1000)
    assert partition.lagging_isr(1000, 10_000) == [5]


def test_caught_up_outside_isr_needs_the_hw_and_the_start_of_our_epoch(plog: PartitionLog) -> None:
    old = leader(plog, [1], epoch=0)
    produce(old, 10)
    plog.update_high_watermark(6)  # as if the HW had been learnt from a previous leader
    partition = make_partition(plog)
    partition.make_leader(2, [1, 2], [1, 2, 3], zk_version=5, now_ms=T0)
    assert partition.leader_epoch_start == 10
    partition.update_follower(2, 10, T0)
    assert plog.high_watermark == 10
    partition.update_follower(3, 8, T0)
    assert partition.caught_up_outside_isr() == []  # below the HW
    partition.update_follower(3, 10, T0)
    assert partition.caught_up_outside_isr() == [3]
    # an ISR member is never "outside"
    assert 2 not in partition.caught_up_outside_isr()


def test_caught_up_outside_isr_requires_the_epoch_start_even_above_the_hw(plog: PartitionLog) -> None:
    old = leader(plog, [1], epoch=0)
    produce(old, 10)
    plog.update_high_watermark(4)
    partition = make_partition(plog)
    partition.make_leader(3, [1, 2], [1, 2, 3], zk_version=0, now_ms=T0)
    partition.update_follower(3, 7, T0)  # >= HW (4) but < the start of epoch 3 (10)
    assert plog.high_watermark == 4
    assert partition.caught_up_outside_isr() == []


def test_a_pending_expansion_holds_the_hw_at_the_joining_followers_end(plog: PartitionLog) -> None:
    partition = leader(plog, [1], [1, 2], epoch=0)
    produce(partition, 4)
    partition.update_follower(2, 4, T0)
    assert partition.caught_up_outside_isr() == [2]
    partition.begin_isr_change([1, 2])
    assert partition.isr_change_pending and partition.isr == [1]
    produce(partition, 3)
    assert plog.high_watermark == 4  # 2 is joining: it holds 4
    partition.update_follower(2, 6, T0)
    assert plog.high_watermark == 6
    partition.set_isr([1, 2], zk_version=1)
    assert not partition.isr_change_pending and partition.isr == [1, 2]
    partition.update_follower(2, 7, T0)
    assert plog.high_watermark == 7


def test_a_pending_shrink_still_waits_for_the_leaving_follower(plog: PartitionLog) -> None:
    partition = leader(plog, [1, 2, 3], epoch=0)
    produce(partition, 5)
    partition.update_follower(2, 5, T0)
    partition.update_follower(3, 1, T0)
    assert plog.high_watermark == 1
    partition.begin_isr_change([1, 2])
    partition.update_follower(2, 5, T0 + 1)
    assert plog.high_watermark == 1  # not committed by [1, 2] before ZooKeeper has that ISR
    partition.set_isr([1, 2], zk_version=1)
    assert plog.high_watermark == 5


def test_an_aborted_isr_change_leaves_the_isr_as_it_was(plog: PartitionLog) -> None:
    partition = leader(plog, [1], [1, 2], epoch=0)
    produce(partition, 2)
    partition.update_follower(2, 2, T0)
    partition.begin_isr_change([1, 2])
    partition.abort_isr_change()
    assert not partition.isr_change_pending and partition.isr == [1]
    produce(partition, 2)
    assert plog.high_watermark == 4  # an ISR of one again


def test_a_leader_and_isr_clears_a_pending_isr_change(plog: PartitionLog) -> None:
    partition = leader(plog, [1], [1, 2], epoch=0)
    partition.begin_isr_change([1, 2])
    partition.make_leader(1, [1], [1, 2], zk_version=1, now_ms=T0)
    assert not partition.isr_change_pending
    partition.begin_isr_change([1, 2])
    partition.make_follower(2, 2, [2], [1, 2], zk_version=2)
    assert not partition.isr_change_pending


def test_check_leader_errors(plog: PartitionLog) -> None:
    partition = make_partition(plog)
    with pytest.raises(NotLeaderError) as info:
        partition.check_leader()
    assert info.value.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    partition.make_leader(5, [1], [1], zk_version=0, now_ms=T0)
    partition.check_leader()
    partition.check_leader(-1)
    partition.check_leader(5)
    with pytest.raises(ReplicationError) as info:
        partition.check_leader(4)
    assert info.value.error_code == ErrorCode.FENCED_LEADER_EPOCH
    with pytest.raises(ReplicationError) as info:
        partition.check_leader(6)
    assert info.value.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    partition.make_follower(2, 6, [2], [1, 2], zk_version=1)
    with pytest.raises(NotLeaderError):
        partition.check_leader(6)


# == durable_and_committed =================================================================================


def test_durable_and_committed_waits_for_both() -> None:
    assert durable_and_committed(None, None) is None
    committed: Future = Future()
    assert durable_and_committed(None, committed) is committed
    durable: Future = Future()
    assert durable_and_committed(durable, None) is durable
    done: Future = Future()
    done.set_result(None)
    assert durable_and_committed(done, committed) is committed
    assert durable_and_committed(durable, done) is durable

    both = durable_and_committed(durable, committed)
    durable.set_result(None)
    assert not both.done()
    committed.set_result(None)
    assert both.result() is None


def test_durable_and_committed_fails_with_the_first_error() -> None:
    durable: Future = Future()
    committed: Future = Future()
    both = durable_and_committed(durable, committed)
    committed.set_exception(NotLeaderError("moved"))
    assert isinstance(both.exception(), NotLeaderError)
    durable.set_exception(OSError("disk"))  # later errors do not disturb the settled future
    assert isinstance(both.exception(), NotLeaderError)


# == ReplicaManager ========================================================================================


class Broker:
    """A ReplicaManager over a real LogManager in ``data_dir`` (as broker/core.py builds it)."""

    def __init__(self, data_dir: Path, broker_id: int = 1, lag_ms: int = 10_000) -> None:
        self.notes = Notes()
        self.metadata = MetadataCache("cluster")
        self.metadata.set_brokers([BrokerInfo(b, "127.0.0.1", 9000 + b) for b in (1, 2, 3)], 1)  # live ones
        self.logs = LogManager(data_dir, LogConfig())
        self.logs.load_all()
        self.rm = ReplicaManager(broker_id, data_dir, self.logs, self.metadata, lambda topic: LogConfig(),
                                 self.notes, lag_ms, 60_000)
        self.leadership: list[tuple[str, int, bool]] = []
        self.rm.on_leadership.append(lambda t, p, led: self.leadership.append((t, p, led)))

    def apply(self, controller_epoch: int, *changes: PartitionStateChange) -> dict:
        return self.rm.become_leader_or_follower(controller_epoch, list(changes))

    def close(self) -> None:
        self.rm.close()
        self.logs.close()


def change(leader: int, leader_epoch: int, isr: list[int], replicas: list[int] | None = None, zk_version: int = 0,
           topic: str = "t", partition: int = 0, controller_epoch: int = 1) -> PartitionStateChange:
    return PartitionStateChange(topic, partition, controller_epoch, leader, leader_epoch, list(isr), zk_version,
                                list(replicas or isr))


@pytest.fixture
def broker(tmp_path: Path) -> Broker:
    b = Broker(tmp_path / "data")
    yield b
    b.close()


def test_become_leader_creates_the_log_and_leads(broker: Broker, tmp_path: Path) -> None:
    errors = broker.apply(1, change(1, 0, [1, 2], [1, 2, 3]))
    assert errors == {("t", 0): ErrorCode.NONE}
    partition = broker.rm.partition("t", 0)
    assert partition.is_leader and partition.leader_epoch == 0 and partition.isr == [1, 2]
    assert partition.replicas == [1, 2, 3] and partition.controller_epoch == 1
    assert (tmp_path / "data" / "t-0").is_dir()
    assert broker.logs.get("t", 0) is partition.log
    assert partition.log.leader_epoch_cache.entries == [(0, 0)]
    assert broker.leadership == [("t", 0, True)]
    assert broker.rm.controller_epoch == 1


def test_become_follower_then_leader_then_follower(broker: Broker) -> None:
    assert broker.apply(1, change(2, 0, [2, 1], [2, 1])) == {("t", 0): ErrorCode.NONE}
    partition = broker.rm.partition("t", 0)
    assert not partition.is_leader and partition.leader_id == 2
    assert broker.leadership == []
    broker.apply(2, change(1, 1, [1, 2], [2, 1], zk_version=1, controller_epoch=2))
    assert partition.is_leader and partition.leader_epoch == 1
    broker.apply(2, change(2, 2, [2], [2, 1], zk_version=2, controller_epoch=2))
    assert partition.leader_id == 2 and partition.leader_epoch == 2 and partition.isr == [2]
    assert broker.leadership == [("t", 0, True), ("t", 0, False)]


def test_become_leader_or_follower_refuses_an_older_controller(broker: Broker) -> None:
    broker.apply(5, change(1, 3, [1, 2], controller_epoch=5))
    errors = broker.apply(4, change(2, 9, [2], [1, 2], controller_epoch=4),
                          change(1, 0, [1], topic="u", controller_epoch=4))
    assert errors == {("t", 0): ErrorCode.STALE_CONTROLLER_EPOCH, ("u", 0): ErrorCode.STALE_CONTROLLER_EPOCH}
    partition = broker.rm.partition("t", 0)
    assert partition.is_leader and partition.leader_epoch == 3
    assert broker.rm.partition("u", 0) is None
    assert broker.rm.controller_epoch == 5


def test_become_leader_or_follower_refuses_older_partition_states(broker: Broker) -> None:
    broker.apply(1, change(1, 3, [1, 2], zk_version=4))
    partition = broker.rm.partition("t", 0)
    # an older leader epoch, or the same epoch at an older znode version: a newer decision is applied already
    errors = broker.apply(2, change(2, 2, [2, 1], zk_version=9, controller_epoch=2))
    assert errors == {("t", 0): ErrorCode.STALE_CONTROLLER_EPOCH}
    # the same leader epoch seen at an older partition epoch: accepted, and nothing changes (as Kafka 3.x)
    errors = broker.apply(2, change(1, 3, [1], zk_version=3, controller_epoch=2))
    assert errors == {("t", 0): ErrorCode.NONE}
    assert partition.is_leader and partition.leader_epoch == 3 and partition.isr == [1, 2] and partition.zk_version == 4
    # the same state again, and newer ones, apply
    assert broker.apply(2, change(1, 3, [1, 2], zk_version=4, controller_epoch=2)) == {("t", 0): ErrorCode.NONE}
    assert broker.apply(2, change(1, 3, [1], zk_version=5, controller_epoch=2)) == {("t", 0): ErrorCode.NONE}
    assert partition.isr == [1] and partition.zk_version == 5 and partition.controller_epoch == 2
    assert broker.apply(2, change(2, 4, [2, 1], zk_version=6, controller_epoch=2)) == {("t", 0): ErrorCode.NONE}
    assert partition.leader_id == 2 and partition.leader_epoch == 4


def test_become_leader_or_follower_for_a_partition_not_assigned_here(broker: Broker) -> None:
    errors = broker.apply(1, change(2, 0, [2, 3], [2, 3]), change(1, 0, [1], partition=1))
    assert errors == {("t", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ("t", 1): ErrorCode.NONE}
    assert broker.rm.partition("t", 0) is None and broker.logs.get("t", 0) is None


def test_leader_partition_errors(broker: Broker) -> None:
    with pytest.raises(ReplicationError) as info:
        broker.rm.leader_partition("t", 0)
    assert info.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(ReplicationError) as info:
        broker.rm.leader_partition(None, 0)
    assert info.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # the cluster knows the partition but this broker holds no replica of it
    broker.metadata.put_partition("t", 0, PartitionInfo(leader=2, leader_epoch=0, replicas=[2, 3], isr=[2, 3]))
    with pytest.raises(ReplicationError) as info:
        broker.rm.leader_partition("t", 0)
    assert info.value.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # a follower here
    broker.apply(1, change(2, 0, [2, 1], [2, 1], partition=1))
    with pytest.raises(ReplicationError) as info:
        broker.rm.leader_partition("t", 1)
    assert info.value.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # the leader here, asked with epochs
    broker.apply(1, change(1, 4, [1], partition=2))
    assert broker.rm.leader_partition("t", 2).index == 2
    assert broker.rm.leader_partition("t", 2, 4).index == 2
    with pytest.raises(ReplicationError) as info:
        broker.rm.leader_partition("t", 2, 3)
    assert info.value.error_code == ErrorCode.FENCED_LEADER_EPOCH
    with pytest.raises(ReplicationError) as info:
        broker.rm.leader_partition("t", 2, 5)
    assert info.value.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_stop_replica_with_delete_removes_the_log(broker: Broker, tmp_path: Path) -> None:
    broker.apply(1, change(1, 0, [1, 2], [1, 2]))
    partition = broker.rm.partition("t", 0)
    produce(partition, 1)
    waiting = partition.when_committed(1)
    assert broker.rm.stop_replica("t", 0, delete=True) == ErrorCode.NONE
    assert isinstance(waiting.exception(), NotLeaderError)
    assert broker.rm.partition("t", 0) is None and broker.logs.get("t", 0) is None
    assert not (tmp_path / "data" / "t-0").exists()
    assert broker.leadership == [("t", 0, True), ("t", 0, False)]


def test_relinquish_all_stops_leading_and_following(broker: Broker) -> None:
    broker.apply(1, change(1, 0, [1, 2], [1, 2]), change(2, 0, [2, 1], [2, 1], partition=1))
    broker.rm.relinquish_all()
    assert all(p.leader_id == -1 for p in broker.rm.partitions.values())
    assert broker.leadership == [("t", 0, True), ("t", 0, False)]
    with pytest.raises(ReplicationError):
        broker.rm.leader_partition("t", 0)


# -- the high watermark checkpoint ------------------------------------------------------------------------


def test_hw_checkpoint_text_format() -> None:
    assert encode_hw_checkpoint({}) == b"0\n0\n"
    assert encode_hw_checkpoint({("b", 1): 7, ("a", 10): 0, ("a", 2): 123}) == b"0\n3\na 2 123\na 10 0\nb 1 7\n"


def test_read_hw_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / HW_CHECKPOINT_FILE
    assert read_hw_checkpoint(path) == {}
    path.write_text("0\n2\nmy-topic 0 15\n__consumer_offsets 49 3\n")  # as Kafka writes it
    assert read_hw_checkpoint(path) == {("my-topic", 0): 15, ("__consumer_offsets", 49): 3}
    path.write_text("1\n1\nt 0 5\n")  # an unknown version
    assert read_hw_checkpoint(path) == {}
    path.write_text("0\n1\nt zero 5\n")
    assert read_hw_checkpoint(path) == {}
    path.write_bytes(b"\xff\xfe")
    assert read_hw_checkpoint(path) == {}


def test_hw_checkpoint_is_written_by_the_log_flusher_in_kafkas_format(broker: Broker, tmp_path: Path) -> None:
    broker.apply(1, change(1, 0, [1], [1]), change(1, 0, [1, 2], [1, 2], partition=1),
                 change(2, 0, [2, 1], [2, 1], topic="other"))
    produce(broker.rm.partition("t", 0), 5)
    produce(broker.rm.partition("t", 1), 4)
    broker.rm.partition("t", 1).update_follower(2, 3, T0)
    path = tmp_path / "data" / HW_CHECKPOINT_FILE
    broker.rm.checkpoint_high_watermarks()  # a job of the flusher thread
    broker.logs.flusher.submit(lambda: None).result(timeout=10)  # jobs run in order: it is done after this one
    assert path.read_text() == "0\n3\nother 0 0\nt 0 5\nt 1 3\n"
    broker.rm.partition("t", 1).update_follower(2, 4, T0)
    broker.rm.checkpoint_high_watermarks(wait=True)
    assert path.read_text() == "0\n3\nother 0 0\nt 0 5\nt 1 4\n"
    assert not (tmp_path / "data" / (HW_CHECKPOINT_FILE + ".tmp")).exists()


def test_a_restarted_replica_takes_its_hw_from_the_checkpoint(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = Broker(data)
    first.apply(1, change(1, 0, [1, 2], [1, 2]), change(1, 0, [1, 2], [1, 2], partition=1),
                change(1, 0, [1, 2], [1, 2], partition=2))
    for p in range(3):
        produce(first.rm.partition("t", p), 10)
    first.rm.partition("t", 0).update_follower(2, 6, T0)
    first.rm.partition("t", 1).update_follower(2, 10, T0)
    first.rm.checkpoint_high_watermarks(wait=True)
    assert read_hw_checkpoint(data / HW_CHECKPOINT_FILE) == {("t", 0): 6, ("t", 1): 10, ("t", 2): 0}
    first.close()
    # a broker the next checkpoint never reached: t-2 is missing from the file and t-1's entry is too high
    (data / HW_CHECKPOINT_FILE).write_text("0\n2\nt 0 6\nt 1 25\n")

    second = Broker(data)
    try:
        assert read_hw_checkpoint(data / HW_CHECKPOINT_FILE) == {("t", 0): 6, ("t", 1): 25}
        second.apply(2, change(2, 1, [2, 1], [1, 2], controller_epoch=2),
                     change(1, 1, [1, 2], [1, 2], partition=1, controller_epoch=2),
                     change(2, 1, [2, 1], [1, 2], partition=2, controller_epoch=2))
        t0, t1, t2 = (second.rm.partition("t", p) for p in range(3))
        assert t0.log.log_end_offset == 10 and t0.log.high_watermark == 6  # as checkpointed, not the log end
        assert t1.log.high_watermark == 10  # capped at the log end
        assert t2.log.high_watermark == 0  # not checkpointed: from the log start
        # as the new leader of t-1 it has not heard from 2 in this epoch: the HW stays
        assert t1.is_leader and t1.log.high_watermark == 10
    finally:
        second.close()


def test_a_restarted_leader_with_an_isr_of_one_exposes_its_log_end(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = Broker(data)
    first.apply(1, change(1, 0, [1, 2], [1, 2]))
    produce(first.rm.partition("t", 0), 8)
    first.rm.partition("t", 0).update_follower(2, 3, T0)
    first.rm.checkpoint_high_watermarks(wait=True)
    first.close()
    second = Broker(data)
    try:
        second.apply(2, change(1, 1, [1, 2], [1, 2], controller_epoch=2))
        assert second.rm.partition("t", 0).log.high_watermark == 3
        second.apply(2, change(1, 1, [1], [1, 2], zk_version=1, controller_epoch=2))
        assert second.rm.partition("t", 0).log.high_watermark == 8
    finally:
        second.close()


# -- ISR changes through isr_writer -----------------------------------------------------------------------


class IsrWriterStub:
    """The ZooKeeper write seam: records (topic, partition, new ISR, zk_version it was based on) and answers
    the new znode version (the old one + 1) with the new ISR, or what ``answer`` says; waits for ``gate`` when
    it is set."""

    def __init__(self, answer: Callable[[Partition, list[int]], IsrWritten | None] | None = None) -> None:
        self.calls: list[tuple[str, int, list[int], int]] = []
        self.finished = 0
        self.answer = answer
        self.gate: asyncio.Event | None = None
        self.error: Exception | None = None

    async def __call__(self, partition: Partition, isr: list[int]) -> IsrWritten | None:
        self.calls.append((partition.topic, partition.index, list(isr), partition.zk_version))
        if self.gate is not None:
            await self.gate.wait()
        self.finished += 1
        if self.error is not None:
            raise self.error
        if self.answer is not None:
            return self.answer(partition, isr)
        return IsrWritten(partition.zk_version + 1, list(isr))


async def until(predicate: Callable[[], object], timeout: float = 5.0, message: str = "condition") -> None:
    """Let the loop run until ``predicate()`` holds (bounded)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        await asyncio.sleep(0.001)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), timeout=30))


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def test_maintain_isr_shrinks_by_lagging_followers_through_the_writer(broker: Broker) -> None:
    writer = IsrWriterStub()
    broker.rm.isr_writer = writer

    async def scenario() -> None:
        broker.apply(1, change(1, 0, [1, 2, 3], [1, 2, 3], zk_version=4))
        partition = broker.rm.partition("t", 0)
        produce(partition, 5)
        broker.rm.follower_fetched(partition, 2, 5)
        broker.rm.follower_fetched(partition, 3, 2)
        broker.rm.maintain_isr()
        assert writer.calls == []  # nobody lags yet
        # follower 3 last caught up a minute ago (longer than replica.lag.time.max.ms = 10 s)
        partition.followers[3].last_caught_up_ms = wall_ms() - 60_000
        writer.gate = asyncio.Event()  # ZooKeeper takes its time
        broker.rm.maintain_isr()
        await asyncio.sleep(0)  # the write task starts
        assert writer.calls == [("t", 0, [1, 2], 4)]
        assert partition.isr_change_pending and partition.isr == [1, 2, 3]  # not applied before it is written
        broker.rm.maintain_isr()
        await asyncio.sleep(0)
        assert len(writer.calls) == 1  # one change in flight at a time
        writer.gate.set()
        await until(lambda: not partition.isr_change_pending, message="the ISR write")
        assert partition.isr == [1, 2] and partition.zk_version == 5
        # with 3 gone the ISR {1, 2} holds 5: the HW moves
        assert partition.log.high_watermark == 5

    run(scenario)


def test_maintain_isr_leaves_an_isr_of_one_and_followed_partitions_alone(broker: Broker) -> None:
    writer = IsrWriterStub()
    broker.rm.isr_writer = writer

    async def scenario() -> None:
        broker.apply(1, change(1, 0, [1], [1, 2]), change(2, 0, [2, 1], [2, 1], partition=1))
        broker.rm.partition("t", 0).followers[2].last_caught_up_ms = 0
        broker.rm.maintain_isr()
        await asyncio.sleep(0)
        assert writer.calls == []

    run(scenario)


def test_a_caught_up_follower_joins_the_isr_through_the_writer(broker: Broker) -> None:
    writer = IsrWriterStub()
    broker.rm.isr_writer = writer

    async def scenario() -> None:
        broker.apply(1, change(1, 0, [1, 2], [1, 2, 3], zk_version=0))
        partition = broker.rm.partition("t", 0)
        produce(partition, 6)
        broker.rm.follower_fetched(partition, 2, 6)
        assert partition.log.high_watermark == 6
        broker.rm.follower_fetched(partition, 3, 4)  # below the HW: not yet
        assert writer.calls == []
        broker.rm.follower_fetched(partition, 3, 6)
        await asyncio.sleep(0)
        assert writer.calls == [("t", 0, [1, 2, 3], 0)]
        broker.rm.follower_fetched(partition, 3, 6)
        assert len(writer.calls) == 1
        await until(lambda: not partition.isr_change_pending, message="the ISR write")
        assert partition.isr == [1, 2, 3] and partition.zk_version == 1

    run(scenario)


def test_a_caught_up_follower_that_is_not_a_live_broker_stays_out_of_the_isr(broker: Broker) -> None:
    # Kafka's isReplicaIsrEligible: a fetch of a broker whose registration is gone (stopped, or paused past
    # its session, its last fetch racing the controller's removal) must not put it back into the ISR
    writer = IsrWriterStub()
    broker.rm.isr_writer = writer

    async def scenario() -> None:
        broker.apply(1, change(1, 0, [1, 2], [1, 2, 3], zk_version=0))
        partition = broker.rm.partition("t", 0)
        produce(partition, 6)
        broker.rm.follower_fetched(partition, 2, 6)
        broker.metadata.set_brokers([BrokerInfo(b, "127.0.0.1", 9000 + b) for b in (1, 2)], 1)  # 3 is gone
        broker.rm.follower_fetched(partition, 3, 6)
        await asyncio.sleep(0)
        assert writer.calls == [] and partition.isr == [1, 2]
        broker.metadata.set_brokers([BrokerInfo(b, "127.0.0.1", 9000 + b) for b in (1, 2, 3)], 1)  # back
        broker.rm.follower_fetched(partition, 3, 6)
        await asyncio.sleep(0)
        assert writer.calls == [("t", 0, [1, 2, 3], 0)]

    run(scenario)


def test_follower_fetched_wakes_waiters_when_the_hw_moves(broker: Broker) -> None:
    async def scenario() -> None:
        broker.apply(1, change(1, 0, [1, 2], [1, 2]))
        partition = broker.rm.partition("t", 0)
        produce(partition, 2)
        broker.notes.calls.clear()
        broker.rm.follower_fetched(partition, 2, 1)
        assert broker.notes.calls == [("t", 0)]
        broker.rm.follower_fetched(partition, 2, 1)  # nothing moved
        assert broker.notes.calls == [("t", 0)]

    run(scenario)


async def shrink_attempted(broker: Broker) -> Partition:
    """Broker 1 leads t-0 (ISR [1, 2], znode version 3) and follower 2 last caught up a minute ago:
    maintain_isr() tries to shrink the ISR to [1]; returns the partition once that write has ended."""
    broker.apply(1, change(1, 0, [1, 2], [1, 2], zk_version=3))
    partition = broker.rm.partition("t", 0)
    partition.followers[2].last_caught_up_ms = wall_ms() - 60_000
    broker.rm.maintain_isr()
    await until(lambda: not partition.isr_change_pending, message="the ISR write")
    return partition


def test_an_isr_write_refused_by_zookeeper_changes_nothing(broker: Broker) -> None:
    writer = IsrWriterStub(answer=lambda partition, isr: None)  # the znode moved on: a newer decision exists
    broker.rm.isr_writer = writer

    async def scenario() -> None:
        partition = await shrink_attempted(broker)
        assert partition.isr == [1, 2] and partition.zk_version == 3
        broker.rm.maintain_isr()  # not stuck: tried again (until the controller's LeaderAndIsr arrives)
        await until(lambda: len(writer.calls) == 2, message="the second ISR write")

    run(scenario)


def test_a_leader_holding_an_old_znode_version_takes_the_znodes_state(broker: Broker) -> None:
    """The write met a newer znode that still names this broker leader at the same epoch (its own earlier
    write landed after a LeaderAndIsr carried the older version): the leader takes the znode's version and
    ISR, and its next change is based on that version instead of failing forever."""
    znode = [IsrWritten(7, [1, 2])]  # what the first write meets: version 7, the ISR unchanged

    def answer(partition: Partition, isr: list[int]) -> IsrWritten | None:
        return znode.pop() if znode else IsrWritten(partition.zk_version + 1, list(isr))

    writer = IsrWriterStub(answer=answer)
    broker.rm.isr_writer = writer

    async def scenario() -> None:
        partition = await shrink_attempted(broker)
        assert (partition.isr, partition.zk_version) == ([1, 2], 7)
        broker.rm.maintain_isr()
        await until(lambda: partition.isr == [1], message="the shrink on the right version")
        assert writer.calls[-1] == ("t", 0, [1], 7) and partition.zk_version == 8

    run(scenario)


def test_a_failing_isr_write_changes_nothing(broker: Broker) -> None:
    writer = IsrWriterStub()
    writer.error = ConnectionError("ZooKeeper connection lost")
    broker.rm.isr_writer = writer

    async def scenario() -> None:
        partition = await shrink_attempted(broker)
        assert partition.isr == [1, 2] and partition.zk_version == 3

    run(scenario)


def test_a_leader_and_isr_during_the_write_wins_over_it(broker: Broker) -> None:
    writer = IsrWriterStub()
    broker.rm.isr_writer = writer

    async def scenario() -> None:
        writer.gate = asyncio.Event()
        broker.apply(1, change(1, 0, [1, 2, 3], [1, 2, 3], zk_version=0))
        partition = broker.rm.partition("t", 0)
        partition.followers[3].last_caught_up_ms = wall_ms() - 60_000
        broker.rm.maintain_isr()
        await asyncio.sleep(0)
        assert writer.calls == [("t", 0, [1, 2], 0)]
        # meanwhile the controller decided: new epoch, ISR [1, 3]
        broker.apply(2, change(1, 1, [1, 3], [1, 2, 3], zk_version=1, controller_epoch=2))
        writer.gate.set()
        await until(lambda: writer.finished == 1, message="the ISR write")
        await asyncio.sleep(0)
        assert partition.isr == [1, 3] and partition.zk_version == 1 and partition.leader_epoch == 1

    run(scenario)


def test_without_an_isr_writer_the_isr_never_changes(broker: Broker) -> None:
    async def scenario() -> None:
        broker.apply(1, change(1, 0, [1, 2], [1, 2, 3]))
        partition = broker.rm.partition("t", 0)
        partition.followers[2].last_caught_up_ms = 0
        broker.rm.maintain_isr()
        produce(partition, 1)
        broker.rm.follower_fetched(partition, 3, 1)
        assert partition.isr == [1, 2] and not partition.isr_change_pending

    run(scenario)


def test_hw_does_not_pass_a_joining_follower_while_its_isr_expansion_is_pending(broker: Broker) -> None:
    """While the expansion is written to ZooKeeper, the HW counts the joining follower too (Kafka's "maximal
    ISR", KIP-497): once the write completes, every ISR member holds everything below the HW. Without it,
    an acks=all write appended in that window is answered while the joining follower lacks it, and a clean
    election of that follower loses it. (This failed against the first version of partition.py.)"""
    writer = IsrWriterStub()
    broker.rm.isr_writer = writer

    async def scenario() -> None:
        writer.gate = asyncio.Event()
        broker.apply(1, change(1, 0, [1], [1, 2], zk_version=0))
        partition = broker.rm.partition("t", 0)
        produce(partition, 5)
        assert partition.log.high_watermark == 5
        broker.rm.follower_fetched(partition, 2, 5)  # caught up: the expansion to [1, 2] is being written
        await asyncio.sleep(0)
        assert writer.calls == [("t", 0, [1, 2], 0)]
        end = produce(partition, 5).last_offset + 1  # an acks=all produce in the window
        committed = partition.when_committed(end)  # None: answered at once
        writer.gate.set()
        await until(lambda: not partition.isr_change_pending, message="the ISR write")
        assert partition.isr == [1, 2]
        # Invariant: every ISR member holds everything below the HW. Follower 2 holds offsets < 5 only.
        assert partition.log.high_watermark <= partition.followers[2].log_end_offset, (
            f"HW {partition.log.high_watermark} is past ISR member 2's log end "
            f"{partition.followers[2].log_end_offset}; the acks=all write ending at {end} was "
            f"{'answered at once' if committed is None else 'waiting'}")
        assert committed is not None and not committed.done()

    run(scenario)
