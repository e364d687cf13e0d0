"""The aborted-transaction index of one partition (Kafka's ``.txnindex`` files).

A read_committed consumer drops the records of aborted transactions itself; the broker tells it which
transactions were aborted in the range it fetched (Fetch ``aborted_transactions``: producer id and first
offset). This index holds, in marker order, one ``AbortedTxn`` per ABORT marker that closed a transaction
in the partition.
"""

from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_left
from pathlib import Path
from typing import Iterable, NamedTuple

from .files import fsync_path, write_file_atomically
from .segment import segment_file_name

log = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the offset of the ABORT marker
    last_stable_offset: int  # the partition's LSO right after the abort


def parse_txn_index_name(name: str) -> int | None:
    stem = name[: -len(TXN_INDEX_SUFFIX)] if name.endswith(TXN_INDEX_SUFFIX) else ""
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


class TransactionIndex:
    """Aborted transactions of one partition: a list in memory, and one ``NNNNNNNNNNNNNNNNNNNN.txnindex`` file
    per segment holding the entries whose marker lies in that segment (the number is the segment's base
    offset).

    Byte layout of a file: concatenated 34-byte entries, big-endian, no header and no checksum::

        offset  size  field
         0      2     version              0
         2      8     producer_id
        10      8     first_offset
        18      8     last_offset          offset of the ABORT marker
        26      8     last_stable_offset

    Entries are appended (``os.write``; fsynced when the segment is sealed, and on close). Like the other
    indexes the files can be rebuilt: at load, entries at or past the offset where the producer-state replay
    starts are dropped and recreated from the markers the replay meets (``load``), so a torn or stale tail
    never survives. A file whose segment is gone is deleted.

    Concurrency: not thread-safe; owned by one PartitionLog (event loop), and by its loader before that.
    """

    ENTRY = struct.Struct(">hqqqq")
    VERSION = 0

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.entries: list[AbortedTxn] = []
        self._last_offsets: list[int] = []  # entries' last offsets, for bisect
        self._bases: set[int] = set()  # segments that have a file

    def path(self, base: int) -> Path:
        return self.directory / segment_file_name(base, TXN_INDEX_SUFFIX)

    # -- load -------------------------------------------------------------------------------------------

    def load(self, segment_bases: list[int], rebuild_from: int, replayed: Iterable[AbortedTxn]) -> None:
        """Read the files of ``segment_bases``, keep their entries below ``rebuild_from``, then add the
        ``replayed`` aborts (those the replay from ``rebuild_from`` found) and rewrite what changed."""
        wanted = set(segment_bases)
        per_base: dict[int, list[AbortedTxn]] = {}
        dirty: set[int] = set()
        for name in os.listdir(self.directory):
            base = parse_txn_index_name(name)
            if base is None:
                continue
            if base not in wanted:
                (self.directory / name).unlink(missing_ok=True)
                continue
            kept, dropped = self._read(self.path(base), rebuild_from)
            per_base[base] = kept
            if dropped:
                dirty.add(base)
        ordered = sorted(segment_bases)
        for txn in replayed:
            base = _segment_of(ordered, txn.last_offset)
            if base is None:
                continue
            per_base.setdefault(base, []).append(txn)
            dirty.add(base)
        for base in dirty:
            data = b"".join(self._encode(t) for t in per_base[base])
            tmp = self.path(base).with_suffix(TXN_INDEX_SUFFIX + ".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, self.path(base))
        # a set: a crash inside a cleaner's swap can leave an entry in two files (log cleaner, cleaner.py)
        entries = sorted({t for ts in per_base.values() for t in ts}, key=lambda t: t.last_offset)
        self.entries = entries
        self._last_offsets = [t.last_offset for t in entries]
        self._bases = {b for b, ts in per_base.items() if ts or self.path(b).exists()}

    def _read(self, path: Path, below: int) -> tuple[list[AbortedTxn], bool]:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return [], False
        out = []
        dropped = len(data) % self.ENTRY.size != 0
        for pos in range(0, len(data) - self.ENTRY.size + 1, self.ENTRY.size):
            version, pid, first, last, lso = self.ENTRY.unpack_from(data, pos)
            if version != self.VERSION or first > last:
                log.warning("%s: dropping an invalid entry at byte %d", path, pos)
                dropped = True
            elif last >= below:
                dropped = True  # rebuilt by the replay
            else:
                out.append(AbortedTxn(pid, first, last, lso))
        return out, dropped

    def _encode(self, txn: AbortedTxn) -> bytes:
        return self.ENTRY.pack(self.VERSION, *txn)

    # -- append and query -------------------------------------------------------------------------------

    def append(self, segment_base: int, txn: AbortedTxn) -> None:
        """Record an abort whose marker is in the segment starting at ``segment_base`` (the active one)."""
        fd = os.open(self.path(segment_base), os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0),
                     0o644)
        try:
            os.write(fd, self._encode(txn))
        finally:
            os.close(fd)
        self._bases.add(segment_base)
        self.entries.append(txn)
        self._last_offsets.append(txn.last_offset)

    def collect(self, from_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions that overlap [from_offset, upper_bound): last offset >= ``from_offset`` and
        first offset < ``upper_bound``. Stops at the first entry whose LSO reaches the bound: any abort after
        it started later than the bound."""
        out = []
        entries = self.entries
        for i in range(bisect_left(self._last_offsets, from_offset), len(entries)):
            txn = entries[i]
            if txn.first_offset < upper_bound:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound:
                break
        return out

    # -- durability and retention -----------------------------------------------------------------------

    def sync(self) -> None:
        """fsync the file of every segment (a roll syncs its segment's own file through the log flusher)."""
        for base in self._bases:
            fsync_path(self.path(base))

    def merge_segments(self, into: int, bases: list[int], end: int) -> None:
        """The log cleaner replaces the segments ``bases`` (offsets [into, end)) by one at ``into``: its file
        gets every entry whose marker lies in that range (written atomically, before the swap's commit
        point); the other files go once the swap is done (``forget_files``)."""
        entries = [t for t in self.entries if into <= t.last_offset < end]
        if entries or self.path(into).exists():
            write_file_atomically(self.path(into), b"".join(self._encode(t) for t in entries))
            self._bases.add(into)

    def forget_files(self, bases: list[int]) -> None:
        """Delete the files of segments that no longer exist (their entries live on in another file)."""
        for base in bases:
            self.path(base).unlink(missing_ok=True)
            self._bases.discard(base)

    def drop_segments_below(self, first_base: int) -> None:
        """Segments below ``first_base`` were deleted: delete their files and forget their entries."""
        for base in [b for b in self._bases if b < first_base]:
            self.path(base).unlink(missing_ok=True)
            self._bases.discard(base)
        keep = bisect_left(self._last_offsets, first_base)
        if keep:
            del self.entries[:keep]
            del self._last_offsets[:keep]


def _segment_of(ordered_bases: list[int], offset: int) -> int | None:
    i = bisect_left(ordered_bases, offset + 1) - 1
    return ordered_bases[i] if i >= 0 else None
