"""ListGroups (key 16), versions 0-5.

Every group this coordinator knows (also Empty ones that only hold offsets), with protocol type, state
(v4+) and type (v5: always "classic"). v4+ `states_filter` and v5 `types_filter` keep only the matching
groups (case-insensitive; an empty filter keeps all).
"""

from odradek.broker.core import RequestContext
from odradek.broker.registry import handler
from odradek.coordinator.group import GroupState
from odradek.protocol.api_keys import ApiKey


@handler(ApiKey.LIST_GROUPS, 0, 5)
def list_groups(ctx: RequestContext, request: dict) -> dict:
    states = {s.lower() for s in request["states_filter"]} if ctx.api_version >= 4 else set()
    types = {t.lower() for t in request["types_filter"]} if ctx.api_version >= 5 else set()
    out = []
    for group in ctx.broker.coordinator.groups.groups.values():
        if group.is_(GroupState.DEAD):
            continue
        if states and group.state.value.lower() not in states:
            continue
        if types and "classic" not in types:
            continue
        out.append({"group_id": group.group_id, "protocol_type": group.protocol_type or "",
                    "group_state": group.state.value, "group_type": "classic"})
    return {"throttle_time_ms": 0, "error_code": 0, "groups": out}
