"""ShareGroupHeartbeat (key 76), version 1: membership of share groups (KIP-932).

A member joins with epoch 0 and its subscribed topic names (v1: with the member id it made itself),
heartbeats with its epoch and leaves with -1; the coordinator (coordinator/share_groups.py) assigns every
member every partition of its subscribed topics (a share group divides records, not partitions), sends the
assignment when it joins or it changes, and tells it `group.share.heartbeat.interval.ms` (or the group's
`share.heartbeat.interval.ms`). Errors: GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED,
NOT_COORDINATOR, INVALID_REQUEST (with Kafka's messages), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, and
GROUP_ID_NOT_FOUND when the id belongs to a classic or consumer group.
v0 (Kafka 4.0's early access) is not served. Gaps: membership is not stored (after a restart members are
told UNKNOWN_MEMBER_ID and rejoin; their delivery state is stored); `rack_id` is only reported; the assignor
is not configurable (Kafka's `simple` assignor divides the partitions among the members, sharing one only
when members outnumber partitions).
"""

from odradek.broker.context import RequestContext
from odradek.broker.handlers.k11_join_group import client_host
from odradek.broker.handlers.k68_consumer_group_heartbeat import heartbeat_refusal
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


def _error(code: int, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "member_id": None,
            "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}


@handler(ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1)
def share_group_heartbeat(ctx: RequestContext, request: dict) -> dict:
    group_id = request["group_id"]
    names = request["subscribed_topic_names"]
    refused = heartbeat_refusal(ctx, group_id, names)
    if refused:
        return _error(refused)
    coordinator = ctx.broker.coordinator
    other = coordinator.groups.groups.get(group_id)
    if other is not None and other.members:  # a running classic or consumer group holds the name
        return _error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
    body = coordinator.share_groups.heartbeat(group_id, request["member_id"], request["member_epoch"],
                                              request["rack_id"], list(names) if names is not None else None,
                                              ctx.client_id or "", client_host(ctx))
    body["throttle_time_ms"] = 0
    return body
