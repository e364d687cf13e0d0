"""LeaveGroup (key 13), versions 0-5.

v0-2 remove one member (`member_id`) and answer with a top-level error. v3+ remove a batch of members,
each by member id and/or group.instance.id (an instance id with an empty member id removes whatever member
holds it), with a per-member error (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); the top-level error is then
NONE. v5 carries a reason, which is only logged. A removal starts a rebalance for the remaining members.
"""

import logging

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


@handler(ApiKey.LEAVE_GROUP, 0, 5)
def leave_group(ctx: RequestContext, request: dict) -> dict:
    groups = ctx.broker.coordinator.groups
    if not ctx.allowed(Op.READ, Res.GROUP, request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "members": []}
    if not ctx.broker.coordinator.owns(request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_COORDINATOR, "members": []}
    if ctx.api_version < 3:
        (error,) = groups.leave(request["group_id"], [(request["member_id"], None)])
        return {"throttle_time_ms": 0, "error_code": error}
    members = request["members"]
    for m in members:
        if m.get("reason"):
            log.info("group %s: %s leaves: %s", request["group_id"], m["member_id"], m["reason"])
    errors = groups.leave(request["group_id"], [(m["member_id"], m["group_instance_id"]) for m in members])
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "members": [{"member_id": m["member_id"], "group_instance_id": m["group_instance_id"], "error_code": e}
                    for m, e in zip(members, errors)],
    }
