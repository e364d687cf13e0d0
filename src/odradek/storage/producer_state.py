"""Idempotent producer state of one partition: epochs, sequences, duplicates, snapshots (Kafka's
ProducerStateManager).

For every producer id that has written to the partition the broker remembers its epoch and the metadata of
its last ``MAX_CACHED_BATCHES`` batches (last sequence, last offset, offset delta, max timestamp). An append
of batches that carry a producer id (>= 0) is checked against that state before anything is written:

* epoch older than the producer's current one  -> ``InvalidProducerEpochError`` (a fenced zombie);
* same epoch and the same (first, last) sequence as a cached batch -> ``DuplicateBatch``: the caller writes
  nothing and answers with the offsets the original got (a retry after a lost response);
* newer epoch: the sequence must restart at 0 -> else ``OutOfOrderSequenceError``;
* same epoch: the first sequence must follow the last one (INT32_MAX wraps to 0) -> else
  ``OutOfOrderSequenceError``;
* a producer id the partition does not know (never seen, or expired) is accepted at any sequence, as Kafka
  does since KIP-360; clients no longer expect UNKNOWN_PRODUCER_ID from the log.

Only batch headers are looked at, so the idempotent path costs O(batches); batches without a producer id are
never passed here.

Transactions: a transactional batch opens the producer's transaction in this partition (its first offset is
remembered as ``txn_first_offset`` until a marker closes it); ``first_unstable_offset`` is the smallest such
offset, from which the log derives its last stable offset. Markers (control batches written by the
transaction coordinator through ``apply_marker``) set the producer's epoch (a newer epoch drops the cached
batches, so the next epoch starts at sequence 0), close its transaction and report it as a
``CompletedTxn``; an abort goes into the partition's aborted-transaction index (txn_index.py).

The state survives restarts through snapshot files beside the segments, ``NNNNNNNNNNNNNNNNNNNN.snapshot``
(the number is the log end offset the snapshot reflects); see ``ProducerStateSnapshot`` for the layout. On
load the newest snapshot not past the log end is read and the batch headers after it are replayed.

Concurrency: not thread-safe; owned by one PartitionLog (event loop), and by its loader before that.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path
from typing import Iterable, NamedTuple

from crc32c import crc32c

from odradek.records.batch import BatchHeader

from .files import write_file_atomically
from .segment import CorruptSegmentError, LogSegment
from .txn_index import AbortedTxn, TransactionIndex

log = logging.getLogger(__name__)

INT32_MAX = (1 << 31) - 1
NO_EPOCH = -1
NO_SEQUENCE = -1
MAX_CACHED_BATCHES = 5
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOTS_KEPT = 3
DEFAULT_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms


class ProducerStateError(Exception):
    """An idempotent batch the partition must refuse; nothing of its record set is written."""


class InvalidProducerEpochError(ProducerStateError):
    """The batch's epoch is older than the producer's current epoch (INVALID_PRODUCER_EPOCH)."""


class OutOfOrderSequenceError(ProducerStateError):
    """The batch's first sequence does not follow the producer's last one (OUT_OF_ORDER_SEQUENCE_NUMBER)."""


class InvalidProducerFieldsError(ProducerStateError):
    """A producer id with a negative epoch or base sequence (INVALID_RECORD)."""


def last_sequence(base_sequence: int, offset_delta: int) -> int:
    """Sequence of a batch's last record; sequences wrap from INT32_MAX to 0."""
    if base_sequence > INT32_MAX - offset_delta:
        return offset_delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + offset_delta


def first_sequence(last_seq: int, offset_delta: int) -> int:
    if last_seq < offset_delta:
        return INT32_MAX - (offset_delta - last_seq) + 1
    return last_seq - offset_delta


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class BatchMetadata(NamedTuple):
    """What is remembered of one appended batch."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int  # the batch's max timestamp (the append time on LogAppendTime topics)

    @property
    def first_seq(self) -> int:
        return first_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class DuplicateBatch(NamedTuple):
    """An append that repeats a cached batch: the original's offsets, to answer the retry with."""

    first_offset: int
    last_offset: int
    timestamp: int


class CompletedTxn(NamedTuple):
    """A transaction closed in one partition by a marker at ``last_offset``."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool
    last_stable_offset: int  # the partition's LSO once this transaction is closed


class ProducerStateEntry:
    """One producer id's epoch and its last (at most ``MAX_CACHED_BATCHES``) batches, oldest first, plus the
    first offset of its open transaction in this partition (-1: none) and the coordinator epoch of its last
    marker."""

    __slots__ = ("producer_id", "epoch", "batches", "last_timestamp", "txn_first_offset", "coordinator_epoch")

    def __init__(self, producer_id: int, epoch: int = NO_EPOCH, batches: list[BatchMetadata] | None = None,
                 last_timestamp: int = -1, txn_first_offset: int = -1, coordinator_epoch: int = -1) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches = batches if batches is not None else []
        self.last_timestamp = last_timestamp
        self.txn_first_offset = txn_first_offset
        self.coordinator_epoch = coordinator_epoch

    def copy(self) -> "ProducerStateEntry":
        return ProducerStateEntry(self.producer_id, self.epoch, list(self.batches), self.last_timestamp,
                                  self.txn_first_offset, self.coordinator_epoch)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.last_seq == last_seq and batch.first_seq == first_seq:
                return batch
        return None

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        if len(self.batches) > MAX_CACHED_BATCHES:
            del self.batches[0]
        self.last_timestamp = timestamp

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateEntry):
            return NotImplemented
        return (self.producer_id, self.epoch, self.batches, self.last_timestamp, self.txn_first_offset,
                self.coordinator_epoch) == (other.producer_id, other.epoch, other.batches, other.last_timestamp,
                                            other.txn_first_offset, other.coordinator_epoch)

    def __repr__(self) -> str:
        return (f"ProducerStateEntry(pid={self.producer_id}, epoch={self.epoch}, batches={self.batches}, "
                f"txn_first_offset={self.txn_first_offset})")


class ProducerAppend:
    """The entries one record set would leave behind; applied with ``ProducerStateManager.commit`` once the
    bytes are in the log, dropped otherwise."""

    __slots__ = ("updates",)

    def __init__(self) -> None:
        self.updates: dict[int, ProducerStateEntry] = {}


class ProducerStateSnapshot:
    """One ``NNNNNNNNNNNNNNNNNNNN.snapshot`` file: every producer entry as of a log offset.

    Byte layout (big-endian)::

        offset  size  field
         0      2     version              2 (1 is still read: it lacks the two transaction fields)
         2      4     crc                  CRC-32C of bytes [6, end)
         6      8     offset               log end offset the state reflects (also the file name)
        14      4     producer_count
        18      ...   producer_count entries:
                        0   8  producer_id
                        8   2  epoch
                       10   8  last_timestamp
                       18   8  txn_first_offset     (version 2; -1: no open transaction)
                       26   4  coordinator_epoch    (version 2; -1: no marker seen)
                       30   1  batch_count (0..5), oldest first:
                       31  24  x batch_count:  last_seq int32, last_offset int64,
                                               offset_delta int32, timestamp int64

    Written atomically (``.snapshot.tmp``, fsync, rename, directory fsync). A file whose CRC, version or
    length does not check out is ignored (and deleted) at load, so the state is rebuilt from an older
    snapshot or from the log instead.
    """

    VERSION = 2
    _HEAD = struct.Struct(">hIqi")
    _ENTRY_V1 = struct.Struct(">qhqB")
    _ENTRY = struct.Struct(">qhqqiB")
    _BATCH = struct.Struct(">iqiq")

    @classmethod
    def encode(cls, offset: int, entries: Iterable[ProducerStateEntry]) -> bytes:
        entries = list(entries)
        body = bytearray()
        for e in entries:
            body += cls._ENTRY.pack(e.producer_id, e.epoch, e.last_timestamp, e.txn_first_offset,
                                    e.coordinator_epoch, len(e.batches))
            for b in e.batches:
                body += cls._BATCH.pack(b.last_seq, b.last_offset, b.offset_delta, b.timestamp)
        covered = struct.pack(">qi", offset, len(entries)) + bytes(body)
        return struct.pack(">hI", cls.VERSION, crc32c(covered)) + covered

    @classmethod
    def decode(cls, data: bytes) -> tuple[int, list[ProducerStateEntry]]:
        """(offset, entries); raises ValueError for anything malformed."""
        if len(data) < cls._HEAD.size:
            raise ValueError("snapshot shorter than its header")
        version, crc, offset, count = cls._HEAD.unpack_from(data, 0)
        if version not in (1, cls.VERSION):
            raise ValueError(f"unknown snapshot version {version}")
        if crc32c(memoryview(data)[6:]) != crc:
            raise ValueError("snapshot CRC mismatch")
        if offset < 0 or count < 0:
            raise ValueError("negative offset or count")
        pos = cls._HEAD.size
        entries = []
        try:
            for _ in range(count):
                if version == 1:
                    pid, epoch, last_ts, n = cls._ENTRY_V1.unpack_from(data, pos)
                    txn_first, coordinator_epoch = -1, -1
                    pos += cls._ENTRY_V1.size
                else:
                    pid, epoch, last_ts, txn_first, coordinator_epoch, n = cls._ENTRY.unpack_from(data, pos)
                    pos += cls._ENTRY.size
                if n > MAX_CACHED_BATCHES:
                    raise ValueError(f"{n} cached batches")
                batches = []
                for _ in range(n):
                    batches.append(BatchMetadata(*cls._BATCH.unpack_from(data, pos)))
                    pos += cls._BATCH.size
                entries.append(ProducerStateEntry(pid, epoch, batches, last_ts, txn_first, coordinator_epoch))
        except struct.error:
            raise ValueError("truncated snapshot") from None
        if pos != len(data):
            raise ValueError("trailing bytes after the last entry")
        return offset, entries


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_file_name(name: str) -> int | None:
    stem = name[: -len(SNAPSHOT_SUFFIX)] if name.endswith(SNAPSHOT_SUFFIX) else ""
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


class ProducerStateManager:
    """The producer entries of one partition, and its snapshot files.

    ``prepare`` checks a record set (its headers already carrying the offsets the log will assign) and
    returns either a ``ProducerAppend`` to ``commit`` after the write or a ``DuplicateBatch``; it raises a
    ``ProducerStateError`` for a batch to refuse. ``replay`` applies a batch read back from the log at load,
    without checks (the log is the truth). ``map_end_offset`` is the end of the last record set that went
    through ``commit``/``replay``/``rebuild`` (record sets without producer ids do not move it).
    ``ongoing`` maps the producer ids with an open transaction to its first offset (kept in step with the
    entries' ``txn_first_offset``).

    Concurrency: not thread-safe; owned by the event loop (through PartitionLog).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing: dict[int, int] = {}
        self.map_end_offset = 0
        self._snapshot_offset: int | None = None  # offset of the newest snapshot known to be on disk
        self._changed_since_snapshot = True

    # -- the append path --------------------------------------------------------------------------------

    def prepare(self, batches: list[tuple[int, BatchHeader]]) -> ProducerAppend | DuplicateBatch:
        """Validate the idempotent batches of one record set, in order (see the module docstring)."""
        append = ProducerAppend()
        updates = append.updates
        producers = self.producers
        for _, h in batches:
            pid = h.producer_id
            if pid < 0:
                continue
            epoch = h.producer_epoch
            first_seq = h.base_sequence
            if epoch < 0 or first_seq < 0:
                raise InvalidProducerFieldsError(
                    f"producer {pid}: invalid epoch {epoch} or base sequence {first_seq}")
            delta = h.last_offset_delta
            last_seq = last_sequence(first_seq, delta)
            current = producers.get(pid)
            if current is not None:
                # as in Kafka, every batch is compared with the stored state; one repeat makes the whole
                # record set a retry (clients send one batch per partition)
                duplicate = current.find_duplicate(epoch, first_seq, last_seq)
                if duplicate is not None:
                    return DuplicateBatch(duplicate.first_offset, duplicate.last_offset, duplicate.timestamp)
            entry = updates.get(pid)
            if entry is None:
                entry = updates[pid] = current.copy() if current is not None else ProducerStateEntry(pid)
            current_epoch = entry.epoch
            if epoch < current_epoch:
                raise InvalidProducerEpochError(
                    f"producer {pid}: epoch {epoch} is older than the current epoch {current_epoch}")
            if epoch != current_epoch:
                if first_seq != 0 and current_epoch != NO_EPOCH:
                    raise OutOfOrderSequenceError(
                        f"producer {pid}: new epoch {epoch} must start at sequence 0, not {first_seq}")
            elif not in_sequence(entry.last_seq, first_seq):
                raise OutOfOrderSequenceError(
                    f"producer {pid} epoch {epoch}: sequence {first_seq} does not follow {entry.last_seq}")
            entry.add_batch(epoch, last_seq, h.base_offset + delta, delta, h.max_timestamp)
            if h.is_transactional and entry.txn_first_offset < 0:
                entry.txn_first_offset = h.base_offset
        return append

    def commit(self, append: ProducerAppend, end_offset: int) -> None:
        """The record set is in the log: its entries become the state."""
        if append.updates:
            self.producers.update(append.updates)
            for pid, entry in append.updates.items():
                if entry.txn_first_offset >= 0 and pid not in self.ongoing:
                    self.ongoing[pid] = entry.txn_first_offset
            self._changed_since_snapshot = True
        self.map_end_offset = end_offset

    def replay(self, header: BatchHeader, marker_type: int | None = None,
               coordinator_epoch: int = -1) -> CompletedTxn | None:
        """Apply one batch read back from the log (load-time rebuild) or copied from the leader (a follower's
        append); headers only, no checks. A control batch needs its ``marker_type`` (0 ABORT, 1 COMMIT;
        None: not a transaction marker, skipped) and may give the marker's ``coordinator_epoch``
        (``read_marker``)."""
        pid = header.producer_id
        if header.is_control:
            completed = None
            if pid >= 0 and marker_type in (0, 1):
                completed = self.apply_marker(header, marker_type == 0, coordinator_epoch)
            self.map_end_offset = header.base_offset + header.last_offset_delta + 1
            return completed
        if pid >= 0:
            entry = self.producers.get(pid)
            if entry is None:
                entry = self.producers[pid] = ProducerStateEntry(pid)
            delta = header.last_offset_delta
            entry.add_batch(header.producer_epoch, last_sequence(header.base_sequence, delta),
                            header.base_offset + delta, delta, header.max_timestamp)
            if header.is_transactional and entry.txn_first_offset < 0:
                entry.txn_first_offset = header.base_offset
                self.ongoing[pid] = header.base_offset
            self._changed_since_snapshot = True
        self.map_end_offset = header.base_offset + header.last_offset_delta + 1
        return None

    # -- transactions -----------------------------------------------------------------------------------

    def check_marker(self, producer_id: int, epoch: int) -> None:
        """A marker may not carry an epoch older than the producer's (raises InvalidProducerEpochError)."""
        entry = self.producers.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"marker for producer {producer_id}: epoch {epoch} is older than the current epoch {entry.epoch}")

    def apply_marker(self, header: BatchHeader, aborted: bool, coordinator_epoch: int) -> CompletedTxn | None:
        """A marker (already in the log at ``header.base_offset``) closes the producer's open transaction
        here. Returns the closed transaction, or None when none was open (a marker written again after a
        coordinator restart, or for a partition the producer never wrote to)."""
        pid = header.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerStateEntry(pid)
        if header.producer_epoch != entry.epoch:
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)
        entry.coordinator_epoch = coordinator_epoch
        first = entry.txn_first_offset
        entry.txn_first_offset = -1
        self.ongoing.pop(pid, None)
        self._changed_since_snapshot = True
        marker_offset = header.base_offset
        self.map_end_offset = marker_offset + header.last_offset_delta + 1
        if first < 0:
            return None
        unstable = self.first_unstable_offset()
        lso = unstable if unstable is not None else marker_offset + 1
        return CompletedTxn(pid, first, marker_offset, aborted, lso)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction in this partition, or None."""
        return min(self.ongoing.values()) if self.ongoing else None

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle (by their last batch timestamp) for ``expiration_ms``; returns how many."""
        doomed = [pid for pid, e in self.producers.items()
                  if now_ms - e.last_timestamp >= expiration_ms and e.txn_first_offset < 0]
        for pid in doomed:
            del self.producers[pid]
        if doomed:
            self._changed_since_snapshot = True
        return len(doomed)

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    # -- load -------------------------------------------------------------------------------------------

    def rebuild(self, segments: list[LogSegment], log_end_offset: int) -> tuple[int, list[CompletedTxn]]:
        """Load-time recovery: the newest usable snapshot, then the headers of every batch after it.

        Without a snapshot the whole log is replayed (headers only). A sealed segment that turns out to be
        unreadable stops the replay there (its producers' state is then incomplete, never wrong about
        offsets that exist).

        Returns the offset the replay started from and the transactions that markers after it closed (the
        aborted ones are what the transaction index must hold from that offset on).
        """
        snapshot = self.load_snapshot(log_end_offset)
        from_offset = snapshot if snapshot is not None else 0
        replayed = 0
        completed: list[CompletedTxn] = []
        try:
            for segment in segments:
                if segment.next_offset <= from_offset:
                    continue
                pos = 0
                if segment.base_offset < from_offset:
                    found = segment.find(from_offset)
                    if found is None:
                        continue
                    pos = found[0]
                for batch_pos, header in segment.walk(pos):
                    if header.base_offset + header.last_offset_delta >= from_offset:
                        marker = read_marker(segment.read(batch_pos, header.size)) if header.is_control else None
                        done = self.replay(header, *(marker or (None, -1)))
                        if done is not None:
                            completed.append(done)
                        replayed += 1
        except CorruptSegmentError as exc:
            log.error("%s: producer state replay stopped: %s", self.directory, exc)
        self.map_end_offset = log_end_offset
        if replayed:
            log.debug("%s: producer state from snapshot %s plus %d batches", self.directory, snapshot, replayed)
        return from_offset, completed

    def restore(self, segments: list[LogSegment], log_end_offset: int, txn_index: TransactionIndex) -> None:
        """Recovery of the producer state and the aborted-transaction index together, at load or after a
        log truncation: ``rebuild`` (newest snapshot at or below ``log_end_offset``, the ones past it
        deleted, then replay), and ``txn_index`` keeps its entries below the replay's start and takes the
        aborts the replay met (its files of segments that are gone are deleted)."""
        replay_from, completed = self.rebuild(segments, log_end_offset)
        aborted = [AbortedTxn(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
                   for t in completed if t.aborted]
        txn_index.load([s.base_offset for s in segments], replay_from, aborted)

    def delete_all_snapshots(self) -> None:
        """Delete every snapshot file (the log restarts empty); the next one is written in full."""
        for offset in self.snapshot_offsets():
            self._delete_snapshot(offset)
        self._snapshot_offset = None
        self._changed_since_snapshot = True

    # -- snapshots --------------------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files on disk, ascending."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return sorted(o for o in map(parse_snapshot_file_name, names) if o is not None)

    def encode_snapshot(self, offset: int) -> tuple[int, bytes] | None:
        """(offset, file content) of the state as of log end ``offset``, or None when that snapshot is
        already written and nothing changed. Counts it as written: the caller writes it (``write_snapshot``),
        perhaps later on the log flusher's thread."""
        if self._snapshot_offset == offset and not self._changed_since_snapshot:
            return None
        data = ProducerStateSnapshot.encode(offset, self.producers.values())
        self._snapshot_offset = offset
        self._changed_since_snapshot = False
        return offset, data

    def write_snapshot(self, offset: int, data: bytes) -> None:
        """Write one encoded snapshot atomically and delete all but the newest ``SNAPSHOTS_KEPT``; touches
        only files, so the log flusher may run it."""
        write_file_atomically(self.directory / snapshot_file_name(offset), data)
        for old in self.snapshot_offsets()[:-SNAPSHOTS_KEPT]:
            self._delete_snapshot(old)

    def _delete_snapshot(self, offset: int) -> None:
        try:
            (self.directory / snapshot_file_name(offset)).unlink()
        except FileNotFoundError:
            pass

    def load_snapshot(self, log_end_offset: int) -> int | None:
        """Adopt the newest valid snapshot at or below ``log_end_offset``; delete those past it (the log
        was cut back) and unreadable ones. Returns the snapshot's offset, or None (state left empty)."""
        self.producers = {}
        self.ongoing = {}
        self.map_end_offset = 0
        self._snapshot_offset = None
        self._changed_since_snapshot = True
        for offset in reversed(self.snapshot_offsets()):
            if offset > log_end_offset:
                log.info("%s: dropping producer snapshot %d past the log end %d", self.directory, offset,
                         log_end_offset)
                self._delete_snapshot(offset)
                continue
            path = self.directory / snapshot_file_name(offset)
            try:
                stored_offset, entries = ProducerStateSnapshot.decode(path.read_bytes())
                if stored_offset != offset:
                    raise ValueError(f"holds offset {stored_offset}")
            except (OSError, ValueError) as exc:
                log.warning("%s: ignoring unreadable producer snapshot %s: %s", self.directory, path.name, exc)
                self._delete_snapshot(offset)
                continue
            self.producers = {e.producer_id: e for e in entries}
            self.ongoing = {e.producer_id: e.txn_first_offset for e in entries if e.txn_first_offset >= 0}
            self.map_end_offset = offset
            self._snapshot_offset = offset
            self._changed_since_snapshot = False
            return offset
        return None


_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch


def read_marker(batch: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int] | None:
    """(type, coordinator epoch) of the control batch at ``pos``: the type of its first record (0 ABORT,
    1 COMMIT, others are not transaction markers) and the coordinator epoch from that record's value (-1
    when the value is too short). None when the record cannot be read."""
    from odradek.records.codec import decode_batch, parse_control_key

    try:
        _, records = decode_batch(batch, pos)
        if not records:
            return None
        marker_type = parse_control_key(records[0].key)[1]
        value = records[0].value
        coordinator_epoch = _MARKER_VALUE.unpack_from(value)[1] if value and len(value) >= _MARKER_VALUE.size else -1
        return marker_type, coordinator_epoch
    except Exception:  # an unreadable control record: not a marker we can apply
        return None
