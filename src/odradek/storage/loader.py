"""Recovery: open a partition directory and bring its segments to a consistent state.

Partition directory layout (``{data_dir}/{topic}-{partition}/``)::

    00000000000000000000.log        record batches          (LogSegment)
    00000000000000000000.index      offset index            (OffsetIndex)
    00000000000000000000.timeindex  time index              (TimeIndex)
    00000000000000001234.log ...    next segment, base offset 1234
    log-start-offset                log start checkpoint    (LogStartCheckpoint)
    recovery-point                  first unsynced segment  (RecoveryPointCheckpoint)
    00000000000000001234.snapshot   producer state at 1234  (ProducerStateSnapshot, producer_state.py)
    00000000000000000000.txnindex   aborted transactions    (TransactionIndex, txn_index.py)
    leader-epoch-checkpoint         epoch -> start offset   (LeaderEpochCache, leader_epoch.py)
    cleaner-offset-checkpoint       first dirty offset, tombstone times   (compacted logs, cleaned_segments.py)
    00000000000000000000.log.cleaned / .index.cleaned / .timeindex.cleaned / .log.swap / .swap-end
                                    a log cleaner's work in progress (cleaned_segments.py; completed or dropped here)

Invariants kept on disk: only segments at or after the recovery point can be torn (the log flusher fsyncs a
rolled segment, indexes included, before it moves the recovery point past it), and checkpoints are replaced
atomically.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from odradek.records.batch import HEADER_SIZE, BatchHeader, crc_is_valid

from .cleaned_segments import complete_swaps
from .config import INT32_MAX, LogConfig
from .files import fsync_dir, write_file_atomically
from .segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    ChunkedBatchReader,
    CorruptSegmentError,
    LogSegment,
    parse_segment_file_name,
)

if TYPE_CHECKING:
    from .leader_epoch import LeaderEpochCache
    from .producer_state import ProducerStateManager
    from .txn_index import TransactionIndex

log = logging.getLogger(__name__)

_SCAN_CHUNK = 1 << 20  # bytes read at a time when validating a segment
class OffsetCheckpoint:
    """One offset of a partition, kept in a small file beside the segments (``FILE_NAME`` per subclass).

    Byte layout: ASCII text, two lines: the format version ``0``, then the offset in decimal::

        0\\n
        1234\\n

    Written atomically (``{FILE_NAME}.tmp``, fsync, rename, fsync of the directory). A missing or
    unreadable file reads as None, and each user says what None means.
    """

    FILE_NAME = ""
    VERSION = 0

    @classmethod
    def read(cls, directory: Path) -> int | None:
        try:
            text = (directory / cls.FILE_NAME).read_text("ascii")
        except (FileNotFoundError, UnicodeDecodeError):
            return None
        lines = text.split("\n")
        try:
            if int(lines[0]) != cls.VERSION:
                return None
            offset = int(lines[1])
        except (ValueError, IndexError):
            log.warning("ignoring an unreadable %s in %s", cls.FILE_NAME, directory)
            return None
        return offset if offset >= 0 else None

    @classmethod
    def write(cls, directory: Path, offset: int) -> None:
        write_file_atomically(directory / cls.FILE_NAME, f"{cls.VERSION}\n{offset}\n".encode("ascii"))


class LogStartCheckpoint(OffsetCheckpoint):
    """The partition's log start offset, rewritten each time the start moves (event loop).

    The effective start on load is max(checkpoint, first segment's base offset), so a crash between a
    checkpoint and the deletion of the segments below it is harmless.
    """

    FILE_NAME = "log-start-offset"


class RecoveryPointCheckpoint(OffsetCheckpoint):
    """The base offset of the oldest segment that may not be on disk whole: every segment below it was
    fsynced, indexes included. Written by the log flusher after it has synced a rolled segment (log.py).

    After an unclean shutdown the loader fully recovers every segment from this point on, not only the last
    one. Missing (a log that never finished a roll) means 0: every segment is recovered.
    """

    FILE_NAME = "recovery-point"


def scan_batches(
    fd: int, start: int, end: int, base_offset: int, min_offset: int, verify_crc: bool
) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each valid batch from ``start``; stops quietly at the first invalid one.

    Valid: the whole batch lies before ``end``, magic is 2, the length is at least a header, offsets
    increase (first base offset >= ``min_offset``) and fit the segment's int32 relative range, counts are not
    negative, and (with ``verify_crc``) the CRC-32C matches.
    """
    pos = start
    reader = ChunkedBatchReader(fd, end, _SCAN_CHUNK)
    expected = min_offset
    while end - pos >= HEADER_SIZE:
        header = reader.header_at(pos)
        if header is None:
            return
        size = header.size
        if header.magic != 2 or size < HEADER_SIZE or size > end - pos:
            return
        if (
            header.base_offset < expected
            or header.last_offset_delta < 0
            or header.records_count < 0
            or header.last_offset - base_offset > INT32_MAX
        ):
            return
        if verify_crc:
            batch = reader.batch_at(pos, size)
            if batch is None or not crc_is_valid(batch[0], batch[1], header):
                return
        expected = header.last_offset + 1
        yield pos, header
        pos += size


def recover_segment(segment: LogSegment, epochs: "LeaderEpochCache | None" = None) -> int:
    """Validate every batch of ``segment``, cut the file at the first invalid one and rebuild its indexes.

    With ``epochs``, a batch whose leader epoch is newer than the cache's latest is assigned there (in
    memory: the caller flushes), so the cache follows data appended after its last checkpoint.
    Returns the number of bytes cut off.
    """
    segment.begin_rebuild()
    valid_end = 0
    for pos, header in scan_batches(segment.fd, 0, segment.size, segment.base_offset, segment.base_offset, True):
        segment.observe(pos, header)
        valid_end = pos + header.size
        if epochs is not None and header.partition_leader_epoch > epochs.latest_epoch:
            epochs.assign(header.partition_leader_epoch, header.base_offset, persist=False)
    cut = segment.size - valid_end
    if cut:
        log.warning("%s: cutting %d bytes of torn or invalid data at byte %d", segment.log_path, cut, valid_end)
        segment.truncate(valid_end)
    segment.end_rebuild()
    return cut


@dataclass
class LoadedLog:
    """What the loader hands to PartitionLog: consistent segments (last one active) and the log start."""

    segments: list[LogSegment]
    log_start_offset: int
    truncated_bytes: int
    producer_state: "ProducerStateManager | None" = None
    txn_index: "TransactionIndex | None" = None
    leader_epoch_cache: "LeaderEpochCache | None" = None


class LogLoader:
    """Opens the segments of one partition directory and makes them consistent (Kafka's LogLoader).

    * Completes an interrupted swap of the log cleaner (``cleaned_segments.complete_swaps``: ``*.cleaned`` files
      deleted, ``*.log.swap`` files renamed into place over the segments they replace).
    * Sweeps leftovers: ``*.tmp`` files and index files whose .log is gone (a crash mid-delete).
    * Sealed segments: O(1) sanity check of the indexes; a failing one is recovered (CRC-validated scan,
      truncation, index rebuild), and if that cuts bytes off, every later segment is dropped, since offsets
      must stay contiguous. After an unclean shutdown, sealed segments at or after the recovery point are
      recovered without asking the indexes: their last fsync may not have happened.
    * Last segment: after an unclean shutdown it is always recovered; after a clean one its indexes are
      checked and the batches after the last index entry are stepped over to find the log end offset.
    * The log start offset is max(checkpoint, first base offset); when it is beyond the recovered end (data
      lost by the OS), the log restarts empty at the start offset.
    * Producer state: the newest snapshot not past the recovered end, plus the batch headers after it
      (``ProducerStateManager.rebuild``); snapshots past the end (the log was cut back) are deleted.
    * Leader epoch cache: the checkpoint, plus the newer epochs of the batches that recovery validates (data
      appended after the checkpoint was written); entries that start past the recovered end are dropped
      (one starting at it stays: a leader's epoch with no records yet) and the first one starts no lower
      than the log start. A missing or unreadable checkpoint is rebuilt from the batch headers of the whole
      log (and written, so that happens once).

    Concurrency: runs once, before the PartitionLog exists; single-threaded.
    """

    def __init__(self, directory: Path, config: LogConfig, clean_shutdown: bool, now_ms: int) -> None:
        self.directory = directory
        self.config = config
        self.clean_shutdown = clean_shutdown
        self.now_ms = now_ms
        self._recovered_epochs: "LeaderEpochCache | None" = None  # where recover_segment assigns epochs

    def load(self) -> LoadedLog:
        from .leader_epoch import LeaderEpochCache  # leader_epoch imports this module

        self.directory.mkdir(parents=True, exist_ok=True)
        bases = self._sweep_and_list()
        interval = self.config.index_interval_bytes
        segments: list[LogSegment] = []
        truncated = 0
        checkpointed_epochs = LeaderEpochCache.read(self.directory)
        epochs = LeaderEpochCache(self.directory, checkpointed_epochs or ())
        # recovery adds the epochs of what it validates; a cache rebuilt from scratch walks every segment
        self._recovered_epochs = epochs if checkpointed_epochs is not None else None
        try:
            for base in bases:
                segments.append(LogSegment.open(self.directory, base, interval))
            truncated += self._load_sealed(segments)
            if segments:
                truncated += self._load_last(segments[-1])
            checkpoint = LogStartCheckpoint.read(self.directory)
            if not segments:
                segments.append(LogSegment.create(self.directory, checkpoint or 0, interval))
                fsync_dir(self.directory)
            start = max(checkpoint or 0, segments[0].base_offset)
            end = segments[-1].next_offset
            if start > end:
                log.warning("%s: log start offset %d is past the recovered end %d; restarting empty there",
                            self.directory, start, end)
                for segment in segments:
                    segment.delete()
                segments = [LogSegment.create(self.directory, start, interval)]
                fsync_dir(self.directory)
                end = start
                epochs = LeaderEpochCache(self.directory)
            self._load_epochs(epochs, checkpointed_epochs, segments, start, end)
            producer_state, txn_index = self._load_producer_state(segments)
        except BaseException:
            for segment in segments:
                segment.close()
            raise
        return LoadedLog(segments, start, truncated, producer_state, txn_index, epochs)

    def _load_epochs(self, epochs: "LeaderEpochCache", checkpointed: list[tuple[int, int]] | None,
                     segments: list[LogSegment], start: int, end: int) -> None:
        """Complete the leader epoch cache (see the class docstring) and write it if it changed."""
        if checkpointed is None and end > start:
            log.info("%s: rebuilding the leader epoch cache from the batch headers", self.directory)
            try:
                for segment in segments:
                    for _, header in segment.walk(0):
                        if header.partition_leader_epoch > epochs.latest_epoch:
                            epochs.assign(header.partition_leader_epoch, header.base_offset, persist=False)
            except CorruptSegmentError as exc:
                log.error("%s: leader epoch rebuild stopped: %s", self.directory, exc)
        # an entry starting exactly at the end stays: a leader's epoch that has no records yet
        epochs.truncate_from_end(end + 1, persist=False)
        epochs.truncate_from_start(start, persist=False)
        if epochs.entries != (checkpointed or []) or (checkpointed is None and end > start):
            epochs.flush()

    def _load_producer_state(self, segments: list[LogSegment]) -> "tuple[ProducerStateManager, TransactionIndex]":
        """Producer state (snapshot + replay) and the aborted-transaction index: its entries from the replay's
        start offset on are rebuilt from the markers the replay meets."""
        from .producer_state import ProducerStateManager  # producer_state imports this module
        from .txn_index import TransactionIndex

        state = ProducerStateManager(self.directory)
        index = TransactionIndex(self.directory)
        state.restore(segments, segments[-1].next_offset, index)
        return state, index

    def _sweep_and_list(self) -> list[int]:

        complete_swaps(self.directory)  # a log cleaner's swap cut short: finished, or its work dropped
        names = os.listdir(self.directory)
        bases = []
        log_stems = set()
        for name in names:
            base = parse_segment_file_name(name)
            if base is not None:
                bases.append(base)
                log_stems.add(name[: -len(LOG_SUFFIX)])
        for name in names:
            path = self.directory / name
            if name.endswith(".tmp"):
                path.unlink(missing_ok=True)
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                if name.endswith(suffix) and name[: -len(suffix)] not in log_stems:
                    log.info("removing orphan index %s", path)
                    path.unlink(missing_ok=True)
        bases.sort()
        return bases

    def _load_sealed(self, segments: list[LogSegment]) -> int:
        """Check or recover every segment but the last; may drop segments after a damaged one."""
        truncated = 0
        synced_below = None if self.clean_shutdown else RecoveryPointCheckpoint.read(self.directory) or 0
        i = 0
        while i < len(segments) - 1:
            segment = segments[i]
            next_base = segments[i + 1].base_offset
            trusted = synced_below is None or segment.base_offset < synced_below
            if trusted and segment.indexes_look_sane(next_base):
                segment.adopt_sealed_state(next_base)
            else:
                cut = recover_segment(segment, self._recovered_epochs)
                truncated += cut
                if cut or segment.next_offset > next_base:
                    log.error("%s: damaged sealed segment; dropping the %d segments after it",
                              segment.log_path, len(segments) - i - 1)
                    for later in segments[i + 1:]:
                        later.delete()
                    del segments[i + 1:]
                    fsync_dir(self.directory)
                    break
                segment.next_offset = next_base  # offsets may have a gap before the next segment
            i += 1
        return truncated

    def _load_last(self, segment: LogSegment) -> int:
        cut = 0
        if not (self.clean_shutdown and segment.indexes_look_sane(None) and self._step_over_tail(segment)):
            cut = recover_segment(segment, self._recovered_epochs)
        segment.init_rolling_base(self.now_ms)
        return cut

    def _step_over_tail(self, segment: LogSegment) -> bool:
        """Find the end offset of a cleanly closed segment from its last index entry; False if inconsistent."""
        last_time = segment.time_index.last_entry
        if last_time is not None:
            segment.max_timestamp = last_time[0]
            segment.offset_of_max_timestamp = segment.base_offset + last_time[1]
        last = segment.offset_index.last_entry
        start = last[1] if last is not None else 0
        end = start
        # The tail past the last index entry is at most one index interval plus a batch, so checking its
        # CRCs costs little and catches a segment damaged after a clean shutdown (appended junk, a torn copy).
        for pos, header in scan_batches(segment.fd, start, segment.size, segment.base_offset,
                                        segment.base_offset, True):
            end = pos + header.size
            segment.note_tail_batch(header, end - start)
        if end != segment.size:
            return False
        if last_time is not None and segment.base_offset + last_time[1] >= segment.next_offset:
            return False
        return True
