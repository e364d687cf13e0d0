"""ListGroups (key 16), versions 0-5.

Every group this coordinator knows (also Empty ones that only hold offsets), with protocol type, state
(v4+) and type (v5: "classic", "consumer" for groups of the KIP-848 protocol, whose states are Empty,
Assigning, Reconciling and Stable, "streams" for groups of the streams protocol of KIP-1071, whose states
add NotReady, or "share" for share groups of KIP-932, Empty or Stable). v4+ `states_filter` and v5 `types_filter` keep only the matching groups
(case-insensitive; an empty filter keeps all).
"""

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.coordinator.consumer_group import ConsumerGroup
from odradek.coordinator.streams_group import StreamsGroup
from odradek.coordinator.group import GroupState
from odradek.protocol.api_keys import ApiKey


@handler(ApiKey.LIST_GROUPS, 0, 5)
def list_groups(ctx: RequestContext, request: dict) -> dict:
    states = {s.lower() for s in request["states_filter"]} if ctx.api_version >= 4 else set()
    types = {t.lower() for t in request["types_filter"]} if ctx.api_version >= 5 else set()
    out = []
    # DESCRIBE on the cluster lists every group; otherwise those the principal may describe
    every = ctx.allowed(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME)
    for group in ctx.broker.coordinator.groups.groups.values():
        if group.is_(GroupState.DEAD) or not (every or ctx.allowed(Op.DESCRIBE, Res.GROUP, group.group_id)):
            continue
        if states and group.state.value.lower() not in states:
            continue
        kind = "streams" if isinstance(group, StreamsGroup) else (
            "consumer" if isinstance(group, ConsumerGroup) else "classic")
        if types and kind not in types:
            continue
        out.append({"group_id": group.group_id, "protocol_type": group.protocol_type or "",
                    "group_state": group.state.value, "group_type": kind})
    for group in ctx.broker.coordinator.share_groups.groups.values():
        if not (every or ctx.allowed(Op.DESCRIBE, Res.GROUP, group.group_id)):
            continue
        if (states and group.state_name.lower() not in states) or (types and "share" not in types):
            continue
        out.append({"group_id": group.group_id, "protocol_type": group.protocol_type,
                    "group_state": group.state_name, "group_type": "share"})
    return {"throttle_time_ms": 0, "error_code": 0, "groups": out}
