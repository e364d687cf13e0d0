"""Fetch (key 1), versions 0-17.

Long poll: the response is built at once; if it holds fewer than `min_bytes` and `max_wait_ms` allows, the
handler parks until an append to one of the requested partitions wakes it (Broker.wait_for_append), then
builds again, until `min_bytes` is met or the wait is over.

Only the partition's leader answers (NOT_LEADER_OR_FOLLOWER elsewhere; with `current_leader_epoch`, v9+,
FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH when it is not the leader's). From v12 the first two name the
leader this broker knows of, and from v16 its endpoint (KIP-951, broker/leader_hints.py). Consumers read
below the high watermark (read_uncommitted) or the last stable offset (read_committed). A follower
(`replica_id` >= 0, v0-14) reads up to the log end; its fetch offset tells the leader what it holds (the
high watermark and the ISR follow from it: cluster/replica_manager.py), and it is answered the leader's high
watermark and log start, which its own follow.

Sizes: each partition gets at most `partition_max_bytes`, the whole response at most `max_bytes` (v3+)
and never more than the broker's `fetch.max.bytes` (4 MiB by default: it bounds the memory of responses
read into memory, such as down-converted ones, and caps from 512 KiB to 55 MiB made no measurable
difference to librdkafka consumers in make bench), except that the first partition with data always
returns at least its first whole batch, so a consumer whose limits are smaller than a batch still makes
progress. A fetch from the middle of a batch returns the whole batch; clients skip the records before
their offset.

v0-3 serve legacy MessageSets: stored v2 batches are down-converted (magic 0 for v0-1, magic 1 for v2-3),
uncompressed. v13+ name topics by id (UNKNOWN_TOPIC_ID when unknown).
Sessions (KIP-227): the broker declines to create fetch sessions (session id 0 in every reply), which
every client handles with full fetches; a request naming a session id gets FETCH_SESSION_ID_NOT_FOUND.
Isolation (v4+): every partition reports its last stable offset (LSO: the first offset of its oldest open
transaction, or the high watermark). read_committed reads only batches below the LSO and lists the aborted
transactions (producer id, first offset) that overlap the returned range, from the partition's
aborted-transaction index, so the client can drop their records; read_uncommitted reads up to the high
watermark and gets no list. Control batches (markers) are returned either way; clients skip them.
Zero-copy: a v4+ fetch takes each segment's span of at least REGION_MIN_BYTES as a file region, which the
connection sends with sendfile(2) straight from the page cache (net/connection.py); smaller spans and
down-converted fetches are read into memory.
Gaps: no preferred read replica (consumers read from leaders only); v15+ followers (replica_state) are not
served as followers.
"""

import asyncio
import time

from odradek.broker.core import RequestContext
from odradek.broker.leader_hints import LEADERSHIP_ERRORS, hint_leader, node_endpoints
from odradek.broker.registry import handler
from odradek.cluster.partition import ReplicationError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.records import legacy
from odradek.records.batch import iter_batches
from odradek.storage.log import OffsetOutOfRangeError
from odradek.storage.segment import FileRegion

ZERO_UUID = bytes(16)
MAX_WAIT_CAP_MS = 30_000
# Below this a pread is cheaper than the loop iterations and syscalls a sendfile of its own costs.
REGION_MIN_BYTES = 256 * 1024


@handler(ApiKey.FETCH, 0, 17)
async def fetch(ctx: RequestContext, request: dict) -> dict:
    if request["session_id"] != 0:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND, "session_id": 0, "responses": []}
    body, size, keys = _build(ctx, request)
    max_wait_s = min(max(request["max_wait_ms"], 0), MAX_WAIT_CAP_MS) / 1000.0
    deadline = time.monotonic() + max_wait_s
    while size < request["min_bytes"] and keys:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not ctx.connection.is_open:
            break
        await ctx.broker.wait_for_append(keys, remaining)
        body, size, keys = _build(ctx, request)
    return body


def _build(ctx: RequestContext, request: dict) -> tuple[dict, int, list]:
    """Return (response body, bytes of records in it, partitions worth waiting on)."""
    broker = ctx.broker
    version = ctx.api_version
    remaining = min(request["max_bytes"] if version >= 3 else 0x7FFFFFFF, broker.config.int("fetch.max.bytes"))
    magic = 0 if version <= 1 else 1 if version <= 3 else 2
    replica_id = request["replica_id"] if version <= 14 else -1
    read_committed = request["isolation_level"] == 1
    region_min = REGION_MIN_BYTES if magic == 2 else None
    total = 0
    keys = []
    responses = []
    leaders: set[int] = set()  # named in leader hints (KIP-951)
    for topic in request["topics"]:
        if version >= 13:
            t = broker.metadata.topic_by_id(topic["topic_id"])
            name = t.name if t is not None else None
            missing = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            name = topic["topic"]
            t = broker.metadata.topic(name)
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        partitions = []
        for part in topic["partitions"]:
            index = part["partition"]
            if t is None:
                partitions.append(_partition(index, missing))
                continue
            try:
                partition = broker.replicas.leader_partition(name, index, part["current_leader_epoch"])
            except ReplicationError as exc:
                refused = _partition(index, exc.error_code)
                if version >= 12 and exc.error_code in LEADERSHIP_ERRORS:
                    hint_leader(broker.metadata, refused, name, index, leaders)
                partitions.append(refused)
                continue
            plog = partition.log
            if replica_id >= 0:
                broker.replicas.follower_fetched(partition, replica_id, part["fetch_offset"])
                upper = None
            else:
                upper = plog.last_stable_offset if read_committed else plog.high_watermark
            lso = plog.last_stable_offset
            entry = _partition(index, 0, plog.high_watermark, plog.log_start_offset, lso)
            limit = min(part["partition_max_bytes"], remaining)
            try:
                data = plog.read(part["fetch_offset"], max(limit, 0), min_one_batch=(total == 0),
                                 max_offset=upper, region_min_bytes=region_min)
            except OffsetOutOfRangeError:
                entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                partitions.append(entry)
                continue
            if read_committed:
                entry["aborted_transactions"] = _aborted(plog, part["fetch_offset"], data, lso)
            if data and magic < 2:
                data = legacy.downconvert(data, magic, part["fetch_offset"])
            entry["records"] = data
            size = sum(map(len, data)) if region_min is not None else len(data)
            total += size
            remaining -= size
            keys.append((name, index))
            partitions.append(entry)
        responses.append({"topic": name if name is not None else "", "topic_id": topic["topic_id"], "partitions": partitions})
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}
    if leaders and version >= 16:
        body["node_endpoints"] = node_endpoints(broker.metadata, leaders)
    return body, total, keys


def _aborted(plog, fetch_offset: int, chunks: "list[bytes | FileRegion]", lso: int) -> list[dict]:
    """Aborted transactions overlapping [fetch_offset, end of the returned batches).

    read_committed exists from v4 on, so its data is always the chunk list of a magic 2 read.
    """
    if not chunks:
        return []
    last = chunks[-1]
    if isinstance(last, FileRegion):
        upper = last.last_offset() + 1
    else:
        upper = lso
        for _, header in iter_batches(last):
            upper = header.last_offset + 1
    return [{"producer_id": t.producer_id, "first_offset": t.first_offset}
            for t in plog.aborted_transactions(fetch_offset, upper)]


def _partition(index: int, error: int, high_watermark: int = -1, log_start_offset: int = -1,
               last_stable_offset: int = -1) -> dict:
    return {
        "partition_index": index,
        "error_code": error,
        "high_watermark": high_watermark,
        "last_stable_offset": last_stable_offset,
        "log_start_offset": log_start_offset,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }
