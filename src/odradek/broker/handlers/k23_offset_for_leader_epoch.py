"""OffsetForLeaderEpoch (key 23), versions 0-4.

Consumers (Java with Metadata epochs and this API at v3+, librdkafka at v2) check that their position is
still on the leader's log after a leader change; followers (v3+ with `replica_id`) find where their log
diverges from the leader's before they fetch (cluster/fetcher.py). Answered by the partition's leader from
its leader epoch cache (storage/leader_epoch.py, Kafka's `leader-epoch-checkpoint`): for the requested
epoch, the largest epoch at or below it and the offset where that epoch ended (the start of the next
epoch), or the log end offset for the current epoch; epoch -1 and offset -1 for an epoch older than the
log (or newer than the leader's). `current_leader_epoch` (v2+) above ours → UNKNOWN_LEADER_EPOCH, below
ours → FENCED_LEADER_EPOCH; a broker that does not lead the partition → NOT_LEADER_OR_FOLLOWER; unknown
partition → UNKNOWN_TOPIC_OR_PARTITION. (A single node stays in leader epoch 0.)

Authorization, as Kafka checks it: a follower (`replica_id` >= 0) needs CLUSTER_ACTION on the cluster, a
consumer DESCRIBE on each topic; each partition refused says TOPIC_AUTHORIZATION_FAILED (for a follower
without CLUSTER_ACTION, CLUSTER_AUTHORIZATION_FAILED).
"""

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.cluster.partition import ReplicationError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 4)
def offset_for_leader_epoch(ctx: RequestContext, request: dict) -> dict:
    if request.get("replica_id", -1) >= 0:
        follower_refusal = None if ctx.allowed(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME) else \
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        refused = lambda name: follower_refusal  # noqa: E731
    else:
        refused = lambda name: None if ctx.allowed(Op.DESCRIBE, Res.TOPIC, name) else \
            ErrorCode.TOPIC_AUTHORIZATION_FAILED  # noqa: E731
    topics = []
    for topic in request["topics"]:
        partitions = []
        refusal = refused(topic["topic"])
        for part in topic["partitions"]:
            index = part["partition"]
            entry = {"partition": index, "error_code": 0, "leader_epoch": -1, "end_offset": -1}
            if refusal is not None:
                entry["error_code"] = refusal
                partitions.append(entry)
                continue
            try:
                partition = ctx.broker.replicas.leader_partition(topic["topic"], index, part["current_leader_epoch"])
            except ReplicationError as exc:
                entry["error_code"] = exc.error_code
            else:
                plog = partition.log
                epoch, end = plog.leader_epoch_cache.end_offset_for(part["leader_epoch"], plog.log_end_offset)
                entry.update(leader_epoch=epoch, end_offset=end)
            partitions.append(entry)
        topics.append({"topic": topic["topic"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
