"""ShareGroupDescribe (key 77), version 1: share groups (KIP-932).

Per group: state (Empty, Stable), group epoch, assignment epoch (the same: a share group's assignment is
made on the heartbeat that changes it), assignor `simple`, and per member its epoch, client, subscribed
topic names and assignment (topic id, name, partitions). An unknown group, or a classic or consumer one, is
answered GROUP_ID_NOT_FOUND; `authorized_operations` as DescribeGroups.
v0 (Kafka 4.0's early access) is not served.
"""

from odradek.broker.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.core import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

NOT_REQUESTED = -(1 << 31)
ASSIGNOR = "simple"


def _failed(group_id: str, code: int, message: str | None = None) -> dict:
    return {"error_code": code, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": NOT_REQUESTED}


def _assignment(ctx: RequestContext, partitions) -> dict:
    out = []
    for topic_id in sorted({t for t, _ in partitions}):
        topic = ctx.broker.metadata.topic_by_id(topic_id)
        out.append({"topic_id": topic_id, "topic_name": topic.name if topic is not None else "",
                    "partitions": sorted(p for t, p in partitions if t == topic_id)})
    return {"topic_partitions": out}


@handler(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1)
def share_group_describe(ctx: RequestContext, request: dict) -> dict:
    coordinator = ctx.broker.coordinator
    out = []
    for gid in request["group_ids"]:
        if not ctx.allowed(Op.DESCRIBE, Res.GROUP, gid):
            out.append(_failed(gid, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        if not gid:
            out.append(_failed(gid, ErrorCode.INVALID_GROUP_ID))
            continue
        if not coordinator.owns(gid):
            out.append(_failed(gid, ErrorCode.NOT_COORDINATOR))
            continue
        group = coordinator.share_groups.groups.get(gid)
        if group is None:
            other = coordinator.groups.groups.get(gid)
            message = f"Group {gid} is not a share group." if other is not None else f"Group {gid} not found."
            out.append(_failed(gid, ErrorCode.GROUP_ID_NOT_FOUND, message))
            continue
        members = [{"member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                    "client_id": m.client_id, "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_names), "assignment": _assignment(ctx, m.assigned)}
                   for m in group.members.values()]
        described = {"error_code": 0, "error_message": None, "group_id": gid, "group_state": group.state_name,
                     "group_epoch": group.group_epoch, "assignment_epoch": group.group_epoch,
                     "assignor_name": ASSIGNOR, "members": members, "authorized_operations": NOT_REQUESTED}
        if request["include_authorized_operations"]:
            conn = ctx.connection
            described["authorized_operations"] = ctx.broker.authorizer.authorized_operations(
                conn.principal, conn.peer_host, Res.GROUP, gid)
        out.append(described)
    return {"throttle_time_ms": 0, "groups": out}
