"""DeleteTopics (key 20), versions 0-6.

Topics by name (v0-5 `topic_names`, v6 `topics[].name`) or by id (v6 `topics[].topic_id`). Unknown name →
UNKNOWN_TOPIC_OR_PARTITION, unknown id → UNKNOWN_TOPIC_ID, `delete.topic.enable=false` →
TOPIC_DELETION_DISABLED, internal topics → INVALID_TOPIC_EXCEPTION. Deletion is synchronous: the
registry entry goes first, then the partition directories, so a crash in between leaves only orphaned
directories, which start-up removes.
"""

from odradek.broker.core import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

ZERO_UUID = bytes(16)


@handler(ApiKey.DELETE_TOPICS, 0, 6)
def delete_topics(ctx: RequestContext, request: dict) -> dict:
    if ctx.api_version >= 6:
        wanted = [(t["name"], t["topic_id"]) for t in request["topics"]]
    else:
        wanted = [(name, ZERO_UUID) for name in request["topic_names"]]
    return {"throttle_time_ms": 0, "responses": [_delete_one(ctx, name, topic_id) for name, topic_id in wanted]}


def _delete_one(ctx: RequestContext, name: str | None, topic_id: bytes) -> dict:
    broker = ctx.broker
    if name is None or (topic_id != ZERO_UUID and ctx.api_version >= 6):
        topic = broker.topics.by_id(topic_id)
        if topic is None:
            return {"name": name, "topic_id": topic_id, "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                    "error_message": "This server does not host this topic ID."}
    else:
        topic = broker.topics.get(name)
        if topic is None:
            return {"name": name, "topic_id": topic_id, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "error_message": "This server does not host this topic-partition."}
    if not broker.config.get("delete.topic.enable"):
        return {"name": topic.name, "topic_id": topic.topic_id, "error_code": ErrorCode.TOPIC_DELETION_DISABLED,
                "error_message": "Topic deletion is disabled."}
    if topic.is_internal:
        return {"name": topic.name, "topic_id": topic.topic_id, "error_code": ErrorCode.INVALID_TOPIC_EXCEPTION,
                "error_message": "Internal topics cannot be deleted."}
    broker.delete_topic(topic.name)
    return {"name": topic.name, "topic_id": topic.topic_id, "error_code": 0, "error_message": None}
