"""Metadata (key 3), versions 0-13.

Answered from the broker's metadata cache (cluster/metadata.py): the live brokers, the controller, and per
partition its leader, leader epoch, replicas, ISR and offline replicas — on a single node, this broker as
the only one, leading every partition in epoch 0. A request for all topics gets the internal ones too
(`is_internal`), as from Kafka. Topics have real UUIDs, returned from v10; v10+ requests
naming topics by id are answered by id. A partition without a leader (its replicas are down) reports
LEADER_NOT_AVAILABLE with leader -1.

Auto-creation (`auto.create.topics.enable`) applies when the request allows it (always before v4) and the
name is legal. A single node creates the topic at once, so the reply already carries it with NONE; a
cluster member asks for its creation (cluster/admin.py) and answers LEADER_NOT_AVAILABLE until the
controller has elected the new partitions' leaders, as Kafka does; clients ask again.
With an authorizer (security/authorizer.py), a topic the principal may not DESCRIBE is left out of an
all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named (whether or not it exists, so nothing
leaks); auto-creation needs CREATE on the cluster or the topic. `authorized_operations` are computed when
asked for (v8+).
"""

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler

NOT_REQUESTED = -2147483648  # authorized operations not asked for
from odradek.cluster.admin import AdminError
from odradek.cluster.topics import Topic, topic_name_error
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.METADATA, 0, 13)
def metadata(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    cache = broker.metadata
    version = ctx.api_version
    requested = request["topics"]
    if requested is None or (version == 0 and not requested):
        # internal ones too, as Kafka does
        topics = [_topic_entry(broker, t) for t in cache.all_topics() if ctx.allowed(Op.DESCRIBE, Res.TOPIC, t.name)]
    else:
        topics = []
        allow_create = request["allow_auto_topic_creation"] if version >= 4 else True
        for entry in requested:
            topics.append(_requested_topic(ctx, entry, allow_create))
    if version >= 8:
        conn = ctx.connection
        if request["include_topic_authorized_operations"]:
            for entry in topics:
                if entry["error_code"] != ErrorCode.TOPIC_AUTHORIZATION_FAILED and entry.get("name"):
                    entry["topic_authorized_operations"] = broker.authorizer.authorized_operations(
                        conn.principal, conn.peer_host, Res.TOPIC, entry["name"])
    cluster_operations = NOT_REQUESTED
    if 8 <= version <= 10 and request["include_cluster_authorized_operations"]:
        # 0 unless the cluster may be described (Kafka's rule, as in DescribeCluster)
        cluster_operations = broker.authorizer.authorized_operations(
            ctx.connection.principal, ctx.connection.peer_host, Res.CLUSTER, CLUSTER_NAME) \
            if ctx.allowed(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME) else 0
    return {
        "throttle_time_ms": 0,
        "cluster_authorized_operations": cluster_operations,
        "brokers": [{"node_id": b.node_id, "host": host, "port": port, "rack": b.rack}
                    for b, host, port in cache.endpoints(ctx.connection.listener)],
        "cluster_id": cache.cluster_id,
        "controller_id": cache.controller_id,
        "topics": topics,
        "error_code": 0,  # v13 (KIP-1102): set only by a broker that wants the client to rebootstrap
    }


def _requested_topic(ctx: RequestContext, entry: dict, allow_create: bool) -> dict:
    broker = ctx.broker
    name = entry["name"]
    if name is None:
        topic = broker.metadata.topic_by_id(entry["topic_id"])
        if topic is None:
            return {"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None, "topic_id": entry["topic_id"], "partitions": []}
        return _topic_entry(broker, topic)
    if not ctx.allowed(Op.DESCRIBE, Res.TOPIC, name):
        return {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name, "partitions": []}
    topic = broker.metadata.topic(name)
    if topic is not None:
        return _topic_entry(broker, topic)
    if topic_name_error(name) is not None:
        return {"error_code": ErrorCode.INVALID_TOPIC_EXCEPTION, "name": name, "partitions": []}
    if allow_create and broker.config.get("auto.create.topics.enable"):
        if not (ctx.allowed(Op.CREATE, Res.CLUSTER, CLUSTER_NAME) or ctx.allowed(Op.CREATE, Res.TOPIC, name)):
            return {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name, "partitions": []}
        try:
            broker.admin.auto_create_topic(name)
        except AdminError as exc:
            return {"error_code": exc.error_code, "name": name, "partitions": []}
        topic = broker.metadata.topic(name)
        if topic is not None:
            return _topic_entry(broker, topic)
        return {"error_code": ErrorCode.LEADER_NOT_AVAILABLE, "name": name, "partitions": []}
    return {"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name, "partitions": []}


def _topic_entry(broker, topic: Topic) -> dict:
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.is_internal,
        "partitions": [partition_entry(broker.metadata, topic.name, p) for p in range(topic.partitions)],
    }


def partition_entry(cache, topic: str, index: int) -> dict:
    """A partition as Metadata and DescribeTopicPartitions describe it, from the metadata cache."""
    info = cache.partition(topic, index)
    if info is None:
        return {"error_code": ErrorCode.LEADER_NOT_AVAILABLE, "partition_index": index, "leader_id": -1,
                "leader_epoch": -1, "replica_nodes": [], "isr_nodes": [], "offline_replicas": []}
    return {
        "error_code": 0 if info.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
        "partition_index": index,
        "leader_id": info.leader,
        "leader_epoch": info.leader_epoch,
        "replica_nodes": info.replicas,
        "isr_nodes": info.isr,
        "offline_replicas": info.offline,
    }
