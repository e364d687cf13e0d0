"""SyncGroup (key 14), versions 0-5.

A long poll: the leader hands in every member's assignment; followers wait until it has (or until the
group starts another rebalance: REBALANCE_IN_PROGRESS). In a Stable group the member's current assignment
is returned at once. Errors: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS,
FENCED_INSTANCE_ID (v3+), INCONSISTENT_GROUP_PROTOCOL (v5: protocol type/name differ from the group's).
v5 replies carry the group's protocol type and name.
"""

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.coordinator.group_coordinator import sync_result
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.SYNC_GROUP, 0, 5)
async def sync_group(ctx: RequestContext, request: dict) -> dict:
    version = ctx.api_version
    if not ctx.allowed(Op.READ, Res.GROUP, request["group_id"]):
        return {"throttle_time_ms": 0, **sync_result(ErrorCode.GROUP_AUTHORIZATION_FAILED)}
    if not ctx.broker.coordinator.owns(request["group_id"]):
        return {"throttle_time_ms": 0, **sync_result(ErrorCode.NOT_COORDINATOR)}
    fut = ctx.broker.coordinator.groups.sync(
        request["group_id"], request["generation_id"], request["member_id"],
        request["group_instance_id"] if version >= 3 else None,
        request["protocol_type"] if version >= 5 else None,
        request["protocol_name"] if version >= 5 else None,
        [(a["member_id"], a["assignment"]) for a in request["assignments"]],
    )
    result = dict(await fut)
    result["throttle_time_ms"] = 0
    return result
