"""JoinGroup (key 11), versions 0-9.

A long poll: the reply comes when the rebalance round completes (all known members rejoined, or the
rebalance timeout passed) — see `coordinator.group_coordinator`. v0 has no rebalance timeout (the session
timeout is used). v4+: a first join without a member id gets MEMBER_ID_REQUIRED and a generated id to
rejoin with. v5+: static membership (group.instance.id). v7+: the reply names the protocol type (and the
protocol name may be null on errors). v8+: the join reason is only logged. v9: `skip_assignment` is set
for a static leader that rejoined a Stable group (its old assignment stands). A JoinGroup to a consumer
group (KIP-848) with members is a classic member of it (online migration, coordinator/classic_members.py):
answered at once, with the member's epoch as generation, no leader and no member list.
Errors: INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT (outside group.min/max.session.timeout.ms),
INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED.
"""

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.coordinator.group_coordinator import JoinRequest, join_error
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


def client_host(ctx: RequestContext) -> str:
    peer = ctx.connection.peer
    return "/" + peer.rsplit(":", 1)[0] if peer and peer != "?" else ""


@handler(ApiKey.JOIN_GROUP, 0, 9)
async def join_group(ctx: RequestContext, request: dict) -> dict:
    version = ctx.api_version
    if not ctx.allowed(Op.READ, Res.GROUP, request["group_id"]):
        return {"throttle_time_ms": 0, **join_error(ErrorCode.GROUP_AUTHORIZATION_FAILED, request["member_id"] or ""),
                "protocol_name": None if version >= 7 else ""}
    if not ctx.broker.coordinator.owns(request["group_id"]):
        return {"throttle_time_ms": 0, **join_error(ErrorCode.NOT_COORDINATOR, request["member_id"] or ""),
                "protocol_name": None if version >= 7 else ""}
    session = request["session_timeout_ms"]
    rebalance = request["rebalance_timeout_ms"] if version >= 1 else session
    req = JoinRequest(
        group_id=request["group_id"],
        member_id=request["member_id"] or "",
        group_instance_id=request["group_instance_id"] if version >= 5 else None,
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance if rebalance > 0 else session,
        protocol_type=request["protocol_type"],
        protocols=[(p["name"], bytes(p["metadata"])) for p in request["protocols"]],
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
        require_known_member=version >= 4,
    )
    result = dict(await ctx.broker.coordinator.groups.join(req))
    result["throttle_time_ms"] = 0
    if version < 7:
        result["protocol_name"] = result["protocol_name"] or ""
    return result
