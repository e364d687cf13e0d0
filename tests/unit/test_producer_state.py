"""ProducerStateManager: sequence/epoch/duplicate rules, snapshots, rebuild on load; the producer id allocator."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coordinator_support import run
from odradek.cluster.producer_ids import ProducerIdFileError, ProducerIdManager
from odradek.records.batch import read_header, validate_v2
from odradek.records.codec import build_batch
from odradek.storage import LogConfig, PartitionLog
from odradek.storage.producer_state import (
    INT32_MAX,
    BatchMetadata,
    DuplicateBatch,
    InvalidProducerEpochError,
    InvalidProducerFieldsError,
    OutOfOrderSequenceError,
    ProducerAppend,
    ProducerStateEntry,
    ProducerStateManager,
    ProducerStateSnapshot,
    first_sequence,
    last_sequence,
    snapshot_file_name,
)

TS = 1_700_000_000_000


def batch(pid: int = 7, epoch: int = 0, seq: int = 0, count: int = 1, ts: int = TS, base_offset: int = 0) -> bytes:
    recs = [(None, b"v%d" % i, None, ts) for i in range(count)]
    return build_batch(recs, base_offset=base_offset, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


class Offsets:
    """Feeds headers to a bare manager with offsets as a log would assign them."""

    def __init__(self, state: ProducerStateManager) -> None:
        self.state = state
        self.end = 0

    def append(self, *raw: bytes) -> ProducerAppend | DuplicateBatch:
        assigned = []
        offset = self.end
        for data in raw:
            h = read_header(data)._replace(base_offset=offset)
            assigned.append((0, h))
            offset = h.last_offset + 1
        result = self.state.prepare(assigned)
        if isinstance(result, ProducerAppend):
            self.state.commit(result, offset)
            self.end = offset
        return result


@pytest.fixture
def log_(tmp_path: Path) -> Offsets:
    return Offsets(ProducerStateManager(tmp_path))


# -- sequence arithmetic --------------------------------------------------------------------------------


def test_sequence_wraps_at_int32_max() -> None:
    assert last_sequence(0, 4) == 4
    assert last_sequence(INT32_MAX, 0) == INT32_MAX
    assert last_sequence(INT32_MAX, 1) == 0
    assert last_sequence(INT32_MAX - 1, 3) == 1
    for base, delta in [(0, 0), (5, 9), (INT32_MAX - 2, 5), (INT32_MAX, 7)]:
        assert first_sequence(last_sequence(base, delta), delta) == base


# -- append rules ---------------------------------------------------------------------------------------


def test_in_order_sequences_are_accepted_and_remembered(log_: Offsets) -> None:
    log_.append(batch(seq=0, count=3))
    log_.append(batch(seq=3, count=2))
    entry = log_.state.entry(7)
    assert entry.epoch == 0 and entry.last_seq == 4 and entry.last_offset == 4
    ranges = [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in entry.batches]
    assert ranges == [(0, 2, 0, 2), (3, 4, 3, 4)]


def test_gap_is_out_of_order_and_changes_nothing(log_: Offsets) -> None:
    log_.append(batch(seq=0, count=2))
    with pytest.raises(OutOfOrderSequenceError):
        log_.append(batch(seq=5))
    with pytest.raises(OutOfOrderSequenceError):
        log_.append(batch(seq=1))  # overlaps, but is not one of the cached batches
    assert log_.state.entry(7).last_seq == 1 and log_.end == 2


def test_duplicate_of_any_of_the_last_five_batches_returns_the_original_offsets(log_: Offsets) -> None:
    for i in range(7):
        log_.append(batch(seq=2 * i, count=2))
    entry = log_.state.entry(7)
    assert len(entry.batches) == 5
    for i in range(2, 7):
        dup = log_.append(batch(seq=2 * i, count=2))
        assert dup == DuplicateBatch(2 * i, 2 * i + 1, TS)
    # the two oldest batches fell out of the cache: their retry is now just out of order
    with pytest.raises(OutOfOrderSequenceError):
        log_.append(batch(seq=0, count=2))
    assert log_.end == 14


def test_duplicate_needs_the_same_epoch_and_the_same_sequence_range(log_: Offsets) -> None:
    log_.append(batch(seq=0, count=3))
    with pytest.raises(OutOfOrderSequenceError):
        log_.append(batch(seq=0, count=2))  # same first sequence, other last sequence
    with pytest.raises(OutOfOrderSequenceError):
        log_.append(batch(epoch=1, seq=3))  # new epoch must restart at 0


def test_older_epoch_is_fenced_newer_epoch_restarts_at_zero(log_: Offsets) -> None:
    log_.append(batch(epoch=3, seq=0, count=2))
    with pytest.raises(InvalidProducerEpochError):
        log_.append(batch(epoch=2, seq=2))
    log_.append(batch(epoch=4, seq=0))
    entry = log_.state.entry(7)
    assert entry.epoch == 4 and [b.last_seq for b in entry.batches] == [0]
    with pytest.raises(InvalidProducerEpochError):
        log_.append(batch(epoch=3, seq=2))  # the old epoch's next batch: a zombie


def test_unknown_producer_is_accepted_at_any_sequence(log_: Offsets) -> None:
    log_.append(batch(pid=99, epoch=5, seq=1234, count=2))
    assert log_.state.entry(99).last_seq == 1235
    log_.append(batch(pid=99, epoch=5, seq=1236))


def test_sequence_wraparound_is_in_order(log_: Offsets) -> None:
    log_.append(batch(seq=INT32_MAX - 1, count=3))  # sequences MAX-1, MAX, 0
    assert log_.state.entry(7).last_seq == 0
    log_.append(batch(seq=1))
    log_.append(batch(pid=8, seq=INT32_MAX))
    log_.append(batch(pid=8, seq=0))


def test_negative_sequence_or_epoch_with_a_producer_id_is_invalid(log_: Offsets) -> None:
    with pytest.raises(InvalidProducerFieldsError):
        log_.append(batch(seq=-1))
    with pytest.raises(InvalidProducerFieldsError):
        log_.append(batch(epoch=-1, seq=0))


def test_multi_batch_record_set_is_checked_in_order_and_all_or_nothing(log_: Offsets) -> None:
    log_.append(batch(seq=0, count=2), batch(seq=2, count=2), batch(pid=8, seq=0))
    assert log_.state.entry(7).last_seq == 3 and log_.state.entry(8).last_seq == 0
    with pytest.raises(OutOfOrderSequenceError):
        log_.append(batch(seq=4), batch(pid=8, seq=1), batch(seq=9))
    assert log_.state.entry(7).last_seq == 3 and log_.state.entry(8).last_seq == 0


def test_batches_without_producer_id_are_ignored(log_: Offsets) -> None:
    plain = build_batch([(None, b"x", None, TS)])
    assert isinstance(log_.append(plain, plain), ProducerAppend)
    assert log_.state.producers == {}


def test_expiration_forgets_idle_producers(log_: Offsets) -> None:
    log_.append(batch(pid=1, ts=1000))
    log_.append(batch(pid=2, ts=5000))
    assert log_.state.remove_expired(now_ms=6000, expiration_ms=4000) == 1
    assert log_.state.entry(1) is None and log_.state.entry(2) is not None
    log_.append(batch(pid=1, epoch=0, seq=17))  # unknown again: any sequence


# -- snapshots ------------------------------------------------------------------------------------------


def test_snapshot_round_trip(tmp_path: Path) -> None:
    entries = [
        ProducerStateEntry(1, 0, [BatchMetadata(4, 10, 4, TS)], TS),
        ProducerStateEntry(2**40, 32767, [BatchMetadata(i, 100 + i, 0, TS + i) for i in range(5)], TS + 4),
        ProducerStateEntry(3, 2, [], -1),
    ]
    data = ProducerStateSnapshot.encode(123, entries)
    assert ProducerStateSnapshot.decode(data) == (123, entries)
    state = ProducerStateManager(tmp_path)
    state.producers = {e.producer_id: e for e in entries}
    snapshot = state.encode_snapshot(123)
    assert snapshot is not None
    state.write_snapshot(*snapshot)
    assert state.encode_snapshot(123) is None  # unchanged: not written again
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load_snapshot(200) == 123
    assert fresh.producers == state.producers


@pytest.mark.parametrize("damage", ["crc", "truncate", "version", "trailing"])
def test_damaged_snapshot_is_ignored_and_deleted(tmp_path: Path, damage: str) -> None:
    state = ProducerStateManager(tmp_path)
    state.producers = {1: ProducerStateEntry(1, 0, [BatchMetadata(0, 0, 0, TS)], TS)}
    state.write_snapshot(*state.encode_snapshot(5))
    state.producers[1].add_batch(0, 1, 1, 0, TS)
    state.write_snapshot(*state.encode_snapshot(9))
    path = tmp_path / snapshot_file_name(9)
    data = bytearray(path.read_bytes())
    if damage == "crc":
        data[-1] ^= 0xFF
    elif damage == "truncate":
        del data[-3:]
    elif damage == "version":
        data[1] = 9
    else:
        data += b"\0"
    path.write_bytes(bytes(data))
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load_snapshot(100) == 5
    assert fresh.entry(1).last_seq == 0
    assert not path.exists()


def test_only_the_newest_snapshots_are_kept(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    for offset in range(1, 7):
        state.producers[offset] = ProducerStateEntry(offset, 0, [], TS)
        state.write_snapshot(*state.encode_snapshot(offset * 10))
    assert state.snapshot_offsets() == [40, 50, 60]


# -- through PartitionLog -------------------------------------------------------------------------------


def plog_append(plog: PartitionLog, *raw: bytes):
    buf = bytearray(b"".join(raw))
    return plog.append(buf, validate_v2(buf))


def test_partition_log_answers_a_retry_with_the_original_offsets(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig())
    plog_append(plog, build_batch([(None, b"plain", None, TS)]))
    first = plog_append(plog, batch(seq=0, count=3))
    assert (first.base_offset, first.last_offset, first.duplicate) == (1, 3, False)
    retry = plog_append(plog, batch(seq=0, count=3))
    assert (retry.base_offset, retry.last_offset, retry.duplicate) == (1, 3, True)
    assert plog.log_end_offset == 4
    with pytest.raises(OutOfOrderSequenceError):
        plog_append(plog, batch(seq=5))
    assert plog.log_end_offset == 4
    plog.close()


def test_state_survives_clean_close_and_rolls(tmp_path: Path) -> None:
    pdir = tmp_path / "t-0"
    plog = PartitionLog.open(pdir, LogConfig(segment_bytes=400))
    for i in range(12):
        plog_append(plog, batch(seq=2 * i, count=2))
    assert plog.segment_count > 2
    before = dict(plog.producer_state.producers)
    plog.close()
    assert sorted(p.name for p in pdir.iterdir() if p.name.endswith(".snapshot"))[-1] == snapshot_file_name(24)
    plog = PartitionLog.open(pdir, LogConfig(segment_bytes=400), clean_shutdown=True)
    assert plog.producer_state.producers == before
    assert plog_append(plog, batch(seq=22, count=2)).duplicate
    plog.close()


def test_rebuild_after_crash_replays_headers_after_the_last_snapshot(tmp_path: Path) -> None:
    pdir = tmp_path / "t-0"
    config = LogConfig(segment_bytes=600)
    plog = PartitionLog.open(pdir, config)
    for i in range(10):
        plog_append(plog, batch(seq=i), batch(pid=8, epoch=1, seq=i))
    snapshots = plog.producer_state.snapshot_offsets()
    assert snapshots and snapshots[-1] < plog.log_end_offset  # some batches are only in the log
    expected = {pid: e.copy() for pid, e in plog.producer_state.producers.items()}
    # crash: no close, so no final snapshot
    for segment in plog._segments:
        segment.close()
    plog = PartitionLog.open(pdir, config)
    assert plog.producer_state.producers == expected
    assert plog_append(plog, batch(seq=9)).duplicate
    plog_append(plog, batch(seq=10))
    for segment in plog._segments:
        segment.close()


def test_rebuild_after_truncation_drops_snapshots_past_the_end(tmp_path: Path) -> None:
    pdir = tmp_path / "t-0"
    plog = PartitionLog.open(pdir, LogConfig())
    for i in range(6):
        plog_append(plog, batch(seq=i))
    plog.close()  # snapshot at 6
    assert plog.producer_state.snapshot_offsets() == [6]
    # Tear the last batch (as a crash mid-write would) and lose the clean-shutdown marker.
    log_path = pdir / "00000000000000000000.log"
    size = log_path.stat().st_size
    os.truncate(log_path, size - 5)
    plog = PartitionLog.open(pdir, LogConfig(), clean_shutdown=False)
    assert plog.log_end_offset == 5
    assert plog.producer_state.entry(7).last_seq == 4  # rebuilt from the log, not the stale snapshot
    assert 6 not in plog.producer_state.snapshot_offsets()
    plog_append(plog, batch(seq=5))  # the lost batch's retry is accepted as new
    assert plog.log_end_offset == 6
    plog.close()


# -- producer ids ---------------------------------------------------------------------------------------


@run
async def test_producer_ids_are_unique_across_restarts_and_crashes(tmp_path: Path) -> None:
    ids = ProducerIdManager(tmp_path, block_size=10)
    first = [await ids.allocate() for _ in range(15)]
    assert first == list(range(15)) and ids.reserved_end == 20
    again = ProducerIdManager(tmp_path, block_size=10)  # a restart (or crash) skips the rest of the block
    assert await again.allocate() == 20
    third = ProducerIdManager(tmp_path, block_size=10)
    assert await third.allocate() == 30


@run
async def test_a_damaged_producer_id_file_refuses_to_start(tmp_path: Path) -> None:
    ids = ProducerIdManager(tmp_path)
    assert await ids.allocate() == 0
    data = bytearray(ids.path.read_bytes())
    data[-1] ^= 1
    ids.path.write_bytes(bytes(data))
    with pytest.raises(ProducerIdFileError):
        ProducerIdManager(tmp_path)


def test_log_manager_tick_expires_idle_producers(tmp_path: Path) -> None:
    from odradek.storage import LogManager

    now = [TS]
    manager = LogManager(tmp_path, LogConfig(), clock=lambda: now[0])
    manager.producer_id_expiration_ms = 580_000
    plog = manager.create("t", 0)
    plog_append(plog, batch(pid=1, ts=TS), batch(pid=2, ts=TS + 50_000))
    manager.tick(TS + 1000)  # before the first check is due
    assert set(plog.producer_state.producers) == {1, 2}
    manager.tick(TS + LogManager.PRODUCER_EXPIRATION_CHECK_MS)
    assert set(plog.producer_state.producers) == {2}
    manager.close()
