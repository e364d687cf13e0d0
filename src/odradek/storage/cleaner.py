"""Log compaction: the log cleaner (Kafka's LogCleaner), for logs whose cleanup.policy has ``compact``.

What a cleaning does, for one partition
---------------------------------------

1. Plan (event loop, ``plan_cleaning``): the *cleanable* segments are the sealed ones (never the active
   segment) that end at or below the first uncleanable offset: min(active segment base, last stable offset,
   high watermark, base of the first segment holding a record newer than now - ``min.compaction.lag.ms``).
   The *dirty* section starts at the first dirty offset kept in ``cleaner-offset-checkpoint`` (below: the
   log start). The log is cleaned when dirty bytes / cleanable bytes >= ``min.cleanable.dirty.ratio``, or
   when the first dirty batch is older than ``max.compaction.lag.ms``. The plan opens its own fd for every
   cleanable .log (a segment deleted meanwhile stays readable) and copies what the thread needs: the aborted
   transactions, the offsets of the producers' cached batches, the tombstone horizon.
2. Offset map (cleaner thread): key -> offset of its latest record, from the dirty section. At most
   ``log.cleaner.dedupe.buffer.size / 24 * 0.9 / log.cleaner.threads`` keys (Kafka's 24-byte entries and
   load factor); when the dirty section holds more, the map ends at the segment (or, inside the first dirty
   segment, the batch) where it filled, and the next cleaning goes on from there. Records of aborted
   transactions and control batches do not enter the map.
3. Rewrite (cleaner thread): consecutive cleanable segments are grouped so that a group's bytes fit
   ``segment.bytes`` and its offsets an int32 range; each group is written to ``{base}.log.cleaned`` (base:
   the group's first segment) and fsynced, with ``{base}.swap-end`` beside it (the offset where the group
   ends: the next segment's base; fsynced, so that the swap on the event loop has fewer fsyncs to wait for).
   Every batch of the group, in order:

   * control batches (transaction markers): copied whole. Kafka removes a marker once the transaction's
     data is gone and delete.retention.ms has passed; odradek keeps them (so the aborted-transaction index
     never loses an entry a read_committed consumer needs). They cost a few bytes per transaction.
   * data batches of an aborted transaction (found in the aborted-transaction index): dropped.
   * a batch the producer state still caches (one of a producer id's last 5 batches): copied whole, so
     that duplicate detection and the producer state rebuilt from the log are what they were.
   * other batches: a record is kept when it has a key and no later record of that key is in the map
     (offset >= the map's), and, for a tombstone (null value), while it is younger than the tombstone
     horizon. A batch keeping every record is copied byte for byte; one keeping none is dropped; otherwise
     it is re-batched as Kafka does: the same header (base offset, last offset delta, base timestamp,
     producer id, epoch, base sequence, attributes, leader epoch) with records_count the records kept,
     max timestamp theirs (LogAppendTime batches keep theirs), the kept records' bytes unchanged (offset
     and timestamp deltas stay), compressed again with the batch's codec, a new CRC. Offsets are never
     changed: a compacted log has gaps, and a batch's last offset delta may exceed its records count - 1.
   * records without a key are dropped, as Kafka's cleaner does (Produce refuses them on compacted topics).

   Reads and writes go through a shared throttle (``log.cleaner.io.max.bytes.per.second``).
4. Swap (event loop, ``PartitionLog.replace_segments``) and 5. checkpoint: cleaned_segments.py, which also
   holds the recovery of a swap cut short by a crash (``complete_swaps``, called by the loader).

Concurrency: ``plan_cleaning``/``apply``/``LogCleaner.tick`` run on the event loop (they touch the
PartitionLog); ``clean`` runs on the cleaner's threads and touches only its task's fds and new files.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from crc32c import crc32c

from odradek.records import compression as codecs
from odradek.records.batch import HEADER, HEADER_SIZE, LOG_OVERHEAD, BatchHeader
from odradek.records.codec import decode_varint

from .cleaned_segments import (
    CLEANED_SUFFIX,
    CleanedGroup,
    CleanerCheckpoint,
    CleaningResult,
    CleaningTask,
    SegmentSource,
    cleaned_paths,
    write_swap_end,
)
from .config import INT32_MAX
from .files import fsync_dir
from .index import OffsetIndex, TimeIndex, write_all
from .segment import INDEX_SUFFIX, TIME_INDEX_SUFFIX, ChunkedBatchReader, LogSegment

if TYPE_CHECKING:
    from .log import PartitionLog
    from .txn_index import AbortedTxn

log = logging.getLogger(__name__)

_ENTRY_BYTES = 24  # Kafka's offset map entry: 16-byte MD5 of the key + 8-byte offset
_LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor
_READ_CHUNK = 1 << 20
_UINT32 = struct.Struct(">I")


class CleanerAborted(Exception):
    """The cleaner is closing: the cleaning stops, its files are removed."""


def checkpoint_of(plog: "PartitionLog") -> CleanerCheckpoint:
    """The log's cleaner checkpoint, read from its file once and then kept in memory (the scheduler looks at
    it for every compacted log on every scan)."""
    if plog.cleaner_checkpoint is None:
        plog.cleaner_checkpoint = CleanerCheckpoint.read(plog.directory)
    return plog.cleaner_checkpoint


# -- plan ---------------------------------------------------------------------------------------------------

def dirty_ratio(plog: "PartitionLog", now_ms: int) -> tuple[float, bool]:
    """(dirty bytes / cleanable bytes, max.compaction.lag.ms passed) of a compacted log; (0, False) when
    nothing is cleanable."""
    span = _cleanable_span(plog, now_ms)
    if span is None:
        return 0.0, False
    k, first_dirty = span
    segments, bases = plog._segments, plog._bases
    total = dirty = 0
    first_dirty_segment = None
    for i in range(k):
        end = bases[i + 1]
        total += segments[i].size
        if end > first_dirty:
            dirty += segments[i].size
            if first_dirty_segment is None:
                first_dirty_segment = segments[i]
    if total == 0 or first_dirty_segment is None:
        return 0.0, False
    overdue = False
    max_lag = plog.config.max_compaction_lag_ms
    first = first_dirty_segment.header_at(0) if first_dirty_segment.size else None
    if first is not None and first.max_timestamp >= 0 and now_ms - first.max_timestamp > max_lag:
        overdue = True
    return dirty / total, overdue


def _cleanable_span(plog: "PartitionLog", now_ms: int, sweep: bool = False) -> tuple[int, int] | None:
    """(number of leading segments that may be cleaned, first dirty offset), or None; with ``sweep`` also
    when nothing is dirty (a cleaning that only removes expired tombstones)."""
    segments, bases = plog._segments, plog._bases
    config = plog.config
    limit = min(bases[-1], plog.last_stable_offset, plog.high_watermark)
    lag = config.min_compaction_lag_ms
    k = 0
    while k < len(segments) - 1 and bases[k + 1] <= limit:
        if lag > 0 and now_ms - segments[k].largest_timestamp_ms() < lag:
            break
        k += 1
    if k == 0:
        return None
    checkpoint = checkpoint_of(plog)
    first_dirty = min(max(checkpoint.first_dirty, plog.log_start_offset, bases[0]), bases[k])
    if first_dirty >= bases[k] and not sweep:
        return None
    return k, first_dirty


def tombstones_due(plog: "PartitionLog", now_ms: int) -> bool:
    """Whether tombstones first cleaned delete.retention.ms ago may be waiting for removal."""
    checkpoint = checkpoint_of(plog)
    return checkpoint.tombstone_horizon(now_ms, plog.config.delete_retention_ms) > checkpoint.swept


def plan_cleaning(plog: "PartitionLog", now_ms: int, force: bool = False) -> CleaningTask | None:
    """The task of cleaning ``plog`` now, or None when it is not due (see the module docstring)."""
    if not plog.config.compact:
        return None
    ratio, overdue = dirty_ratio(plog, now_ms)
    sweep = force or tombstones_due(plog, now_ms)
    if not sweep and not overdue and (ratio == 0.0 or ratio < plog.config.min_cleanable_dirty_ratio):
        return None
    span = _cleanable_span(plog, now_ms, sweep)
    if span is None:
        return None
    k, first_dirty = span
    checkpoint = checkpoint_of(plog).copy()  # the swap records into the copy
    sources: list[SegmentSource] = []
    try:
        for i in range(k):
            segment = plog._segments[i]
            fd = os.open(segment.log_path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            sources.append(SegmentSource(segment.base_offset, plog._bases[i + 1], segment.size, fd, segment))
    except OSError:
        for source in sources:
            os.close(source.fd)
        raise
    end = plog._bases[k]
    keep = frozenset(b.last_offset for entry in plog.producer_state.producers.values() for b in entry.batches)
    return CleaningTask(
        directory=plog.directory, segments=sources, first_dirty=first_dirty, cleanable_end=end,
        aborted=plog.txn_index.collect(plog._bases[0], end), keep_whole=keep,
        tombstone_horizon=min(checkpoint.tombstone_horizon(now_ms, plog.config.delete_retention_ms), first_dirty),
        max_segment_bytes=plog.config.max_segment_bytes, index_interval=plog.config.index_interval_bytes,
        generation=plog.cleaning_generation,
        checkpoint=checkpoint, delete_retention_ms=plog.config.delete_retention_ms, started_ms=now_ms)


# -- throttle -----------------------------------------------------------------------------------------------

class Throttler:
    """Holds the cleaner threads together to ``rate`` bytes per second (log.cleaner.io.max.bytes.per.second).

    Thread-safe. Sleeps in slices of at most 100 ms and raises ``CleanerAborted`` once ``stop`` is set.
    """

    def __init__(self, rate: float, stop: threading.Event) -> None:
        self.rate = rate
        self.stop = stop
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._bytes = 0.0

    def account(self, n: int) -> None:
        if self.stop.is_set():
            raise CleanerAborted()
        if self.rate >= 1e300:
            return
        with self._lock:
            now = time.monotonic()
            if now - self._start > 1.0 and self._bytes <= self.rate * (now - self._start):
                self._start, self._bytes = now, 0.0  # a fresh window once the rate has caught up
            self._bytes += n
            wait = self._bytes / self.rate - (now - self._start)
        deadline = time.monotonic() + max(wait, 0.0)
        while True:  # bounded: ends at the deadline, or at once when the cleaner stops
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self.stop.wait(min(left, 0.1)):
                raise CleanerAborted()


# -- the thread's work --------------------------------------------------------------------------------------

def _batches(source: SegmentSource) -> Iterator[tuple[int, BatchHeader, bytes]]:
    """(position, header, whole batch bytes) of each batch of a segment, in order."""
    reader = ChunkedBatchReader(source.fd, source.size, _READ_CHUNK)
    pos = 0
    while pos + HEADER_SIZE <= source.size:
        header = reader.header_at(pos)
        if header is None or header.magic != 2 or header.size < HEADER_SIZE or pos + header.size > source.size:
            raise OSError(f"segment {source.base} of {source.fd}: no valid batch at byte {pos}")
        got = reader.batch_at(pos, header.size)
        if got is None:
            raise OSError(f"segment {source.base}: short read at byte {pos}")
        buf, rel = got
        yield pos, header, bytes(buf[rel:rel + header.size])
        pos += header.size


def _records(header: BatchHeader, batch: bytes) -> tuple[bytes, list[tuple[int, int, int, int, bytes | None, bool]]]:
    """(decompressed records, [(start, end, offset delta, timestamp delta, key, is tombstone)])."""
    body: bytes = batch[HEADER_SIZE:]
    if header.compression:
        limit = codecs.decompressed_limit(len(body), codecs.READ_FLOOR_BYTES)
        body = bytes(codecs.decompress(header.compression, body, limit=limit))
    out = []
    pos = 0
    for _ in range(header.records_count):
        length, p = decode_varint(body, pos)
        end = p + length
        p += 1  # attributes
        ts_delta, p = decode_varint(body, p)
        off_delta, p = decode_varint(body, p)
        key_len, p = decode_varint(body, p)
        key = None
        if key_len >= 0:
            key, p = body[p:p + key_len], p + key_len
        value_len, p = decode_varint(body, p)
        out.append((pos, end, off_delta, ts_delta, key, value_len < 0))
        pos = end
    return body, out


class _Aborted:
    """Which transactional data batches belong to aborted transactions: [first offset, marker offset)."""

    def __init__(self, aborted: list["AbortedTxn"]) -> None:
        self.ranges: dict[int, list[tuple[int, int]]] = {}
        for txn in aborted:
            self.ranges.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))

    def __contains__(self, header: BatchHeader) -> bool:
        if not header.is_transactional or header.is_control:
            return False
        for first, last in self.ranges.get(header.producer_id, ()):
            if first <= header.base_offset < last:
                return True
        return False


def map_capacity(dedupe_buffer_size: int, threads: int) -> int:
    """Keys the offset map of one cleaner thread holds (Kafka's sizing)."""
    return max(1, int(dedupe_buffer_size // max(threads, 1) // _ENTRY_BYTES * _LOAD_FACTOR))


def _build_map(task: CleaningTask, capacity: int, aborted: _Aborted,
               throttler: Throttler) -> tuple[dict[bytes, int], int, int]:
    """(key -> latest offset, map end, bytes read) over the dirty section."""
    offsets: dict[bytes, int] = {}
    read = 0
    first_dirty_segment = True
    for source in task.segments:
        if source.end <= task.first_dirty:
            continue
        for _, header, batch in _batches(source):
            read += header.size
            throttler.account(header.size)
            if header.last_offset < task.first_dirty or header.is_control or header in aborted:
                continue
            _, records = _records(header, batch)
            new_keys = sum(1 for r in records if r[4] is not None and r[4] not in offsets)
            if len(offsets) + new_keys > capacity:
                # full: this pass ends here (at the segment boundary, or at this batch in the first segment)
                end = header.base_offset if first_dirty_segment else source.base
                if end <= task.first_dirty:
                    end = header.base_offset
                if end <= task.first_dirty:
                    raise OSError("log.cleaner.dedupe.buffer.size holds fewer keys than one batch has")
                return offsets, end, read
            for _, _, off_delta, _, key, _ in records:
                offset = header.base_offset + off_delta
                if key is not None and offset >= task.first_dirty:
                    offsets[key] = offset
        first_dirty_segment = False
    return offsets, task.cleanable_end, read


def _groups(task: CleaningTask) -> list[list[SegmentSource]]:
    groups: list[list[SegmentSource]] = []
    current: list[SegmentSource] = []
    size = 0
    for source in task.segments:
        if current and (size + source.size > task.max_segment_bytes or source.end - 1 - current[0].base > INT32_MAX):
            groups.append(current)
            current, size = [], 0
        current.append(source)
        size += source.size
    if current:
        groups.append(current)
    return groups


def _rebatch(header: BatchHeader, body: bytes, kept: list[tuple[int, int, int, int, bytes | None, bool]]) -> bytes:
    """A batch holding only ``kept`` records (see the module docstring): same header fields but count, max
    timestamp and CRC."""
    records = b"".join(body[start:end] for start, end, *_ in kept)
    payload = codecs.compress(header.compression, records) if header.compression else records
    if header.is_log_append_time:
        max_ts = header.max_timestamp
    else:
        max_ts = max(header.base_timestamp + r[3] for r in kept)
    out = bytearray(HEADER_SIZE)
    out += payload
    HEADER.pack_into(out, 0, header.base_offset, len(out) - LOG_OVERHEAD, header.partition_leader_epoch, 2, 0,
                     header.attributes, header.last_offset_delta, header.base_timestamp, max_ts,
                     header.producer_id, header.producer_epoch, header.base_sequence, len(kept))
    _UINT32.pack_into(out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


def clean(task: CleaningTask, capacity: int, throttler: Throttler) -> CleaningResult:
    """Build the offset map and write the cleaned groups (``{base}.log.cleaned``, fsynced). Runs on a cleaner
    thread; closes the task's fds. A failure removes the files it wrote."""
    aborted = _Aborted(task.aborted)
    written: list[CleanedGroup] = []
    try:
        offsets, map_end, read = _build_map(task, capacity, aborted, throttler)
        result = CleaningResult(task, written, map_end, read)
        horizon = task.tombstone_horizon
        for group in _groups(task):
            path = task.directory / f"{group[0].base:020d}.log{CLEANED_SUFFIX}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
            written.append(CleanedGroup(group[0].base, group[-1].end, path, group))
            try:
                out = bytearray()
                for source in group:
                    for _, header, batch in _batches(source):
                        result.bytes_read += header.size
                        throttler.account(header.size)
                        kept_batch = _clean_batch(header, batch, offsets, aborted, task.keep_whole, horizon)
                        if kept_batch is not None:
                            out += kept_batch
                            throttler.account(len(kept_batch))
                            if len(out) >= _READ_CHUNK:
                                write_all(fd, out)
                                result.bytes_written += len(out)
                                out.clear()
                write_all(fd, out)
                result.bytes_written += len(out)
                os.fsync(fd)
            finally:
                os.close(fd)
            _write_indexes(task, group[0].base, path)
            write_swap_end(task.directory, written[-1])
        fsync_dir(task.directory)
        return result
    except BaseException:
        for group in written:
            for cleaned in cleaned_paths(group):
                cleaned.unlink(missing_ok=True)
        raise
    finally:
        for source in task.segments:
            try:
                os.close(source.fd)
            except OSError:
                pass


def _write_indexes(task: CleaningTask, base: int, log_path: Path) -> None:
    """The offset and time index of a cleaned segment, built here on the cleaner thread (so the swap on the
    event loop only renames them), as ``{base}.index.cleaned`` and ``{base}.timeindex.cleaned``, fsynced."""
    stem = f"{base:020d}"
    fd = os.open(log_path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    segment = LogSegment(task.directory, base, fd, os.fstat(fd).st_size, task.index_interval)
    try:
        segment.offset_index = OffsetIndex(task.directory / f"{stem}{INDEX_SUFFIX}{CLEANED_SUFFIX}")
        segment.time_index = TimeIndex(task.directory / f"{stem}{TIME_INDEX_SUFFIX}{CLEANED_SUFFIX}")
        segment.begin_rebuild()
        for pos, header in segment.walk(0):
            segment.observe(pos, header)
        segment.end_rebuild()  # writes, fsyncs and closes both
    finally:
        segment.close()


def _clean_batch(header: BatchHeader, batch: bytes, offsets: dict[bytes, int], aborted: _Aborted,
                 keep_whole: frozenset[int], horizon: int) -> bytes | None:
    """The batch as the cleaned segment holds it (the same bytes, fewer records, or None: dropped)."""
    if header.is_control or header.last_offset in keep_whole:
        return batch
    if header in aborted:
        return None
    body, records = _records(header, batch)
    kept = []
    for record in records:
        _, _, off_delta, _, key, tombstone = record
        offset = header.base_offset + off_delta
        if key is None or offsets.get(key, -1) > offset:
            continue  # keyless (Kafka drops these too), or superseded by a later record of the key
        if tombstone and offset < horizon:
            continue  # a tombstone past delete.retention.ms
        kept.append(record)
    if not kept:
        return None
    if len(kept) == len(records):
        return batch
    return _rebatch(header, body, kept)


# -- the scheduler --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CleanerConfig:
    """The broker's log.cleaner.* properties (Kafka's names and defaults)."""

    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 134_217_728
    io_max_bytes_per_second: float = 1.7976931348623157e308
    backoff_ms: int = 15_000
    file_delete_delay_ms: int = 60_000


class LogCleaner:
    """Picks the dirtiest compacted logs, cleans them on ``threads`` threads and swaps the results in.

    ``tick`` (event loop, from LogManager.tick every second) applies finished cleanings, closes the fds of
    replaced segments whose delay has passed, and — at most every ``backoff_ms``, or at once after a
    cleaning finished — starts new ones for idle threads. A log is cleaned by one thread at a time.
    """

    def __init__(self, config: CleanerConfig) -> None:
        self.config = config
        self._stop = threading.Event()
        self._throttler = Throttler(config.io_max_bytes_per_second, self._stop)
        self._executor = ThreadPoolExecutor(max_workers=config.threads, thread_name_prefix="log-cleaner")
        self._running: dict[object, tuple["PartitionLog", Future]] = {}
        self._retired: list[tuple[int, list]] = []  # (close at ms, replaced LogSegments)
        self._next_scan_ms = 0
        self.cleanings = 0  # completed and applied, for tests and logs
        # topics compacted otherwise: the coordinators' logs keep their own snapshots
        # (coordinator/persistence.py maybe_compact), which a second compaction would only duplicate
        self.excluded_topics: frozenset[str] = frozenset({"__consumer_offsets", "__transaction_state",
                                                          "__share_group_state"})

    def tick(self, logs: dict, now_ms: int) -> None:
        for key, (plog, future) in list(self._running.items()):
            if not future.done():
                continue
            del self._running[key]
            self._next_scan_ms = 0  # a thread is free: look again now
            try:
                result = future.result()
            except CleanerAborted:
                continue
            except Exception:
                log.exception("cleaning %s failed", plog.directory)
                continue
            try:
                replaced = plog.replace_segments(result, now_ms)
            except Exception:
                log.exception("swapping the cleaned segments of %s failed", plog.directory)
                continue
            if replaced is not None:
                self.cleanings += 1
                self._retired.append((now_ms + self.config.file_delete_delay_ms, replaced))
        self._close_retired(now_ms)
        if not self.config.enable or now_ms < self._next_scan_ms or len(self._running) >= self.config.threads:
            return
        self._next_scan_ms = now_ms + self.config.backoff_ms
        candidates = []
        for key, plog in logs.items():
            if key in self._running or not plog.config.compact or plog.closed or key[0] in self.excluded_topics:
                continue
            try:
                ratio, overdue = dirty_ratio(plog, now_ms)
            except Exception:
                log.exception("cannot measure the dirty ratio of %s", plog.directory)
                continue
            due = ratio > 0 and ratio >= plog.config.min_cleanable_dirty_ratio
            if overdue or due or tombstones_due(plog, now_ms):
                candidates.append((not overdue, -ratio, key, plog))
        candidates.sort(key=lambda c: (c[0], c[1]))
        capacity = map_capacity(self.config.dedupe_buffer_size, self.config.threads)
        for _, _, key, plog in candidates[: self.config.threads - len(self._running)]:
            try:
                task = plan_cleaning(plog, now_ms)
            except Exception:
                log.exception("cannot plan the cleaning of %s", plog.directory)
                continue
            if task is not None:
                log.info("%s: cleaning offsets [%d, %d) of %d segments", plog.directory, task.first_dirty,
                         task.cleanable_end, len(task.segments))
                self._running[key] = (plog, self._executor.submit(clean, task, capacity, self._throttler))

    def reconfigure(self, config: CleanerConfig) -> None:
        """Dynamic broker configs (log.cleaner.threads, .io.max.bytes.per.second, .backoff.ms, ...) take effect
        from the next scan: a new thread count gets a pool of that size (cleanings running on the old pool
        finish there and are swapped in as usual), a new rate holds the threads from their next write."""
        if config == self.config:
            return
        if config.threads != self.config.threads:
            old, self._executor = self._executor, ThreadPoolExecutor(max_workers=config.threads,
                                                                     thread_name_prefix="log-cleaner")
            old.shutdown(wait=False)
        self._throttler.rate = config.io_max_bytes_per_second
        self.config = config
        self._next_scan_ms = 0

    def _close_retired(self, now_ms: int, everything: bool = False) -> None:
        keep = []
        for when, segments in self._retired:
            if everything or now_ms >= when:
                for segment in segments:
                    try:
                        segment.close()
                    except OSError:
                        pass
            else:
                keep.append((when, segments))
        self._retired = keep

    def busy(self) -> bool:
        return bool(self._running)

    def close(self) -> None:
        """Stop the threads (a cleaning in progress is abandoned: its files removed) and close every fd."""
        self._stop.set()
        self._executor.shutdown(wait=True)
        for plog, future in self._running.values():
            try:
                result = future.result()
            except BaseException:
                continue
            for group in result.groups:
                for cleaned in cleaned_paths(group):
                    cleaned.unlink(missing_ok=True)
        self._running.clear()
        self._close_retired(0, everything=True)


