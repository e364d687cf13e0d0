"""Heartbeat (key 12), versions 0-4.

Keeps a member's session alive. Answers REBALANCE_IN_PROGRESS while the group prepares a rebalance (the
member must rejoin), ILLEGAL_GENERATION for an old generation, UNKNOWN_MEMBER_ID for a member the group
does not know (expired, left, or the group is Empty), FENCED_INSTANCE_ID (v3+) for a replaced static
member. A heartbeat during CompletingRebalance is accepted.
"""

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.HEARTBEAT, 0, 4)
def heartbeat(ctx: RequestContext, request: dict) -> dict:
    if not ctx.allowed(Op.READ, Res.GROUP, request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    if not ctx.broker.coordinator.owns(request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_COORDINATOR}
    instance = request["group_instance_id"] if ctx.api_version >= 3 else None
    error = ctx.broker.coordinator.groups.heartbeat(request["group_id"], request["generation_id"],
                                                    request["member_id"], instance)
    return {"throttle_time_ms": 0, "error_code": error}
