"""One log segment: a ``.log`` file of record batches plus its offset and time indexes."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterator

from odradek.records.batch import HEADER_SIZE, BatchHeader, read_header, read_prefix

from .index import IndexCorruptError, OffsetIndex, TimeIndex, write_all

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
_WALK_CHUNK = 16 * 1024  # bytes read at a time when stepping over batch headers


class CorruptSegmentError(Exception):
    """Bytes inside the committed part of a segment that are not a well-formed batch."""


class ChunkedBatchReader:
    """Reads batch headers (and, on request, whole batches) of ``fd`` below ``end`` at increasing positions,
    ``chunk`` bytes per pread, so that stepping over many small batches costs few system calls.

    It only reads: the callers decide what a valid batch is and what to do about an invalid one.
    """

    def __init__(self, fd: int, end: int, chunk: int) -> None:
        self.fd = fd
        self.end = end
        self.chunk = chunk
        self.buf = b""
        self.buf_start = 0

    def _fill(self, pos: int) -> None:
        self.buf = os.pread(self.fd, min(self.chunk, self.end - pos), pos)
        self.buf_start = pos

    def _header_window(self, pos: int) -> int | None:
        """Index in ``buf`` of the header at ``pos`` (read in if needed), or None when it is cut short."""
        rel = pos - self.buf_start
        if rel + HEADER_SIZE > len(self.buf):
            self._fill(pos)
            rel = 0
            if len(self.buf) < HEADER_SIZE:
                return None
        return rel

    def header_at(self, pos: int) -> BatchHeader | None:
        """The header at ``pos``, or None when fewer than HEADER_SIZE bytes could be read there."""
        rel = self._header_window(pos)
        return None if rel is None else read_header(self.buf, rel)

    def prefix_at(self, pos: int) -> tuple[int, int] | None:
        """(base offset, total size) of the batch at ``pos``, or None when its header could not be read."""
        rel = self._header_window(pos)
        if rel is None:
            return None
        base_offset, size, _ = read_prefix(self.buf, rel)
        return base_offset, size

    def batch_at(self, pos: int, size: int) -> tuple[bytes, int] | None:
        """(buffer, index in it) of the ``size`` bytes at ``pos``, or None when fewer could be read."""
        rel = pos - self.buf_start
        if rel + size <= len(self.buf):
            return self.buf, rel
        if size > self.chunk:
            whole = os.pread(self.fd, size, pos)
            return (whole, 0) if len(whole) == size else None
        self._fill(pos)
        return (self.buf, 0) if len(self.buf) >= size else None


class FileRegion:
    """``length`` bytes at ``position`` of a segment's .log file, sent to a socket with sendfile(2) rather
    than read into memory (see net/connection.py).

    It holds the segment, not its fd: the fd is duplicated only when the send starts (``dup``), and a
    segment closed or deleted in between raises there instead of handing out a number the OS may since
    have given to another file. Committed bytes of a segment never change, so the region reads the same
    whenever it is sent; the exception is a follower's log truncation (``PartitionLog.truncate_to``), which
    may cut a region before it is sent: the send then fails at the end of the file, or carries the batches
    appended there since.
    """

    __slots__ = ("segment", "position", "length", "last_batch_position")

    def __init__(self, segment: "LogSegment", position: int, length: int, last_batch_position: int) -> None:
        self.segment = segment
        self.position = position
        self.length = length
        self.last_batch_position = last_batch_position

    def __len__(self) -> int:
        return self.length

    def last_offset(self) -> int:
        """The last offset of the region's last batch (one header read)."""
        header = self.segment.header_at(self.last_batch_position)
        if header is None:
            raise OSError(f"{self.segment.log_path}: no batch header at {self.last_batch_position}")
        return header.last_offset

    def dup(self) -> int:
        """A new fd for the file (the caller closes it); OSError or ValueError if the segment is closed."""
        return os.dup(self.segment.fd)

    def read(self) -> bytes:
        """The region's bytes, for a socket sendfile(2) cannot serve (TLS encrypts in user space)."""
        data = os.pread(self.segment.fd, self.length, self.position)
        if len(data) != self.length:
            raise OSError(f"{self.segment.log_path}: ends before byte {self.position + self.length} of a region")
        return data


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def parse_segment_file_name(name: str) -> int | None:
    """Base offset of a ``NNNNNNNNNNNNNNNNNNNN.log`` file name, else None."""
    stem, dot, suffix = name.partition(".")
    if dot and "." + suffix == LOG_SUFFIX and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


class LogSegment:
    """One ``NNNNNNNNNNNNNNNNNNNN.log`` file (the number is its base offset, zero-padded to 20 digits) and the
    OffsetIndex and TimeIndex beside it.

    Byte layout of the .log file: record batches (magic 2, see ``records/batch.py``) concatenated with no
    gap, header or trailer, exactly as produced except that each batch's base_offset holds the absolute
    offset the log assigned. Offsets increase from batch to batch; the first batch's base offset is at least
    the segment's base offset, and every offset is less than base offset + 2**31 (index entries are int32).

    ``size`` is the committed length: it advances only after a write has completed, and reads never look
    past it (os.pread on the kept-open fd, no buffering), so a half-written batch is never served. Appends
    go through one os.write on an O_APPEND fd.

    The active (last) segment keeps three fds open; a sealed segment keeps only its .log fd and reads its
    indexes into memory on first lookup.

    Concurrency: not thread-safe; owned by one PartitionLog (event loop). Reads may run in a worker thread
    only while nothing appends to, truncates, or closes the segment.
    """

    def __init__(self, directory: Path, base_offset: int, fd: int, size: int, index_interval: int) -> None:
        self.base_offset = base_offset
        self.log_path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        self.offset_index = OffsetIndex(directory / segment_file_name(base_offset, INDEX_SUFFIX))
        self.time_index = TimeIndex(directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX))
        self.index_interval = index_interval
        self.size = size
        # One past the last offset in this segment; exact for the active segment, for a recovered one and
        # for a sealed one (set to the next segment's base offset by the loader).
        self.next_offset = base_offset
        self.max_timestamp = -1  # largest batch max_timestamp in the segment
        self.offset_of_max_timestamp = -1  # last offset of the first batch holding it
        self.rolling_base_ms: int | None = None  # when the segment started to fill (segment.ms)
        self._fd: int | None = fd
        self._bytes_since_index_entry = 0
        self._index_write_failed = False
        self.broken = False  # a failed write could not be undone: no further appends
        # bytes below this were last handed to the page cache drop-behind (PartitionLog._drop_cache_behind)
        self.cache_dropped_to = 0

    # -- lifecycle --------------------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, base_offset: int, index_interval: int) -> "LogSegment":
        """A new, empty segment (empty index files too)."""
        path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        fd = os.open(path, _OPEN_FLAGS | os.O_CREAT, 0o644)
        size = os.fstat(fd).st_size
        if size:
            os.close(fd)
            raise FileExistsError(f"{path} already holds {size} bytes")
        segment = cls(directory, base_offset, fd, 0, index_interval)
        try:
            segment.offset_index.reset()
            segment.time_index.reset()
        except BaseException:
            segment.close()
            raise
        return segment

    @classmethod
    def open(cls, directory: Path, base_offset: int, index_interval: int) -> "LogSegment":
        """An existing segment; the loader then checks or rebuilds its indexes."""
        path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        fd = os.open(path, _OPEN_FLAGS)
        return cls(directory, base_offset, fd, os.fstat(fd).st_size, index_interval)

    @property
    def fd(self) -> int:
        if self._fd is None:
            raise ValueError(f"{self.log_path} is closed")
        return self._fd

    @property
    def closed(self) -> bool:
        return self._fd is None

    def mtime_ms(self) -> int:
        return os.fstat(self.fd).st_mtime_ns // 1_000_000

    def largest_timestamp_ms(self) -> int:
        """What time-based retention compares against: the largest timestamp, or the file's mtime if none."""
        return self.max_timestamp if self.max_timestamp > 0 else self.mtime_ms()

    def seal(self, *, sync: bool = True) -> None:
        """Make the segment complete on disk before it stops being active (roll) or the log closes.

        Adds the final time-index entry (the segment's largest timestamp), writes pending entries, fsyncs the
        .log and both indexes, and releases the index fds. ``sync=False`` leaves the fsyncs to the caller
        (a roll hands them to the log flusher, by path).
        """
        if self._index_write_failed:
            self.rebuild_indexes()
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
        self.offset_index.write_pending()
        self.time_index.write_pending()
        if sync:
            os.fsync(self.fd)
            self.offset_index.flush()
            self.time_index.flush()
        self.offset_index.close()
        self.time_index.close()

    def close(self) -> None:
        try:
            try:
                self.offset_index.close()
            finally:
                self.time_index.close()
        finally:
            if self._fd is not None:
                fd, self._fd = self._fd, None
                os.close(fd)

    def delete(self) -> None:
        """Close and remove the three files."""
        self.close_unwritten()
        self.remove_files()

    def close_unwritten(self) -> None:
        """Close without writing pending index entries: the segment is about to be removed."""
        self.offset_index.drop_pending()
        self.time_index.drop_pending()
        self.close()

    def remove_files(self) -> None:
        """Remove the three files of a closed segment (.log first: a leftover index without its log is swept
        at load). Touches no open state, so it may run on another thread."""
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    def truncate(self, size: int) -> None:
        """Cut the .log at ``size`` (recovery of a torn tail); the caller rebuilds the indexes."""
        os.ftruncate(self.fd, size)
        os.fsync(self.fd)
        self.size = size

    def truncate_batches(self, size: int) -> None:
        """Log truncation: cut the .log at ``size`` (a batch boundary; everything after it goes, a partial
        write included), then rebuild both indexes from the batches left. The segment can be appended to
        afterwards, as the active one."""
        self.truncate(size)
        self.broken = False
        self._rebuild_indexes()

    # -- appending --------------------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]], now_ms: int) -> None:
        """Write ``data`` (whole batches, offsets already assigned) at the end, then index it.

        ``batches`` holds (position in ``data``, header with the assigned base offset). If the write fails,
        the file is cut back so no partial batch stays behind, and the error propagates; nothing was
        committed. Index entries go to memory and then to each index file in one write; a failure there does
        not undo the append (the indexes are rebuilt when the segment is sealed or recovered).
        """
        start = self.size
        try:
            write_all(self.fd, data)
        except BaseException:
            try:
                os.ftruncate(self.fd, start)
            except OSError:
                log.exception("could not cut %s back to %d bytes after a failed write", self.log_path, start)
                self.broken = True
                raise CorruptSegmentError(f"{self.log_path} has a partial batch after a failed write") from None
            raise
        # The batches are committed from here on: nothing below may raise, or the caller would not advance
        # its end offset past bytes that are already in the file.
        self.size = start + len(data)
        if self.rolling_base_ms is None:
            self.rolling_base_ms = now_ms
        try:
            for pos, header in batches:
                self.observe(start + pos, header)
            self.offset_index.write_pending()
            self.time_index.write_pending()
        except Exception:
            log.exception("indexing failed for %s; the indexes will be rebuilt", self.log_path)
            self._index_write_failed = True

    def observe(self, pos: int, header: BatchHeader) -> None:
        """Account for one batch at ``pos`` (appended or met during recovery): indexes and running maxima."""
        last_offset = header.last_offset
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self._bytes_since_index_entry >= self.index_interval:
            if self.offset_index.append(last_offset - self.base_offset, pos):
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += header.size
        self.next_offset = last_offset + 1

    def note_tail_batch(self, header: BatchHeader, bytes_since_index_entry: int) -> None:
        """Account for a batch after the last index entry of a cleanly closed segment (no new entry)."""
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        self.next_offset = header.last_offset + 1
        self._bytes_since_index_entry = bytes_since_index_entry

    def begin_rebuild(self) -> None:
        self.offset_index.reset()
        self.time_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self._bytes_since_index_entry = 0
        self._index_write_failed = False

    def end_rebuild(self) -> None:
        """Write the rebuilt indexes (sealing entry included) and sync them."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
        self.offset_index.write_pending()
        self.time_index.write_pending()
        self.offset_index.flush()
        self.time_index.flush()
        self.offset_index.close()
        self.time_index.close()

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes by stepping over the batch headers (no CRC check, no truncation)."""
        log.warning("rebuilding the indexes of %s", self.log_path)
        self._rebuild_indexes()

    def _rebuild_indexes(self) -> None:
        self.begin_rebuild()
        for pos, header in self.walk(0):
            self.observe(pos, header)
        self.end_rebuild()

    def init_rolling_base(self, now_ms: int) -> None:
        """When a non-empty segment that this process did not fill started to (for segment.ms): the file's
        mtime, or its first batch's max timestamp when that is earlier."""
        if self.size == 0:
            return
        base = min(self.mtime_ms(), now_ms)
        first = self.header_at(0)
        if first is not None and 0 <= first.max_timestamp < base:
            base = first.max_timestamp
        self.rolling_base_ms = base

    # -- index checks at load ---------------------------------------------------------------------------

    def indexes_look_sane(self, next_base_offset: int | None) -> bool:
        """O(1) check of both index files against the log (Kafka's sanity check, plus a header read).

        ``next_base_offset`` is the following segment's base offset (None for the last segment).
        """
        if not self.offset_index.probe() or not self.time_index.probe():
            return self.size == 0 and self._recreate_empty_indexes()
        limit = None if next_base_offset is None else next_base_offset - self.base_offset
        last = self.offset_index.last_entry
        if last is not None:
            rel, pos = last
            if rel < 0 or pos < 0 or pos + HEADER_SIZE > self.size or (limit is not None and rel >= limit):
                return False
            header = self.header_at(pos)
            if header is None or header.magic != 2 or header.last_offset != self.base_offset + rel:
                return False
        last_time = self.time_index.last_entry
        if last_time is not None:
            rel = last_time[1]
            if rel < 0 or (limit is not None and rel >= limit):
                return False
        return True

    def _recreate_empty_indexes(self) -> bool:
        self.offset_index.reset()
        self.time_index.reset()
        self.offset_index.close()
        self.time_index.close()
        return True

    def adopt_sealed_state(self, next_base_offset: int) -> None:
        """State of a sealed segment whose indexes passed the check: maxima from the last time-index entry."""
        self.next_offset = next_base_offset
        last_time = self.time_index.last_entry
        if last_time is not None:
            self.max_timestamp = last_time[0]
            self.offset_of_max_timestamp = self.base_offset + last_time[1]

    # -- reading ----------------------------------------------------------------------------------------

    def read(self, pos: int, size: int) -> bytes:
        return os.pread(self.fd, size, pos)

    def header_at(self, pos: int) -> BatchHeader | None:
        raw = os.pread(self.fd, HEADER_SIZE, pos)
        return read_header(raw) if len(raw) == HEADER_SIZE else None

    def walk(self, pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from ``pos`` to the committed end, reading headers in chunks."""
        end = self.size
        reader = ChunkedBatchReader(self.fd, end, _WALK_CHUNK)
        while pos + HEADER_SIZE <= end:
            header = reader.header_at(pos)
            if header is None:
                raise CorruptSegmentError(f"{self.log_path}: short read at byte {pos}")
            size = header.size
            if header.magic != 2 or size < HEADER_SIZE or pos + size > end:
                raise CorruptSegmentError(f"{self.log_path}: no valid batch at byte {pos}")
            yield pos, header
            pos += size

    def _scan_start(self, offset: int) -> int:
        try:
            return self.offset_index.floor_position(offset - self.base_offset)
        except IndexCorruptError:
            self.rebuild_indexes()
            return self.offset_index.floor_position(offset - self.base_offset)

    def find(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= ``offset`` (the one containing it, or the next one)."""
        for pos, header in self.walk(self._scan_start(offset)):
            if header.last_offset >= offset:
                return pos, header
        return None

    def find_by_timestamp(self, timestamp: int, from_offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch with last offset >= ``from_offset`` whose max_timestamp >= ``timestamp``."""
        try:
            below = self.time_index.last_below(timestamp)
        except IndexCorruptError:
            self.rebuild_indexes()
            below = self.time_index.last_below(timestamp)
        if below is not None:
            # every batch up to the one ending at that offset is below the target
            from_offset = max(from_offset, self.base_offset + below[1] + 1)
        for pos, header in self.walk(self._scan_start(from_offset)):
            if header.last_offset >= from_offset and header.max_timestamp >= timestamp:
                return pos, header
        return None

    def read_batches(
        self, pos: int, max_bytes: int, force_first: bool, max_offset: int | None, as_region: bool = False
    ) -> tuple["bytes | FileRegion", bool]:
        """Whole batches from ``pos`` (a batch boundary) totalling at most ``max_bytes``.

        With ``force_first``, a first batch larger than ``max_bytes`` is returned whole anyway. Batches whose
        base offset is >= ``max_offset`` are not returned. Returns (data, reached the end of the segment
        without stopping for a limit). The data is bytes, or with ``as_region`` a FileRegion naming the same
        span of the file: then only batch prefixes are read, 16 KiB at a time, and the payload stays in the
        page cache until it is sent.
        """
        available = self.size - pos
        want = max(0, min(max_bytes, available))
        # For bytes, one pread of the whole span that the walk then cuts; for a region, only what the walk needs.
        reader = ChunkedBatchReader(self.fd, pos + want, _WALK_CHUNK if as_region else max(want, 1))
        cut = last = 0
        stopped = False
        while cut + HEADER_SIZE <= want:
            prefix = reader.prefix_at(pos + cut)
            if prefix is None:
                break
            base_offset, size = prefix
            if max_offset is not None and base_offset >= max_offset:
                stopped = True
                break
            if cut + size > want:
                break
            last = cut
            cut += size
        if cut == 0 and not stopped and force_first and available >= HEADER_SIZE:
            header = self.header_at(pos)
            if header is not None and (max_offset is None or header.base_offset < max_offset):
                cut = header.size
                data = FileRegion(self, pos, cut, pos) if as_region else self.read(pos, cut)
                return data, pos + cut == self.size
            stopped = True
        if as_region:
            data = FileRegion(self, pos, cut, pos + last)
        elif reader.buf_start == pos and len(reader.buf) >= cut:
            data = reader.buf if cut == len(reader.buf) else reader.buf[:cut]
        else:
            data = self.read(pos, cut)
        return data, not stopped and pos + cut == self.size
