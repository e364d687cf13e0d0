"""One transactional id's state, and its record format in `__transaction_state`.

States (Kafka's names, which DescribeTransactions and ListTransactions report)::

    Empty ──AddPartitions/AddOffsets──► Ongoing ──EndTxn──► PrepareCommit ──markers──► CompleteCommit
      ▲                                    │                PrepareAbort  ──markers──► CompleteAbort
      └──────── InitProducerId ◄───────────┴──timeout / InitProducerId (epoch bump)──┘      │
                                                                      (Complete* ──AddPartitions──► Ongoing)

Record format (our own; only this broker reads it). Key and value are big-endian; strings are an int16
length plus UTF-8; a null value (tombstone) forgets the id::

    key:    version int16 (0), transactional_id string
    value:  version int16 (1; 0 is still read), producer_id int64, last_producer_id int64, producer_epoch int16,
            last_producer_epoch int16, timeout_ms int32, state int8, start_timestamp int64,
            last_update_timestamp int64,
            partitions: int32 n, n x [topic string, partition int32]
            pending offsets: int32 n, n x [group string, topic string, partition int32, offset int64,
                                           leader_epoch int32, metadata string, commit_timestamp int64],
            next_producer_id int64 (version 1; -1: none)

`next_producer_id` is the producer id a transaction ending with an epoch bump (transactions v2) hands on when
the epoch would overflow: its markers carry the old id at the last epoch, and Complete* takes the new id at
epoch 0.

The pending offsets section is written empty: transactional offsets live in `__consumer_offsets` as
transactional records of the producer (the group coordinator's, coordinator/service.py). Records of earlier
versions of odradek, which kept them here, are read and the section is skipped.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field


KEY_VERSION = 0
VALUE_VERSION = 1

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead", TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATE_BY_NAME = {name: state for state, name in _NAMES.items()}

@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    start_timestamp: int = -1
    last_update_timestamp: int = -1
    partitions: set[tuple[str, int]] = field(default_factory=set)
    next_producer_id: int = NO_PRODUCER_ID

    def copy(self) -> "TxnMetadata":
        return TxnMetadata(self.transactional_id, self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
                           self.last_producer_id, self.last_producer_epoch, self.start_timestamp,
                           self.last_update_timestamp, set(self.partitions), self.next_producer_id)

    @property
    def continued_as(self) -> tuple[int, int]:
        """The producer id and epoch the producer goes on with once the transaction being ended is complete."""
        if self.preparing and self.next_producer_id != NO_PRODUCER_ID:
            return self.next_producer_id, 0
        return self.producer_id, self.producer_epoch

    @property
    def preparing(self) -> bool:
        return self.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


# ------------------------------------------------------------------------------------------- codec

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_VALUE_HEAD = struct.Struct(">hqqhhibqq")
_OFFSET = struct.Struct(">iqi")


def _put_str(out: bytearray, s: str) -> None:
    raw = s.encode()
    out += _H.pack(len(raw))
    out += raw


def _get_str(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = _H.unpack_from(buf, pos)
    pos += 2
    if n < 0 or pos + n > len(buf):
        raise ValueError("bad string length")
    return buf[pos:pos + n].decode(), pos + n


def encode_key(transactional_id: str) -> bytes:
    out = bytearray(_H.pack(KEY_VERSION))
    _put_str(out, transactional_id)
    return bytes(out)


def decode_key(raw: bytes) -> str | None:
    (version,) = _H.unpack_from(raw, 0)
    if version != KEY_VERSION:
        return None
    return _get_str(raw, 2)[0]


def encode_value(m: TxnMetadata) -> bytes:
    out = bytearray(_VALUE_HEAD.pack(VALUE_VERSION, m.producer_id, m.last_producer_id, m.producer_epoch,
                                     m.last_producer_epoch, m.timeout_ms, int(m.state), m.start_timestamp,
                                     m.last_update_timestamp))
    out += _I.pack(len(m.partitions))
    for topic, partition in sorted(m.partitions):
        _put_str(out, topic)
        out += _I.pack(partition)
    out += _I.pack(0)  # no pending offsets (see the module docstring)
    out += _Q.pack(m.next_producer_id)
    return bytes(out)


def decode_value(transactional_id: str, raw: bytes) -> TxnMetadata:
    """Raises ValueError (or struct.error) for anything malformed."""
    (version, pid, last_pid, epoch, last_epoch, timeout, state, start, updated) = _VALUE_HEAD.unpack_from(raw, 0)
    if version not in (0, VALUE_VERSION):
        raise ValueError(f"unknown transaction record version {version}")
    m = TxnMetadata(transactional_id, pid, epoch, timeout, TxnState(state), last_pid, last_epoch, start, updated)
    pos = _VALUE_HEAD.size
    (n,) = _I.unpack_from(raw, pos)
    pos += 4
    for _ in range(n):
        topic, pos = _get_str(raw, pos)
        (partition,) = _I.unpack_from(raw, pos)
        pos += 4
        m.partitions.add((topic, partition))
    (n,) = _I.unpack_from(raw, pos)
    pos += 4
    for _ in range(n):  # pending offsets of an earlier version: skipped
        _, pos = _get_str(raw, pos)
        _, pos = _get_str(raw, pos)
        pos += _OFFSET.size
        _, pos = _get_str(raw, pos)
        pos += 8
    if version >= 1:
        (m.next_producer_id,) = _Q.unpack_from(raw, pos)
        pos += 8
    if pos != len(raw):
        raise ValueError("trailing bytes after a transaction record")
    return m
