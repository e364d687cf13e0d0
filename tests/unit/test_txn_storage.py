"""Transactions in the partition log: open transactions, the last stable offset, markers, the
aborted-transaction index (.txnindex) and its recovery."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.records.batch import validate_v2
from odradek.records.codec import ABORT, COMMIT, build_batch, build_control_batch
from odradek.storage import LogConfig, PartitionLog
from odradek.storage.producer_state import (
    InvalidProducerEpochError,
    ProducerStateEntry,
    ProducerStateSnapshot,
)
from odradek.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn

TS = 1_700_000_000_000


def txn_batch(pid: int, seq: int, count: int = 2, epoch: int = 0, transactional: bool = True) -> bytes:
    recs = [(None, b"p%d-%d" % (pid, seq + i), None, TS) for i in range(count)]
    return build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional)


def append(plog: PartitionLog, raw: bytes):
    """Append as a single node does: the high watermark follows the log end."""
    buf = bytearray(raw)
    result = plog.append(buf, validate_v2(buf))
    plog.update_high_watermark(plog.log_end_offset)
    return result


def marker(plog: PartitionLog, pid: int, commit: bool, epoch: int = 0) -> int:
    buf = bytearray(build_control_batch(COMMIT if commit else ABORT, pid, epoch, 0, TS))
    offset = plog.append_marker(buf, validate_v2(buf)[0][1], not commit, 0)
    plog.update_high_watermark(plog.log_end_offset)
    return offset


def open_log(path: Path, clean: bool = False, **config) -> PartitionLog:
    return PartitionLog.open(path, LogConfig(**config), clean_shutdown=clean, clock=lambda: TS)


def test_lso_markers_and_aborted_index(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    assert plog.last_stable_offset == 0
    append(plog, txn_batch(1, 0))  # 0-1, txn of pid 1
    append(plog, build_batch([(None, b"plain", None, TS)]))  # 2
    append(plog, txn_batch(2, 0))  # 3-4, txn of pid 2
    append(plog, txn_batch(1, 2))  # 5-6
    assert plog.last_stable_offset == 0 and plog.high_watermark == 7
    assert marker(plog, 1, commit=False) == 7
    assert plog.last_stable_offset == 3
    assert plog.aborted_transactions(0, 100) == [AbortedTxn(1, 0, 7, 3)]
    assert marker(plog, 2, commit=True) == 8
    assert plog.last_stable_offset == plog.high_watermark == 9
    assert plog.aborted_transactions(0, 100) == [AbortedTxn(1, 0, 7, 3)]
    assert plog.aborted_transactions(8, 100) == []  # the abort ended before the range
    assert plog.aborted_transactions(0, 0) == []  # and started at its end
    # a marker written again (coordinator recovery) changes nothing
    assert marker(plog, 1, commit=False) == 9
    assert len(plog.aborted_transactions(0, 100)) == 1
    # read_committed reads stop at the LSO
    append(plog, txn_batch(3, 0))  # 10-11
    assert plog.last_stable_offset == 10
    data = plog.read(0, 1 << 20, max_offset=plog.last_stable_offset)
    assert data == plog.read(0, 1 << 20)[:len(data)] and len(validate_v2(bytearray(data))) == 7
    plog.close()


def test_stale_marker_epoch_is_refused_and_a_newer_one_fences(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    append(plog, txn_batch(1, 0, epoch=3))
    with pytest.raises(InvalidProducerEpochError):
        marker(plog, 1, commit=False, epoch=2)
    marker(plog, 1, commit=False, epoch=4)  # the coordinator's fencing abort
    assert plog.last_stable_offset == plog.high_watermark
    with pytest.raises(InvalidProducerEpochError):  # the zombie
        append(plog, txn_batch(1, 2, epoch=3))
    append(plog, txn_batch(1, 0, epoch=5))  # the new incarnation starts at sequence 0
    plog.close()


@pytest.mark.parametrize("how", ["clean", "crash", "crash-without-snapshots"])
def test_index_and_open_transactions_survive_restarts(tmp_path: Path, how: str) -> None:
    path = tmp_path / "t-0"
    plog = open_log(path, segment_bytes=400)  # small segments: the entries spread over several files
    expected = []
    for pid in range(1, 6):
        first = plog.log_end_offset
        append(plog, txn_batch(pid, 0, count=3))
        off = marker(plog, pid, commit=pid % 2 == 0)
        if pid % 2:
            expected.append(AbortedTxn(pid, first, off, off + 1))
    open_first = plog.log_end_offset
    append(plog, txn_batch(9, 0))
    assert plog.segment_count > 1
    assert plog.aborted_transactions(0, 1000) == expected
    if how == "clean":
        plog.close()
    else:
        plog.flush()  # a process crash: the files are as written, nothing closed
        if how == "crash-without-snapshots":
            for snap in path.glob("*.snapshot"):
                snap.unlink()
            for index in path.glob("*" + TXN_INDEX_SUFFIX):
                index.write_bytes(index.read_bytes()[:-5])  # torn
    again = open_log(path, clean=how == "clean", segment_bytes=400)
    assert again.aborted_transactions(0, 1000) == expected
    assert again.last_stable_offset == open_first
    marker(again, 9, commit=False)
    assert again.last_stable_offset == again.high_watermark
    again.close()


def test_retention_drops_index_files_of_deleted_segments(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    plog = open_log(path, segment_bytes=300)
    for pid in range(1, 5):
        append(plog, txn_batch(pid, 0, count=3))
        marker(plog, pid, commit=False)
    before = sorted(path.glob("*" + TXN_INDEX_SUFFIX))
    assert len(before) > 1
    plog.delete_records_before(plog.segment_base_offsets[-1])
    remaining = plog.aborted_transactions(0, 1000)
    assert all(t.last_offset >= plog.segment_base_offsets[0] for t in remaining)
    assert len(sorted(path.glob("*" + TXN_INDEX_SUFFIX))) < len(before)
    plog.close()


def test_snapshot_keeps_transaction_fields_and_reads_version_1(tmp_path: Path) -> None:
    entries = [ProducerStateEntry(1, 2, [], TS, txn_first_offset=17, coordinator_epoch=0),
               ProducerStateEntry(2, 0, [], TS)]
    assert ProducerStateSnapshot.decode(ProducerStateSnapshot.encode(5, entries)) == (5, entries)
    import struct

    from crc32c import crc32c
    body = struct.pack(">qi", 5, 1) + struct.pack(">qhqB", 7, 1, TS, 0)
    v1 = struct.pack(">hI", 1, crc32c(body)) + body
    assert ProducerStateSnapshot.decode(v1) == (5, [ProducerStateEntry(7, 1, [], TS)])
