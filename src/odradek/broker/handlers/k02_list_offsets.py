"""ListOffsets (key 2), versions 0-11.

Answered by the partition's leader only (NOT_LEADER_OR_FOLLOWER elsewhere; with `current_leader_epoch`,
v4+, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when it is not the leader's); every answer carries the
leader epoch. Special timestamps: -1 latest (the high watermark; for a follower's own request,
`replica_id` >= 0, the log end), -2 earliest (log start offset), -3 max timestamp
(v7+: the offset and timestamp of the record with the largest timestamp), -4 earliest local (v8+: same as
earliest, there is no tiered storage), -5 latest tiered (v9+: no tiered storage, so offset -1), -6 earliest
pending upload (v11+, KIP-1023: nothing is waiting to be uploaded, so offset -1). v10's `timeout_ms` (KIP-1075's
async remote lookups) changes nothing: every lookup is local and answered at once. A
timestamp ≥ 0 finds the first record whose timestamp is at or after it: the log locates the batch through
its time index and the record is found inside it; none → offset -1, timestamp -1.
v0 answers with `old_style_offsets` (one offset; `max_num_offsets` beyond 1 is not honoured).
Isolation level (v2+): with read_committed, latest is the last stable offset (the first offset of the
oldest open transaction, or the high watermark), and a timestamp lookup finds nothing at or past it.
A stored batch that a timestamp lookup cannot decode (bad data on disk, say from before the Produce check
read every record) answers CORRUPT_MESSAGE for its partition; the other partitions are answered as usual.
"""

import logging

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.cluster.partition import ReplicationError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.records.batch import InvalidRecordError
from odradek.records.codec import record_timestamps
from odradek.storage.log import PartitionLog

log = logging.getLogger(__name__)

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


@handler(ApiKey.LIST_OFFSETS, 0, 11)
def list_offsets(ctx: RequestContext, request: dict) -> dict:
    topics = []
    follower = request["replica_id"] >= 0
    for topic in request["topics"]:
        partitions = []
        if not ctx.allowed(Op.DESCRIBE, Res.TOPIC, topic["name"]):
            topics.append({"name": topic["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
                for p in topic["partitions"]]})
            continue
        for part in topic["partitions"]:
            try:
                partition = ctx.broker.replicas.leader_partition(topic["name"], part["partition_index"],
                                                                 part["current_leader_epoch"])
            except ReplicationError as exc:
                partitions.append({"partition_index": part["partition_index"], "error_code": exc.error_code})
                continue
            plog = partition.log
            read_committed = ctx.api_version >= 2 and request["isolation_level"] == 1
            if follower and part["timestamp"] == LATEST:
                offset, timestamp = plog.log_end_offset, -1
            else:
                try:
                    offset, timestamp = lookup(plog, part["timestamp"], read_committed)
                except InvalidRecordError as exc:
                    log.warning("ListOffsets of %s-%d: a stored batch cannot be read: %s",
                                topic["name"], part["partition_index"], exc)
                    partitions.append({"partition_index": part["partition_index"],
                                       "error_code": ErrorCode.CORRUPT_MESSAGE})
                    continue
            partitions.append({
                "partition_index": part["partition_index"],
                "error_code": 0,
                "old_style_offsets": [offset] if offset >= 0 else [],
                "timestamp": timestamp,
                "offset": offset,
                "leader_epoch": partition.leader_epoch if offset >= 0 else -1,  # nothing found: none, as Kafka
            })
        topics.append({"name": topic["name"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


def lookup(plog: PartitionLog, timestamp: int, read_committed: bool = False) -> tuple[int, int]:
    """(offset, timestamp) for a ListOffsets query against one partition."""
    if timestamp == LATEST:
        return (plog.last_stable_offset if read_committed else plog.high_watermark), -1
    offset, found_ts = _lookup(plog, timestamp)
    if read_committed and timestamp not in (EARLIEST, EARLIEST_LOCAL) and offset >= plog.last_stable_offset:
        return -1, -1
    return offset, found_ts


def _lookup(plog: PartitionLog, timestamp: int) -> tuple[int, int]:
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return plog.log_start_offset, -1
    if timestamp == LATEST_TIERED:
        return -1, -1
    if timestamp == MAX_TIMESTAMP:
        found = plog.max_timestamp()
        if found is None:
            return -1, -1
        max_ts, _ = found
        return first_at_or_after(plog, max_ts)
    if timestamp < 0:
        return -1, -1
    return first_at_or_after(plog, timestamp)


def first_at_or_after(plog: PartitionLog, timestamp: int) -> tuple[int, int]:
    """(offset, timestamp) of the first record from the log start with a timestamp >= ``timestamp``; (-1, -1)
    when none has (ShareFetch's `by_duration:` reset asks it too)."""
    found = plog.find_batch_by_timestamp(timestamp)
    if found is None:
        return -1, -1
    _, batch = found
    for offset, ts in record_timestamps(batch):
        if ts >= timestamp and offset >= plog.log_start_offset:
            return offset, ts
    return -1, -1
