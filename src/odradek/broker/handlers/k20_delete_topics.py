"""DeleteTopics (key 20), versions 0-6.

Topics by name (v0-5 `topic_names`, v6 `topics[].name`) or by id (v6 `topics[].topic_id`). Unknown name →
UNKNOWN_TOPIC_OR_PARTITION, unknown id → UNKNOWN_TOPIC_ID, `delete.topic.enable=false` →
TOPIC_DELETION_DISABLED, internal topics → INVALID_TOPIC_EXCEPTION.
Authorization in Kafka's order (its controller's), so that a refusal tells nothing about existence: DELETE on
the cluster allows every topic; otherwise a name the principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED
whether or not the topic exists, and only a describable one can be UNKNOWN_TOPIC_OR_PARTITION; an existing
one without DELETE is TOPIC_AUTHORIZATION_FAILED. An id is looked up first (an unknown id is UNKNOWN_TOPIC_ID
for anyone, as in Kafka: ids are not guessable); a known id without DELETE is TOPIC_AUTHORIZATION_FAILED,
its name left out unless the principal may describe the topic.
A single node deletes at once: the registry entry goes first, then the partition directories, so a crash in
between leaves only orphaned directories, which start-up removes. In a cluster only the controller takes
deletions (NOT_CONTROLLER elsewhere): it marks the topic for deletion in ZooKeeper, has every replica
delete its log (StopReplica) and then removes the topic; the answer comes when the topic is gone from the
metadata, or REQUEST_TIMED_OUT after `timeout_ms`.
"""

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.cluster.admin import AdminError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

ZERO_UUID = bytes(16)
DENIED = "Topic authorization failed."  # Kafka's message for the code


@handler(ApiKey.DELETE_TOPICS, 0, 6)
async def delete_topics(ctx: RequestContext, request: dict) -> dict:
    if ctx.api_version >= 6:
        wanted = [(t["name"], t["topic_id"]) for t in request["topics"]]
    else:
        wanted = [(name, ZERO_UUID) for name in request["topic_names"]]
    try:
        ctx.broker.admin.check_controller()
    except AdminError as exc:
        return {"throttle_time_ms": 0, "responses": [
            {"name": name, "topic_id": topic_id, "error_code": exc.error_code, "error_message": exc.message}
            for name, topic_id in wanted]}
    return {"throttle_time_ms": 0, "responses": [await _delete_one(ctx, name, topic_id, request["timeout_ms"])
                                                 for name, topic_id in wanted]}


async def _delete_one(ctx: RequestContext, name: str | None, topic_id: bytes, timeout_ms: int) -> dict:
    broker = ctx.broker
    cluster_delete = ctx.allowed(Op.DELETE, Res.CLUSTER, CLUSTER_NAME)
    if name is None or (topic_id != ZERO_UUID and ctx.api_version >= 6):
        topic = broker.metadata.topic_by_id(topic_id)
        if topic is None:
            return {"name": name, "topic_id": topic_id, "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                    "error_message": "This server does not host this topic ID."}
        if not cluster_delete and not ctx.allowed(Op.DELETE, Res.TOPIC, topic.name):
            shown = topic.name if ctx.allowed(Op.DESCRIBE, Res.TOPIC, topic.name) else None
            return {"name": shown, "topic_id": topic_id, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    "error_message": DENIED}
    else:
        if not cluster_delete and not ctx.allowed(Op.DESCRIBE, Res.TOPIC, name):
            return {"name": name, "topic_id": topic_id, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    "error_message": DENIED}
        topic = broker.metadata.topic(name)
        if topic is None:
            return {"name": name, "topic_id": topic_id, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "error_message": "This server does not host this topic-partition."}
        if not cluster_delete and not ctx.allowed(Op.DELETE, Res.TOPIC, topic.name):
            return {"name": name, "topic_id": topic_id, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    "error_message": DENIED}
    if not broker.config.get("delete.topic.enable"):
        return {"name": topic.name, "topic_id": topic.topic_id, "error_code": ErrorCode.TOPIC_DELETION_DISABLED,
                "error_message": "Topic deletion is disabled."}
    if topic.is_internal:
        return {"name": topic.name, "topic_id": topic.topic_id, "error_code": ErrorCode.INVALID_TOPIC_EXCEPTION,
                "error_message": "Internal topics cannot be deleted."}
    try:
        await broker.admin.delete_topic(topic.name, timeout_ms)
    except AdminError as exc:
        return {"name": topic.name, "topic_id": topic.topic_id, "error_code": exc.error_code,
                "error_message": exc.message}
    return {"name": topic.name, "topic_id": topic.topic_id, "error_code": 0, "error_message": None}
