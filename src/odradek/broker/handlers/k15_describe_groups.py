"""DescribeGroups (key 15), versions 0-6.

Per group: state, protocol type, and members (id, instance id v4+, client id and host). As in Kafka, the
protocol name and each member's metadata and assignment bytes are filled in only when the group is
Stable. An unknown group is described as Dead with no members and error NONE; from v6 (KIP-1043) it is
answered GROUP_ID_NOT_FOUND with a message instead. A group of the consumer protocol (KIP-848) is described as
Kafka 4.4 does: Dead and empty before v6, GROUP_ID_NOT_FOUND ("not a classic group") from v6 — its clients
use ConsumerGroupDescribe; so is a share group (KIP-932), described by ShareGroupDescribe.
With an authorizer, a group the principal may not DESCRIBE is answered GROUP_AUTHORIZATION_FAILED, and
`authorized_operations` (v3+, when asked for) holds the bits of what it may do with each group.
"""

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.coordinator.consumer_group import ConsumerGroup
from odradek.coordinator.group import GroupState
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

NOT_REQUESTED = -(1 << 31)


def describe(group, group_id: str) -> dict:
    if group is None:
        return {"error_code": 0, "group_id": group_id, "group_state": GroupState.DEAD.value, "protocol_type": "",
                "protocol_data": "", "members": [], "authorized_operations": NOT_REQUESTED}
    stable = group.is_(GroupState.STABLE)
    members = [{
        "member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
        "client_host": m.client_host,
        "member_metadata": m.metadata_for(group.protocol_name) if stable else b"",
        "member_assignment": m.assignment if stable else b"",
    } for m in group.members.values()]
    return {"error_code": 0, "group_id": group_id, "group_state": group.state.value,
            "protocol_type": group.protocol_type or "", "protocol_data": (group.protocol_name or "") if stable else "",
            "members": members, "authorized_operations": NOT_REQUESTED}


@handler(ApiKey.DESCRIBE_GROUPS, 0, 6)
def describe_groups(ctx: RequestContext, request: dict) -> dict:
    groups = ctx.broker.coordinator.groups.groups
    out = []
    for gid in request["groups"]:
        if not ctx.allowed(Op.DESCRIBE, Res.GROUP, gid):
            out.append({**describe(None, gid), "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED})
        elif not gid:
            out.append({**describe(None, gid), "error_code": ErrorCode.INVALID_GROUP_ID})
        elif not ctx.broker.coordinator.owns(gid):
            out.append({**describe(None, gid), "error_code": ErrorCode.NOT_COORDINATOR})
        elif gid not in groups and ctx.api_version >= 6 and gid not in ctx.broker.coordinator.share_groups.groups:
            out.append({**describe(None, gid), "error_code": ErrorCode.GROUP_ID_NOT_FOUND,
                        "error_message": f"Group {gid} not found."})
        elif isinstance(groups.get(gid), ConsumerGroup) or (
                gid not in groups and gid in ctx.broker.coordinator.share_groups.groups):
            out.append(describe(None, gid) if ctx.api_version < 6 else {
                **describe(None, gid), "error_code": ErrorCode.GROUP_ID_NOT_FOUND,
                "error_message": f"Group {gid} is not a classic group."})
        else:
            out.append(describe(groups.get(gid), gid))
            if ctx.api_version >= 3 and request["include_authorized_operations"]:
                conn = ctx.connection
                out[-1]["authorized_operations"] = ctx.broker.authorizer.authorized_operations(
                    conn.principal, conn.peer_host, Res.GROUP, gid)
    return {"throttle_time_ms": 0, "groups": out}
