"""Group and offset records in the internal topic `__consumer_offsets`.

The record layouts follow Kafka's own `__consumer_offsets` format (big-endian, non-flexible: strings are
int16 length + UTF-8, nullable strings use length -1, bytes are int32 length + data, arrays int32 count),
so that tools which understand Kafka's topic can read ours:

Keys (the first int16 is the key version, which also says what the record is)::

    OffsetCommitKey   version int16 = 1 (0 is read too), group string, topic string, partition int32
    GroupMetadataKey  version int16 = 2, group string
    ConsumerGroupKey  version int16 = 1000, group string     (odradek's own: Kafka's tools skip it)
    ShareStateKey     version int16 = 1001, group string, topic_id 16 bytes, partition int32
                      (odradek's own; in `__share_group_state`, share_state.py)
    GroupConfigKey    version int16 = 1002, group string     (odradek's own)
    PlacementKey      version int16 = 1003, nothing else      (odradek's own; placement.py)
    StreamsGroupKey   version int16 = 1004, group string     (odradek's own; its value: streams_persistence.py)

Values (a null value is a tombstone: the key was deleted)::

    OffsetCommitValue v1  version int16 = 1, offset int64, metadata string, commit_timestamp int64,
                          expire_timestamp int64            (written when the commit had a retention time)
    OffsetCommitValue v3  version int16 = 3, offset int64, leader_epoch int32, metadata string,
                          commit_timestamp int64            (written otherwise; v0 and v2 are read too)
    GroupMetadataValue v3 version int16 = 3, protocol_type string, generation int32,
                          protocol nullable string, leader nullable string, current_state_timestamp int64,
                          members [member_id string, group_instance_id nullable string, client_id string,
                                   client_host string, rebalance_timeout int32, session_timeout int32,
                                   subscription bytes, assignment bytes]

    ConsumerGroupValue v0 (the whole state of a KIP-848 group, consumer_group.py; written when it changes)
                          version int16 = 0, group_epoch int32, assignment_epoch int32, state_timestamp int64,
                          topics [name string, known int8, topic_id 16 bytes, partitions int32],
                          members [member_id string, instance_id nullable string, rack_id nullable string,
                                   client_id string, client_host string, rebalance_timeout int32,
                                   subscribed_names [string], regex nullable string, assignor nullable string,
                                   member_epoch int32, previous_member_epoch int32, state int8,
                                   assigned P, pending_revocation P, target P]
                          where P = [topic_id 16 bytes, partition int32]

    ShareStateValue v0    (in `__share_group_state`: one share group's delivery state of one partition,
                          share_partition.py; written when it changed: on acknowledgements, releases,
                          expired locks and a new window)
                          version int16 = 0, start_offset int64, end_offset int64,
                          runs [first_offset int64, last_offset int64, state int8, delivery_count int16]
    ShareStateValue v1    (written since the share coordinator, share_coordinator.py) version int16 = 1,
                          state_epoch int32, leader_epoch int32, then as v0
    GroupConfigValue v0   version int16 = 0, configs [name string, value string]   (a group's dynamic configs)

A group's records go to partition `Utils.abs(group.hashCode()) % partitions`, as in Kafka (placement.py, which
also says how records stored by older odradek versions under another partition are found and moved).

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, NamedTuple

from odradek.cluster.partition import NotLeaderError, durable_and_committed
from odradek.coordinator.consumer_group import ConsumerGroup, ConsumerMember, MemberState
from odradek.coordinator.placement import (
    PLACEMENT_KEY,
    PLACEMENT_VALUE,
    legacy_partition_for,
    may_have_moved,
    partition_for,
)
from odradek.records.batch import validate_v2
from odradek.records.codec import build_batch, decode_batch, parse_control_key
from odradek.storage.flusher import completed_future

if TYPE_CHECKING:
    from odradek.cluster.partition import Partition
    from odradek.storage import PartitionLog

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
CONSUMER_GROUP_KEY_VERSION = 1000
SHARE_STATE_KEY_VERSION = 1001
GROUP_CONFIG_KEY_VERSION = 1002
STREAMS_GROUP_KEY_VERSION = 1004  # odradek's own: the state of a streams group (streams_persistence.py)
MAX_RECORDS_PER_BATCH = 500

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


# ------------------------------------------------------------------------------------------- primitives


class _Writer:
    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def i16(self, v: int) -> "_Writer":
        self.buf += _I16.pack(v)
        return self

    def i8(self, v: int) -> "_Writer":
        self.buf.append(v & 0xFF)
        return self

    def raw(self, v: bytes) -> "_Writer":
        self.buf += v
        return self

    def i32(self, v: int) -> "_Writer":
        self.buf += _I32.pack(v)
        return self

    def i64(self, v: int) -> "_Writer":
        self.buf += _I64.pack(v)
        return self

    def string(self, v: str | None) -> "_Writer":
        if v is None:
            return self.i16(-1)
        raw = v.encode()
        self.i16(len(raw))
        self.buf += raw
        return self

    def bytes_(self, v: bytes | None) -> "_Writer":
        if v is None:
            return self.i32(-1)
        self.i32(len(v))
        self.buf += v
        return self


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, s: struct.Struct) -> int:
        (v,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return v

    def i8(self) -> int:
        v = self.buf[self.pos]
        self.pos += 1
        return v - 256 if v >= 128 else v

    def raw(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            raise ValueError("record ends early")
        v = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return v

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        v = bytes(self.buf[self.pos:self.pos + n]).decode()
        self.pos += n
        return v

    def bytes_(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        v = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return v


# ------------------------------------------------------------------------------------------- records


@dataclass
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # -1: expires by the broker's retention once the group is empty


@dataclass
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberValue] = field(default_factory=list)


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return bytes(_Writer().i16(OFFSET_KEY_VERSION).string(group).string(topic).i32(partition).buf)


def group_key(group: str) -> bytes:
    return bytes(_Writer().i16(GROUP_KEY_VERSION).string(group).buf)


def encode_offset_value(v: OffsetValue) -> bytes:
    w = _Writer()
    if v.expire_timestamp >= 0:
        w.i16(1).i64(v.offset).string(v.metadata).i64(v.commit_timestamp).i64(v.expire_timestamp)
    else:
        w.i16(3).i64(v.offset).i32(v.leader_epoch).string(v.metadata).i64(v.commit_timestamp)
    return bytes(w.buf)


def decode_offset_value(raw: bytes) -> OffsetValue:
    r = _Reader(raw)
    version = r.i16()
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    return OffsetValue(offset, epoch, metadata, commit_ts, expire_ts)


def encode_group_value(v: GroupValue) -> bytes:
    w = _Writer().i16(3).string(v.protocol_type).i32(v.generation).string(v.protocol).string(v.leader)
    w.i64(v.current_state_timestamp).i32(len(v.members))
    for m in v.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.buf)


def decode_group_value(raw: bytes) -> GroupValue:
    r = _Reader(raw)
    version = r.i16()
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.string() or ""
        instance = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance = r.i32() if version >= 1 else -1
        session = r.i32()
        subscription = r.bytes_() or b""
        assignment = r.bytes_() or b""
        members.append(MemberValue(member_id, instance, client_id, client_host,
                                   rebalance if rebalance >= 0 else session, session, subscription, assignment))
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, members)


def consumer_group_key(group: str) -> bytes:
    return bytes(_Writer().i16(CONSUMER_GROUP_KEY_VERSION).string(group).buf)


def streams_group_key(group: str) -> bytes:
    return bytes(_Writer().i16(STREAMS_GROUP_KEY_VERSION).string(group).buf)


_MEMBER_STATES = list(MemberState)


def _write_partitions(w: _Writer, partitions: set[tuple[bytes, int]]) -> None:
    w.i32(len(partitions))
    for topic_id, p in sorted(partitions):
        w.raw(topic_id).i32(p)


def _read_partitions(r: "_Reader") -> set[tuple[bytes, int]]:
    return {(r.raw(16), r.i32()) for _ in range(r.i32())}


def encode_consumer_group_value(g: ConsumerGroup) -> bytes:
    w = _Writer().i16(0).i32(g.group_epoch).i32(g.assignment_epoch).i64(g.state_timestamp_ms)
    w.i32(len(g.subscription_metadata))
    for name, info in sorted(g.subscription_metadata.items()):
        w.string(name).i8(info is not None).raw(info[0] if info else bytes(16)).i32(info[1] if info else 0)
    w.i32(len(g.members))
    for m in g.members.values():
        w.string(m.member_id).string(m.instance_id).string(m.rack_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(len(m.subscribed_names))
        for name in m.subscribed_names:
            w.string(name)
        w.string(m.subscribed_regex).string(m.server_assignor)
        w.i32(m.member_epoch).i32(m.previous_member_epoch).i8(_MEMBER_STATES.index(m.state))
        for partitions in (m.assigned, m.pending_revocation, g.target.get(m.member_id, set())):
            _write_partitions(w, partitions)
    return bytes(w.buf)


def decode_consumer_group_value(group_id: str, raw: bytes) -> ConsumerGroup:
    r = _Reader(raw)
    r.i16()
    g = ConsumerGroup(group_id, group_epoch=r.i32(), assignment_epoch=r.i32(), state_timestamp_ms=r.i64())
    for _ in range(r.i32()):
        name = r.string() or ""
        known, topic_id, partitions = r.i8(), r.raw(16), r.i32()
        g.subscription_metadata[name] = (topic_id, partitions) if known else None
    for _ in range(r.i32()):
        m = ConsumerMember(r.string() or "", instance_id=r.string(), rack_id=r.string(), client_id=r.string() or "",
                           client_host=r.string() or "", rebalance_timeout_ms=r.i32())
        m.subscribed_names = tuple(r.string() or "" for _ in range(r.i32()))
        m.subscribed_regex, m.server_assignor = r.string(), r.string()
        m.member_epoch, m.previous_member_epoch, m.state = r.i32(), r.i32(), _MEMBER_STATES[r.i8()]
        m.assigned, m.pending_revocation = _read_partitions(r), _read_partitions(r)
        g.target[m.member_id] = _read_partitions(r)
        g.add(m)
    return g


def share_state_key(group: str, topic_id: bytes, partition: int) -> bytes:
    return bytes(_Writer().i16(SHARE_STATE_KEY_VERSION).string(group).raw(topic_id).i32(partition).buf)


def encode_share_state_value(start: int, end: int, runs: list[tuple[int, int, int, int]], state_epoch: int = 0,
                             leader_epoch: int = -1) -> bytes:
    w = _Writer().i16(1).i32(state_epoch).i32(leader_epoch).i64(start).i64(end).i32(len(runs))
    for first, last, state, count in runs:
        w.i64(first).i64(last).i8(state).i16(count)
    return bytes(w.buf)


def decode_share_state_value(raw: bytes) -> tuple[int, int, list[tuple[int, int, int, int]], int, int]:
    """(start, end, runs, state epoch, leader epoch); v0 (no epochs) reads as state epoch 0, leader epoch -1."""
    r = _Reader(raw)
    version = r.i16()
    state_epoch, leader_epoch = (r.i32(), r.i32()) if version >= 1 else (0, -1)
    start, end = r.i64(), r.i64()
    return start, end, [(r.i64(), r.i64(), r.i8(), r.i16()) for _ in range(r.i32())], state_epoch, leader_epoch


def group_config_key(group: str) -> bytes:
    return bytes(_Writer().i16(GROUP_CONFIG_KEY_VERSION).string(group).buf)


def encode_group_config_value(configs: dict[str, str]) -> bytes:
    w = _Writer().i16(0).i32(len(configs))
    for name, value in sorted(configs.items()):
        w.string(name).string(value)
    return bytes(w.buf)


def decode_group_config_value(raw: bytes) -> dict[str, str]:
    r = _Reader(raw)
    r.i16()
    return {r.string() or "": r.string() or "" for _ in range(r.i32())}


# ("offset", group, topic, partition), ("group", group), ("consumer_group", group),
# ("share_state", group, topic_id, partition) or ("group_config", group)
Key = tuple


def decode_key(raw: bytes) -> Key | None:
    """The key of a record of the offsets topic, or None for one this broker does not know (a newer Kafka's
    record type, or a key cut short: skipped, never a failed load)."""
    try:
        return _decode_key(raw)
    except struct.error:
        return None


def _decode_key(raw: bytes) -> Key | None:
    r = _Reader(raw)
    version = r.i16()
    if version in (0, 1):
        return ("offset", r.string() or "", r.string() or "", r.i32())
    if version == GROUP_KEY_VERSION:
        return ("group", r.string() or "")
    if version == CONSUMER_GROUP_KEY_VERSION:
        return ("consumer_group", r.string() or "")
    if version == SHARE_STATE_KEY_VERSION:
        return ("share_state", r.string() or "", r.raw(16), r.i32())
    if version == GROUP_CONFIG_KEY_VERSION:
        return ("group_config", r.string() or "")
    if version == STREAMS_GROUP_KEY_VERSION:
        return ("streams_group", r.string() or "")
    return None  # a record type we do not know (e.g. a newer Kafka's): skipped


# ------------------------------------------------------------------------------------------- the log


class OffsetsTopicLog:
    """Appends group/offset records to an internal topic (`__consumer_offsets`, or `__transaction_state` for
    the transaction coordinator) and replays its partitions when this broker becomes their leader.

    Every `append` is one v2 batch (``records.codec.build_batch``) appended by the partition's leader
    replica (cluster/partition.py); it returns a future done once the records are on disk (the fsync is
    queued on the log flusher) and held by every in-sync replica (the high watermark passed them: at once
    on a single node), so a caller acknowledges only what a crash or a failover cannot lose, while the event
    loop goes on serving. A partition this broker does not lead refuses the append (NotLeaderError).

    Replay cost is bounded by snapshots: `maybe_compact` rewrites the live keys of a partition (the last
    value of every key, tombstones dropped) as fresh batches at the end of the log, waits for them, and then
    moves the log start to the first snapshot batch (`delete_records_before`), which drops whole old
    segments (followers move their start after the leader's). Replay starts at the log start, so it reads at
    most one snapshot plus what followed it. A crash between the snapshot and the move only means some keys
    are read twice (the last one wins).

    Placement (placement.py): with ``owner_of`` (the string that places a stored key), a replay yields only
    the records of keys that belong to the partition; records an older odradek stored under its old rule
    are read by the load of the partition they belong to instead (`replay_for_load`), which writes them
    there and tombstones them where they were (docs/coordinator-placement.md).

    Not thread-safe; owned by the event loop.
    """

    def __init__(self, partitions: int, get_partition: Callable[[int], "Partition | None"],
                 clock_ms: Callable[[], int], owner_of: Callable[[bytes], str | None] | None = None) -> None:
        self.partitions = partitions
        self._get_partition = get_partition
        # a partition's log on this broker's disk, led here, followed, or not yet either (the broker sets it:
        # while it takes the leadership of one partition, the others' replicas may not exist yet)
        self.local_log: Callable[[int], "PartitionLog | None"] = self._replica_log
        self._clock_ms = clock_ms
        # the string that places a stored key (group id, transactional id, share-partition key text); None
        # (or a key it cannot read): the record is taken where it is
        self.owner_of = owner_of
        # records appended since the last snapshot, per partition (drives maybe_compact)
        self._appended: dict[int, int] = {}
        self._live: dict[int, dict[bytes, bytes]] = {}  # partition -> key -> last value (for snapshots)
        self.placed: set[int] = set()  # loaded partitions that carry the placement record
        # loaded partitions whose moved records are being written: not snapshotted until they are, since a
        # snapshot drops tombstones that must keep overriding the older records still to be moved
        self._unplaced: set[int] = set()
        # old partition -> ((log start, log end) when read, {new partition: [(key, value)] in log order})
        self._legacy_scans: dict[int, tuple[tuple[int, int], dict[int, list[tuple[bytes, bytes | None]]]]] = {}
        self._moves: set[asyncio.Task] = set()
        # moves written while no event loop ran (a single node loads its partitions before serving): their
        # second half starts at the next `resume_moves`
        self._deferred: list[tuple[int, dict[int, list[tuple[bytes, bytes | None]]], bool, Future]] = []
        self.name = "an internal topic"  # for log lines; the coordinator names it
        self._left_behind: dict[int, dict[bytes, int]] = {}  # partition -> key stored there -> its partition now

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.partitions)

    def _replica_log(self, partition: int) -> "PartitionLog | None":
        replica = self._get_partition(partition)
        return replica.log if replica is not None else None

    def append(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> Future:
        """Append ``(key, value)`` records (value None = tombstone) for one group (or transactional id); the
        future completes when they are durable and replicated. Raises if the append itself fails."""
        if not records:
            return completed_future()
        partition = self.partition_for(group_id)
        durable = self._append(partition, records)
        self.commit_live(partition, records)
        self._appended[partition] = self._appended.get(partition, 0) + len(records)
        return durable

    def leader(self, partition: int) -> "Partition":
        """The local replica of ``partition``, which must be led here (else NotLeaderError)."""
        replica = self._get_partition(partition)
        if replica is None or not replica.is_leader:
            raise NotLeaderError(f"partition {partition} of the internal topic is not led here")
        return replica

    def leader_or_none(self, partition: int) -> "Partition | None":
        """The local replica of ``partition`` when it is led here."""
        replica = self._get_partition(partition)
        return replica if replica is not None and replica.is_leader else None

    def _append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> Future:
        replica = self.leader(partition)
        now = self._clock_ms()
        last = -1
        for i in range(0, len(records), MAX_RECORDS_PER_BATCH):
            chunk = records[i:i + MAX_RECORDS_PER_BATCH]
            buf = bytearray(build_batch([(k, v, (), now) for k, v in chunk]))
            last = replica.append_as_leader(buf, validate_v2(buf)).last_offset
        return self._committed(replica, last)

    @staticmethod
    def _committed(replica: "Partition", last_offset: int) -> Future:
        return (durable_and_committed(replica.log.request_flush(), replica.when_committed(last_offset + 1))
                or completed_future())

    def append_transactional(self, partition: int, producer_id: int, producer_epoch: int,
                             records: list[tuple[bytes, bytes | None]]) -> Future:
        """Append records of a producer's transaction (TxnOffsetCommit): one transactional batch, whose
        records count as live only once its COMMIT marker comes (`commit_live`)."""
        replica = self.leader(partition)
        buf = bytearray(build_batch([(k, v, (), self._clock_ms()) for k, v in records], producer_id=producer_id,
                                    producer_epoch=producer_epoch, transactional=True))
        appended = replica.append_records_unchecked(buf, validate_v2(buf))
        return self._committed(replica, appended.last_offset)

    @staticmethod
    def _read(plog: "PartitionLog") -> Iterator[ReplayedRecord]:
        """Every record of a local log from its start, in log order, and the markers of transactions."""
        offset = plog.log_start_offset
        end = plog.log_end_offset
        while offset < end:
            data = plog.read(offset, 1 << 20, min_one_batch=True)
            if not data:
                break
            view = memoryview(data)
            pos = 0
            while pos < len(view):
                header, records = decode_batch(view, pos)
                pos += header.size
                offset = max(offset, header.last_offset + 1)
                pid = header.producer_id if header.is_transactional else -1
                if header.is_control:
                    if pid >= 0 and records:
                        yield ReplayedRecord(None, None, pid, parse_control_key(records[0].key)[1])
                    continue
                for rec in records:
                    if rec.offset < plog.log_start_offset or rec.key is None:
                        continue
                    yield ReplayedRecord(bytes(rec.key), None if rec.value is None else bytes(rec.value), pid, None)

    def _placer(self) -> Callable[[bytes], tuple[int, int] | None]:
        """(partition by Kafka's rule, partition by the old rule) of a stored key; None for a key that says
        nothing about placement (or cannot be read). Memoized per owner for one pass over a log."""
        owner_of, partitions = self.owner_of, self.partitions
        memo: dict[str, tuple[int, int]] = {}

        def place(key: bytes) -> tuple[int, int] | None:
            try:
                owner = owner_of(key) if owner_of is not None else None
            except Exception:
                return None
            if owner is None:
                return None
            placed = memo.get(owner)
            if placed is None:
                placed = memo[owner] = (partition_for(owner, partitions), legacy_partition_for(owner, partitions))
            return placed

        return place

    def replay(self, partition: int) -> Iterator[ReplayedRecord]:
        """Every record of one partition in log order (keys and values as stored), with the producer id of
        transactional batches and the markers (control records) that end their transactions. Records of keys
        that belong to another partition (stored by an older odradek) are left out: that partition's load
        reads them (`replay_for_load`); they stay live here until it has written them."""
        replica = self._get_partition(partition)
        if replica is None:
            return
        live = self._live[partition] = {}
        left: dict[bytes, int] = {}
        self.placed.discard(partition)
        place = self._placer() if may_have_moved(self.partitions) else None
        count = 0
        for rec in self._read(replica.log):
            key, value, pid = rec.key, rec.value, rec.producer_id
            if key is None:
                yield rec
                continue
            count += 1
            if pid < 0:
                if value is None:
                    live.pop(key, None)
                else:
                    live[key] = value
            if key == PLACEMENT_KEY:
                self.placed.add(partition)
                continue
            if place is not None:
                placed = place(key)
                if placed is not None and placed[0] != partition:
                    left[key] = placed[0]
                    continue
            yield rec
        self._appended[partition] = count
        # keys stored here under the old rule and still live: tombstoned once their partition has its
        # placement record (`drop_moved`)
        self._left_behind[partition] = {k: p for k, p in left.items() if k in live}

    # -- records stored under the old rule ------------------------------------------------------------------

    def replay_for_load(self, partition: int) -> list[ReplayedRecord]:
        """What a coordinator loading ``partition`` replays: `replay`, preceded, until the partition carries
        the placement record, by the committed records of its keys that an older odradek stored in other
        partitions (every key was written to one partition only, so those are older than any of its own, and
        the partition's own win). The moved records are written to the partition with the placement record
        (once every other partition could be read here) and then tombstoned where they were, in the
        background; a failure leaves things as they were, for the next load to do again."""
        own = list(self.replay(partition))
        if self.owner_of is None or not may_have_moved(self.partitions) or partition in self.placed:
            return own
        moved: dict[int, list[tuple[bytes, bytes | None]]] = {}
        unread: list[int] = []
        old_records_here = False
        for source in range(self.partitions):
            if source == partition:
                continue
            scan = self._legacy_scan(source)
            if scan is None:
                unread.append(source)
                continue
            old_records_here = old_records_here or any(scan.values())
            if scan.get(partition):
                moved[source] = scan[partition]
        if unread:  # the placement record waits for a load that can read them all; snapshots do not
            # a warning where this broker holds records of the old rule (an upgrade), else a fresh start
            log.log(logging.WARNING if old_records_here else logging.INFO,
                    "%s-%d: partitions %s have no replica here, so records an older odradek stored there for "
                    "its keys cannot be read (docs/coordinator-placement.md)", self.name, partition, unread)
        self._write_moved(partition, moved, {r.key for r in own if r.key is not None}, complete=not unread)
        return [ReplayedRecord(k, v, -1, None) for records in moved.values() for k, v in records] + own

    def _legacy_scan(self, source: int) -> dict[int, list[tuple[bytes, bytes | None]]] | None:
        """The committed records in ``source`` (its log on this broker, led here or not) of keys that the old
        rule put there and that belong to another partition, by that partition; None without a local log.
        Kept while the log does not change, so loading every partition reads each one once."""
        plog = self.local_log(source)
        if plog is None:
            return None
        stamp = (plog.log_start_offset, plog.log_end_offset)
        cached = self._legacy_scans.get(source)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        place = self._placer()
        moved: dict[int, list[tuple[bytes, bytes | None]]] = {}
        pending: dict[int, list[tuple[int, bytes, bytes | None]]] = {}
        for rec in self._read(plog):
            if rec.key is None:  # a marker: the producer's records here are committed or dropped
                done = pending.pop(rec.producer_id, [])
                if rec.marker == 1:
                    for target, key, value in done:
                        moved.setdefault(target, []).append((key, value))
                continue
            placed = place(rec.key)
            if placed is None or placed[0] == source or placed[1] != source:
                continue
            if rec.producer_id >= 0:
                pending.setdefault(rec.producer_id, []).append((placed[0], rec.key, rec.value))
            else:
                moved.setdefault(placed[0], []).append((rec.key, rec.value))
        self._legacy_scans[source] = (stamp, moved)
        return moved

    def _write_moved(self, partition: int, moved: dict[int, list[tuple[bytes, bytes | None]]],
                     own_keys: set[bytes], complete: bool) -> None:
        """Write to ``partition`` the last value of every moved key it has no record of (its own are newer),
        with the placement record when every other partition was read; then tombstone the moved keys in the
        partitions led here that held them."""
        last: dict[bytes, bytes | None] = {}
        for records in moved.values():
            last.update(records)
        copies = [(k, v) for k, v in last.items() if v is not None and k not in own_keys]
        records = copies + ([(PLACEMENT_KEY, PLACEMENT_VALUE)] if complete else [])
        if not records:
            return
        self._unplaced.add(partition)  # until the records are written: see maybe_compact
        try:
            durable = self._append(partition, records)
        except Exception as exc:
            log.warning("%s-%d: cannot write the %d records moved to it: %s; the "
                        "next load moves them", self.name, partition, len(copies), exc)
            return
        self.commit_live(partition, records)
        self._appended[partition] = self._appended.get(partition, 0) + len(records)
        if copies:
            log.info("%s-%d: moving %d records stored under the old placement "
                     "from partitions %s", self.name, partition, len(copies), sorted(moved))
        self._deferred.append((partition, moved, complete, durable))
        self.resume_moves()

    def resume_moves(self) -> None:
        """Start the second half of moves written while no event loop ran (called by the coordinators' tick)."""
        if not self._deferred:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        deferred, self._deferred = self._deferred, []
        for partition, moved, complete, durable in deferred:
            task = loop.create_task(self._finish_move(partition, moved, complete, durable))
            self._moves.add(task)
            task.add_done_callback(self._moves.discard)

    async def _finish_move(self, partition: int, moved: dict[int, list[tuple[bytes, bytes | None]]],
                           complete: bool, durable: Future) -> None:
        try:
            await asyncio.wrap_future(durable)
        except Exception as exc:
            log.warning("%s-%d: the records moved to it were not written (%s); the "
                        "next load moves them", self.name, partition, exc)
            return
        self._unplaced.discard(partition)
        if complete:
            self.placed.add(partition)
        for source, records in moved.items():
            scan = self._legacy_scans.get(source)
            if scan is not None:
                scan[1].pop(partition, None)
            await self._tombstone(source, list(dict.fromkeys(k for k, _ in records)))

    async def _tombstone(self, source: int, keys: list[bytes]) -> bool:
        """Tombstone moved keys in their old partition, when it is led here (else its leader keeps them as
        dead records: no load reads them again once their partition has its placement record)."""
        if not keys or self.leader_or_none(source) is None:
            return False
        tombstones = [(key, None) for key in keys]
        try:
            await asyncio.wrap_future(self._append(source, tombstones))
        except Exception as exc:
            log.warning("%s-%d: cannot tombstone the records moved from it: %s", self.name, source, exc)
            return False
        self.commit_live(source, tombstones)
        self._appended[source] = self._appended.get(source, 0) + len(tombstones)
        left = self._left_behind.get(source, {})
        for key in keys:
            left.pop(key, None)
        return True

    async def drop_moved(self) -> int:
        """Tombstone, in partitions led here, the keys an older odradek stored there whose partition now
        carries its placement record (a move whose tombstones a crash or a leader change cut short);
        returns how many."""
        done = 0
        for source, left in list(self._left_behind.items()):
            keys = [k for k, target in left.items() if target in self.placed]
            if await self._tombstone(source, keys):
                done += len(keys)
        return done

    def commit_live(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        """Records become the live keys of the partition (what a snapshot keeps): at once for plain appends,
        at the COMMIT marker for a transaction's."""
        live = self._live.setdefault(partition, {})
        for key, value in records:
            if value is None:
                live.pop(key, None)
            else:
                live[key] = value

    async def maybe_compact(self, min_records: int = 1000) -> int:
        """Snapshot every led partition whose log holds far more records than live keys, and has no open
        transaction (its records must stay until the transaction ends) nor records still to be moved to
        it; returns how many."""
        await self.drop_moved()
        done = 0
        for partition, appended in list(self._appended.items()):
            live = self._live.get(partition, {})
            if appended < min_records or appended < 2 * len(live) or partition in self._unplaced:
                continue
            replica = self._get_partition(partition)
            if replica is None or not replica.is_leader:
                continue
            plog = replica.log
            if plog.producer_state.first_unstable_offset() is not None:
                continue
            start = plog.log_end_offset
            if live:
                await asyncio.wrap_future(self._append(partition, list(live.items())))
            if not replica.is_leader:
                continue
            plog.delete_records_before(min(start, plog.high_watermark))
            self._appended[partition] = len(live)
            done += 1
        return done

    def forget(self, partition: int) -> None:
        self._live.pop(partition, None)
        self._left_behind.pop(partition, None)
        self._appended.pop(partition, None)
        self.placed.discard(partition)
        self._unplaced.discard(partition)


class ReplayedRecord(NamedTuple):
    key: bytes | None  # None for a transaction marker
    value: bytes | None
    producer_id: int  # of a transactional batch (or marker); -1 otherwise
    marker: int | None  # 0 ABORT, 1 COMMIT for a marker; None for a record
