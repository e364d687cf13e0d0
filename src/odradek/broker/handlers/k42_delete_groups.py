"""DeleteGroups (key 42), versions 0-2.

Deletes Empty groups with their committed offsets (tombstones in `__consumer_offsets`). Per group:
GROUP_ID_NOT_FOUND for an unknown group, NON_EMPTY_GROUP while it has members, INVALID_GROUP_ID for "".
A share group (KIP-932) is deleted with its delivery state and group configs, once it has no members.
"""

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.DELETE_GROUPS, 0, 2)
async def delete_groups(ctx: RequestContext, request: dict) -> dict:
    coordinator = ctx.broker.coordinator
    names = request["groups_names"]
    allowed = {g for g in names if ctx.allowed(Op.DELETE, Res.GROUP, g)}
    results = {g: ErrorCode.GROUP_AUTHORIZATION_FAILED for g in names if g not in allowed}
    owned = [g for g in allowed if coordinator.owns(g)]
    share = coordinator.share_groups
    results.update({g: share.delete_group(g) for g in owned if g in share.groups})
    results.update(await coordinator.offsets.delete_groups([g for g in owned if g not in share.groups
                                                            and g not in results]))
    return {"throttle_time_ms": 0, "results": [
        {"group_id": g, "error_code": results.get(g, ErrorCode.NOT_COORDINATOR)} for g in names]}
