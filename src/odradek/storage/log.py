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
from typing import Callable, ClassVar, Iterator

from odradek.records.batch import BatchHeader, patch_base_offset

from .cleaned_segments import CleanerCheckpoint
from .config import INT32_MAX, LogConfig
from .errors import OffsetOutOfRangeError, OffsetsOutOfOrderError, StorageError
from .files import fsync_dir, fsync_path, write_file_atomically
from .flusher import SYNCHRONOUS, LogFlusher, completed_future
from .leader_epoch import LeaderEpochCache
from .loader import LogLoader, RecoveryPointCheckpoint
from .log_maintenance import SegmentMaintenance
from .producer_state import CompletedTxn, DuplicateBatch, ProducerStateManager, read_marker
from .segment import FileRegion, LogSegment
from .txn_index import AbortedTxn, TransactionIndex

log = logging.getLogger(__name__)

Clock = Callable[[], int]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int  # offset assigned to the first record
    last_offset: int  # offset of the last record
    log_start_offset: int  # for Produce v5+ responses
    first_batch_max_timestamp: int = -1
    log_append_time_ms: int = -1  # -1: CreateTime (the handler stamps LogAppendTime batches itself)
    duplicate: bool = False  # an idempotent retry: nothing was written, the offsets are the original's
    durable: Future | None = None  # a flush the flush policy asked for: acknowledge once it is done


class PartitionLog(SegmentMaintenance):
    """One topic-partition: segments in offset order, the last one active, plus the log start offset.

    ``log_end_offset`` advances only after an append's bytes are in the file; reads are bounded by it.

    High watermark: the offset below which records are committed (replicated to every in-sync replica),
    kept apart from the log end. Appends do not move it: the replication layer does, with
    ``update_high_watermark`` (on a single node, to the log end after every append). It starts at the
    recovered log end when the log is opened, stays within [log_start_offset, log_end_offset] (truncation
    lowers it, a moving log start raises it), and retention never deletes a segment that reaches past it.
    ``last_stable_offset`` is bounded by it.

    Leader epochs (KIP-101): ``leader_epoch_cache`` (leader_epoch.py) maps each leader epoch to the offset
    where its records start, loaded (or rebuilt) at open. Every append (``append``, ``append_marker``,
    ``append_replicated``) assigns (partition_leader_epoch, base offset) of each batch whose epoch is newer
    than the cache's latest: one integer comparison per batch, the checkpoint written by the flusher only
    when an epoch changes. ``end_offset_for_epoch`` answers OffsetForLeaderEpoch.

    Follower side: ``append_replicated`` appends batches that already carry the leader's offsets and epochs;
    ``truncate_to`` cuts the log back to a batch boundary (segments, indexes, transaction index, producer
    state, epoch cache, high watermark, recovery point); ``truncate_fully_and_start_at`` restarts it empty at
    an offset; ``maybe_increment_log_start`` follows the leader's log start. The truncations first wait for
    this log's pending flusher jobs (they name files about to go) and order their file changes so that a
    crash at any point leaves a log the loader opens: later segments are deleted before an earlier one is
    cut, the recovery point is lowered before any segment changes, snapshots past the new end are deleted.

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
    ``last_stable_offset`` (LSO) is the first offset of the oldest open one (no lower than the log start),
    or the high watermark if that is lower.
    ``append_marker`` writes a COMMIT/ABORT control batch for the transaction coordinator; an abort is
    recorded in the ``TransactionIndex`` that read_committed fetches consult (``aborted_transactions``).

    Compaction (cleanup.policy=compact, cleaner.py): the log cleaner's threads read sealed segments through
    fds of their own and write new files; ``replace_segments`` (event loop) swaps the cleaned segments in
    when none of them changed since the cleaning was planned (``cleaning_generation``: truncations bump it).
    Offsets never change, so a compacted log has gaps, which reads, indexes and followers step over.
    Retention (time and size) applies only when the policy also has ``delete``.

    Concurrency: not thread-safe; owned by the event loop.
    """

    # Called with (log, new start) just before the log start moves up (retention, DeleteRecords), while the
    # records below it can still be read: the Kafka 0.7 listener (legacy07/positions.py) records there the
    # byte position of the new start, which it could not compute once those records are gone.
    start_moving_hooks: ClassVar[list[Callable[["PartitionLog", int], None]]] = []

    def __init__(self, directory: Path, config: LogConfig, segments: list[LogSegment], log_start_offset: int,
                 clock: Clock, producer_state: ProducerStateManager | None = None,
                 txn_index: TransactionIndex | None = None, flusher: LogFlusher = SYNCHRONOUS,
                 leader_epoch_cache: LeaderEpochCache | None = None, drop_behind_bytes: int = 0) -> None:
        self.directory = directory
        self.drop_behind_bytes = drop_behind_bytes  # log.page.cache.drop.behind.bytes; 0: the kernel decides
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
        self._hw = self._end
        if leader_epoch_cache is None:
            leader_epoch_cache = LeaderEpochCache(directory)
        leader_epoch_cache.writer = self._write_file_later
        self.leader_epoch_cache = leader_epoch_cache
        # bumped by every truncation: a cleaning planned before one must not be swapped in (cleaner.py)
        self.cleaning_generation = 0
        self.cleaner_checkpoint: CleanerCheckpoint | None = None  # loaded by the cleaner when it first looks

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, clean_shutdown: bool = False,
             clock: Clock | None = None, flusher: LogFlusher = SYNCHRONOUS,
             drop_behind_bytes: int = 0) -> "PartitionLog":
        """Create the log, or recover it from ``directory``.

        ``clean_shutdown`` (from LogManager's marker) skips the full scan of the last segment; without it the
        segments from the recovery point on are validated batch by batch and a torn tail is cut off.
        ``flusher`` runs the fsyncs; the default runs them on the calling thread. ``drop_behind_bytes``: see
        ``_drop_cache_behind``.
        """
        clock = clock or wall_clock_ms
        loaded = LogLoader(directory, config, clean_shutdown, clock()).load()
        return cls(directory, config, loaded.segments, loaded.log_start_offset, clock, loaded.producer_state,
                   loaded.txn_index, flusher, loaded.leader_epoch_cache, drop_behind_bytes)

    # -- state ------------------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._end

    @property
    def high_watermark(self) -> int:
        return self._hw

    def update_high_watermark(self, offset: int) -> bool:
        """Set the high watermark to ``offset``, clamped to [log_start_offset, log_end_offset] (it may go
        down: a follower takes the leader's); returns whether it moved."""
        hw = min(max(offset, self._start), self._end)
        if hw == self._hw:
            return False
        self._hw = hw
        return True

    @property
    def last_stable_offset(self) -> int:
        """The offset below which every transaction is decided: min(first offset of open ones, HW), where
        an open transaction that began below the log start counts from the log start."""
        unstable = self.producer_state.first_unstable_offset()
        return self._hw if unstable is None else min(max(unstable, self._start), self._hw)

    @property
    def latest_epoch(self) -> int:
        """The newest leader epoch in the epoch cache (-1: none)."""
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) for a requested epoch (LeaderEpochCache.end_offset_for)."""
        return self.leader_epoch_cache.end_offset_for(epoch, self._end)

    def aborted_transactions(self, from_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [from_offset, upper_bound) (for read_committed fetches)."""
        return self.txn_index.collect(from_offset, upper_bound)

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def segment_base_offsets(self) -> list[int]:
        return list(self._bases)

    def segment_timestamps(self) -> list[tuple[int, int]]:
        """(base offset, largest timestamp or else the file's mtime) of each segment, oldest first."""
        return [(s.base_offset, s.largest_timestamp_ms()) for s in self._segments]

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
        The high watermark does not move.
        """
        self._check_writable()
        if not batches:
            raise ValueError("append of an empty record set")
        now = self._clock()
        first_offset = next_offset = self._end
        assigned: list[tuple[int, BatchHeader]] = []
        messages = 0
        idempotent = False
        latest_epoch = self.leader_epoch_cache.latest_epoch
        new_epoch = False
        for pos, header in batches:
            patch_base_offset(records, pos, next_offset)
            header = header._replace(base_offset=next_offset)
            assigned.append((pos, header))
            next_offset = header.last_offset + 1
            messages += header.records_count
            if header.producer_id >= 0:
                idempotent = True
            if header.partition_leader_epoch > latest_epoch:
                new_epoch = True
        last_offset = next_offset - 1
        producer_append = None
        if idempotent:
            producer_append = self.producer_state.prepare(assigned)
            if isinstance(producer_append, DuplicateBatch):
                dup = producer_append
                return AppendResult(dup.first_offset, dup.last_offset, self._start, dup.timestamp, duplicate=True)
        segment = self._segment_for(len(records), last_offset, now)
        segment.append(records, assigned, now)
        self._end = next_offset
        if producer_append is not None:
            self.producer_state.commit(producer_append, next_offset)
        if new_epoch:
            self._assign_epochs(assigned)
        durable = self._count_unflushed(messages, now)
        return AppendResult(first_offset, last_offset, self._start, assigned[0][1].max_timestamp,
                            durable=durable)

    def append_marker(self, records: bytearray, header: BatchHeader, aborted: bool, coordinator_epoch: int) -> int:
        """Append one transaction marker (a control batch from ``records.codec.build_control_batch``, as
        ``validate_v2`` read it) for the coordinator; returns its offset. Closes the producer's transaction
        here and indexes it when ``aborted``. Raises ``InvalidProducerEpochError`` for a marker older than
        the producer's epoch (nothing written). The caller stamps the leader epoch (``header`` carries it)."""
        self._check_writable()
        self.producer_state.check_marker(header.producer_id, header.producer_epoch)
        now = self._clock()
        offset = self._end
        patch_base_offset(records, 0, offset)
        header = header._replace(base_offset=offset)
        segment = self._segment_for(len(records), offset, now)
        segment.append(records, [(0, header)], now)
        self._end = offset + 1
        self._index_if_aborted(segment, self.producer_state.apply_marker(header, aborted, coordinator_epoch))
        if header.partition_leader_epoch > self.leader_epoch_cache.latest_epoch:
            self._assign_epochs([(0, header)])
        self._count_unflushed(1, now)
        return offset

    def append_replicated(self, records: bytearray | memoryview,
                          batches: list[tuple[int, BatchHeader]]) -> AppendResult:
        """A follower's append: batches as the leader wrote them (``validate_v2`` of a fetched record set),
        offsets and leader epochs included; nothing is patched.

        The first base offset must be at least log_end_offset (offsets may skip, as after compaction) and
        every batch must start past the previous one's last offset: else ``OffsetsOutOfOrderError`` and
        nothing is written. Rolls as ``append`` does (a new segment starts at the base offset of the batch
        that did not fit). Producer state follows without checks (``ProducerStateManager.replay``); a COMMIT
        or ABORT marker closes its transaction and an abort is indexed, as ``append_marker`` does; newer
        leader epochs are assigned. Only batch headers are looked at, and control batches read. The flush
        policy applies as for ``append``; the high watermark does not move.
        """
        self._check_writable()
        if not batches:
            raise ValueError("append of an empty record set")
        expected = self._end
        messages = 0
        producers = False
        latest_epoch = self.leader_epoch_cache.latest_epoch
        new_epoch = False
        for _, header in batches:
            if header.base_offset < expected:
                raise OffsetsOutOfOrderError(header.base_offset, header.last_offset, expected)
            expected = header.last_offset + 1
            messages += header.records_count
            if header.producer_id >= 0:
                producers = True
            if header.partition_leader_epoch > latest_epoch:
                new_epoch = True
        now = self._clock()
        first = batches[0][1]
        if expected - 1 - first.base_offset <= INT32_MAX:
            self._append_run(records, batches, now, producers, new_epoch)
        else:  # more offsets than one segment can hold (gaps of a compacted log)
            for data, run in _runs_within_int32(records, batches):
                self._append_run(data, run, now, producers, new_epoch)
        durable = self._count_unflushed(messages, now)
        return AppendResult(first.base_offset, expected - 1, self._start, first.max_timestamp, durable=durable)

    def _append_run(self, records: bytearray | memoryview, batches: list[tuple[int, BatchHeader]], now: int,
                    producers: bool, new_epoch: bool) -> None:
        """Write replicated batches that fit one segment, and let the producer state and epochs follow."""
        last_offset = batches[-1][1].last_offset
        segment = self._segment_for(len(records), last_offset, now, batches[0][1].base_offset)
        segment.append(records, batches, now)
        self._end = last_offset + 1
        if producers:
            state = self.producer_state
            for pos, header in batches:
                if header.producer_id < 0:
                    continue
                if header.is_control:
                    marker = read_marker(records, pos)
                    self._index_if_aborted(segment, state.replay(header, *(marker or (None, -1))))
                else:
                    state.replay(header)
        if new_epoch:
            self._assign_epochs(batches)

    def _segment_for(self, size: int, last_offset: int, now_ms: int, roll_base: int | None = None) -> LogSegment:
        """The segment the next ``size`` bytes go to: the active one, or a new one (``roll_base``: its base
        offset, default the log end) when it should roll."""
        segment = self._segments[-1]
        if segment.broken:
            raise StorageError(f"{segment.log_path} holds a partial write that could not be undone")
        if self._should_roll(segment, size, last_offset, now_ms):
            segment = self._roll(roll_base)
        return segment

    def _index_if_aborted(self, segment: LogSegment, completed: CompletedTxn | None) -> None:
        """A marker in ``segment`` closed ``completed``: an abort goes into the transaction index."""
        if completed is not None and completed.aborted:
            self.txn_index.append(segment.base_offset, AbortedTxn(
                completed.producer_id, completed.first_offset, completed.last_offset, completed.last_stable_offset))

    def _assign_epochs(self, batches: list[tuple[int, BatchHeader]]) -> None:
        """Assign the batches' leader epochs that are newer than the cache's latest (the data is written)."""
        cache = self.leader_epoch_cache
        for _, header in batches:
            if header.partition_leader_epoch > cache.latest_epoch:
                cache.assign(header.partition_leader_epoch, header.base_offset)

    def _count_unflushed(self, messages: int, now_ms: int) -> Future | None:
        """Flush policy after a write of ``messages`` records: the flush it started, if any."""
        if self.drop_behind_bytes:
            self._drop_cache_behind()
        self._unflushed_messages += messages
        self._dirty = True
        flush = self._config.flush_messages
        if flush is not None and self._unflushed_messages >= flush:
            return self._start_flush()
        return self.maybe_flush(now_ms)

    def _drop_cache_behind(self) -> None:
        """Keep only the last ``drop_behind_bytes`` of the active segment in the page cache.

        Every new page of page cache is memory the kernel must find; where that is costly (a VM whose host
        takes back the guest's free memory: each first touch faults into the host) writing is what a broker
        spends its CPU on, and a replicated cluster writes every byte once per replica. Dropping what lies
        further behind the end than the window (posix_fadvise DONTNEED, in a flusher job) lets the next writes
        reuse the same few pages. The call starts writeback of dirty pages in the range and drops the clean
        ones, so each range is passed again by later calls (they all start at 0) until it is gone. Readers
        near the end (followers, consumers keeping up) still read from memory; a consumer further behind
        reads from the disk.
        """
        segment = self._active
        end = segment.size - self.drop_behind_bytes
        if end - segment.cache_dropped_to < self.drop_behind_bytes // 2:
            return
        segment.cache_dropped_to = end
        fd = os.dup(segment.fd)  # the segment may close (and its fd number be reused) before the job runs
        self._flusher.submit(lambda: _drop_page_cache(fd, end))

    def _should_roll(self, segment: LogSegment, size: int, last_offset: int, now_ms: int) -> bool:
        if last_offset - segment.base_offset > INT32_MAX:
            return True
        if segment.size == 0:
            return False
        if segment.size + size > self._config.max_segment_bytes:
            return True
        return segment.rolling_base_ms is not None and now_ms - segment.rolling_base_ms > self._config.segment_ms

    def _roll(self, base_offset: int | None = None) -> LogSegment:
        old = self._active
        old.seal(sync=False)
        new = LogSegment.create(self.directory, self._end if base_offset is None else base_offset,
                                self._config.index_interval_bytes)
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

    def _write_file_later(self, path: Path, data: bytes) -> None:
        """Replace ``path`` with ``data`` atomically in a flusher job (the leader epoch checkpoint)."""
        self._submit(lambda: write_file_atomically(path, data))

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

    def _wait_for_jobs(self) -> None:
        """Block until every flusher job of this log queued so far has run (they run in order)."""
        if self._last_job is not None:
            wait([self._last_job])

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
        located = self._locate(offset)
        if located is None:
            return nothing
        i, pos, _ = located
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

    def _locate(self, offset: int) -> tuple[int, int, BatchHeader] | None:
        """(segment index, position, header) of the first batch whose last offset is >= ``offset``."""
        i = bisect_right(self._bases, offset) - 1
        while i < len(self._segments):
            found = self._segments[i].find(offset)
            if found is not None:
                return i, found[0], found[1]
            i += 1
        return None

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


def _drop_page_cache(fd: int, end: int) -> None:
    """Flusher job of ``_drop_cache_behind``: bytes [0, end) of ``fd`` out of the page cache; closes ``fd``."""
    try:
        os.posix_fadvise(fd, 0, end, os.POSIX_FADV_DONTNEED)
    except OSError as exc:  # only advice: the data is unaffected
        log.debug("posix_fadvise failed: %s", exc)
    finally:
        os.close(fd)


def rename_for_deletion(directory: Path) -> Path:
    """Rename ``directory`` to a unique ``{name}.{hex}.deleted`` sibling (durably) and return the new path."""
    target = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETED_SUFFIX}")
    os.rename(directory, target)
    fsync_dir(directory.parent)
    return target


def _runs_within_int32(records: bytearray | memoryview, batches: list[tuple[int, BatchHeader]]
                       ) -> "Iterator[tuple[memoryview, list[tuple[int, BatchHeader]]]]":
    """Split replicated batches into runs whose offsets each fit one segment's int32 range: (the run's bytes,
    its batches with positions in them). The batches lie back to back in ``records``."""
    view = memoryview(records)
    i, n = 0, len(batches)
    while i < n:
        base = batches[i][1].base_offset
        j = i + 1
        while j < n and batches[j][1].last_offset - base <= INT32_MAX:
            j += 1
        lo = batches[i][0]
        hi = batches[j - 1][0] + batches[j - 1][1].size
        yield view[lo:hi], [(pos - lo, header) for pos, header in batches[i:j]]
        i = j
