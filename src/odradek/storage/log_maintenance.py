"""SegmentMaintenance: everything that changes which segments a partition log holds, apart from appending —
the log start moving up (DeleteRecords, a follower following its leader, time and size retention), the
log cleaner's swap of cleaned segments (cleaned_segments.py, step 4), and a follower's truncation.

A base class of PartitionLog (log.py), which owns the state these methods change (``_segments``,
``_bases``, ``_start``, ``_end``, the producer state, the transaction index, the epoch cache, the flusher
jobs) and the helpers they call (``_check_open``, ``_submit``, ``_wait_for_jobs``, ``_locate``); this
module keeps the read and append path of log.py apart from segment management. Its rules (which segments
go, in which order files change so that a crash leaves a log the loader opens) are in PartitionLog's
docstring.

Concurrency: not thread-safe; owned by the event loop, as the PartitionLog.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Iterator

from .cleaned_segments import (CHECKPOINT_FILE, CleanerCheckpoint, CleaningResult, cleaned_paths, finish_swap,
                               install_indexes, remove_swap_end, swap_in)
from .errors import OffsetOutOfRangeError
from .files import fsync_dir
from .flusher import completed_future
from .loader import LogStartCheckpoint, RecoveryPointCheckpoint
from .segment import LogSegment

log = logging.getLogger(__name__)


class SegmentMaintenance:
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
        durable = self._move_start(offset)
        self._delete_oldest(self._count_below_start())
        return self._start, durable

    def maybe_increment_log_start(self, offset: int) -> bool:
        """A follower learned that the leader's log start is ``offset``: move the start there (never past
        the log end, never back) and drop the segments wholly below it, as DeleteRecords does. Returns
        whether the start moved."""
        self._check_open()
        offset = min(offset, self._end)
        if offset <= self._start:
            return False
        self.delete_records_before(offset)
        return True

    def _move_start(self, offset: int) -> Future:
        """The log start moves up to ``offset``: the high watermark and the leader epoch cache follow, and the
        checkpoint is queued (its future)."""
        for hook in self.start_moving_hooks:
            hook(self, offset)
        self._start = offset
        if self._hw < offset:
            self._hw = offset
        self.leader_epoch_cache.truncate_from_start(offset)
        return self._checkpoint_start()

    def _count_below_start(self) -> int:
        n = 0
        while n < len(self._segments) - 1 and self._bases[n + 1] <= self._start:
            n += 1
        return n

    def enforce_retention(self, now_ms: int) -> int:
        """Delete old whole segments by retention.ms and retention.bytes (never the active one, nor one that
        reaches past the high watermark).

        Returns the number of segments deleted.
        """
        self._check_open()
        last_sealed = len(self._segments) - 1
        while last_sealed > 0 and self._bases[last_sealed] > self._hw:
            last_sealed -= 1  # segment n may go only if the next one starts at or below the HW
        n = self._count_below_start()
        retention_ms = self._config.retention_ms
        if not self._config.delete:  # cleanup.policy=compact alone: no time or size retention, as in Kafka
            retention_ms = -1
        if retention_ms >= 0:
            while n < last_sealed and now_ms - self._segments[n].largest_timestamp_ms() > retention_ms:
                n += 1
        retention_bytes = self._config.retention_bytes if self._config.delete else -1
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
            self._move_start(new_start)
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

    # -- compaction (cleaner.py) ------------------------------------------------------------------------

    def replace_segments(self, result: CleaningResult, now_ms: int) -> list[LogSegment] | None:
        """Swap the cleaned groups of ``result`` in (cleaned_segments.py, step 4) and checkpoint the cleaning; returns the
        replaced segments (their fds are still open: the caller closes them later), or None when the log
        changed since the cleaning was planned (a truncation, retention, closing): the cleaned files are then
        deleted and nothing changes."""
        task = result.task
        positions = [] if not self._closed and task.generation == self.cleaning_generation else None
        for group in result.groups:
            if positions is None:
                break
            first = next((i for i, s in enumerate(self._segments) if s is group.sources[0].segment), None)
            n = len(group.sources)
            if (first is None or first + n >= len(self._segments)
                    or any(self._segments[first + j] is not src.segment for j, src in enumerate(group.sources))
                    or self._bases[first + n] != group.end):
                positions = None
                break
            positions.append(first)
        if positions is None:
            for group in result.groups:
                for path in cleaned_paths(group):
                    path.unlink(missing_ok=True)
            return None
        replaced: list[LogSegment] = []
        # (group, its segments) from the end of the log, so that earlier positions stay valid as each is
        # replaced; each step of the swap (cleaned_segments.py, step 4) for every group, then one fsync of the directory
        groups = [(group, i, self._segments[i:i + len(group.sources)])
                  for group, i in sorted(zip(result.groups, positions), key=lambda gi: gi[1], reverse=True)]
        with self._failure_is_fatal():
            for group, _, old in groups:
                self.txn_index.merge_segments(group.base, [s.base_offset for s in old], group.end)
                swap_in(self.directory, group)
            fsync_dir(self.directory)  # the commit point
            for group, _, old in groups:
                for segment in reversed(old[1:]):
                    segment.offset_index.drop_pending()
                    segment.time_index.drop_pending()
                    segment.remove_files()  # the fd stays open for fetches holding a region of it
                for path in (old[0].offset_index.path, old[0].time_index.path):
                    path.unlink(missing_ok=True)
                old[0].offset_index.drop_pending()
                old[0].time_index.drop_pending()
                finish_swap(self.directory, group)
            fsync_dir(self.directory)
            for group, i, old in groups:
                remove_swap_end(group)
                self.txn_index.forget_files([s.base_offset for s in old[1:]])
                new = LogSegment.open(self.directory, group.base, self._config.index_interval_bytes)
                if install_indexes(self.directory, group.base) and new.indexes_look_sane(group.end):
                    new.adopt_sealed_state(group.end)
                else:
                    new._rebuild_indexes()  # on the loop: only when the thread's indexes went missing
                new.next_offset = group.end
                self._segments[i:i + len(old)] = [new]
                self._bases[i:i + len(old)] = [group.base]
                replaced.extend(old)
            fsync_dir(self.directory)
            checkpoint = task.checkpoint
            checkpoint.record(result.map_end, result.map_end, task.started_ms, self._config.delete_retention_ms,
                              checkpoint.tombstone_horizon(task.started_ms, self._config.delete_retention_ms))
            self.cleaner_checkpoint = checkpoint
        # By the flusher, from a copy (the loop goes on changing the live one): lost in a crash, it costs
        # cleaning the range again, nothing more; written here it cost the swap two more fsyncs.
        written = checkpoint.copy()
        self._submit(lambda: written.write(self.directory))
        log.info("%s: cleaned [%d, %d): %d bytes read, %d written", self.directory, task.first_dirty,
                 result.map_end, result.bytes_read, result.bytes_written)
        return replaced

    # -- truncation (followers) -------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch from the first one whose last offset is >= ``offset`` on: the new log end is
        that batch's base offset when the batch holds ``offset`` (Kafka would say ``offset``, leaving the end
        inside a batch that is gone), else ``offset``. Segments that start past the new end go whole. No-op
        when ``offset`` >= log_end_offset; an ``offset`` at or below the log start (or a cut that would reach
        it) restarts the log empty there (``truncate_fully_and_start_at``).

        Waits for this log's pending flusher jobs, then, in this order: lowers the recovery point to the
        segment being cut, deletes the later segments (newest first), cuts that segment and rebuilds its
        indexes, fsyncs the directory; rebuilds producer state and transaction index from the newest
        snapshot at or below the new end (deleting those past it); trims the leader epoch cache and clamps
        the high watermark. A crash in between leaves a prefix of the old log (or the new one) that the
        loader opens, and the leader epoch answers make the follower truncate again.
        """
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot truncate to a negative offset {offset}")
        if offset >= self._end:
            return
        if offset <= self._start:
            self.truncate_fully_and_start_at(offset)
            return
        located = self._locate(offset)
        if located is None:  # ``offset`` lies in a gap after the last batch: nothing to remove but the gap
            i = len(self._segments) - 1
            cut, new_end = self._segments[i].size, offset
        else:  # (below ``offset`` when the batch holds it; ``offset`` when it follows a gap)
            i, cut, header = located
            new_end = min(header.base_offset, offset)
        if new_end <= self._start:
            self.truncate_fully_and_start_at(new_end)
            return
        if cut == 0 and self._bases[i] > new_end:  # a segment that starts past the new end goes whole
            i -= 1
            cut = self._segments[i].size
        log.info("%s: truncating from %d to %d", self.directory, self._end, new_end)
        self._wait_for_jobs()
        with self._failure_is_fatal():
            self._lower_recovery_point(self._bases[i])
            doomed = self._segments[i + 1:]
            del self._segments[i + 1:]
            del self._bases[i + 1:]
            for segment in reversed(doomed):
                segment.delete()
            segment = self._segments[i]
            segment.truncate_batches(cut)
            segment.index_interval = self._config.index_interval_bytes
            if segment.rolling_base_ms is None:
                segment.init_rolling_base(self._clock())
            fsync_dir(self.directory)
            self._end = new_end
            self._after_truncation()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset``: log start = end = high watermark =
        ``offset``, no producer state, no aborted transactions, no leader epochs. For a follower whose
        leader's log starts past its own end.

        Waits for this log's pending flusher jobs, then: lowers the recovery point, deletes the producer
        snapshots, the segments (newest first), writes the empty epoch checkpoint, the log start checkpoint,
        and creates the new segment. A crash in between leaves a prefix of the old log (replayed without
        snapshots) or an empty one.
        """
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot start a log at a negative offset {offset}")
        log.info("%s: truncating fully, to start again at %d", self.directory, offset)
        self._wait_for_jobs()
        with self._failure_is_fatal():
            self._lower_recovery_point(offset)
            self.producer_state.delete_all_snapshots()
            for segment in reversed(self._segments):
                segment.delete()
            self.leader_epoch_cache.clear_and_flush()
            self._wait_for_jobs()  # the empty checkpoint is written before the log start moves
            LogStartCheckpoint.write(self.directory, offset)
            self._segments = [LogSegment.create(self.directory, offset, self._config.index_interval_bytes)]
            self._bases = [offset]
            fsync_dir(self.directory)
            self._start = self._end = offset
            self._after_truncation()

    @contextmanager
    def _failure_is_fatal(self) -> Iterator[None]:
        """A truncation that fails halfway leaves the log's state behind its files: refuse further appends
        (as after a failed fsync); reopening the log recovers it from the files."""
        try:
            yield
        except BaseException as exc:
            log.error("%s: truncation failed, refusing further appends: %s", self.directory, exc)
            self._sync_error = exc if isinstance(exc, OSError) else OSError(str(exc))
            raise

    def _after_truncation(self) -> None:
        """State that follows the segments after a truncation to ``self._end``."""
        self.cleaning_generation += 1
        if self.cleaner_checkpoint is None and (self.directory / CHECKPOINT_FILE).exists():
            self.cleaner_checkpoint = CleanerCheckpoint.read(self.directory)
        if self.cleaner_checkpoint is not None:
            self.cleaner_checkpoint.reset_to(self.directory, self._end)
        end = self._end
        self.producer_state.restore(self._segments, end, self.txn_index)
        self.leader_epoch_cache.truncate_from_end(end)
        self._hw = min(max(self._hw, self._start), end)
        self._unflushed_messages = 0  # the cut synced the active segment
        self._dirty = False
        self._queued_flush = None

    def _lower_recovery_point(self, offset: int) -> None:
        """Before segments at or after ``offset`` change: no recovery point past ``offset`` may vouch for
        them (a missing checkpoint means 0 already)."""
        current = RecoveryPointCheckpoint.read(self.directory)
        if current is not None and current > offset:
            RecoveryPointCheckpoint.write(self.directory, offset)
