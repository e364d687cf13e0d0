"""AlterShareGroupOffsets (key 91), version 0: set where an empty share group starts in partitions (KIP-932).

On the group's coordinator. Each partition's share coordinator gets InitializeShareGroupState (or the local
call) with the next state epoch and the new start offset, nothing in flight: what the group had in flight
there is forgotten, and a share-partition leader still holding the old window is fenced (FENCED_STATE_EPOCH
on its next write) and reads the new state (it also reads it again when the group opens its first share
session there). As in Kafka 4.2+, a group that does not exist yet is created empty, so offsets can be set
before first use. Top-level errors: INVALID_GROUP_ID, GROUP_AUTHORIZATION_FAILED (READ on the group),
NOT_COORDINATOR, GROUP_ID_NOT_FOUND (a classic or consumer group has the id), NON_EMPTY_GROUP (it has
members). Per partition: TOPIC_AUTHORIZATION_FAILED (READ on the topic), UNKNOWN_TOPIC_OR_PARTITION,
INVALID_REQUEST (a negative offset: Kafka 4.4 stores it, a deliberate difference), and the share
coordinator's errors. In a cluster the first call waits for `__share_group_state` to be created and its share
coordinators to be known (for at most 20 s), as Kafka's persister waits for its share coordinator.
Gaps: the start offset is not checked against the log (Kafka neither: a start past the end waits for it).
"""

import asyncio

from odradek.security.authorizer import Operation as Op
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.broker.share_offsets import offsets_refusal, topic_refusal
from odradek.coordinator.share_groups import ShareGroup
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

PROVEN_BY = "interop and cluster suites, franz-go's share tests, differential suite"
ZERO_UUID = bytes(16)


@handler(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0)
async def alter_share_group_offsets(ctx: RequestContext, request: dict) -> dict:
    group_id = request["group_id"]
    refused = offsets_refusal(ctx, group_id, Op.READ, must_exist=False)
    if refused is not None:
        return {"throttle_time_ms": 0, "error_code": refused[0], "error_message": refused[1], "responses": []}
    share = ctx.broker.coordinator.share_groups
    group = share.groups.setdefault(group_id, ShareGroup(group_id))
    responses = []
    for asked in request["topics"]:
        name = asked["topic_name"]
        code = topic_refusal(ctx, name)
        topic = ctx.broker.metadata.topic(name)
        parts = []
        for p in asked["partitions"]:
            index, start = p["partition_index"], p["start_offset"]
            result = code
            if not result and not 0 <= index < topic.partitions:
                result = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if not result and start < 0:
                result = ErrorCode.INVALID_REQUEST
            if not result:
                result = await _initialize(share, (group_id, topic.topic_id, index), start)
                group.seen.add((topic.topic_id, index))
            parts.append({"partition_index": index, "error_code": result, "error_message": None})
        responses.append({"topic_name": name, "topic_id": topic.topic_id if topic is not None else ZERO_UUID,
                          "partitions": parts})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": responses}


async def _initialize(share, key: tuple[str, bytes, int], start: int) -> int:
    """The next state epoch with ``start`` at the key's share coordinator; an error code."""
    code, stored = await asyncio.wrap_future(share.persister.summary(key))
    if code:
        return code
    share.drop_window(key)  # led here: read again on the next fetch
    return await asyncio.wrap_future(share.persister.initialize(key, (stored.state_epoch if stored else 0) + 1, start))
