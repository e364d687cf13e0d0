"""DescribeProducers (key 61), version 0.

Per partition, the producers the partition's producer state knows (storage/producer_state.py): producer
id, epoch, last sequence, last timestamp, the coordinator epoch of its last marker (-1: none) and the first
offset of its open transaction there (-1: none).

Any replica answers, leader or follower, as Kafka's does (ReplicaManager.activeProducerState reads the hosted
partition's log without a leadership check): a follower's log replays every batch it copies from the leader
into its own producer state (storage/log.py `append_replicated`), so it knows the same producers up to its
log end. `kafka-transactions find-hanging --broker-id N` relies on it: it asks broker N about every partition
N holds a replica of. A partition that does not exist → UNKNOWN_TOPIC_OR_PARTITION; one this broker holds no
replica of → NOT_LEADER_OR_FOLLOWER.
"""

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.cluster.partition import ReplicationError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


def _partition(ctx: RequestContext, topic: str, index: int) -> dict:
    try:
        plog = ctx.broker.replicas.hosted_partition(topic, index).log
    except ReplicationError as exc:
        return {"partition_index": index, "error_code": exc.error_code, "error_message": str(exc),
                "active_producers": []}
    producers = [{"producer_id": e.producer_id, "producer_epoch": e.epoch, "last_sequence": e.last_seq,
                  "last_timestamp": e.last_timestamp, "coordinator_epoch": e.coordinator_epoch,
                  "current_txn_start_offset": e.txn_first_offset}
                 for e in sorted(plog.producer_state.producers.values(), key=lambda e: e.producer_id)]
    return {"partition_index": index, "error_code": 0, "error_message": None, "active_producers": producers}


@handler(ApiKey.DESCRIBE_PRODUCERS, 0, 0)
def describe_producers(ctx: RequestContext, request: dict) -> dict:
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [
            _partition(ctx, t["name"], p) if ctx.allowed(Op.READ, Res.TOPIC, t["name"]) else
            {"partition_index": p, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "active_producers": []}
            for p in t["partition_indexes"]]}
        for t in request["topics"]]}
