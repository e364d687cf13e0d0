"""ShareGroupDescribe (key 77), version 1: share groups (KIP-932).

Per group: state (Empty, Stable), group epoch, assignment epoch (the same: a share group's assignment is
made on the heartbeat that changes it), assignor `simple`, and per member its epoch, client, subscribed
topic names and assignment (topic id, name, partitions). An unknown group, or a classic or consumer one, is
answered GROUP_ID_NOT_FOUND; `authorized_operations` as DescribeGroups.
v0 (Kafka 4.0's early access) is not served.
"""

from odradek.broker.context import RequestContext
from odradek.broker.handlers.k69_consumer_group_describe import NOT_REQUESTED, assignment_body, \
    authorized_operations, describe_refusal, failed_group
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

ASSIGNOR = "simple"


@handler(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1)
def share_group_describe(ctx: RequestContext, request: dict) -> dict:
    coordinator = ctx.broker.coordinator
    out = []
    for gid in request["group_ids"]:
        refused = describe_refusal(ctx, gid)
        if refused:
            out.append(failed_group(gid, refused))
            continue
        group = coordinator.share_groups.groups.get(gid)
        if group is None:
            other = coordinator.groups.groups.get(gid)
            message = f"Group {gid} is not a share group." if other is not None else f"Group {gid} not found."
            out.append(failed_group(gid, ErrorCode.GROUP_ID_NOT_FOUND, message))
            continue
        members = [{"member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                    "client_id": m.client_id, "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_names), "assignment": assignment_body(ctx, m.assigned)}
                   for m in group.members.values()]
        described = {"error_code": 0, "error_message": None, "group_id": gid, "group_state": group.state_name,
                     "group_epoch": group.group_epoch, "assignment_epoch": group.group_epoch,
                     "assignor_name": ASSIGNOR, "members": members, "authorized_operations": NOT_REQUESTED}
        if request["include_authorized_operations"]:
            described["authorized_operations"] = authorized_operations(ctx, gid)
        out.append(described)
    return {"throttle_time_ms": 0, "groups": out}
