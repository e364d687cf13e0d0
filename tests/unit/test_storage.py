"""PartitionLog: append/read, segments, indexes, timestamps, recovery, retention, log start offset, flush."""

from __future__ import annotations

import os
import random
import struct
import threading
from pathlib import Path

import pytest
from crc32c import crc32c

from odradek.records.batch import iter_batches, read_header, validate_v2
from odradek.storage import LogConfig, OffsetOutOfRangeError, PartitionLog
from odradek.storage import files as files_module
from odradek.storage import segment as segment_module
from odradek.storage.flusher import LogFlusher
from odradek.storage.index import OffsetIndex, TimeIndex
from odradek.storage.loader import LogStartCheckpoint, RecoveryPointCheckpoint
from tests.interop.helpers import resident_bytes


def make_batch(count: int = 1, timestamp: int = 1000, max_timestamp: int | None = None, payload: bytes = b"p" * 20) -> bytes:
    """A v2 batch with a valid CRC; the records section is opaque filler."""
    max_ts = timestamp if max_timestamp is None else max_timestamp
    after_crc = struct.pack(">hiqqqhii", 0, count - 1, timestamp, max_ts, -1, -1, -1, count) + payload
    return struct.pack(">qiibI", 0, 9 + len(after_crc), 0, 2, crc32c(after_crc)) + after_crc


def append(plog: PartitionLog, *batches: bytes):
    """Append as a single node does: the high watermark follows the log end."""
    buf = bytearray(b"".join(batches))
    result = plog.append(buf, validate_v2(buf))
    plog.update_high_watermark(plog.log_end_offset)
    return result


def bases(data: bytes) -> list[int]:
    return [h.base_offset for _, h in iter_batches(data)]


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def pdir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


def open_log(pdir: Path, clock=None, **config) -> PartitionLog:
    return PartitionLog.open(pdir, LogConfig(**config), clock=clock)


def segment_files(pdir: Path, suffix: str = ".log") -> list[Path]:
    return sorted(p for p in pdir.iterdir() if p.name.endswith(suffix))


# -- append and read --------------------------------------------------------------------------------------


def test_append_assigns_consecutive_offsets_and_reads_back(pdir: Path) -> None:
    plog = open_log(pdir)
    assert (plog.log_start_offset, plog.log_end_offset) == (0, 0)
    r1 = append(plog, make_batch(1))
    r2 = append(plog, make_batch(5), make_batch(2))
    assert (r1.base_offset, r1.last_offset) == (0, 0)
    assert (r2.base_offset, r2.last_offset) == (1, 7)
    assert r2.log_start_offset == 0 and r2.first_batch_max_timestamp == 1000
    assert plog.log_end_offset == plog.high_watermark == 8
    data = plog.read(0, 1 << 20)
    assert bases(data) == [0, 1, 6]
    assert [h.last_offset for _, h in iter_batches(data)] == [0, 5, 7]
    validate_v2(data)  # stored batches keep valid CRCs (the base offset is outside the CRC)
    assert (pdir / "00000000000000000000.log").read_bytes() == data
    plog.close()


def test_append_patches_the_callers_buffer_in_place(pdir: Path) -> None:
    plog = open_log(pdir)
    append(plog, make_batch(3))
    buf = bytearray(make_batch(2))
    plog.append(buf, validate_v2(buf))
    assert read_header(buf).base_offset == 3
    plog.close()


def test_read_from_the_middle_of_a_batch_returns_the_whole_batch(pdir: Path) -> None:
    plog = open_log(pdir)
    append(plog, make_batch(1), make_batch(5), make_batch(2))
    for offset, expected in [(0, 0), (1, 1), (3, 1), (5, 1), (6, 6), (7, 6)]:
        assert bases(plog.read(offset, 1 << 20))[0] == expected
    plog.close()


def test_read_bounds(pdir: Path) -> None:
    plog = open_log(pdir)
    append(plog, make_batch(2))
    assert plog.read(2, 100) == b""
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(3, 100)
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(-1, 100)
    plog.close()


def test_max_bytes_never_splits_a_batch_and_min_one_batch(pdir: Path) -> None:
    plog = open_log(pdir)
    batch = make_batch(1, payload=b"a" * 100)
    size = len(batch)
    append(plog, batch, batch, batch)
    assert bases(plog.read(0, size)) == [0]
    assert len(plog.read(0, 2 * size + size // 2)) == 2 * size
    assert len(plog.read(0, 10)) == size  # the first batch whole, although bigger than max_bytes
    assert plog.read(0, 10, min_one_batch=False) == b""
    assert len(plog.read(1, 0)) == size
    plog.close()


def test_max_offset_stops_before_batches_at_or_past_it(pdir: Path) -> None:
    plog = open_log(pdir)
    append(plog, make_batch(3), make_batch(3), make_batch(3))
    assert bases(plog.read(0, 1 << 20, max_offset=6)) == [0, 3]
    assert bases(plog.read(0, 1 << 20, max_offset=4)) == [0, 3]
    assert bases(plog.read(0, 1 << 20, max_offset=3)) == [0]
    assert plog.read(3, 1 << 20, max_offset=3) == b""
    assert plog.read(0, 1 << 20, max_offset=0) == b""
    plog.close()


def region_bytes(region) -> bytes:
    """What sendfile would send: the region's span of its own duplicated fd."""
    fd = region.dup()
    try:
        return os.pread(fd, region.length, region.position)
    finally:
        os.close(fd)


def joined(chunks) -> bytes:
    return b"".join(c if isinstance(c, bytes) else region_bytes(c) for c in chunks)


@pytest.mark.parametrize("region_min", [1, 150, 1 << 30])
def test_reading_as_file_regions_names_the_same_bytes(pdir: Path, region_min: int) -> None:
    # regions (sent with sendfile) must cover exactly what a read into memory returns, for every limit
    batches = [make_batch(n, payload=bytes([n]) * (30 * n)) for n in (1, 3, 2, 5, 1, 4)]
    plog = open_log(pdir, segment_bytes=sum(map(len, batches[:3])) + 10)
    for _ in range(3):
        append(plog, *batches)
    end = plog.log_end_offset
    for offset in range(0, end, 3):
        for max_bytes in (0, 10, 200, 700, 1 << 20):
            for max_offset in (None, offset + 4):
                for first in (True, False):
                    expected = plog.read(offset, max_bytes, first, max_offset)
                    chunks = plog.read(offset, max_bytes, first, max_offset, region_min_bytes=region_min)
                    assert joined(chunks) == expected
                    if region_min == 1 and max_bytes > 0:
                        assert not any(isinstance(c, bytes) for c in chunks)
                    for c in chunks:  # read_committed fetches bound their aborted list by this
                        if not isinstance(c, bytes):
                            assert c.last_offset() == [h.last_offset for _, h in iter_batches(region_bytes(c))][-1]
    assert plog.read(end, 100, region_min_bytes=1) == []
    plog.close()


def test_a_region_of_a_deleted_segment_refuses_to_be_sent(pdir: Path) -> None:
    batch = make_batch(2, payload=b"r" * 60)
    plog = open_log(pdir, segment_bytes=2 * len(batch))
    for _ in range(6):
        append(plog, batch)
    [region] = plog.read(0, len(batch), region_min_bytes=1)
    fd = region.dup()  # a send that started before the deletion keeps the file's data
    plog.delete_records_before(6)
    assert plog.segment_base_offsets[0] > 0 and not segment_files(pdir)[0].name.startswith("0" * 20)
    with pytest.raises((OSError, ValueError)):
        region.dup()
    assert os.pread(fd, len(batch), 0) == batch  # the first batch, stored at offset 0 as appended
    os.close(fd)
    plog.close()


def test_empty_append_is_refused(pdir: Path) -> None:
    plog = open_log(pdir)
    with pytest.raises(ValueError):
        plog.append(bytearray(), [])
    plog.close()


# -- segments and indexes ---------------------------------------------------------------------------------


def test_rolls_segments_and_reads_across_them(pdir: Path) -> None:
    batch = make_batch(2, payload=b"r" * 60)
    plog = open_log(pdir, segment_bytes=3 * len(batch), index_interval_bytes=0)
    for _ in range(20):
        append(plog, batch)
    assert plog.log_end_offset == 40
    logs = segment_files(pdir)
    assert len(logs) == plog.segment_count == 7
    assert [int(p.name[:20]) for p in logs] == plog.segment_base_offsets == list(range(0, 40, 6))
    assert all(p.stat().st_size <= 3 * len(batch) for p in logs)
    everything = plog.read(0, 1 << 20)
    assert bases(everything) == list(range(0, 40, 2))
    for offset in range(40):
        data = plog.read(offset, 2 * len(batch) + 1)
        assert bases(data) == [offset - offset % 2, offset - offset % 2 + 2][: 2 if offset < 38 else 1]
    plog.close()


def test_a_batch_bigger_than_a_segment_gets_its_own_segment(pdir: Path) -> None:
    plog = open_log(pdir, segment_bytes=200)
    append(plog, make_batch(1))
    append(plog, make_batch(1, payload=b"b" * 500))
    append(plog, make_batch(1))
    assert plog.segment_base_offsets == [0, 1, 2]
    assert bases(plog.read(0, 1 << 20)) == [0, 1, 2]
    plog.close()


def test_one_append_of_several_batches_is_one_write_into_one_segment(pdir: Path) -> None:
    batch = make_batch(1, payload=b"s" * 40)
    plog = open_log(pdir, segment_bytes=2 * len(batch))
    append(plog, batch)
    append(plog, batch, batch, batch)  # rolls first, then goes whole into the new segment
    assert plog.segment_base_offsets == [0, 1]
    assert bases(plog.read(1, 1 << 20)) == [1, 2, 3]
    plog.close()


def test_index_entries_are_sparse_and_point_at_batches(pdir: Path) -> None:
    batch = make_batch(3, payload=b"i" * 100)
    plog = open_log(pdir, index_interval_bytes=3 * len(batch))
    for _ in range(30):
        append(plog, batch)
    plog.close()
    raw = (pdir / "00000000000000000000.index").read_bytes()
    entries = list(struct.iter_unpack(">ii", raw))
    assert 5 <= len(entries) <= 10
    log_bytes = (pdir / "00000000000000000000.log").read_bytes()
    for relative_offset, position in entries:
        assert read_header(log_bytes, position).last_offset == relative_offset
    time_entries = list(struct.iter_unpack(">qi", (pdir / "00000000000000000000.timeindex").read_bytes()))
    assert time_entries == [(1000, 2)]  # constant timestamps: one entry, naming the first batch


def test_segment_ms_rolls_by_age(pdir: Path) -> None:
    clock = Clock()
    plog = open_log(pdir, clock=clock, segment_ms=1000)
    append(plog, make_batch(1))
    clock.now += 500
    append(plog, make_batch(1))
    assert plog.segment_count == 1
    clock.now += 600
    append(plog, make_batch(1))
    assert plog.segment_base_offsets == [0, 2]
    plog.close()


def fd_path(fd: int) -> str:
    return os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))


def test_recovery_point_passes_a_rolled_segment_only_after_its_files_are_synced(pdir: Path, monkeypatch) -> None:
    events: list[str] = []
    real_fsync = os.fsync
    real_write = RecoveryPointCheckpoint.write.__func__

    def fsync(fd):
        events.append(f"fsync {fd_path(fd)}")
        real_fsync(fd)

    def write(cls, directory, offset):
        events.append(f"recovery point {offset}")
        real_write(cls, directory, offset)

    plog = open_log(pdir, segment_bytes=100)
    append(plog, make_batch(1, payload=b"z" * 50))
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(RecoveryPointCheckpoint, "write", classmethod(write))
    append(plog, make_batch(1, payload=b"z" * 50))
    mark = events.index("recovery point 1")
    for name in ("00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex"):
        assert events.index(f"fsync {name}") < mark
    assert RecoveryPointCheckpoint.read(pdir) == 1
    plog.close()


class BlockedFlusher(LogFlusher):
    """A background flusher whose thread waits for ``release`` before running anything."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.submit(lambda: self.release.wait(10))


def test_a_roll_leaves_the_disk_work_to_the_flusher(pdir: Path) -> None:
    flusher = BlockedFlusher()
    plog = PartitionLog.open(pdir, LogConfig(segment_bytes=100), flusher=flusher)
    append(plog, make_batch(1, payload=b"z" * 50))
    append(plog, make_batch(1, payload=b"z" * 50))  # rolls while the flusher cannot run
    assert plog.segment_base_offsets == [0, 1]
    assert RecoveryPointCheckpoint.read(pdir) is None
    flusher.release.set()
    plog.flush()
    assert RecoveryPointCheckpoint.read(pdir) == 1
    plog.close()
    flusher.close()


# -- timestamps -------------------------------------------------------------------------------------------


def test_find_batch_by_timestamp(pdir: Path) -> None:
    plog = open_log(pdir, index_interval_bytes=0)
    for ts in (1000, 2000, 3000, 4000):
        append(plog, make_batch(2, timestamp=ts))
    assert plog.find_batch_by_timestamp(0)[0] == 0
    assert plog.find_batch_by_timestamp(1000)[0] == 0
    assert plog.find_batch_by_timestamp(1001)[0] == 2
    assert plog.find_batch_by_timestamp(2500)[0] == 4
    offset, data = plog.find_batch_by_timestamp(4000)
    assert offset == 6 and read_header(data).max_timestamp == 4000 and len(data) == len(make_batch(2))
    assert plog.find_batch_by_timestamp(4001) is None
    assert plog.max_timestamp() == (4000, 7)
    plog.close()


def test_find_batch_by_timestamp_with_unordered_timestamps_and_segments(pdir: Path) -> None:
    timestamps = [5000, 1000, 3000, 7000, 2000, 6000, 9000, 4000, 8000, 1500]
    batch_size = len(make_batch(1))
    plog = open_log(pdir, segment_bytes=2 * batch_size, index_interval_bytes=0)
    for ts in timestamps:
        append(plog, make_batch(1, timestamp=ts))
    assert plog.segment_count == 5

    def expected(target: int) -> int | None:
        return next((i for i, ts in enumerate(timestamps) if ts >= target), None)

    for target in (0, 1000, 1200, 4000, 5000, 5001, 6500, 7000, 8500, 9000, 9001):
        hit = plog.find_batch_by_timestamp(target)
        assert (hit[0] if hit else None) == expected(target), target
    assert plog.max_timestamp() == (9000, 6)
    plog.close()
    plog = open_log(pdir, segment_bytes=2 * batch_size, index_interval_bytes=0)  # from the time index files
    for target in (0, 4000, 6500, 8500, 9001):
        hit = plog.find_batch_by_timestamp(target)
        assert (hit[0] if hit else None) == expected(target), target
    assert plog.max_timestamp() == (9000, 6)
    plog.close()


def test_timestamp_lookups_respect_the_log_start(pdir: Path) -> None:
    plog = open_log(pdir)
    append(plog, make_batch(1, timestamp=9000), make_batch(1, timestamp=1000), make_batch(1, timestamp=2000))
    plog.delete_records_before(1)
    assert plog.find_batch_by_timestamp(500)[0] == 1
    assert plog.find_batch_by_timestamp(5000) is None
    assert plog.max_timestamp() == (2000, 2)
    plog.close()


def test_max_timestamp_of_an_empty_log(pdir: Path) -> None:
    plog = open_log(pdir)
    assert plog.max_timestamp() is None
    assert plog.find_batch_by_timestamp(0) is None
    plog.close()


# -- recovery ---------------------------------------------------------------------------------------------


def fill(pdir: Path, n: int = 10, **config) -> tuple[PartitionLog, list[bytes]]:
    plog = open_log(pdir, **config)
    batches = [make_batch(i % 3 + 1, timestamp=1000 + i, payload=bytes([65 + i]) * 30) for i in range(n)]
    for batch in batches:
        append(plog, batch)
    return plog, batches


def crash(plog: PartitionLog) -> None:
    """Drop the log without sealing or syncing, as a kill -9 would."""
    for segment in plog._segments:
        segment.offset_index.drop_pending()
        segment.time_index.drop_pending()
        segment.close()


def test_recovery_cuts_a_torn_last_batch(pdir: Path) -> None:
    plog, batches = fill(pdir)
    end = plog.log_end_offset
    last_size = len(batches[-1])
    crash(plog)
    log_file = pdir / "00000000000000000000.log"
    size = log_file.stat().st_size
    os.truncate(log_file, size - last_size // 2)
    plog = open_log(pdir)
    assert plog.log_end_offset == end - (9 % 3 + 1)
    assert log_file.stat().st_size == size - last_size
    assert len(bases(plog.read(0, 1 << 20))) == 9
    r = append(plog, make_batch(2))
    assert r.base_offset == end - 1
    assert bases(plog.read(r.base_offset, 1 << 20)) == [r.base_offset]
    plog.close()


# the random bytes are seeded: pytest-xdist's workers must collect the same test ids
@pytest.mark.parametrize("garbage", [b"\x00" * 4096, random.Random(500).randbytes(500), make_batch(1)[:40], b"\xff" * 61],
                         ids=["zeros", "random", "torn-batch", "ones"])
def test_recovery_cuts_garbage_after_the_last_batch(pdir: Path, garbage: bytes) -> None:
    plog, _ = fill(pdir)
    end = plog.log_end_offset
    crash(plog)
    log_file = pdir / "00000000000000000000.log"
    size = log_file.stat().st_size
    with open(log_file, "ab") as f:
        f.write(garbage)
    plog = open_log(pdir)
    assert plog.log_end_offset == end
    assert log_file.stat().st_size == size
    assert append(plog, make_batch(1)).base_offset == end
    plog.close()


def test_recovery_cuts_at_a_bad_crc(pdir: Path) -> None:
    plog, batches = fill(pdir, n=5)
    crash(plog)
    log_file = pdir / "00000000000000000000.log"
    data = bytearray(log_file.read_bytes())
    third = len(batches[0]) + len(batches[1])
    data[third + 70] ^= 0xFF  # inside the records of the third batch
    log_file.write_bytes(data)
    plog = open_log(pdir)
    assert plog.log_end_offset == 1 + 2  # batches of 1 and 2 records survive
    assert log_file.stat().st_size == third
    plog.close()


def test_recovery_rebuilds_missing_indexes(pdir: Path) -> None:
    plog, _ = fill(pdir, n=30, segment_bytes=600, index_interval_bytes=100)
    end = plog.log_end_offset
    expected = plog.read(0, 1 << 20)
    plog.close()
    for path in segment_files(pdir, ".index") + segment_files(pdir, ".timeindex"):
        path.unlink()
    plog = open_log(pdir, segment_bytes=600, index_interval_bytes=100)
    assert plog.log_end_offset == end
    assert plog.read(0, 1 << 20) == expected
    for offset in range(end):
        assert read_header(plog.read(offset, 1)).last_offset >= offset
    assert all(p.stat().st_size > 0 for p in segment_files(pdir, ".index"))
    assert plog.find_batch_by_timestamp(1015)[0] == sum(i % 3 + 1 for i in range(15))
    plog.close()


@pytest.mark.parametrize("damage", ["garbage", "torn", "empty", "wrong"])
def test_recovery_rebuilds_inconsistent_indexes(pdir: Path, damage: str) -> None:
    plog, _ = fill(pdir, n=30, segment_bytes=600, index_interval_bytes=100)
    end = plog.log_end_offset
    expected = plog.read(0, 1 << 20)
    plog.close()
    for path in segment_files(pdir, ".index"):
        size = path.stat().st_size
        if damage == "garbage":
            path.write_bytes(b"\x7f" * size)
        elif damage == "torn":
            os.truncate(path, size - 3)
        elif damage == "empty":
            os.truncate(path, 0)
        else:
            path.write_bytes(struct.pack(">ii", 1, 0) * 2)
    plog = open_log(pdir, segment_bytes=600, index_interval_bytes=100)
    assert plog.log_end_offset == end
    assert plog.read(0, 1 << 20) == expected
    for offset in range(end):
        assert read_header(plog.read(offset, 1)).last_offset >= offset
    plog.close()


def test_indexes_out_of_order_are_rebuilt_on_first_use(pdir: Path) -> None:
    plog, _ = fill(pdir, n=30, segment_bytes=600, index_interval_bytes=100)
    end = plog.log_end_offset
    plog.close()
    first = pdir / "00000000000000000000.index"
    entries = list(struct.iter_unpack(">ii", first.read_bytes()))
    assert len(entries) >= 2
    entries[0] = (entries[-1][0] + 1000, entries[0][1])  # last entry still sane, first one not
    first.write_bytes(b"".join(struct.pack(">ii", *e) for e in entries))
    plog = open_log(pdir, segment_bytes=600, index_interval_bytes=100)
    for offset in range(end):
        assert read_header(plog.read(offset, 1)).last_offset >= offset
    plog.close()


def test_zero_length_and_missing_segments(pdir: Path) -> None:
    plog, _ = fill(pdir, n=3)
    plog.close()
    for path in pdir.iterdir():
        if path.name.endswith((".log", ".index", ".timeindex")):
            os.truncate(path, 0)
    plog = open_log(pdir)
    assert (plog.log_start_offset, plog.log_end_offset) == (0, 0)
    append(plog, make_batch(1))
    plog.close()
    for path in pdir.iterdir():
        path.unlink()
    plog = open_log(pdir)
    assert plog.log_end_offset == 0
    plog.close()


@pytest.mark.parametrize("why_scanned", ["index lost", "before the recovery point"])
def test_a_sealed_segment_found_torn_drops_the_segments_after_it(pdir: Path, why_scanned: str) -> None:
    plog, _ = fill(pdir, n=12, segment_bytes=300)
    bases_before = plog.segment_base_offsets
    assert len(bases_before) >= 4
    crash(plog)
    if why_scanned == "index lost":
        (pdir / f"{bases_before[1]:020d}.index").unlink()
    else:
        # The roll job after segment 1 never ran. Its index still looks sane, so only the recovery point
        # tells the loader not to trust it.
        RecoveryPointCheckpoint.write(pdir, bases_before[1])
    second = pdir / f"{bases_before[1]:020d}.log"
    os.truncate(second, second.stat().st_size - 5)  # the machine lost the last bytes of segment 1
    plog = open_log(pdir, segment_bytes=300)
    assert plog.segment_base_offsets == bases_before[:2]
    assert plog.log_end_offset < bases_before[2]
    validate_v2(plog.read(0, 1 << 20))
    plog.close()


def test_orphan_index_files_are_removed(pdir: Path) -> None:
    plog, _ = fill(pdir, n=3)
    plog.close()
    (pdir / "00000000000000000099.index").write_bytes(b"\x00" * 8)
    (pdir / "00000000000000000099.timeindex").write_bytes(b"")
    (pdir / "log-start-offset.tmp").write_bytes(b"junk")
    plog = open_log(pdir)
    # the producer state snapshot written by close() stays (tests/unit/test_producer_state.py covers it)
    assert sorted(p.name for p in pdir.iterdir() if not p.name.endswith(".snapshot")) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
        "leader-epoch-checkpoint"]
    plog.close()


def test_clean_open_uses_the_indexes_and_steps_over_the_tail(pdir: Path) -> None:
    plog, _ = fill(pdir, n=20, segment_bytes=500, index_interval_bytes=80)
    end = plog.log_end_offset
    expected = plog.read(0, 1 << 20)
    maximum = plog.max_timestamp()
    plog.close()
    plog = PartitionLog.open(pdir, LogConfig(segment_bytes=500, index_interval_bytes=80), clean_shutdown=True)
    assert plog.log_end_offset == end
    assert plog.read(0, 1 << 20) == expected
    assert plog.max_timestamp() == maximum
    assert append(plog, make_batch(1)).base_offset == end
    plog.close()


def test_clean_open_falls_back_to_recovery_when_the_tail_is_torn(pdir: Path) -> None:
    plog, batches = fill(pdir, n=5)
    end = plog.log_end_offset
    plog.close()
    with open(pdir / "00000000000000000000.log", "ab") as f:
        f.write(make_batch(1)[:30])
    plog = PartitionLog.open(pdir, LogConfig(), clean_shutdown=True)
    assert plog.log_end_offset == end
    plog.close()


def test_a_failed_write_leaves_no_partial_batch(pdir: Path, monkeypatch) -> None:
    plog, _ = fill(pdir, n=3)
    end = plog.log_end_offset
    size = (pdir / "00000000000000000000.log").stat().st_size

    def failing_write(fd, data):
        os.write(fd, bytes(data)[:17])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(segment_module, "write_all", failing_write)
    with pytest.raises(OSError):
        append(plog, make_batch(1))
    monkeypatch.undo()
    assert plog.log_end_offset == end
    assert (pdir / "00000000000000000000.log").stat().st_size == size
    assert append(plog, make_batch(1)).base_offset == end
    validate_v2(plog.read(0, 1 << 20))
    plog.close()


# -- log start, DeleteRecords, retention ------------------------------------------------------------------


def test_delete_records_before(pdir: Path) -> None:
    batch = make_batch(2, payload=b"d" * 50)
    plog = open_log(pdir, segment_bytes=3 * len(batch))
    for _ in range(10):
        append(plog, batch)
    assert plog.segment_base_offsets == [0, 6, 12, 18]
    assert plog.delete_records_before(7)[0] == 7
    assert plog.log_start_offset == 7
    assert plog.segment_base_offsets == [6, 12, 18]
    assert not (pdir / "00000000000000000000.log").exists()
    assert not (pdir / "00000000000000000000.index").exists()
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(6, 1000)
    assert bases(plog.read(7, len(batch))) == [6]  # the batch holding the start, whole
    assert plog.delete_records_before(3)[0] == 7  # never backwards
    with pytest.raises(OffsetOutOfRangeError):
        plog.delete_records_before(21)
    assert plog.delete_records_before(20)[0] == 20
    assert plog.segment_base_offsets == [18]  # the active segment stays
    assert plog.read(20, 1000) == b""
    plog.close()
    plog = open_log(pdir, segment_bytes=3 * len(batch))
    assert (plog.log_start_offset, plog.log_end_offset) == (20, 20)
    assert append(plog, batch).base_offset == 20
    plog.close()


def test_delete_records_leaves_the_disk_work_to_the_flusher(pdir: Path) -> None:
    batch = make_batch(2, payload=b"d" * 50)
    flusher = BlockedFlusher()
    plog = PartitionLog.open(pdir, LogConfig(segment_bytes=3 * len(batch)), flusher=flusher)
    for _ in range(10):
        append(plog, batch)
    start, durable = plog.delete_records_before(13)  # returns while the flusher cannot run
    assert start == 13 and plog.log_start_offset == 13
    assert plog.segment_base_offsets == [12, 18]
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(12, 1000)
    assert not durable.done()
    assert (pdir / "00000000000000000000.log").exists()
    flusher.release.set()
    durable.result(timeout=10)
    assert LogStartCheckpoint.read(pdir) == 13
    flusher.close()  # runs what is queued, in order: the deletions came after the checkpoint
    assert not (pdir / "00000000000000000000.log").exists()
    assert not (pdir / "00000000000000000006.index").exists()
    plog.close()
    plog = open_log(pdir)
    assert (plog.log_start_offset, plog.segment_base_offsets) == (13, [12, 18])
    plog.close()


def test_log_start_offset_survives_restart(pdir: Path) -> None:
    plog, _ = fill(pdir, n=6)
    plog.delete_records_before(4)
    crash(plog)
    assert (pdir / "log-start-offset").read_text() == "0\n4\n"
    plog = open_log(pdir)
    assert plog.log_start_offset == 4
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(3, 100)
    plog.close()


def test_log_start_past_the_recovered_end_restarts_the_log_there(pdir: Path) -> None:
    plog, _ = fill(pdir, n=3)
    plog.close()
    (pdir / "log-start-offset").write_text("0\n100\n")
    plog = open_log(pdir)
    assert (plog.log_start_offset, plog.log_end_offset) == (100, 100)
    assert append(plog, make_batch(1)).base_offset == 100
    assert plog.segment_base_offsets == [100]
    plog.close()


def test_retention_by_time_never_deletes_the_active_segment(pdir: Path) -> None:
    batch_size = len(make_batch(1))
    clock = Clock(now=100_000)
    plog = open_log(pdir, clock=clock, segment_bytes=2 * batch_size, retention_ms=10_000)
    for ts in (10_000, 20_000, 30_000, 40_000, 85_000, 95_000, 96_000):
        append(plog, make_batch(1, timestamp=ts))
    assert plog.segment_base_offsets == [0, 2, 4, 6]
    assert plog.enforce_retention(100_000) == 2  # max timestamps 20000 and 40000 are older than 90000
    assert plog.segment_base_offsets == [4, 6]
    assert plog.log_start_offset == 4
    assert plog.enforce_retention(10**9) == 1
    assert plog.segment_base_offsets == [6]
    assert plog.enforce_retention(10**9) == 0
    assert plog.log_start_offset == 6 and plog.log_end_offset == 7
    plog.close()
    assert open_log(pdir).log_start_offset == 6


def test_retention_by_time_falls_back_to_mtime_without_timestamps(pdir: Path) -> None:
    batch_size = len(make_batch(1))
    plog = open_log(pdir, segment_bytes=batch_size, retention_ms=1000)
    for _ in range(3):
        append(plog, make_batch(1, timestamp=-1))
    old = (pdir / "00000000000000000000.log")
    os.utime(old, (1, 1))
    now = int(os.stat(pdir / "00000000000000000001.log").st_mtime * 1000)
    assert plog.enforce_retention(now) == 1
    assert plog.segment_base_offsets == [1, 2]
    plog.close()


def test_retention_unlimited(pdir: Path) -> None:
    plog = open_log(pdir, segment_bytes=100, retention_ms=-1, retention_bytes=-1)
    for _ in range(5):
        append(plog, make_batch(1, timestamp=1, payload=b"u" * 50))
    assert plog.enforce_retention(10**12) == 0
    plog.close()


def test_retention_by_size(pdir: Path) -> None:
    batch = make_batch(1, payload=b"s" * 39)
    assert len(batch) == 100
    plog = open_log(pdir, segment_bytes=200, retention_ms=-1, retention_bytes=450)
    for _ in range(9):
        append(plog, batch)
    assert plog.size_in_bytes == 900 and plog.segment_count == 5
    assert plog.enforce_retention(0) == 2  # 900 -> 500: deleting a third would go under 450
    assert plog.size_in_bytes == 500 and plog.log_start_offset == 4
    assert plog.enforce_retention(0) == 0
    plog.update_config(LogConfig(segment_bytes=200, retention_ms=-1, retention_bytes=0))
    assert plog.enforce_retention(0) == 2
    assert plog.segment_base_offsets == [8]
    plog.close()


# -- flush policy -----------------------------------------------------------------------------------------


def test_flush_by_message_count_and_by_time(pdir: Path, monkeypatch) -> None:
    syncs: list[int] = []
    monkeypatch.setattr(files_module, "_fdatasync", syncs.append)
    clock = Clock()
    plog = open_log(pdir, clock=clock, flush_messages=5)
    append(plog, make_batch(2))
    append(plog, make_batch(2))
    assert syncs == []
    append(plog, make_batch(1))
    assert len(syncs) == 1
    append(plog, make_batch(4))
    assert len(syncs) == 1
    plog.update_config(LogConfig(flush_ms=1000))
    plog.maybe_flush(clock.now + 10)
    assert len(syncs) == 1
    plog.maybe_flush(clock.now + 1000)
    assert len(syncs) == 2
    plog.maybe_flush(clock.now + 5000)  # nothing new
    assert len(syncs) == 2
    clock.now += 5000
    append(plog, make_batch(1))  # flush_ms elapsed since the last flush
    assert len(syncs) == 3
    plog.close()


def test_no_flush_by_default(pdir: Path, monkeypatch) -> None:
    syncs: list[int] = []
    monkeypatch.setattr(files_module, "_fdatasync", syncs.append)
    plog = open_log(pdir)
    for _ in range(50):
        append(plog, make_batch(3))
    plog.maybe_flush(10**15)
    assert syncs == []
    plog.close()


def test_appends_while_a_policy_flush_is_queued_share_it(pdir: Path) -> None:
    flusher = BlockedFlusher()
    plog = PartitionLog.open(pdir, LogConfig(flush_messages=1), flusher=flusher)
    first = append(plog, make_batch(1))
    second = append(plog, make_batch(1))
    assert first.durable is not None and first.durable is second.durable and not first.durable.done()
    flusher.release.set()
    first.durable.result(10)
    third = append(plog, make_batch(1))
    assert third.durable is not first.durable
    plog.close()
    flusher.close()


def test_a_failed_sync_refuses_later_appends(pdir: Path, monkeypatch) -> None:
    from odradek.storage import StorageError

    def fail(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(files_module, "_fdatasync", fail)
    plog = open_log(pdir, flush_messages=1)
    result = append(plog, make_batch(1))
    assert isinstance(result.durable.exception(), OSError)
    with pytest.raises(StorageError, match="failed to sync"):
        append(plog, make_batch(1))
    assert plog.log_end_offset == 1
    plog.close()


def test_delete_removes_the_directory(pdir: Path) -> None:
    plog, _ = fill(pdir, n=3)
    plog.delete()
    assert not pdir.exists()
    assert list(pdir.parent.iterdir()) == []


def test_closed_log_refuses_work(pdir: Path) -> None:
    from odradek.storage import StorageError

    plog, _ = fill(pdir, n=1)
    plog.close()
    plog.close()
    with pytest.raises(StorageError):
        append(plog, make_batch(1))


# -- indexes on their own ---------------------------------------------------------------------------------


def test_offset_index_lookup_and_reload(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index")
    index.reset()
    assert index.floor_position(5) == 0
    for rel, pos in [(4, 100), (9, 250), (20, 900)]:
        assert index.append(rel, pos)
    assert not index.append(20, 1000)  # out of order: ignored
    index.write_pending()
    assert [index.floor_position(o) for o in (0, 3, 4, 8, 9, 19, 20, 10**6)] == [0, 0, 100, 100, 250, 250, 900, 900]
    index.close()
    again = OffsetIndex(tmp_path / "x.index")
    assert again.probe() and again.last_entry == (20, 900)
    assert again.entries() == [(4, 100), (9, 250), (20, 900)]


def test_time_index_lookup(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex")
    index.reset()
    assert not index.maybe_append(-1, 0)
    assert index.maybe_append(100, 0)
    assert not index.maybe_append(100, 3)
    assert index.maybe_append(300, 7)
    assert index.last_below(100) is None
    assert index.last_below(101) == (100, 0)
    assert index.last_below(300) == (100, 0)
    assert index.last_below(10**12) == (300, 7)
    index.close()
    assert (tmp_path / "x.timeindex").read_bytes() == struct.pack(">qiqi", 100, 0, 300, 7)


def test_bytes_beyond_the_committed_end_are_never_served(pdir: Path) -> None:
    plog, batches = fill(pdir, n=3)
    committed = plog.read(0, 1 << 20)
    with open(pdir / "00000000000000000000.log", "ab") as f:  # a write in progress, as seen by a reader
        f.write(make_batch(1)[:50])
    assert plog.read(0, 1 << 20) == committed
    assert plog.read(plog.log_end_offset, 1 << 20) == b""
    crash(plog)


def test_config_overrides_and_validation() -> None:
    base = LogConfig()
    topic = base.with_overrides({"retention.ms": "60000", "segment.bytes": 1024, "flush.messages": str(2**63 - 1),
                                 "cleanup.policy": "compact", "flush.ms": None})
    assert (topic.retention_ms, topic.segment_bytes, topic.flush_messages, topic.flush_ms) == (60000, 1024, None, None)
    assert base.retention_ms == 7 * 24 * 3600 * 1000 and base.with_overrides({}) is base
    assert LogConfig(segment_bytes=1 << 40).max_segment_bytes == 2**31 - 1
    for bad in ({"segment_bytes": 0}, {"segment_ms": 0}, {"index_interval_bytes": -1}, {"flush_messages": 0}):
        with pytest.raises(ValueError):
            LogConfig(**bad)


# -- the page cache drop-behind (log.page.cache.drop.behind.bytes) ----------------------------------------------

@pytest.mark.parametrize("drop_behind", [0, 1 << 20])
def test_drop_behind_keeps_only_the_end_of_the_active_segment_cached(pdir: Path, drop_behind: int) -> None:
    plog = PartitionLog.open(pdir, LogConfig(), drop_behind_bytes=drop_behind)  # flusher jobs run inline
    batches = [make_batch(payload=bytes([i % 251]) * (64 << 10)) for i in range(128)]  # 8 MiB
    for batch in batches[:120]:
        append(plog, batch)
    plog.flush()  # written back: the next pass can drop everything behind the window
    for batch in batches[120:]:
        append(plog, batch)
    size = plog.size_in_bytes
    cached = resident_bytes(segment_files(pdir)[0])
    if drop_behind:
        assert cached <= 2 * drop_behind, (cached, size)
    else:  # the kernel keeps what was just written (20 times the window here)
        assert cached >= size // 2, (cached, size)
    # what was dropped is read back from the disk, whole
    assert bases(plog.read(0, size + 1)) == list(range(128))
    plog.close()
