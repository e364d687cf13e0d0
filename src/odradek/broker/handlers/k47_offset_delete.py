"""OffsetDelete (key 47), version 0.

Deletes committed offsets of a group (tombstones in `__consumer_offsets`). Top-level GROUP_ID_NOT_FOUND
for an unknown group, NON_EMPTY_GROUP for an active group that is not a consumer group; per partition
GROUP_SUBSCRIBED_TO_TOPIC while active members subscribe to the topic, UNKNOWN_TOPIC_OR_PARTITION for a
partition that does not exist. As in Kafka, partitions of topics the user may not READ get
TOPIC_AUTHORIZATION_FAILED and the others are deleted all the same; a group-level error is the whole answer.
"""

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.OFFSET_DELETE, 0, 0)
async def offset_delete(ctx: RequestContext, request: dict) -> dict:
    wanted = [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in request["topics"]]
    if not ctx.allowed(Op.DELETE, Res.GROUP, request["group_id"]):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0, "topics": []}
    # READ on each topic; the authorized ones go to the coordinator, and a group-level error (an unknown group)
    # is then the whole answer, as in Kafka
    denied = {name for name, _ in wanted if not ctx.allowed(Op.READ, Res.TOPIC, name)}
    if not ctx.broker.coordinator.owns(request["group_id"]):
        return {"error_code": ErrorCode.NOT_COORDINATOR, "throttle_time_ms": 0, "topics": []}
    error, results = await ctx.broker.coordinator.offsets.delete_offsets(
        request["group_id"], [(name, parts) for name, parts in wanted if name not in denied])
    if error:
        return {"error_code": error, "throttle_time_ms": 0, "topics": []}
    return {"error_code": 0, "throttle_time_ms": 0, "topics": [
        {"name": name, "partitions": [{"partition_index": p, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED
                                       if name in denied else results[(name, p)]} for p in parts]}
        for name, parts in wanted]}
