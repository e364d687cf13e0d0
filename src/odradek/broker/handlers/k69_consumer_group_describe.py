"""ConsumerGroupDescribe (key 69), versions 0-1: groups of the consumer group protocol (KIP-848).

Per group: state (Empty, Assigning, Reconciling, Stable), group epoch, assignment epoch, the assignor the
next target assignment comes from, and per member its epoch, subscription (names and regex), current
assignment (what it owns, partitions it has still to revoke included) and target assignment, each partition
set named by topic id and name (a member without a regex shows an empty one, as Kafka); v1 adds the member type
(1: consumer protocol; odradek's consumer groups have no classic members). An unknown group, a classic
group, a streams group (KIP-1071) and a share group are answered GROUP_ID_NOT_FOUND with Kafka's message; `authorized_operations` as DescribeGroups.
"""

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.coordinator.consumer_group import ConsumerGroup, grouped
from odradek.coordinator.streams_group import StreamsGroup
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

NOT_REQUESTED = -(1 << 31)
CONSUMER_MEMBER = 1


def assignment_body(ctx: RequestContext, partitions) -> dict:
    out = []
    for topic_id, parts in sorted(grouped(partitions).items()):
        topic = ctx.broker.metadata.topic_by_id(topic_id)
        out.append({"topic_id": topic_id, "topic_name": topic.name if topic is not None else "",
                    "partitions": sorted(parts)})
    return {"topic_partitions": out}


def failed_group(group_id: str, code: int, message: str | None = None) -> dict:
    return {"error_code": code, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": NOT_REQUESTED}


def describe_refusal(ctx: RequestContext, group_id: str) -> int:
    """Why a group cannot be described here (this API, or ShareGroupDescribe), before it is looked up."""
    if not ctx.allowed(Op.DESCRIBE, Res.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID
    if not ctx.broker.coordinator.owns(group_id):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.NONE


def authorized_operations(ctx: RequestContext, group_id: str) -> int:
    conn = ctx.connection
    return ctx.broker.authorizer.authorized_operations(conn.principal, conn.peer_host, Res.GROUP, group_id)


@handler(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1)
def consumer_group_describe(ctx: RequestContext, request: dict) -> dict:
    coordinator = ctx.broker.coordinator
    out = []
    for gid in request["group_ids"]:
        refused = describe_refusal(ctx, gid)
        if refused:
            out.append(failed_group(gid, refused))
            continue
        group = coordinator.groups.groups.get(gid)
        if group is None and gid in coordinator.share_groups.groups:
            out.append(failed_group(gid, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group."))
            continue
        if group is None or group.is_("Dead"):
            out.append(failed_group(gid, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found."))
            continue
        if not isinstance(group, ConsumerGroup) or isinstance(group, StreamsGroup):
            out.append(failed_group(gid, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group."))
            continue
        members = [{
            "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
            "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_names), "subscribed_topic_regex": m.subscribed_regex or "",
            "assignment": assignment_body(ctx, m.owned),
            "target_assignment": assignment_body(ctx, group.target.get(m.member_id, set())),
            "member_type": CONSUMER_MEMBER,
        } for m in group.members.values()]
        described = {"error_code": 0, "error_message": None, "group_id": gid, "group_state": group.state.value,
                     "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
                     "assignor_name": coordinator.consumer_groups.assignor_for(group), "members": members,
                     "authorized_operations": NOT_REQUESTED}
        if request["include_authorized_operations"]:
            described["authorized_operations"] = authorized_operations(ctx, gid)
        out.append(described)
    return {"throttle_time_ms": 0, "groups": out}
