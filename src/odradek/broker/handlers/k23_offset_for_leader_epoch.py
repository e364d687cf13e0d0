"""OffsetForLeaderEpoch (key 23), versions 0-4.

Consumers (Java with Metadata epochs and this API at v3+, librdkafka at v2) use it to check that their
position is still on the leader's log after a leader change. A single node stays in epoch 0
(broker/core.py LEADER_EPOCH), so: a requested epoch of 0 ends at the log end offset; a later epoch is
unknown here (epoch -1, offset -1, as Kafka answers for epochs it never had); a `current_leader_epoch`
(v2+) above ours → UNKNOWN_LEADER_EPOCH, below ours → FENCED_LEADER_EPOCH; unknown partition →
UNKNOWN_TOPIC_OR_PARTITION.
"""

from odradek.broker.core import LEADER_EPOCH, RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 4)
def offset_for_leader_epoch(ctx: RequestContext, request: dict) -> dict:
    topics = []
    for topic in request["topics"]:
        partitions = []
        for part in topic["partitions"]:
            index = part["partition"]
            plog = ctx.broker.partition_log(topic["topic"], index)
            current = part["current_leader_epoch"]
            entry = {"partition": index, "error_code": 0, "leader_epoch": -1, "end_offset": -1}
            if plog is None:
                entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif current > LEADER_EPOCH:
                entry["error_code"] = ErrorCode.UNKNOWN_LEADER_EPOCH
            elif 0 <= current < LEADER_EPOCH:
                entry["error_code"] = ErrorCode.FENCED_LEADER_EPOCH
            elif part["leader_epoch"] <= LEADER_EPOCH:
                entry.update(leader_epoch=LEADER_EPOCH, end_offset=plog.log_end_offset)
            partitions.append(entry)
        topics.append({"topic": topic["topic"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
