"""DescribeTopicPartitions (key 75), version 0 (KIP-966): Metadata's topic part, paged by partitions.

The Java admin client (3.7+) describes topics with it when the broker offers it. Topics are answered in
name order from the metadata cache, as Metadata answers them (leader, leader epoch, replicas, ISR, offline
replicas; a partition without a leader has LEADER_NOT_AVAILABLE and leader -1). At most
`response_partition_limit` partitions are returned, never more than `max.request.partition.size.limit`
(2000) and never fewer than one; where the answer stops short, `next_cursor` names the topic and partition
to ask from next. An empty topic list asks for every topic from the cursor's on; there unknown topics do
not arise, while a named unknown topic gets UNKNOWN_TOPIC_OR_PARTITION. A cursor must name one of the
requested topics and a partition of at least 0, else every requested topic gets INVALID_REQUEST, as Kafka
answers a request it refuses whole. With an authorizer, a topic the principal may not DESCRIBE is left out
of an all-topics answer and answered TOPIC_AUTHORIZATION_FAILED, after the others, when named;
`topic_authorized_operations` is always filled in.

Gaps: eligible leader replicas (KIP-966's ELR) belong to KRaft's controller; the lists are always empty.
"""

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.handlers.k03_metadata import partition_entry
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

ZERO_UUID = bytes(16)


@handler(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0)
def describe_topic_partitions(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    cache = broker.metadata
    named = sorted({t["name"] for t in request["topics"]})
    cursor = request["cursor"]
    if cursor is not None and ((named and cursor["topic_name"] not in named) or cursor["partition_index"] < 0):
        return {"throttle_time_ms": 0, "next_cursor": None, "topics": [
            {"error_code": ErrorCode.INVALID_REQUEST, "name": t["name"], "topic_id": ZERO_UUID, "partitions": []}
            for t in request["topics"]]}
    start_topic = cursor["topic_name"] if cursor is not None else ""
    if named:
        candidates = named
    else:
        candidates = sorted(t.name for t in cache.all_topics() if t.name >= start_topic)
    refused = []
    names = []
    for name in candidates:
        if ctx.allowed(Op.DESCRIBE, Res.TOPIC, name):
            names.append(name)
        elif named:
            refused.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name, "topic_id": ZERO_UUID,
                            "partitions": []})
    budget = max(min(broker.config.get("max.request.partition.size.limit"), request["response_partition_limit"]), 1)
    topics: list[dict] = []
    next_cursor = None
    for name in names:
        if budget <= 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        topic = cache.topic(name)
        if topic is None:
            topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name, "topic_id": ZERO_UUID,
                           "partitions": []})
            continue
        first = cursor["partition_index"] if cursor is not None and name == start_topic else 0
        last = min(topic.partitions, first + budget)
        partitions = [{**partition_entry(cache, name, p), "eligible_leader_replicas": [], "last_known_elr": []}
                      for p in range(first, last)]
        budget -= len(partitions)
        topics.append({"error_code": 0, "name": name, "topic_id": topic.topic_id, "is_internal": topic.is_internal,
                       "partitions": partitions})
        if last < topic.partitions:
            next_cursor = {"topic_name": name, "partition_index": last}
            break
    conn = ctx.connection
    for entry in topics:
        entry["topic_authorized_operations"] = broker.authorizer.authorized_operations(
            conn.principal, conn.peer_host, Res.TOPIC, entry["name"])
    return {"throttle_time_ms": 0, "topics": topics + refused, "next_cursor": next_cursor}
