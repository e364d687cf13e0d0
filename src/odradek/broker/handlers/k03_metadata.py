"""Metadata (key 3), versions 0-12.

Single node: this broker is the leader, the only replica and the whole ISR of every partition, and the
controller. Topics have real UUIDs, returned from v10; v10+ requests naming topics by id are answered by
id. Auto-creation (`auto.create.topics.enable`) applies when the request allows it (always before v4) and
the name is legal; the topic is created synchronously, so the reply already carries it with NONE rather
than the LEADER_NOT_AVAILABLE a multi-node Kafka returns while the controller works.
Gaps: authorized operations are not computed (the "not requested" sentinel is returned).
"""

from odradek.broker.core import LEADER_EPOCH, RequestContext
from odradek.broker.registry import handler
from odradek.cluster.topics import Topic, topic_name_error
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

ZERO_UUID = bytes(16)


@handler(ApiKey.METADATA, 0, 12)
def metadata(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    version = ctx.api_version
    requested = request["topics"]
    if requested is None or (version == 0 and not requested):
        topics = [_topic_entry(broker, t) for t in broker.topics.all() if not t.is_internal]
    else:
        topics = []
        allow_create = request["allow_auto_topic_creation"] if version >= 4 else True
        for entry in requested:
            topics.append(_requested_topic(ctx, entry, allow_create))
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": broker.node_id, "host": broker.advertised_host, "port": broker.advertised_port, "rack": None}],
        "cluster_id": broker.topics.cluster_id,
        "controller_id": broker.node_id,
        "topics": topics,
    }


def _requested_topic(ctx: RequestContext, entry: dict, allow_create: bool) -> dict:
    broker = ctx.broker
    name = entry["name"]
    if name is None:
        topic = broker.topics.by_id(entry["topic_id"])
        if topic is None:
            return {"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None, "topic_id": entry["topic_id"], "partitions": []}
        return _topic_entry(broker, topic)
    topic = broker.topics.get(name)
    if topic is not None:
        return _topic_entry(broker, topic)
    if topic_name_error(name) is not None:
        return {"error_code": ErrorCode.INVALID_TOPIC_EXCEPTION, "name": name, "partitions": []}
    if allow_create and broker.config.get("auto.create.topics.enable"):
        topic = broker.create_topic(name, broker.config.int("num.partitions"), {})
        return _topic_entry(broker, topic)
    return {"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name, "partitions": []}


def _topic_entry(broker, topic: Topic) -> dict:
    node = broker.node_id
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.is_internal,
        "partitions": [
            {
                "error_code": 0,
                "partition_index": p,
                "leader_id": node,
                "leader_epoch": LEADER_EPOCH,
                "replica_nodes": [node],
                "isr_nodes": [node],
                "offline_replicas": [],
            }
            for p in range(topic.partitions)
        ],
    }
