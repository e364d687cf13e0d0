"""Kafka 0.7 byte offsets over the partition logs the current protocol writes.

A 0.7 offset ("position") is where a message would start in the partition's log had 0.7 written it. The
stored v2 batches are seen as 0.7 messages (``batch_messages``): a record of an uncompressed (or LZ4/ZSTD,
which 0.7 cannot read) batch is one magic-1 message of its value (key and headers dropped), 10 + len(value)
bytes; a gzip or snappy batch is one compressed wrapper message whose payload is the inner set of its
records' values, compressed again with the batch's codec (deterministic: same records, same bytes); a
control batch is nothing. The position of a message is the position of the log's first batch plus the sizes
of the messages before it.

A listener serving magic 0 (the 0.6 format, `legacy.message.magic=0`) sees every record as one magic-0
message, 9 + len(value) bytes, compressed batches included (magic 0 has no codec): a position space of its
own, with a file and an index of its own.

Stability when the log start moves (retention, DeleteRecords): the first batch's position is kept in a small
file beside the segments, ``kafka07.positions``, written whenever the start moves, just before it does (the
``PartitionLog.start_moving_hooks`` call, while the records below the new start can still be read)::

    (kafka07-magic0.positions for magic 0)
    entries       n times 16 bytes, oldest first
      offset      int64    base offset of a batch that was once the first of the log
      position    int64    its 0.7 position

Only partitions 0.7 clients have asked about (those with a file) are followed. No file starts the log's
first batch at position 0. A log whose first batch has no entry (its start moved while no KAFKA07 listener
was configured) restarts its positions at the largest one the file records, so they never go back.

The rest is in memory, rebuilt by scanning the log from its first batch when a partition is first asked
about: one entry (batch base offset, position) every ``INDEX_INTERVAL`` bytes of positions, plus each
segment's first batch (what OFFSETS answers). A lookup walks forward from the entry below the position.

Compaction and follower truncation rewrite what was stored; positions of the records they touch are not kept
stable (0.7 knew neither).

Concurrency: not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import logging
import struct
import weakref
from bisect import bisect_right
from pathlib import Path
from typing import Iterator

from odradek.records import compression
from odradek.records.batch import BatchHeader, iter_batches
from odradek.records.codec import decode_batch
from odradek.storage.files import write_file_atomically
from odradek.storage.log import PartitionLog

from .codec import encode_compressed, encode_message

log = logging.getLogger(__name__)

POSITIONS_FILES = {1: "kafka07.positions", 0: "kafka07-magic0.positions"}
INDEX_INTERVAL = 4096
READ_CHUNK = 1 << 20
_ENTRY = struct.Struct(">qq")
_WRAPPED_CODECS = (compression.GZIP, compression.SNAPPY)


class PositionOutOfRange(LookupError):
    """A position past the end, before the start, or inside a message (0.7's OffsetOutOfRange)."""


class FetchTooSmall(ValueError):
    """The message at the position is bigger than the fetch's max size (0.7's InvalidFetchSize)."""


def batch_messages(buf: bytes | bytearray | memoryview, pos: int = 0, magic: int = 1
                   ) -> tuple[BatchHeader, list[bytes]]:
    """The stored v2 batch at ``pos`` as 0.7 messages of ``magic`` (see the module docstring)."""
    header, records = decode_batch(buf, pos)
    if header.is_control or not records:
        return header, []
    if magic == 1 and header.compression in _WRAPPED_CODECS:
        return header, [encode_compressed([r.value or b"" for r in records], header.compression)]
    return header, [encode_message(r.value or b"", magic=magic) for r in records]


def read_anchors(path: Path) -> list[tuple[int, int]]:
    """The (offset, position) entries of a positions file; none when it is missing or torn."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return [_ENTRY.unpack_from(data, i) for i in range(0, len(data) - len(data) % _ENTRY.size, _ENTRY.size)]


class PositionIndex:
    """The positions of one partition's log (see the module docstring)."""

    def __init__(self, plog: PartitionLog, magic: int = 1) -> None:
        self.log = plog
        self.magic = magic
        self._path = plog.directory / POSITIONS_FILES[magic]
        self._anchors = read_anchors(self._path)
        self._reset()

    def _reset(self) -> None:
        """Start the in-memory index over at the log's first batch."""
        first = self._first_batch_base()
        known = dict(self._anchors)
        if first in known:
            position = known[first]
        else:
            position = max((p for _, p in self._anchors), default=0)
            self._remember(first, position)
        self._start_offset, self._start_position = first, position
        self._offsets = [first]
        self._positions = [position]
        self._end_offset, self._end_position = first, position
        self._segment_positions: dict[int, int] = {}

    def _first_batch_base(self) -> int:
        start = self.log.log_start_offset
        if start >= self.log.log_end_offset:
            return start
        data = self.log.read(start, 1)
        return next((header.base_offset for _, header in iter_batches(data)), start)

    def _remember(self, offset: int, position: int) -> None:
        if (offset, position) in self._anchors:
            return
        self._anchors = [a for a in self._anchors if a[0] < offset] + [(offset, position)]
        write_file_atomically(self._path, b"".join(_ENTRY.pack(o, p) for o, p in self._anchors))

    # -- scanning -------------------------------------------------------------------------------------

    def _batches(self, offset: int, position: int, until_offset: int
                 ) -> Iterator[tuple[BatchHeader, int, list[bytes]]]:
        """(header, position, messages) of each batch from the one at ``offset`` (a batch base, at
        ``position``) on, while batches start below ``until_offset``."""
        bases = set(self.log.segment_base_offsets)
        while offset < until_offset:
            data = self.log.read(max(offset, self.log.log_start_offset), READ_CHUNK, max_offset=until_offset)
            if not data:
                return
            moved = False
            for pos, header in iter_batches(data):
                if header.base_offset < offset:
                    continue
                if header.base_offset >= until_offset:
                    return
                header, messages = batch_messages(data, pos, self.magic)
                if header.base_offset in bases:
                    self._segment_positions[header.base_offset] = position
                yield header, position, messages
                position += sum(len(m) for m in messages)
                offset = header.last_offset + 1
                moved = True
            if not moved:
                return

    def catch_up(self, until_offset: int | None = None) -> None:
        """Index the batches up to the high watermark (or those starting below ``until_offset``)."""
        target = self.log.high_watermark if until_offset is None else until_offset
        if self._end_offset > self.log.log_end_offset:
            self._reset()  # truncated below what was indexed
        elif self.log.log_start_offset > self._start_offset:
            self._follow_start()
        if self._end_offset >= target:
            return
        last_entry = self._positions[-1]
        for header, position, messages in self._batches(self._end_offset, self._end_position, target):
            if position - last_entry >= INDEX_INTERVAL:
                self._offsets.append(header.base_offset)
                self._positions.append(position)
                last_entry = position
            self._end_offset = header.last_offset + 1
            self._end_position = position + sum(len(m) for m in messages)

    def _follow_start(self) -> None:
        """The log start moved up: drop what lies below its first batch, whose position the hook recorded."""
        first = self._first_batch_base()
        if first == self._start_offset:
            return
        known = dict(self._anchors)
        if first not in known or first > self._end_offset:
            self._reset()
            return
        keep = bisect_right(self._offsets, first)
        self._offsets = [first] + self._offsets[keep:]
        self._positions = [known[first]] + self._positions[keep:]
        self._start_offset, self._start_position = first, known[first]

    def start_moving(self, new_start: int) -> None:
        """The log start is about to move to ``new_start``: record the position of the batch holding it."""
        self.catch_up(new_start + 1)
        base, position = self._batch_at_or_before(new_start)
        self._remember(base, position)

    def _batch_at_or_before(self, offset: int) -> tuple[int, int]:
        i = bisect_right(self._offsets, offset) - 1
        found = (self._offsets[i], self._positions[i])
        for header, position, _ in self._batches(found[0], found[1], offset + 1):
            found = (header.base_offset, position)
        return found

    # -- what requests ask ----------------------------------------------------------------------------

    @property
    def start_position(self) -> int:
        """The position of the log's first batch."""
        self.catch_up()
        return self._start_position

    @property
    def end_position(self) -> int:
        """The position after the last batch below the high watermark."""
        self.catch_up()
        return self._end_position

    def read(self, position: int, max_size: int) -> bytes:
        """Whole messages from the one starting at ``position``, at most ``max_size`` bytes of them.
        PositionOutOfRange when no message starts there (the end gives b""), FetchTooSmall when the first
        does not fit."""
        self.catch_up()
        if position == self._end_position:
            return b""
        if not self._start_position <= position < self._end_position:
            raise PositionOutOfRange(position)
        i = bisect_right(self._positions, position) - 1
        out = bytearray()
        found = False
        for _, at, messages in self._batches(self._offsets[i], self._positions[i], self._end_offset):
            for message in messages:
                if not found:
                    if at > position:
                        raise PositionOutOfRange(position)
                    found = at == position
                if found:
                    if len(out) + len(message) > max_size:
                        if not out:
                            raise FetchTooSmall(f"the message at {position} takes {len(message)} bytes")
                        return bytes(out)
                    out += message
                at += len(message)
        if not found:
            raise PositionOutOfRange(position)
        return bytes(out)

    def segment_starts(self) -> list[tuple[int, int]]:
        """(position, time in ms) of each segment from the first batch on, oldest first: the first segment
        at the start position, the others at their first batch; the time is the segment's largest
        timestamp, or its file's mtime without timestamps (0.7 used the mtime)."""
        self.catch_up()
        out = []
        for i, (base, time_ms) in enumerate(self.log.segment_timestamps()):
            if i == 0:
                out.append((self._start_position, time_ms))
            elif base in self._segment_positions:
                out.append((self._segment_positions[base], time_ms))
        return out


class PositionIndexes:
    """The PositionIndex of every partition log asked about, per magic served, created on first use; keeps
    the positions files current as log starts move (registered in ``PartitionLog.start_moving_hooks`` by
    ``install``)."""

    def __init__(self, magics: set[int]) -> None:
        self.magics = magics  # those the listeners serve
        self._indexes: weakref.WeakKeyDictionary[PartitionLog, dict[int, PositionIndex]] = \
            weakref.WeakKeyDictionary()

    def of(self, plog: PartitionLog, magic: int = 1) -> PositionIndex:
        by_magic = self._indexes.setdefault(plog, {})
        index = by_magic.get(magic)
        if index is None:
            index = by_magic[magic] = PositionIndex(plog, magic)
        return index

    def install(self) -> None:
        if self._start_moving not in PartitionLog.start_moving_hooks:
            PartitionLog.start_moving_hooks.append(self._start_moving)

    def uninstall(self) -> None:
        if self._start_moving in PartitionLog.start_moving_hooks:
            PartitionLog.start_moving_hooks.remove(self._start_moving)

    def _start_moving(self, plog: PartitionLog, new_start: int) -> None:
        # Only the partitions 0.7 clients have used (an index now, or a file from before): the others have
        # handed out no position to keep, and scanning every log of the broker would cost the loop dearly.
        if plog not in self._indexes and not any((plog.directory / f).exists() for f in POSITIONS_FILES.values()):
            return
        try:
            for magic in self.magics:
                self.of(plog, magic).start_moving(new_start)
        except Exception:  # the log's own work goes on; only the 0.7 positions may suffer
            log.exception("%s: cannot record the 0.7 position of the new log start %d", plog.directory, new_start)
