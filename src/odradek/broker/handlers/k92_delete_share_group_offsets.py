"""DeleteShareGroupOffsets (key 92), version 0: forget an empty share group's state in topics (KIP-932).

On the group's coordinator. For every partition of each named topic, the stored state goes at its share
coordinator (DeleteShareGroupState, or the local call), so the group starts there afresh at its
`share.auto.offset.reset`. Top-level errors: INVALID_GROUP_ID, GROUP_AUTHORIZATION_FAILED (DELETE on the
group), NOT_COORDINATOR, GROUP_ID_NOT_FOUND (unknown, or a classic or consumer group), NON_EMPTY_GROUP
(it has members). Per topic: TOPIC_AUTHORIZATION_FAILED (READ on the topic), UNKNOWN_TOPIC_OR_PARTITION,
and the share coordinators' errors.
Gaps: a topic the group never read is answered NONE (Kafka's coordinator knows which partitions a group
initialized; odradek's does not keep that list).
"""

import asyncio

from odradek.security.authorizer import Operation as Op
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.broker.share_offsets import offsets_refusal, topic_refusal
from odradek.protocol.api_keys import ApiKey

ZERO_UUID = bytes(16)


@handler(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0)
async def delete_share_group_offsets(ctx: RequestContext, request: dict) -> dict:
    group_id = request["group_id"]
    refused = offsets_refusal(ctx, group_id, Op.DELETE, must_exist=True)
    if refused is not None:
        return {"throttle_time_ms": 0, "error_code": refused[0], "error_message": refused[1], "responses": []}
    share = ctx.broker.coordinator.share_groups
    group = share.groups[group_id]
    responses = []
    for asked in request["topics"]:
        name = asked["topic_name"]
        code = topic_refusal(ctx, name)
        topic = ctx.broker.metadata.topic(name)
        if not code:
            for index in range(topic.partitions):
                key = (group_id, topic.topic_id, index)
                share.drop_window(key)
                code = code or await asyncio.wrap_future(share.persister.delete(key))
                group.seen.discard((topic.topic_id, index))
        responses.append({"topic_name": name, "topic_id": topic.topic_id if topic is not None else ZERO_UUID,
                          "error_code": code, "error_message": None})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": responses}
