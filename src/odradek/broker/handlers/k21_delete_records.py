"""DeleteRecords (key 21), versions 0-2.

Moves a partition's log start offset forward to `offset` (-1 means the high watermark); whole segments
below it are deleted, and the checkpointed start offset survives restarts. Reads below the new start get
OFFSET_OUT_OF_RANGE at once; the answer waits until the new start is checkpointed, which the log flusher's
thread does (then it removes the segment files), so the loop never waits for that fsync. A failed
checkpoint → KAFKA_STORAGE_ERROR for the partition. An offset beyond the high watermark →
OFFSET_OUT_OF_RANGE; unknown partition → UNKNOWN_TOPIC_OR_PARTITION; a broker that does not lead the
partition → NOT_LEADER_OR_FOLLOWER. The reply's low watermark is the new log start offset.
Gaps: in a cluster the answer does not wait for the followers to move their log start (they follow the
leader's from their next fetch).
"""

from concurrent.futures import Future

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.core import when_durable
from odradek.broker.registry import handler
from odradek.cluster.partition import ReplicationError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.storage.errors import OffsetOutOfRangeError


@handler(ApiKey.DELETE_RECORDS, 0, 2)
def delete_records(ctx: RequestContext, request: dict):
    topics = []
    pending: list[tuple[dict, Future]] = []
    for topic in request["topics"]:
        partitions = []
        allowed = ctx.allowed(Op.DELETE, Res.TOPIC, topic["name"])
        for part in topic["partitions"]:
            index = part["partition_index"]
            if not allowed:
                partitions.append(_result(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            try:
                plog = ctx.broker.replicas.leader_partition(topic["name"], index).log
            except ReplicationError as exc:
                partitions.append(_result(index, exc.error_code))
                continue
            offset = part["offset"]
            if offset == -1:
                offset = plog.high_watermark
            try:
                if offset < 0 or offset > plog.high_watermark:
                    raise OffsetOutOfRangeError(offset, plog.log_start_offset, plog.high_watermark)
                low, durable = plog.delete_records_before(offset)
            except OffsetOutOfRangeError:
                partitions.append(_result(index, ErrorCode.OFFSET_OUT_OF_RANGE))
                continue
            except OSError:
                partitions.append(_result(index, ErrorCode.KAFKA_STORAGE_ERROR))
                continue
            result = _result(index, ErrorCode.NONE, low)
            partitions.append(result)
            pending.append((result, durable))
        topics.append({"name": topic["name"], "partitions": partitions})
    return when_durable({"throttle_time_ms": 0, "topics": topics}, pending, _not_checkpointed)


def _result(index: int, error: int, low_watermark: int = -1) -> dict:
    return {"partition_index": index, "low_watermark": low_watermark, "error_code": error}


def _not_checkpointed(result: dict, error: BaseException) -> None:
    result.update(low_watermark=-1, error_code=ErrorCode.KAFKA_STORAGE_ERROR)
