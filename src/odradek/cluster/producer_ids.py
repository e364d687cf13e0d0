"""Producer id allocation: ids that are never handed out twice, across restarts and crashes.

Ids are reserved on disk in blocks of ``BLOCK_SIZE`` before any of them is given out; the file holds the end
of the reserved range, so after a restart allocation continues at that end. A crash therefore skips at most
the unused rest of one block and never repeats an id. A cluster member allocates from blocks reserved in
ZooKeeper instead (``ZkProducerIdManager``), unique across the brokers.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from crc32c import crc32c

from odradek.cluster import zk_layout as L
from odradek.storage.files import write_file_atomically

if TYPE_CHECKING:  # kazoo: loaded only by a cluster member, never by a single node
    from odradek.cluster.zk import ZkClient

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


class ZkMember(Protocol):
    """What the ZooKeeper allocator needs of the cluster member (cluster/member.py)."""

    broker_id: int
    zk: "ZkClient | None"


class ZkProducerIdManager:
    """Producer ids from blocks reserved in `/latest_producer_id_block`, unique across the cluster: a block is
    claimed by a conditional write of the next range (Kafka's ZooKeeper-era ProducerIdManager); a failed
    write means another broker took that range, so the next is tried."""

    def __init__(self, member: "ZkMember") -> None:
        self.member = member
        self._next = 0
        self._end = -1  # inclusive end of the current block
        self._claiming: asyncio.Future | None = None

    async def allocate(self) -> int:
        while self._next > self._end:
            if self._claiming is None:
                self._claiming = asyncio.ensure_future(self._claim())
            claiming = self._claiming
            try:
                await asyncio.shield(claiming)
            except Exception as exc:
                raise OSError(f"cannot reserve producer ids: {exc}") from exc
            finally:
                if self._claiming is claiming and claiming.done():
                    self._claiming = None
        pid = self._next
        self._next += 1
        return pid

    async def _claim(self) -> None:
        from odradek.cluster.zk import BadVersionError, NodeExistsError

        zk = self.member.zk
        for _ in range(100):
            found = await zk.get_or_none(L.PRODUCER_ID_BLOCK)
            start = L.decode_producer_id_block(found[0]).end + 1 if found else 0
            block = L.ProducerIdBlock(self.member.broker_id, start, start + BLOCK_SIZE - 1)
            try:
                if found is None:
                    await zk.create(L.PRODUCER_ID_BLOCK, L.encode_producer_id_block(block))
                else:
                    await zk.set(L.PRODUCER_ID_BLOCK, L.encode_producer_id_block(block), found[1].version)
            except (NodeExistsError, BadVersionError):
                continue
            self._next, self._end = block.start, block.end
            log.info("broker %d reserved producer ids %d-%d", self.member.broker_id, block.start, block.end)
            return
        raise OSError("could not claim a producer id block")
