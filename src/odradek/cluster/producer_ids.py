"""Producer id allocation: ids that are never handed out twice, across restarts and crashes.

Ids are reserved on disk in blocks of ``BLOCK_SIZE`` before any of them is given out; the file holds the end
of the reserved range, so after a restart allocation continues at that end. A crash therefore skips at most
the unused rest of one block and never repeats an id.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

from crc32c import crc32c

from odradek.storage.files import write_file_atomically

log = logging.getLogger(__name__)

BLOCK_SIZE = 1000
METADATA_DIR = "__cluster_metadata"
INT64_MAX = (1 << 63) - 1


class ProducerIdFileError(Exception):
    """The reservation file exists but cannot be trusted; starting would risk reusing ids."""


class ProducerIdManager:
    """Hands out producer ids from blocks reserved in ``{data_dir}/__cluster_metadata/producer-id-block``.

    Byte layout of the file (big-endian, 14 bytes)::

        offset  size  field
         0      2     version         0
         2      4     crc             CRC-32C of bytes [6, 14)
         6      8     reserved_end    every id below this may have been handed out

    Reserving a block writes ``reserved_end + BLOCK_SIZE`` atomically (``.tmp``, fsync, rename, directory
    fsync) before the first id of the block is returned. An unreadable file raises ``ProducerIdFileError``
    at start-up rather than risk handing out an id twice.

    Concurrency: not thread-safe; owned by the event loop. A reservation (one small fsynced write every
    ``BLOCK_SIZE`` ids) runs inline.
    """

    FILE_NAME = "producer-id-block"
    VERSION = 0
    _LAYOUT = struct.Struct(">hIq")

    def __init__(self, data_dir: Path, block_size: int = BLOCK_SIZE) -> None:
        self.path = Path(data_dir) / METADATA_DIR / self.FILE_NAME
        self.block_size = block_size
        reserved = self._read()
        self._next = reserved  # nothing of the current block is reserved yet
        self._block_end = reserved

    def _read(self) -> int:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return 0
        if len(data) != self._LAYOUT.size:
            raise ProducerIdFileError(f"{self.path}: {len(data)} bytes, expected {self._LAYOUT.size}")
        version, crc, reserved_end = self._LAYOUT.unpack(data)
        if version != self.VERSION or crc32c(data[6:]) != crc or reserved_end < 0:
            raise ProducerIdFileError(f"{self.path}: bad version, checksum or value")
        return reserved_end

    def _reserve(self) -> None:
        end = self._block_end + self.block_size
        if end > INT64_MAX:
            raise ProducerIdFileError("producer ids exhausted")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = struct.pack(">q", end)
        write_file_atomically(self.path, struct.pack(">hI", self.VERSION, crc32c(body)) + body)
        self._block_end = end
        log.debug("reserved producer ids up to %d", end)

    async def allocate(self) -> int:
        """A producer id never returned before (by this or any earlier broker run on this data dir)."""
        if self._next >= self._block_end:
            self._reserve()
        pid = self._next
        self._next += 1
        return pid

    @property
    def reserved_end(self) -> int:
        return self._block_end
