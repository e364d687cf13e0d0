"""ConsumerGroupHeartbeat (key 68), versions 0-1: the consumer group protocol of KIP-848.

One request joins (member epoch 0), heartbeats, reports revoked partitions and leaves (epoch -1; -2 for a
static member leaving for now); the coordinator computes the assignment (`uniform` or `range`, see
`coordinator.assignors`) and hands it out step by step with member epochs (`coordinator.consumer_groups`).
v0: a member joining without a member id gets one made by the coordinator; v1 (KIP-1082) requires the
client to make its own, and adds `subscribed_topic_regex` (a Python regular expression, matched against
the whole topic name; internal topics never match).
Errors: GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED (a subscribed topic the principal may not
describe), NOT_COORDINATOR, INVALID_REQUEST (with Kafka's messages), GROUP_ID_NOT_FOUND (the id is a
classic group with members that does not use the consumer embedded protocol; one that does is converted
online, as Kafka 4.x does: coordinator/classic_members.py), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, FENCED_INSTANCE_ID,
UNRELEASED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, GROUP_MAX_SIZE_REACHED, INVALID_REGULAR_EXPRESSION (v1).
The group's state is stored in `__consumer_offsets` and restored with the coordinator (members keep their
epochs across a failover). A member of a group the coordinator does not know is told UNKNOWN_MEMBER_ID
(Kafka: GROUP_ID_NOT_FOUND), so that it rejoins.
Gaps: rack-aware assignment (`rack_id` is only reported), client-side assignors.
"""

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.handlers.k11_join_group import client_host
from odradek.broker.registry import handler
from odradek.coordinator.consumer_groups import HeartbeatRequest
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


def _error(code: int, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "member_id": None,
            "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}


def heartbeat_refusal(ctx: RequestContext, group_id: str, names: list[str] | None) -> int:
    """Why a group heartbeat (this one, or ShareGroupHeartbeat) is refused before its group is looked at."""
    if not ctx.allowed(Op.READ, Res.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if names and any(not ctx.allowed(Op.DESCRIBE, Res.TOPIC, n) for n in names):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if group_id and not ctx.broker.coordinator.owns(group_id):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.NONE


@handler(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1)
def consumer_group_heartbeat(ctx: RequestContext, request: dict) -> dict:
    group_id = request["group_id"]
    names = request["subscribed_topic_names"]
    refused = heartbeat_refusal(ctx, group_id, names)
    if refused:
        return _error(refused)
    owned = request["topic_partitions"]
    body = ctx.broker.coordinator.consumer_groups.heartbeat(HeartbeatRequest(
        group_id=group_id,
        member_id=request["member_id"],
        member_epoch=request["member_epoch"],
        instance_id=request["instance_id"],
        rack_id=request["rack_id"],
        rebalance_timeout_ms=request["rebalance_timeout_ms"],
        subscribed_names=list(names) if names is not None else None,
        subscribed_regex=request["subscribed_topic_regex"] if ctx.api_version >= 1 else None,
        server_assignor=request["server_assignor"],
        owned=[(t["topic_id"], list(t["partitions"])) for t in owned] if owned is not None else None,
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
        version=ctx.api_version,
    ))
    body["throttle_time_ms"] = 0
    return body
