"""Storage for replication: the leader epoch cache (leader-epoch-checkpoint), the high watermark, a follower's
append_replicated, log truncation (truncate_to, truncate_fully_and_start_at), log start increments, and
recovery after a crash in the middle of a truncation. Real files in tmp_path throughout.

A "leader" here is a PartitionLog written with ``append``/``append_marker`` (batches stamped with the
leader epoch, as the produce path does); a "follower" copies its bytes with ``append_replicated``.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from odradek.records.batch import iter_batches, patch_base_offset, patch_leader_epoch, read_header, validate_v2
from odradek.records.codec import ABORT, COMMIT, build_batch, build_control_batch
from odradek.storage import LogConfig, PartitionLog
from odradek.storage.config import INT32_MAX
from odradek.storage.leader_epoch import LeaderEpochCache
from odradek.storage.loader import LogStartCheckpoint, RecoveryPointCheckpoint
from odradek.storage.errors import OffsetsOutOfOrderError
from odradek.storage.producer_state import OutOfOrderSequenceError
from odradek.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn

TS = 1_700_000_000_000
CHECKPOINT = LeaderEpochCache.FILE_NAME


def records(count: int = 1, tag: bytes = b"v", **fields) -> bytes:
    return build_batch([(None, tag + b"%d" % i, None, TS) for i in range(count)], **fields)


def open_log(path: Path, clean: bool = False, **config) -> PartitionLog:
    return PartitionLog.open(path, LogConfig(**config), clean_shutdown=clean, clock=lambda: TS)


def crash(plog: PartitionLog) -> None:
    """Drop the log without sealing or syncing, as a kill -9 would (the synchronous flusher ran every job)."""
    for segment in plog._segments:
        segment.offset_index.drop_pending()
        segment.time_index.drop_pending()
        segment.close()


def produce(plog: PartitionLog, raw: bytes, epoch: int) -> int:
    """Append as a leader in ``epoch`` does; returns the base offset."""
    buf = bytearray(raw)
    batches = validate_v2(buf)
    for pos, _ in batches:
        patch_leader_epoch(buf, pos, epoch)
    return plog.append(buf, validate_v2(buf)).base_offset


def end_txn(plog: PartitionLog, pid: int, commit: bool, epoch: int, producer_epoch: int = 0) -> int:
    buf = bytearray(build_control_batch(COMMIT if commit else ABORT, pid, producer_epoch, 3, TS))
    patch_leader_epoch(buf, 0, epoch)
    return plog.append_marker(buf, validate_v2(buf)[0][1], not commit, 3)


def replicate(follower: PartitionLog, data: bytes):
    """A fetched record set, as the fetcher hands it over: a read-only memoryview."""
    view = memoryview(bytes(data))
    return follower.append_replicated(view, validate_v2(view))


def follow(follower: PartitionLog, leader: PartitionLog, fetch_bytes: int = 250) -> None:
    """Copy the leader's log from the follower's end on, in fetches of about ``fetch_bytes``."""
    while follower.log_end_offset < leader.log_end_offset:
        replicate(follower, leader.read(follower.log_end_offset, fetch_bytes))


def batch_at(base_offset: int, count: int = 1, epoch: int = 0, **fields) -> bytes:
    """A batch as a leader stored it: base offset and leader epoch set."""
    buf = bytearray(records(count, **fields))
    patch_base_offset(buf, 0, base_offset)
    patch_leader_epoch(buf, 0, epoch)
    return bytes(buf)


def everything(plog: PartitionLog) -> bytes:
    return plog.read(plog.log_start_offset, 1 << 30)


def bases(data: bytes) -> list[int]:
    return [h.base_offset for _, h in iter_batches(data)]


def leader_log(path: Path, **config) -> PartitionLog:
    """Epoch 0: offsets 0-9 (five batches of 2); epoch 2: 10-19; epoch 5: 20-29 (one record per batch)."""
    leader = open_log(path, **config)
    for i in range(5):
        produce(leader, records(2, tag=b"a%d-" % i), 0)
    for i in range(5):
        produce(leader, records(2, tag=b"b%d-" % i), 2)
    for i in range(10):
        produce(leader, records(1, tag=b"c%d-" % i), 5)
    return leader


# -- the leader epoch cache -------------------------------------------------------------------------------


def test_checkpoint_file_format(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    assert cache.latest_epoch == -1 and cache.entries == [] and not (tmp_path / CHECKPOINT).exists()
    assert cache.assign(0, 0) and cache.assign(3, 10) and cache.assign(4, 25)
    assert (tmp_path / CHECKPOINT).read_bytes() == b"0\n3\n0 0\n3 10\n4 25\n"
    assert LeaderEpochCache.read(tmp_path) == [(0, 0), (3, 10), (4, 25)]
    again = LeaderEpochCache(tmp_path, LeaderEpochCache.read(tmp_path))
    assert again.entries == cache.entries and again.latest_epoch == 4
    assert (again.earliest_epoch, again.earliest_start, again.latest_start) == (0, 0, 25)
    assert [again.epoch_for(o) for o in (0, 9, 10, 24, 25, 99)] == [0, 0, 3, 3, 4, 4]
    cache.clear_and_flush()
    assert (tmp_path / CHECKPOINT).read_bytes() == b"0\n0\n" and LeaderEpochCache.read(tmp_path) == []
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("content", [b"", b"1\n0\n", b"0\n2\n0 0\n", b"0\n1\n0 0\n1 5\n", b"0\nx\n",
                                     b"0\n1\n0 -5\n", b"0\n1\n00\n", b"\xff"])
def test_unreadable_checkpoint_reads_as_missing(tmp_path: Path, content: bytes) -> None:
    (tmp_path / CHECKPOINT).write_bytes(content)
    assert LeaderEpochCache.read(tmp_path) is None
    assert LeaderEpochCache.read(tmp_path / "nowhere") is None


def test_assign_keeps_both_columns_increasing(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    assert cache.assign(2, 10)
    assert not cache.assign(2, 15)  # the latest epoch again: the earlier start stays
    assert not cache.assign(1, 20)  # an older epoch is ignored
    assert cache.assign(2, 8)  # the latest epoch at an earlier start moves it back
    assert cache.entries == [(2, 8)]
    assert cache.assign(4, 30) and cache.assign(6, 40)
    assert cache.assign(7, 35)  # starts below the entry of epoch 6: that entry goes
    assert cache.entries == [(2, 8), (4, 30), (7, 35)]
    assert cache.assign(9, 30)  # at the start of epoch 4's entry: it goes too
    assert cache.entries == [(2, 8), (9, 30)]
    assert LeaderEpochCache.read(tmp_path) == cache.entries
    with pytest.raises(ValueError):
        cache.assign(-1, 50)
    with pytest.raises(ValueError):
        cache.assign(10, -1)


def test_end_offset_for_every_case(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    assert cache.end_offset_for(0, 100) == (-1, -1)  # empty
    for epoch, start in [(1, 10), (3, 20), (5, 40)]:
        cache.assign(epoch, start)
    assert cache.end_offset_for(5, 100) == (5, 100)  # the latest epoch: the log end
    assert cache.end_offset_for(3, 100) == (3, 40)  # a known epoch: the next one's start
    assert cache.end_offset_for(1, 100) == (1, 20)
    assert cache.end_offset_for(4, 100) == (3, 40)  # unknown, between: the largest below, the next's start
    assert cache.end_offset_for(2, 100) == (1, 20)
    assert cache.end_offset_for(0, 100) == (0, 10)  # below the first: the first start (as Kafka answers)
    assert cache.end_offset_for(6, 100) == (-1, -1)  # above the latest
    assert cache.end_offset_for(-1, 100) == (-1, -1)  # UNDEFINED


def test_truncation_of_the_cache(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in [(1, 10), (3, 20), (5, 40)]:
        cache.assign(epoch, start)
    assert not cache.truncate_from_end(41)
    assert cache.truncate_from_end(40) and cache.entries == [(1, 10), (3, 20)] and cache.latest_epoch == 3
    assert not cache.truncate_from_start(10)  # an entry starting exactly there stays
    assert cache.truncate_from_start(15) and cache.entries == [(1, 15), (3, 20)]
    assert cache.truncate_from_start(25) and cache.entries == [(3, 25)]
    assert LeaderEpochCache.read(tmp_path) == [(3, 25)]
    assert cache.truncate_from_end(0) and cache.entries == [] and cache.latest_epoch == -1
    assert not cache.truncate_from_start(30)
    assert LeaderEpochCache.read(tmp_path) == []


# -- the leader epoch cache of a log ----------------------------------------------------------------------


def test_appends_assign_new_epochs_and_the_cache_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    leader = leader_log(path)
    expected = [(0, 0), (2, 10), (5, 20)]
    assert leader.leader_epoch_cache.entries == expected and leader.latest_epoch == 5
    assert LeaderEpochCache.read(path) == expected
    assert leader.end_offset_for_epoch(2) == (2, 20)
    assert leader.end_offset_for_epoch(5) == (5, 30)
    assert end_txn(leader, 9, commit=True, epoch=7) == 30  # markers carry epochs too
    assert leader.leader_epoch_cache.entries[-1] == (7, 30)
    produce(leader, records(1), -1)  # a batch without an epoch changes nothing
    assert leader.latest_epoch == 7
    leader.close()
    again = open_log(path, clean=True)
    assert again.leader_epoch_cache.entries == expected + [(7, 30)]
    again.close()


@pytest.mark.parametrize("clean", [True, False])
def test_missing_checkpoint_is_rebuilt_from_the_batches(tmp_path: Path, clean: bool) -> None:
    path = tmp_path / "t-0"
    leader = leader_log(path, segment_bytes=700)
    assert leader.segment_count > 2
    leader.close()
    (path / CHECKPOINT).unlink()
    again = open_log(path, clean=clean, segment_bytes=700)
    assert again.leader_epoch_cache.entries == [(0, 0), (2, 10), (5, 20)]
    assert LeaderEpochCache.read(path) == [(0, 0), (2, 10), (5, 20)]  # written, so not rebuilt every time
    again.close()


def test_recovery_adds_epochs_written_after_the_checkpoint_and_drops_those_past_the_end(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    leader = leader_log(path)
    produce(leader, records(3), 8)  # 30-32
    crash(leader)
    # a kill -9 between the write of the data and that of the checkpoint
    (path / CHECKPOINT).write_bytes(b"0\n3\n0 0\n2 10\n5 20\n")
    again = open_log(path)
    assert again.leader_epoch_cache.entries == [(0, 0), (2, 10), (5, 20), (8, 30)]
    crash(again)
    # the OS lost the data from offset 25 on after the checkpoint was written: the entry of epoch 8 goes
    log_file = path / "00000000000000000000.log"
    cut = next(pos for pos, h in iter_batches(log_file.read_bytes()) if h.base_offset == 25)
    with open(log_file, "r+b") as f:
        f.truncate(cut + 10)
    again = open_log(path)
    assert again.log_end_offset == 25
    assert again.leader_epoch_cache.entries == [(0, 0), (2, 10), (5, 20)]
    assert LeaderEpochCache.read(path) == [(0, 0), (2, 10), (5, 20)]
    again.close()


# -- the high watermark -----------------------------------------------------------------------------------


def test_high_watermark_is_moved_from_above_and_clamped(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    plog = open_log(path, segment_bytes=300)
    assert plog.high_watermark == 0
    for i in range(10):
        produce(plog, records(2), 0)
    assert plog.log_end_offset == 20 and plog.high_watermark == 0  # appends do not move it
    assert plog.update_high_watermark(12) and plog.high_watermark == 12
    assert not plog.update_high_watermark(12)
    assert plog.update_high_watermark(99) and plog.high_watermark == 20  # not past the log end
    assert plog.update_high_watermark(4) and plog.high_watermark == 4  # a follower may lower it
    plog.delete_records_before(6)
    assert plog.high_watermark == 6  # never below the log start
    assert not plog.update_high_watermark(0) and plog.high_watermark == 6
    plog.update_high_watermark(20)
    plog.truncate_to(14)
    assert plog.high_watermark == 14  # truncation clamps it
    plog.close()
    again = open_log(path, clean=True, segment_bytes=300)
    assert again.high_watermark == again.log_end_offset == 14  # at open: the recovered log end
    again.close()


def test_last_stable_offset_is_bounded_by_the_high_watermark_and_the_log_start(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=200)
    produce(plog, records(2), 0)  # 0-1
    produce(plog, records(2, producer_id=1, producer_epoch=0, base_sequence=0, transactional=True), 0)  # 2-3
    for _ in range(6):
        produce(plog, records(2), 0)  # 4-15
    assert plog.last_stable_offset == 0
    plog.update_high_watermark(1)
    assert plog.last_stable_offset == 1
    plog.update_high_watermark(16)
    assert plog.last_stable_offset == 2
    plog.delete_records_before(8)  # the open transaction began below the new start
    assert plog.last_stable_offset == 8
    plog.close()


def test_retention_never_deletes_past_the_high_watermark(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=200, retention_ms=1)
    for _ in range(8):
        produce(plog, records(2), 0)
    assert plog.segment_count > 3
    bases_before = plog.segment_base_offsets
    plog.update_high_watermark(bases_before[2])
    assert plog.enforce_retention(TS + 1_000_000) == 2  # the segments that end at or below the HW
    assert plog.log_start_offset == bases_before[2]
    plog.update_high_watermark(plog.log_end_offset)
    assert plog.enforce_retention(TS + 1_000_000) == len(bases_before) - 3  # all but the active one
    plog.close()


# -- append_replicated ------------------------------------------------------------------------------------


def test_follower_copies_the_leaders_batches(tmp_path: Path) -> None:
    leader = leader_log(tmp_path / "leader")
    follower = open_log(tmp_path / "follower")
    copied = leader.read(0, 1 << 20)
    for fetch_end in (1, 8, 19, None):  # several fetches, one record set each
        data = leader.read(follower.log_end_offset, 1 << 20, max_offset=fetch_end)
        result = replicate(follower, data)
        assert result.base_offset == bases(data)[0] and result.last_offset == follower.log_end_offset - 1
    assert follower.log_end_offset == 30 and follower.high_watermark == 0
    assert everything(follower) == copied  # byte for byte: offsets and epochs as the leader wrote them
    assert (tmp_path / "follower" / "00000000000000000000.log").read_bytes() == copied
    assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries
    assert LeaderEpochCache.read(tmp_path / "follower") == [(0, 0), (2, 10), (5, 20)]
    assert follower.end_offset_for_epoch(2) == (2, 20)
    follower.close()
    again = open_log(tmp_path / "follower", clean=True)
    assert everything(again) == copied and again.leader_epoch_cache.entries == [(0, 0), (2, 10), (5, 20)]
    again.close()
    leader.close()


def test_replicated_offsets_may_skip_but_never_go_back(tmp_path: Path) -> None:
    follower = open_log(tmp_path / "t-0")
    replicate(follower, batch_at(0, 2) + batch_at(5, 3, epoch=1))  # a gap, as compaction leaves
    assert follower.log_end_offset == 8
    assert bases(everything(follower)) == [0, 5]
    size = (tmp_path / "t-0" / "00000000000000000000.log").stat().st_size
    for bad in [batch_at(7, 1), batch_at(8, 2) + batch_at(9, 1), batch_at(8, 2) + batch_at(8, 2)]:
        with pytest.raises(OffsetsOutOfOrderError) as info:
            replicate(follower, bad)
        assert info.value.log_end_offset >= 8
    assert isinstance(info.value, ValueError)
    with pytest.raises(OffsetsOutOfOrderError) as info:
        replicate(follower, batch_at(6, 3))  # a batch that straddles the log end
    assert (info.value.first_offset, info.value.last_offset, info.value.log_end_offset) == (6, 8, 8)
    assert follower.log_end_offset == 8 and (tmp_path / "t-0" / "00000000000000000000.log").stat().st_size == size
    assert follower.leader_epoch_cache.entries == [(0, 0), (1, 5)]
    follower.close()


def test_replicated_appends_roll_like_the_leaders(tmp_path: Path) -> None:
    leader = leader_log(tmp_path / "leader", segment_bytes=400, index_interval_bytes=100)
    follower = open_log(tmp_path / "follower", segment_bytes=400, index_interval_bytes=100)
    follow(follower, leader)
    assert follower.segment_count > 2
    assert everything(follower) == leader.read(0, 1 << 20)
    for offset in range(30):
        assert read_header(follower.read(offset, 1)).last_offset >= offset
    follower.close()
    again = open_log(tmp_path / "follower", segment_bytes=400, index_interval_bytes=100)  # unclean: recovered
    assert everything(again) == leader.read(0, 1 << 20)
    assert again.leader_epoch_cache.entries == [(0, 0), (2, 10), (5, 20)]
    again.close()
    leader.close()


def test_offsets_beyond_a_segments_int32_range_start_a_new_segment(tmp_path: Path) -> None:
    follower = open_log(tmp_path / "t-0")
    far = INT32_MAX + 10
    result = replicate(follower, batch_at(0, 2) + batch_at(far, 1) + batch_at(far + INT32_MAX, 1)
                       + batch_at(far + INT32_MAX + 1, 1))
    assert (result.base_offset, result.last_offset) == (0, far + INT32_MAX + 1)
    assert follower.segment_base_offsets == [0, far, far + INT32_MAX + 1]
    assert bases(everything(follower)) == [0, far, far + INT32_MAX, far + INT32_MAX + 1]
    follower.close()
    empty = open_log(tmp_path / "t-1")  # an empty active segment far below the first batch
    replicate(empty, batch_at(far, 1))
    assert empty.segment_base_offsets == [0, far] and bases(everything(empty)) == [far]
    empty.close()
    again = open_log(tmp_path / "t-1")
    assert again.log_end_offset == far + 1 and bases(everything(again)) == [far]
    again.close()


def test_idempotent_batches_leave_the_leaders_producer_state(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    for seq in range(0, 14, 2):
        produce(leader, records(2, producer_id=7, producer_epoch=1, base_sequence=seq), 0)
        produce(leader, records(1), 0)
    produce(leader, records(1, producer_id=8, producer_epoch=0, base_sequence=0), 1)
    follower = open_log(tmp_path / "follower")
    replicate(follower, leader.read(0, 1 << 20))
    assert follower.producer_state.producers == leader.producer_state.producers
    assert len(follower.producer_state.entry(7).batches) == 5
    follower.close()
    again = open_log(tmp_path / "follower", clean=True)
    assert again.producer_state.producers == leader.producer_state.producers
    # as a new leader it detects a retry of the leader's last batch and refuses a gap
    buf = bytearray(records(2, producer_id=7, producer_epoch=1, base_sequence=12))
    assert again.append(buf, validate_v2(buf)).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        produce(again, records(1, producer_id=7, producer_epoch=1, base_sequence=20), 2)
    again.close()
    leader.close()


def test_transactions_and_markers_follow_the_leader(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader", segment_bytes=400)
    txn = {"producer_epoch": 0, "transactional": True}
    produce(leader, records(2, producer_id=1, base_sequence=0, **txn), 0)  # 0-1
    produce(leader, records(1), 0)  # 2
    produce(leader, records(2, producer_id=2, base_sequence=0, **txn), 0)  # 3-4
    end_txn(leader, 1, commit=False, epoch=0)  # 5
    produce(leader, records(2, producer_id=3, base_sequence=0, **txn), 1)  # 6-7
    end_txn(leader, 2, commit=True, epoch=1)  # 8
    produce(leader, records(2, producer_id=1, base_sequence=2, **txn), 1)  # 9-10
    end_txn(leader, 1, commit=False, epoch=1)  # 11
    produce(leader, records(2, producer_id=4, base_sequence=0, **txn), 1)  # 12-13, stays open
    leader.update_high_watermark(leader.log_end_offset)
    follower = open_log(tmp_path / "follower", segment_bytes=400)
    data = leader.read(0, 1 << 20)
    for cut in (6, 9, 12, None):  # fetch by fetch: the LSO moves as on the leader
        piece = leader.read(follower.log_end_offset, 1 << 20, max_offset=cut)
        replicate(follower, piece)
        follower.update_high_watermark(follower.log_end_offset)
        expected_lso = {6: 3, 9: 6, 12: 6, None: 6}[cut]
        assert follower.last_stable_offset == expected_lso
    assert everything(follower) == data
    assert follower.last_stable_offset == leader.last_stable_offset == 6
    assert follower.aborted_transactions(0, 100) == leader.aborted_transactions(0, 100) == [
        AbortedTxn(1, 0, 5, 3), AbortedTxn(1, 9, 11, 6)]
    assert follower.producer_state.producers == leader.producer_state.producers
    assert follower.segment_count > 1 and len(list((tmp_path / "follower").glob("*" + TXN_INDEX_SUFFIX))) >= 1
    follower.close()
    again = open_log(tmp_path / "follower", segment_bytes=400)
    assert again.aborted_transactions(0, 100) == leader.aborted_transactions(0, 100)
    assert again.last_stable_offset == 6 and again.producer_state.producers == leader.producer_state.producers
    again.close()
    leader.close()


def test_replicated_flush_policy_returns_the_flush(tmp_path: Path) -> None:
    follower = open_log(tmp_path / "t-0", flush_messages=3)
    assert replicate(follower, batch_at(0, 2)).durable is None
    durable = replicate(follower, batch_at(2, 2)).durable
    assert durable is not None and durable.done()
    follower.close()


# -- truncate_to ------------------------------------------------------------------------------------------


CONFIG = {"segment_bytes": 400, "index_interval_bytes": 100}


def follower_of(tmp_path: Path, name: str = "follower") -> tuple[PartitionLog, PartitionLog, bytes]:
    """A leader (see leader_log, small segments) and a follower holding all of it."""
    leader = leader_log(tmp_path / "leader", **CONFIG)
    follower = open_log(tmp_path / name, **CONFIG)
    data = leader.read(0, 1 << 20)
    follow(follower, leader)
    follower.update_high_watermark(follower.log_end_offset)
    return leader, follower, data


def prefix(data: bytes, end: int) -> bytes:
    """The batches of ``data`` that end below ``end``."""
    size = 0
    for pos, header in iter_batches(data):
        if header.last_offset >= end:
            break
        size = pos + header.size
    return data[:size]


def check_truncated(plog: PartitionLog, data: bytes, end: int) -> None:
    assert plog.log_end_offset == end
    assert everything(plog) == prefix(data, end)
    for offset in range(plog.log_start_offset, end):
        assert read_header(plog.read(offset, 1)).last_offset >= offset
    assert all(e[1] < end for e in plog.leader_epoch_cache.entries)
    assert all(o <= end for o in plog.producer_state.snapshot_offsets())


def case_ends(follower: PartitionLog) -> dict[str, int]:
    bases_ = follower.segment_base_offsets
    return {"middle": bases_[1] + 2 if bases_[1] + 2 < bases_[2] else bases_[1] + 1,
            "boundary": bases_[2], "several": bases_[1], "first-segment": 3, "active-segment": bases_[-1] + 2}


@pytest.mark.parametrize("case", ["middle", "boundary", "several", "first-segment", "active-segment"])
@pytest.mark.parametrize("reopen", ["clean", "crash"])
def test_truncate_to(tmp_path: Path, case: str, reopen: str) -> None:
    leader, follower, data = follower_of(tmp_path)
    assert follower.segment_count >= 4
    target = case_ends(follower)[case]
    target -= target % 2 if target < 20 else 0  # a batch boundary (two records a batch below 20)
    epochs_before = follower.leader_epoch_cache.entries
    follower.truncate_to(target)
    check_truncated(follower, data, target)
    assert follower.high_watermark == target
    assert follower.leader_epoch_cache.entries == [e for e in epochs_before if e[1] < target]
    assert LeaderEpochCache.read(follower.directory) == follower.leader_epoch_cache.entries
    recovery_point = RecoveryPointCheckpoint.read(follower.directory)
    assert recovery_point is None or recovery_point <= follower.segment_base_offsets[-1]
    assert follower.segment_base_offsets[-1] <= target
    assert all(int(p.name[:20]) <= target for p in follower.directory.glob("*.log"))
    if reopen == "clean":
        follower.close()
    else:
        crash(follower)
    again = open_log(follower.directory, clean=reopen == "clean", **CONFIG)
    check_truncated(again, data, target)
    assert again.leader_epoch_cache.entries == [e for e in epochs_before if e[1] < target]
    # and it follows the leader again from there
    replicate(again, leader.read(target, 1 << 20))
    assert everything(again) == data and again.leader_epoch_cache.entries == epochs_before
    again.close()
    leader.close()


def test_truncate_inside_a_batch_removes_the_whole_batch(tmp_path: Path) -> None:
    leader, follower, data = follower_of(tmp_path)
    follower.truncate_to(13)  # the batch 12-13 goes whole
    check_truncated(follower, data, 12)
    follower.close()
    again = open_log(follower.directory, clean=True, **CONFIG)
    check_truncated(again, data, 12)
    again.close()
    leader.close()


def test_truncate_to_the_log_start_or_below_restarts_the_log(tmp_path: Path) -> None:
    leader, follower, data = follower_of(tmp_path)
    follower.truncate_to(follower.log_end_offset)  # no-op
    follower.truncate_to(99)
    assert everything(follower) == data
    follower.delete_records_before(4)
    follower.truncate_to(5)  # the batch 4-5 holds the start: nothing can stay
    assert (follower.log_start_offset, follower.log_end_offset, follower.high_watermark) == (4, 4, 4)
    assert follower.segment_base_offsets == [4] and follower.leader_epoch_cache.entries == []
    follower.close()
    again = open_log(follower.directory, **CONFIG)
    assert (again.log_start_offset, again.log_end_offset) == (4, 4)
    replicate(again, leader.read(4, 1 << 20))
    assert everything(again) == data[len(prefix(data, 4)):]
    again.truncate_to(2)  # below the start
    assert (again.log_start_offset, again.log_end_offset) == (2, 2)
    again.close()
    leader.close()
    with pytest.raises(ValueError):
        open_log(tmp_path / "x").truncate_to(-1)


def test_truncate_to_an_offset_in_a_gap(tmp_path: Path) -> None:
    follower = open_log(tmp_path / "t-0", segment_bytes=150)
    replicate(follower, batch_at(0, 2))
    replicate(follower, batch_at(10, 2))  # a new segment at 10
    replicate(follower, batch_at(20, 2, epoch=3))
    assert follower.segment_base_offsets == [0, 10, 20] and follower.log_end_offset == 22
    follower.truncate_to(15)  # between the batches 10-11 and 20-21
    assert follower.log_end_offset == 15 and follower.segment_base_offsets == [0, 10]
    assert bases(everything(follower)) == [0, 10] and follower.leader_epoch_cache.entries == [(0, 0)]
    follower.truncate_to(5)  # before a segment that starts past the cut: it goes whole
    assert follower.log_end_offset == 5 and follower.segment_base_offsets == [0]
    replicate(follower, batch_at(5, 1, epoch=4))
    assert bases(everything(follower)) == [0, 5]
    follower.close()
    again = open_log(tmp_path / "t-0", segment_bytes=150)
    assert again.log_end_offset == 6 and again.leader_epoch_cache.entries == [(0, 0), (4, 5)]
    again.close()


def test_a_cut_sealed_segment_becomes_the_active_one(tmp_path: Path) -> None:
    leader, follower, data = follower_of(tmp_path)
    cut_base = follower.segment_base_offsets[1]
    follower.truncate_to(cut_base + 2)
    assert follower.segment_base_offsets[-1] == cut_base
    for _ in range(6):  # as the new leader: appends go to it, then it rolls by size
        produce(follower, records(2, tag=b"new"), 9)
    assert follower.segment_count > 2 and follower.leader_epoch_cache.entries[-1] == (9, cut_base + 2)
    expected = everything(follower)
    follower.close()
    for clean in (True, False):
        again = open_log(follower.directory, clean=clean, **CONFIG)
        assert everything(again) == expected
        for offset in range(again.log_end_offset):
            assert read_header(again.read(offset, 1)).last_offset >= offset
        again.close()
    leader.close()


def test_truncate_then_follow_a_new_leader(tmp_path: Path) -> None:
    old_leader, follower, data = follower_of(tmp_path)
    # the new leader (epoch 7) has the first 16 offsets in common, then its own records
    new_leader = open_log(tmp_path / "new-leader", **CONFIG)
    replicate(new_leader, prefix(data, 16))
    new_leader.leader_epoch_cache.assign(7, 16)
    for i in range(6):
        produce(new_leader, records(3, tag=b"n%d-" % i), 7)
    epoch, end = new_leader.end_offset_for_epoch(follower.latest_epoch)  # the follower asks for epoch 5
    assert (epoch, end) == (2, 16)
    follower.truncate_to(min(end, follower.end_offset_for_epoch(epoch)[1]))
    assert follower.log_end_offset == 16 and follower.latest_epoch == 2
    replicate(follower, new_leader.read(16, 1 << 20))
    assert everything(follower) == new_leader.read(0, 1 << 20)
    assert follower.leader_epoch_cache.entries == [(0, 0), (2, 10), (7, 16)]
    follower.close()
    again = open_log(follower.directory, **CONFIG)
    assert everything(again) == new_leader.read(0, 1 << 20)
    assert again.leader_epoch_cache.entries == [(0, 0), (2, 10), (7, 16)]
    again.close()
    new_leader.close()
    old_leader.close()


@pytest.mark.parametrize("reopen", ["none", "clean", "crash"])
def test_producer_state_after_truncation(tmp_path: Path, reopen: str) -> None:
    leader = open_log(tmp_path / "leader", segment_bytes=300)
    for seq in range(0, 20, 2):
        produce(leader, records(2, producer_id=7, producer_epoch=0, base_sequence=seq), 0)  # offsets = seqs
    produce(leader, records(2, producer_id=8, producer_epoch=0, base_sequence=0, transactional=True), 0)  # 20-21
    follower = open_log(tmp_path / "follower", segment_bytes=300)
    follow(follower, leader)
    assert follower.segment_count > 2 and len(follower.producer_state.snapshot_offsets()) > 1
    follower.update_high_watermark(22)
    assert follower.last_stable_offset == 20
    follower.truncate_to(14)
    assert all(o <= 14 for o in follower.producer_state.snapshot_offsets())
    assert follower.producer_state.entry(7).last_seq == 13
    assert follower.producer_state.entry(8) is None and follower.last_stable_offset == 14
    if reopen != "none":
        if reopen == "clean":
            follower.close()
        else:
            crash(follower)
        follower = open_log(tmp_path / "follower", clean=reopen == "clean", segment_bytes=300)
        assert follower.producer_state.entry(7).last_seq == 13 and follower.producer_state.entry(8) is None
    # as the new leader: the batch with sequences 14-15 was truncated away, so it is new again
    buf = bytearray(records(2, producer_id=7, producer_epoch=0, base_sequence=14))
    result = follower.append(buf, validate_v2(buf))
    assert not result.duplicate and result.base_offset == 14
    buf = bytearray(records(2, producer_id=7, producer_epoch=0, base_sequence=12))
    assert follower.append(buf, validate_v2(buf)).duplicate  # one that survived is still a retry
    follower.close()
    leader.close()


def test_truncation_rebuilds_the_aborted_transaction_index(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader", segment_bytes=300)
    txn = {"producer_epoch": 0, "transactional": True}
    for pid in range(1, 7):
        produce(leader, records(2, producer_id=pid, base_sequence=0, **txn), 0)
        end_txn(leader, pid, commit=pid % 3 == 0, epoch=0)
    follower = open_log(tmp_path / "follower", segment_bytes=300)
    follow(follower, leader)
    all_aborts = leader.aborted_transactions(0, 100)
    assert len(all_aborts) == 4
    follower.truncate_to(10)  # keeps the transactions of pids 1-3 (markers at 2, 5, 8), pid 4's data goes
    assert follower.aborted_transactions(0, 100) == [t for t in all_aborts if t.last_offset < 10]
    assert follower.last_stable_offset == follower.high_watermark
    indexed = {int(p.name[:20]) for p in follower.directory.glob("*" + TXN_INDEX_SUFFIX)}
    assert indexed <= set(follower.segment_base_offsets)
    replicate(follower, leader.read(9, 1 << 20))
    assert follower.aborted_transactions(0, 100) == all_aborts
    follower.close()
    again = open_log(tmp_path / "follower", segment_bytes=300)
    assert again.aborted_transactions(0, 100) == all_aborts
    again.close()
    leader.close()


def test_truncate_after_a_roll_whose_jobs_were_still_queued(tmp_path: Path) -> None:
    from odradek.storage.flusher import LogFlusher

    flusher = LogFlusher()
    try:
        leader = leader_log(tmp_path / "leader", **CONFIG)
        follower = PartitionLog.open(tmp_path / "follower", LogConfig(**CONFIG), clock=lambda: TS, flusher=flusher)
        data = leader.read(0, 1 << 20)
        follow(follower, leader)  # several rolls: their snapshots and recovery points are flusher jobs
        follower.truncate_to(6)
        check_truncated(follower, data, 6)
        assert RecoveryPointCheckpoint.read(follower.directory) <= follower.segment_base_offsets[-1]
        follower.close()
        leader.close()
    finally:
        flusher.close()
    again = open_log(tmp_path / "follower", **CONFIG)
    check_truncated(again, data, 6)
    again.close()


# -- truncate_fully_and_start_at ----------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [50, 12, 0])
def test_truncate_fully_and_start_at(tmp_path: Path, offset: int) -> None:
    """From a leader whose log starts past ours (50), or from where we fetch again (12, 0)."""
    leader, follower, _ = follower_of(tmp_path)
    path = follower.directory
    follower.truncate_fully_and_start_at(offset)
    state = (follower.log_start_offset, follower.log_end_offset, follower.high_watermark, follower.last_stable_offset)
    assert state == (offset, offset, offset, offset)
    assert follower.segment_base_offsets == [offset] and everything(follower) == b""
    assert follower.leader_epoch_cache.entries == [] and LeaderEpochCache.read(path) == []
    assert follower.producer_state.producers == {} and follower.aborted_transactions(0, 100) == []
    assert sorted(p.name for p in path.iterdir() if not p.name.startswith("leader-epoch")) == sorted(
        [f"{offset:020d}.log", f"{offset:020d}.index", f"{offset:020d}.timeindex", "log-start-offset"]
        + (["recovery-point"] if (path / "recovery-point").exists() else []))
    assert LogStartCheckpoint.read(path) == offset
    assert (RecoveryPointCheckpoint.read(path) or 0) <= offset
    follower.close()
    again = open_log(path, **CONFIG)
    assert (again.log_start_offset, again.log_end_offset) == (offset, offset)
    more = leader.read(offset, 1 << 20) if offset < leader.log_end_offset else batch_at(offset, 2, epoch=9)
    replicate(again, more)
    assert everything(again) == more
    assert again.leader_epoch_cache.entries[0] == (leader.leader_epoch_cache.epoch_for(offset) if offset < 30 else 9,
                                                   offset)
    again.close()
    leader.close()


# -- log start increments ---------------------------------------------------------------------------------


def test_maybe_increment_log_start(tmp_path: Path) -> None:
    leader, follower, data = follower_of(tmp_path)
    bases_before = follower.segment_base_offsets
    assert not follower.maybe_increment_log_start(0)
    assert follower.maybe_increment_log_start(bases_before[2] + 1)
    assert follower.log_start_offset == bases_before[2] + 1
    assert follower.segment_base_offsets == bases_before[2:]
    assert follower.leader_epoch_cache.earliest_start == bases_before[2] + 1
    assert LogStartCheckpoint.read(follower.directory) == bases_before[2] + 1
    assert not follower.maybe_increment_log_start(5)  # never back
    follower.update_high_watermark(0)
    assert follower.high_watermark == follower.log_start_offset
    assert follower.maybe_increment_log_start(1000)  # never past the log end
    assert follower.log_start_offset == follower.log_end_offset == follower.high_watermark == 30
    assert follower.leader_epoch_cache.entries == [(5, 30)]
    follower.close()
    again = open_log(follower.directory, clean=True, **CONFIG)
    assert (again.log_start_offset, again.log_end_offset) == (30, 30)
    assert again.leader_epoch_cache.entries == [(5, 30)]
    again.close()
    leader.close()


# -- a crash in the middle of a truncation ----------------------------------------------------------------


@pytest.mark.parametrize("stage", ["later-segments-half-deleted", "cut-but-stale-files"])
def test_a_crash_in_the_middle_of_truncate_to_leaves_a_log_that_opens(tmp_path: Path, stage: str) -> None:
    leader, follower, data = follower_of(tmp_path)
    path = follower.directory
    target = follower.segment_base_offsets[1] + 2
    target -= target % 2
    saved = tmp_path / "saved"
    saved.mkdir()
    for name in ("*.snapshot", "*" + TXN_INDEX_SUFFIX, CHECKPOINT, "recovery-point"):
        for p in path.glob(name):
            shutil.copy(p, saved / p.name)
    if stage == "later-segments-half-deleted":
        # the recovery point was lowered and the two newest segments deleted, then kill -9
        crash(follower)
        RecoveryPointCheckpoint.write(path, 0)
        newest = sorted(path.glob("*.log"))[-2:]
        for p in newest:
            p.unlink()
        expected_end = int(newest[0].name[:20])
    else:
        # everything was cut, but the files written after that are as they were before
        follower.truncate_to(target)
        crash(follower)
        for p in saved.iterdir():
            shutil.copy(p, path / p.name)
        expected_end = target
    again = open_log(path, **CONFIG)
    check_truncated(again, data, expected_end)
    assert again.leader_epoch_cache.entries == [e for e in [(0, 0), (2, 10), (5, 20)] if e[1] < expected_end]
    assert again.aborted_transactions(0, 100) == []
    again.truncate_to(target)  # the replication layer truncates again
    check_truncated(again, data, target)
    again.close()
    again = open_log(path, **CONFIG)
    check_truncated(again, data, target)
    again.close()
    leader.close()


def test_a_crash_in_the_middle_of_truncate_fully_leaves_a_log_that_opens(tmp_path: Path) -> None:
    leader, follower, data = follower_of(tmp_path)
    path = follower.directory
    crash(follower)
    # snapshots and the newest segments were deleted, then kill -9
    for p in path.glob("*.snapshot"):
        p.unlink()
    logs = sorted(path.glob("*.log"))
    for p in logs[2:]:
        p.unlink()
    again = open_log(path, **CONFIG)
    check_truncated(again, data, int(logs[2].name[:20]))
    assert again.producer_state.producers == {}
    again.truncate_fully_and_start_at(100)
    again.close()
    again = open_log(path, **CONFIG)
    assert (again.log_start_offset, again.log_end_offset, again.segment_base_offsets) == (100, 100, [100])
    again.close()
    leader.close()


# -- kill -9 while following and truncating ----------------------------------------------------------------

FOLLOWER_CHILD = textwrap.dedent(
    """
    import random, sys
    from pathlib import Path
    from odradek.records.batch import patch_base_offset, patch_leader_epoch, validate_v2
    from odradek.records.codec import build_batch, build_control_batch
    from odradek.storage import LogConfig, PartitionLog
    from odradek.storage.flusher import LogFlusher

    rng = random.Random(int(sys.argv[2]))
    plog = PartitionLog.open(Path(sys.argv[1]), LogConfig(segment_bytes=1500, index_interval_bytes=200),
                             flusher=LogFlusher())
    epoch = max(plog.latest_epoch, 0)
    pid = 1000 * epoch

    def batch(offset, raw):
        buf = bytearray(raw)
        patch_base_offset(buf, 0, offset)
        patch_leader_epoch(buf, 0, epoch)
        return bytes(buf)

    while True:
        epoch += 1
        pid += 1
        seq = 0
        for _ in range(rng.randint(1, 6)):  # one fetch: a record set of a few batches
            data = b""
            offset = plog.log_end_offset
            for _ in range(rng.randint(1, 4)):
                kind = rng.random()
                if kind < 0.15:
                    raw = build_control_batch(rng.randint(0, 1), pid, 0, 0, 1000)
                elif kind < 0.5:
                    n = rng.randint(1, 3)
                    raw = build_batch([(None, b"x" * 40, None, 1000)] * n, producer_id=pid, producer_epoch=0,
                                      base_sequence=seq, transactional=kind < 0.3)
                    seq += n
                else:
                    raw = build_batch([(None, b"y" * 60, None, 1000)] * rng.randint(1, 3))
                data += batch(offset, raw)
                offset += validate_v2(raw)[0][1].records_count
            view = memoryview(data)
            plog.append_replicated(view, validate_v2(view))
        choice = rng.random()
        start, end = plog.log_start_offset, plog.log_end_offset
        if choice < 0.8:
            plog.truncate_to(rng.randint(start, end))
        elif choice < 0.9:
            plog.truncate_fully_and_start_at(rng.randint(max(start - 5, 0), end + 5))
        plog.update_high_watermark(plog.log_end_offset)
        print(plog.log_end_offset, flush=True)
    """
)


def state_of(path: Path) -> tuple:
    plog = open_log(path, segment_bytes=1500, index_interval_bytes=200)
    try:
        data = everything(plog)
        epochs = [e for e in plog.leader_epoch_cache.entries if e[1] < plog.log_end_offset]
        return (plog.log_start_offset, plog.log_end_offset, data, epochs, plog.producer_state.producers,
                plog.aborted_transactions(0, 1 << 62), plog.last_stable_offset)
    finally:
        plog.close()


@pytest.mark.parametrize("round_", range(2))
def test_kill_9_while_following_and_truncating_leaves_a_consistent_log(tmp_path: Path, round_: int) -> None:
    path = tmp_path / "t-0"
    for attempt in range(3):
        child = subprocess.Popen([sys.executable, "-c", FOLLOWER_CHILD, str(path), str(round_ * 10 + attempt)],
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        rounds = [child.stdout.readline() for _ in range(15 + 25 * attempt)]  # then kill it wherever it is
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert all(rounds), "the child stopped by itself"
        start, end, data, epochs, producers, aborted, lso = state_of(path)
        expected = start
        for _, header in iter_batches(data):  # whole batches, offsets increasing, epochs as the cache says
            assert header.last_offset >= expected
            expected = header.last_offset + 1
            first = max(header.base_offset, start)  # the first batch may hold the log start
            assert LeaderEpochCache(path, epochs).epoch_for(first) == header.partition_leader_epoch
        assert expected <= end
        # what the snapshots, the epoch checkpoint and the transaction index say is what the batches say
        # (the child never moves the log start alone, which would leave state of deleted segments behind)
        scratch = tmp_path / f"scratch-{attempt}" / "t-0"
        shutil.copytree(path, scratch)
        for leftover in [*scratch.glob("*.snapshot"), *scratch.glob("*" + TXN_INDEX_SUFFIX), scratch / CHECKPOINT]:
            leftover.unlink(missing_ok=True)
        rebuilt = state_of(scratch)
        assert rebuilt[:4] == (start, end, data, epochs)
        assert rebuilt[4] == producers and rebuilt[5] == aborted and rebuilt[6] == lso
