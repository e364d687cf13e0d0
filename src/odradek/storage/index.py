"""The two sparse indexes of a segment: offset -> file position, and timestamp -> offset.

Both files are written by the classes below; neither carries a header or a checksum, because either can
always be rebuilt from the segment's .log file (recovery does so whenever one is missing or looks wrong).

Unlike Kafka, which preallocates index files (``segment.index.bytes``), memory-maps them and trims them on
roll, these files are append-only and exactly as long as their entries: there is no trailing zero region to
trim or to mistake for entries after a crash, and a torn last entry shows up as a length that is not a
multiple of the entry size. Entries are kept in memory in two ``array``s for ``bisect``; an index that was
not written by this process is read into memory only on its first lookup, so closed segments nobody reads
cost no memory.

Concurrency: not thread-safe; owned by the LogSegment that owns the file (event loop).
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

_OPEN_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
_OPEN_TRUNCATE = _OPEN_APPEND | os.O_TRUNC


class IndexCorruptError(Exception):
    """An index file that does not hold well-ordered whole entries; the owner rebuilds it from the log."""


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """os.write until every byte is written (a regular file may accept fewer bytes than asked)."""
    view = memoryview(data)
    written = 0
    total = len(view)
    while written < total:
        written += os.write(fd, view[written:])


class _SparseIndex:
    """Shared machinery: an in-memory copy of (key, value) entries plus an append-only file."""

    _ENTRY: struct.Struct
    _KEY_TYPE: str
    _VALUE_TYPE: str

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None  # append fd; opened on the first write, closed when the segment is sealed
        self._pending = bytearray()  # entries appended in memory but not yet written
        self._keys: array | None = None  # None until loaded (lazily)
        self._values: array | None = None
        self._last: tuple[int, int] | None = None

    # -- state ------------------------------------------------------------------------------------------

    @property
    def last_entry(self) -> tuple[int, int] | None:
        return self._last

    def __len__(self) -> int:
        self._ensure_loaded()
        assert self._keys is not None
        return len(self._keys)

    def entries(self) -> list[tuple[int, int]]:
        self._ensure_loaded()
        assert self._keys is not None and self._values is not None
        return list(zip(self._keys, self._values))

    def probe(self) -> bool:
        """Cheap check when a segment is opened: the file exists and holds whole entries.

        Remembers the last entry (one small read) and leaves the rest to be loaded on first use. Returns
        False when the file is missing or torn; the caller then rebuilds.
        """
        entry_size = self._ENTRY.size
        try:
            with open(self.path, "rb", buffering=0) as f:
                size = os.fstat(f.fileno()).st_size
                if size % entry_size:
                    return False
                if size:
                    raw = os.pread(f.fileno(), entry_size, size - entry_size)
                    if len(raw) != entry_size:
                        return False
                    self._last = self._ENTRY.unpack(raw)
                else:
                    self._last = None
        except FileNotFoundError:
            return False
        self._keys = self._values = None
        return True

    def reset(self) -> None:
        """Forget every entry and truncate the file (a new segment, or a rebuild)."""
        self._pending.clear()
        self.close()
        self._fd = os.open(self.path, _OPEN_TRUNCATE, 0o644)
        self._pending.clear()
        self._keys = array(self._KEY_TYPE)
        self._values = array(self._VALUE_TYPE)
        self._last = None

    def _ensure_loaded(self) -> None:
        if self._keys is None:
            self._load()

    def _load(self) -> None:
        self.write_pending()
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            raw = b""
        if len(raw) % self._ENTRY.size:
            raise IndexCorruptError(f"{self.path}: {len(raw)} bytes is not a whole number of entries")
        keys = array(self._KEY_TYPE)
        values = array(self._VALUE_TYPE)
        for key, value in self._ENTRY.iter_unpack(raw):
            keys.append(key)
            values.append(value)
        self._check_order(keys, values)
        self._keys, self._values = keys, values
        self._last = (keys[-1], values[-1]) if keys else None

    def _check_order(self, keys: array, values: array) -> None:
        raise NotImplementedError

    # -- writing ----------------------------------------------------------------------------------------

    def _add(self, key: int, value: int) -> None:
        self._last = (key, value)
        self._pending += self._ENTRY.pack(key, value)
        if self._keys is not None:
            assert self._values is not None
            self._keys.append(key)
            self._values.append(value)

    def write_pending(self) -> None:
        """Write the entries appended since the last call, in one write."""
        if not self._pending:
            return
        if self._fd is None:
            self._fd = os.open(self.path, _OPEN_APPEND, 0o644)
        data = bytes(self._pending)
        self._pending.clear()
        write_all(self._fd, data)

    def flush(self) -> None:
        """fsync the file if this process has written to it."""
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Write what is pending and release the file descriptor (entries stay in memory)."""
        try:
            self.write_pending()
        finally:
            if self._fd is not None:
                fd, self._fd = self._fd, None
                os.close(fd)

    def drop_pending(self) -> None:
        self._pending.clear()


class OffsetIndex(_SparseIndex):
    """Sparse map from offset to the byte position of the batch holding it, in ``NNNNNNNNNNNNNNNNNNNN.index``.

    Byte layout (big-endian), 8 bytes per entry, entries strictly increasing in both fields::

        offset  size  field
         0      4     relative_offset  last offset of the indexed batch minus the segment's base offset
         4      4     position         byte position of that batch in the segment's .log file

    As in Kafka, an entry names a batch by its *last* offset: the batch containing offset ``o`` is at or
    after the position of the greatest entry whose relative offset is <= ``o - base``. One entry is added
    for a batch when at least ``index_interval_bytes`` of log precede it since the previous entry.

    Concurrency: not thread-safe; owned by its LogSegment (event loop).
    """

    _ENTRY = struct.Struct(">ii")
    _KEY_TYPE = "i"
    _VALUE_TYPE = "i"

    def append(self, relative_offset: int, position: int) -> bool:
        last = self._last
        if last is not None and (relative_offset <= last[0] or position <= last[1]):
            return False  # never out of order; a stale caller is ignored rather than corrupting the file
        self._add(relative_offset, position)
        return True

    def floor_position(self, relative_offset: int) -> int:
        """Byte position to start scanning from for ``relative_offset`` (0 when no entry is at or below it)."""
        self._ensure_loaded()
        assert self._keys is not None and self._values is not None
        i = bisect_right(self._keys, relative_offset) - 1
        return self._values[i] if i >= 0 else 0

    def _check_order(self, keys: array, values: array) -> None:
        for i in range(1, len(keys)):
            if keys[i] <= keys[i - 1] or values[i] <= values[i - 1]:
                raise IndexCorruptError(f"{self.path}: entry {i} is out of order")
        if keys and (keys[0] < 0 or values[0] < 0):
            raise IndexCorruptError(f"{self.path}: negative first entry")


class TimeIndex(_SparseIndex):
    """Sparse map from timestamp to offset, in ``NNNNNNNNNNNNNNNNNNNN.timeindex``.

    Byte layout (big-endian), 12 bytes per entry; timestamps strictly increase, offsets never decrease::

        offset  size  field
         0      8     timestamp        the largest batch max_timestamp in the segment up to this point
         8      4     relative_offset  last offset of the first batch that reached that timestamp, minus the
                                       segment's base offset

    An entry is added alongside each offset-index entry when the running maximum has grown, and once more
    when the segment is sealed (rolled or closed), so the last entry always holds the segment's largest
    timestamp and the offset of its batch. Hence: every batch up to and including the one named by an entry
    has a max_timestamp <= the entry's timestamp.

    Concurrency: not thread-safe; owned by its LogSegment (event loop).
    """

    _ENTRY = struct.Struct(">qi")
    _KEY_TYPE = "q"
    _VALUE_TYPE = "i"

    def maybe_append(self, timestamp: int, relative_offset: int) -> bool:
        last = self._last
        if last is None:
            if timestamp < 0:
                return False
        elif timestamp <= last[0] or relative_offset < last[1]:
            return False
        self._add(timestamp, relative_offset)
        return True

    def last_below(self, timestamp: int) -> tuple[int, int] | None:
        """The greatest entry whose timestamp is strictly below ``timestamp``: (timestamp, relative offset)."""
        self._ensure_loaded()
        assert self._keys is not None and self._values is not None
        i = bisect_left(self._keys, timestamp) - 1
        return (self._keys[i], self._values[i]) if i >= 0 else None

    def _check_order(self, keys: array, values: array) -> None:
        for i in range(1, len(keys)):
            if keys[i] <= keys[i - 1] or values[i] < values[i - 1]:
                raise IndexCorruptError(f"{self.path}: entry {i} is out of order")
        if values and values[0] < 0:
            raise IndexCorruptError(f"{self.path}: negative first entry")
