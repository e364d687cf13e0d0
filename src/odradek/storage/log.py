"""PartitionLog: the ordered sequence of segments of one topic-partition."""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from bisect import bisect_right
from concurrent.futures import Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from odradek.records.batch import BatchHeader, patch_base_offset

from .config import INT32_MAX, LogConfig
from .flusher import SYNCHRONOUS, LogFlusher, completed_future
from .loader import LogLoader, LogStartCheckpoint, RecoveryPointCheckpoint, fsync_dir, fsync_path
from .producer_state import DuplicateBatch, ProducerStateManager
from .segment import FileRegion, LogSegment
from .txn_index import AbortedTxn, TransactionIndex

log = logging.getLogger(__name__)

Clock = Callable[[], int]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class OffsetOutOfRangeError(Exception):
    """A read or DeleteRecords offset outside [log_start_offset, log_end_offset]."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is outside [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class StorageError(OSError):
    """The log cannot serve the request (closed, or left inconsistent by an I/O error)."""


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int  # offset assigned to the first record
    last_offset: int  # offset of the last record
    log_start_offset: int  # for Produce v5+ responses
    first_batch_max_timestamp: int = -1
    log_append_time_ms: int = -1  # -1: CreateTime (the handler stamps LogAppendTime batches itself)
    duplicate: bool = False  # an idempotent retry: nothing was written, the offsets are the original's
    durable: Future | None = None  # a flush the flush policy asked for: acknowledge once it is done


class PartitionLog:
    """One topic-partition: segments in offset order, the last one active, plus the log start offset.

    ``log_end_offset`` (== high watermark on a single node) advances only after an append's bytes are in
    the file; reads are bounded by it.

    Roll: the active segment's indexes are completed and the next segment is created at once; making the old
    one durable is a job for the ``LogFlusher``: fsync of the .log, its indexes and transaction index, the
    directory, a producer state snapshot, and last the recovery point (loader.py), moved to the new segment.
    A machine crash before that job ends can tear the old segment too, and the loader then recovers every
    segment from the recovery point on.

    Flush policy: fdatasync the active segment when ``flush_messages`` records have accumulated since the
    last flush, or ``flush_ms`` has passed (checked on append and by ``maybe_flush``); otherwise the OS
    decides. A ``kill -9`` loses nothing written either way; the policy is about machine crashes. Policy
    flushes are flusher jobs too: an append that triggers one returns its future in ``AppendResult.durable``
    (the producer is answered when it is done), and appends made while it is still queued share it.

    A job that fails records its OSError: every later append raises ``StorageError`` (Produce answers
    KAFKA_STORAGE_ERROR), since data acknowledged after a failed fsync might not be on disk.

    Idempotent producers: batches with a producer id are checked by the ``ProducerStateManager`` before the
    write (``ProducerStateError`` refuses the whole record set; a duplicate is answered without writing) and
    the state is committed after it. It is snapshotted on every roll and on close; record sets without
    producer ids never reach it.

    Transactions: transactional batches open a transaction per producer (tracked by the producer state);
    ``last_stable_offset`` (LSO) is the first offset of the oldest open one, or the high watermark.
    ``append_marker`` writes a COMMIT/ABORT control batch for the transaction coordinator; an abort is
    recorded in the ``TransactionIndex`` that read_committed fetches consult (``aborted_transactions``).

    Concurrency: not thread-safe; owned by the event loop.
    """

    def __init__(self, directory: Path, config: LogConfig, segments: list[LogSegment], log_start_offset: int,
                 clock: Clock, producer_state: ProducerStateManager | None = None,
                 txn_index: TransactionIndex | None = None, flusher: LogFlusher = SYNCHRONOUS) -> None:
        self.directory = directory
        self._config = config
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._start = log_start_offset
        self._end = segments[-1].next_offset
        self._clock = clock
        self._unflushed_messages = 0
        self._dirty = False
        self._last_flush_ms = clock()
        self._closed = False
        self._flusher = flusher
        self._last_job: Future | None = None  # the newest flusher job; jobs run in order
        self._queued_flush: Future | None = None  # a policy flush not started yet, shared by later appends
        self._sync_error: OSError | None = None
        if producer_state is None:
            producer_state = ProducerStateManager(directory)
            producer_state.map_end_offset = self._end
        self.producer_state = producer_state
        self.txn_index = txn_index if txn_index is not None else TransactionIndex(directory)

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, clean_shutdown: bool = False,
             clock: Clock | None = None, flusher: LogFlusher = SYNCHRONOUS) -> "PartitionLog":
        """Create the log, or recover it from ``directory``.

        ``clean_shutdown`` (from LogManager's marker) skips the full scan of the last segment; without it the
        segments from the recovery point on are validated batch by batch and a torn tail is cut off.
        ``flusher`` runs the fsyncs; the default runs them on the calling thread.
        """
        clock = clock or wall_clock_ms
        loaded = LogLoader(directory, config, clean_shutdown, clock()).load()
        return cls(directory, config, loaded.segments, loaded.log_start_offset, clock, loaded.producer_state,
                   loaded.txn_index, flusher)

    # -- state ------------------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._end

    high_watermark = log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The offset below which every transaction is decided: min(first offset of open ones, HW)."""
        unstable = self.producer_state.first_unstable_offset()
        return self._end if unstable is None else min(unstable, self._end)

    def aborted_transactions(self, from_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [from_offset, upper_bound) (for read_committed fetches)."""
        return self.txn_index.collect(from_offset, upper_bound)

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def segment_base_offsets(self) -> list[int]:
        return list(self._bases)

    @property
    def _active(self) -> LogSegment:
        return self._segments[-1]

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"log {self.directory} is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self._sync_error is not None:
            raise StorageError(f"log {self.directory} failed to sync: {self._sync_error}")

    def _segment_end(self, i: int) -> int:
        return self._bases[i + 1] if i + 1 < len(self._bases) else self._end

    # -- append -----------------------------------------------------------------------------------------

    def append(self, records: bytearray, batches: list[tuple[int, BatchHeader]]) -> AppendResult:
        """Assign offsets from log_end_offset (patching ``records`` in place) and append the batches.

        ``records``/``batches`` are what ``validate_v2`` accepted. Rolls first when the active segment would
        grow past segment.bytes, is older than segment.ms, or the offsets would not fit its int32 range.
        Batches with a producer id are checked first: raises ``ProducerStateError`` (nothing written), or
        returns the original offsets with ``duplicate=True`` for a retried batch (nothing written).
        """
        self._check_writable()
        if not batches:
            raise ValueError("append of an empty record set")
        now = self._clock()
        first_offset = next_offset = self._end
        assigned: list[tuple[int, BatchHeader]] = []
        messages = 0
        idempotent = False
        for pos, header in batches:
            patch_base_offset(records, pos, next_offset)
            header = header._replace(base_offset=next_offset)
            assigned.append((pos, header))
            next_offset = header.last_offset + 1
            messages += header.records_count
            if header.producer_id >= 0:
                idempotent = True
        last_offset = next_offset - 1
        producer_append = None
        if idempotent:
            producer_append = self.producer_state.prepare(assigned)
            if isinstance(producer_append, DuplicateBatch):
                dup = producer_append
                return AppendResult(dup.first_offset, dup.last_offset, self._start, dup.timestamp, duplicate=True)
        segment = self._active
        if segment.broken:
            raise StorageError(f"{segment.log_path} holds a partial write that could not be undone")
        if self._should_roll(segment, len(records), last_offset, now):
            segment = self._roll()
        segment.append(records, assigned, now)
        self._end = next_offset
        if producer_append is not None:
            self.producer_state.commit(producer_append, next_offset)
        self._unflushed_messages += messages
        self._dirty = True
        flush = self._config.flush_messages
        if flush is not None and self._unflushed_messages >= flush:
            durable = self._start_flush()
        else:
            durable = self.maybe_flush(now)
        return AppendResult(first_offset, last_offset, self._start, assigned[0][1].max_timestamp,
                            durable=durable)

    def append_marker(self, records: bytearray, header: BatchHeader, aborted: bool, coordinator_epoch: int) -> int:
        """Append one transaction marker (a control batch from ``records.codec.build_control_batch``, as
        ``validate_v2`` read it) for the coordinator; returns its offset. Closes the producer's transaction
        here and indexes it when ``aborted``. Raises ``InvalidProducerEpochError`` for a marker older than
        the producer's epoch (nothing written)."""
        self._check_writable()
        self.producer_state.check_marker(header.producer_id, header.producer_epoch)
        now = self._clock()
        offset = self._end
        patch_base_offset(records, 0, offset)
        header = header._replace(base_offset=offset)
        segment = self._active
        if segment.broken:
            raise StorageError(f"{segment.log_path} holds a partial write that could not be undone")
        if self._should_roll(segment, len(records), offset, now):
            segment = self._roll()
        segment.append(records, [(0, header)], now)
        self._end = offset + 1
        completed = self.producer_state.apply_marker(header, aborted, coordinator_epoch)
        if completed is not None and completed.aborted:
            self.txn_index.append(segment.base_offset, AbortedTxn(
                completed.producer_id, completed.first_offset, completed.last_offset, completed.last_stable_offset))
        self._dirty = True
        self._unflushed_messages += 1
        self.maybe_flush(now)
        return offset

    def _should_roll(self, segment: LogSegment, size: int, last_offset: int, now_ms: int) -> bool:
        if segment.size == 0:
            return False
        if segment.size + size > self._config.max_segment_bytes:
            return True
        if last_offset - segment.base_offset > INT32_MAX:
            return True
        return segment.rolling_base_ms is not None and now_ms - segment.rolling_base_ms > self._config.segment_ms

    def _roll(self) -> LogSegment:
        old = self._active
        old.seal(sync=False)
        new = LogSegment.create(self.directory, self._end, self._config.index_interval_bytes)
        self._segments.append(new)
        self._bases.append(new.base_offset)
        snapshot = self.producer_state.encode_snapshot(self._end)
        paths = [old.log_path, old.offset_index.path, old.time_index.path, self.txn_index.path(old.base_offset)]
        self._submit(lambda: self._make_roll_durable(paths, new.base_offset, snapshot))
        self._unflushed_messages = 0  # the job syncs everything written so far
        self._dirty = False
        self._queued_flush = None
        self._last_flush_ms = self._clock()
        log.debug("%s: rolled to segment %d", self.directory, new.base_offset)
        return new

    def _make_roll_durable(self, paths: list[Path], new_base: int, snapshot: tuple[int, bytes] | None) -> None:
        """Flusher job of a roll: the old segment's files, the directory, the snapshot, the recovery point."""
        for path in paths:
            fsync_path(path)
        fsync_dir(self.directory)
        self._write_snapshot(snapshot)
        RecoveryPointCheckpoint.write(self.directory, new_base)

    def _submit(self, job: Callable[[], None]) -> Future:
        """Hand ``job`` to the flusher; a failure is recorded (see the class docstring) unless the log was
        closed meanwhile, when its files may be gone on purpose."""
        def run() -> None:
            if self._closed:
                return
            try:
                job()
            except OSError as exc:
                if not self._closed:
                    log.error("%s: sync failed, refusing further appends: %s", self.directory, exc)
                    self._sync_error = exc
                raise
        future = self._flusher.submit(run)
        self._last_job = future
        return future

    # -- read -------------------------------------------------------------------------------------------

    def _check_range(self, offset: int) -> None:
        if offset < self._start or offset > self._end:
            raise OffsetOutOfRangeError(offset, self._start, self._end)

    def read(self, offset: int, max_bytes: int, min_one_batch: bool = True, max_offset: int | None = None,
             region_min_bytes: int | None = None) -> "bytes | list[bytes | FileRegion]":
        """Whole batches starting with the one containing ``offset``, up to ``max_bytes`` in total.

        A first batch bigger than ``max_bytes`` is returned whole when ``min_one_batch``. Crosses segment
        boundaries; stops before a batch whose base offset is >= ``max_offset``. ``offset == log_end_offset``
        gives b"".

        With ``region_min_bytes`` the result is a list of chunks, one per segment read, and a chunk of at
        least that many bytes is a FileRegion (sent with sendfile, never read into memory).
        """
        self._check_open()
        self._check_range(offset)
        nothing = b"" if region_min_bytes is None else []
        if offset == self._end:
            return nothing
        i = bisect_right(self._bases, offset) - 1
        found = None
        while i < len(self._segments):
            found = self._segments[i].find(offset)
            if found is not None:
                break
            i += 1
        if found is None:
            return nothing
        pos = found[0]
        chunks: list[bytes | FileRegion] = []
        budget = max_bytes
        force_first = min_one_batch
        while True:
            segment = self._segments[i]
            as_region = region_min_bytes is not None and min(budget, segment.size - pos) >= region_min_bytes
            data, reached_end = segment.read_batches(pos, budget, force_first, max_offset, as_region)
            if data:
                chunks.append(data)
                budget -= len(data)
                force_first = False
            i += 1
            if not reached_end or budget <= 0 or i >= len(self._segments):
                break
            pos = 0
        if region_min_bytes is not None:
            return chunks
        if len(chunks) == 1:
            return chunks[0]
        return b"".join(chunks)

    def find_batch_by_timestamp(self, timestamp_ms: int) -> tuple[int, bytes] | None:
        """The first batch at or after the log start whose max_timestamp >= ``timestamp_ms``.

        Returns (base offset, batch bytes); the base offset may be below log_start_offset when the start lies
        inside that batch. None when no batch qualifies.
        """
        self._check_open()
        for i, segment in enumerate(self._segments):
            if self._segment_end(i) <= self._start or segment.max_timestamp < timestamp_ms:
                continue
            hit = segment.find_by_timestamp(timestamp_ms, max(self._start, segment.base_offset))
            if hit is not None:
                pos, header = hit
                return header.base_offset, segment.read(pos, header.size)
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(largest max_timestamp, last offset of the first batch holding it) over the log from its start.

        None when no batch at or after the start carries a timestamp (>= 0).
        """
        self._check_open()
        best: tuple[int, int] | None = None
        for i, segment in enumerate(self._segments):
            if self._segment_end(i) <= self._start:
                continue
            ts, offset = segment.max_timestamp, segment.offset_of_max_timestamp
            if ts >= 0 and offset < self._start:
                # the segment's maximum lies below the start: step over its visible part instead
                ts, offset = -1, -1
                found = segment.find(self._start)
                if found is not None:
                    for _, header in segment.walk(found[0]):
                        if header.max_timestamp > ts:
                            ts, offset = header.max_timestamp, header.last_offset
            if ts >= 0 and (best is None or ts > best[0]):
                best = (ts, offset)
        return best

    # -- deletion ---------------------------------------------------------------------------------------

    def delete_records_before(self, offset: int) -> tuple[int, Future]:
        """DeleteRecords: move the log start to ``offset`` and drop the segments wholly below it.

        Returns the new log start and a future that completes once it is checkpointed on disk (the flusher
        writes the checkpoint, then removes the segment files; reads see the new start at once)."""
        self._check_open()
        if offset < 0 or offset > self._end:
            raise OffsetOutOfRangeError(offset, self._start, self._end)
        if offset <= self._start:
            return self._start, completed_future()
        self._start = offset
        durable = self._checkpoint_start()
        self._delete_oldest(self._count_below_start())
        return self._start, durable

    def _count_below_start(self) -> int:
        n = 0
        while n < len(self._segments) - 1 and self._bases[n + 1] <= self._start:
            n += 1
        return n

    def enforce_retention(self, now_ms: int) -> int:
        """Delete old whole segments by retention.ms and retention.bytes (never the active one).

        Returns the number of segments deleted.
        """
        self._check_open()
        last_sealed = len(self._segments) - 1
        n = self._count_below_start()
        retention_ms = self._config.retention_ms
        if retention_ms >= 0:
            while n < last_sealed and now_ms - self._segments[n].largest_timestamp_ms() > retention_ms:
                n += 1
        retention_bytes = self._config.retention_bytes
        if retention_bytes >= 0:
            excess = sum(s.size for s in self._segments[n:]) - retention_bytes
            while n < last_sealed and excess - self._segments[n].size >= 0:
                excess -= self._segments[n].size
                n += 1
        if n:
            self._delete_oldest(n)
        return n

    def _delete_oldest(self, n: int) -> None:
        """Drop the first ``n`` segments (never the active one); checkpoint the new start first."""
        n = min(n, len(self._segments) - 1)
        if n <= 0:
            return
        new_start = max(self._start, self._bases[n])
        if new_start != self._start:
            self._start = new_start
            self._checkpoint_start()
        doomed = self._segments[:n]
        del self._segments[:n]
        del self._bases[:n]
        self.txn_index.drop_segments_below(self._bases[0])
        for segment in doomed:
            log.info("%s: deleting segment %d", self.directory, segment.base_offset)
            # Closed here, so no fetch can take its fd number after this; removed by the flusher, after the
            # checkpoint above, because unlinking a large cached file takes milliseconds.
            segment.close_unwritten()
            self._submit(segment.remove_files)

    def _checkpoint_start(self) -> Future:
        """Queue a write of the log start checkpoint (the value when the job runs: the newest)."""
        return self._submit(lambda: LogStartCheckpoint.write(self.directory, self._start))

    # -- flush and lifecycle ----------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync everything appended so far, and return when it is on disk (blocks the calling thread)."""
        self.request_flush().result()

    def request_flush(self) -> Future:
        """Queue an fsync of everything appended so far; the future completes when it is on disk."""
        self._check_open()
        if self._dirty:
            return self._start_flush()
        if self._last_job is not None:
            return self._last_job  # a roll's job, or the flush that covers the last append
        return completed_future()

    def _start_flush(self) -> Future:
        """Queue an fdatasync of the active segment (earlier jobs, such as a roll's, run first)."""
        self._dirty = False
        self._unflushed_messages = 0
        self._last_flush_ms = self._clock()
        queued = self._queued_flush
        if queued is not None and not queued.running() and not queued.done():
            return queued  # not started: it will also cover what was appended since it was queued
        path = self._active.log_path
        future = self._submit(lambda: fsync_path(path, data_only=True))
        self._queued_flush = future
        return future

    def maybe_flush(self, now_ms: int) -> Future | None:
        """Time-based flush: queue one if ``flush_ms`` has passed since the last and there is new data."""
        flush_ms = self._config.flush_ms
        if flush_ms is not None and self._dirty and now_ms - self._last_flush_ms >= flush_ms:
            return self._start_flush()
        return None

    def _write_snapshot(self, snapshot: tuple[int, bytes] | None) -> None:
        """Write an encoded producer state snapshot (None: nothing new); a failure only costs a longer replay
        at the next load."""
        if snapshot is None:
            return
        try:
            self.producer_state.write_snapshot(*snapshot)
        except OSError as exc:
            log.warning("%s: could not write a producer state snapshot at %d: %s", self.directory, snapshot[0], exc)

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producer ids idle for ``expiration_ms`` (producer.id.expiration.ms)."""
        return self.producer_state.remove_expired(now_ms, expiration_ms)

    def update_config(self, config: LogConfig) -> None:
        """New settings apply from the next append / retention check; existing segments are not rewritten."""
        self._config = config
        self._active.index_interval = config.index_interval_bytes

    def close(self, *, flush: bool = True) -> None:
        """Seal the active segment (final time-index entry, fsync) and release every file descriptor.

        ``flush=False`` just releases them (used before deleting the log).
        """
        if self._closed:
            return
        if flush and self._last_job is not None:
            # Queued jobs (a roll's snapshot and recovery point, a log start checkpoint, segment removals)
            # finish first. A failure was logged and recorded by its job; the seal below syncs everything
            # again anyway.
            wait([self._last_job])
        self._closed = True
        try:
            if flush:
                self._active.seal()
                self.txn_index.sync()
                self._write_snapshot(self.producer_state.encode_snapshot(self._end))
        finally:
            for segment in self._segments:
                segment.close()

    def delete(self) -> None:
        """Close and remove the partition directory (renamed to ``*.deleted`` first, then removed)."""
        self.close(flush=False)
        doomed = rename_for_deletion(self.directory)
        shutil.rmtree(doomed, ignore_errors=True)


DELETED_SUFFIX = ".deleted"


def rename_for_deletion(directory: Path) -> Path:
    """Rename ``directory`` to a unique ``{name}.{hex}.deleted`` sibling (durably) and return the new path."""
    target = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETED_SUFFIX}")
    os.rename(directory, target)
    fsync_dir(directory.parent)
    return target
