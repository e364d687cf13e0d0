"""What AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92) share: who may change a share group's
offsets, and that the group must be empty.

Both run on the group's coordinator and reach each partition's share coordinator through the share-group
persister (coordinator/share_coordinator.py: local, or broker/share_persister.py in a cluster). A group
with members is refused NON_EMPTY_GROUP; an id held by a classic or consumer group GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.context import RequestContext


def offsets_refusal(ctx: "RequestContext", group_id: str, operation: int,
                    must_exist: bool) -> tuple[int, str | None] | None:
    """Why the group's share offsets may not be changed by this request (code, message), or None."""
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID, "GroupId can't be empty."
    if not ctx.allowed(operation, Res.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    coordinator = ctx.broker.coordinator
    if not coordinator.owns(group_id):
        return ErrorCode.NOT_COORDINATOR, None
    if coordinator.groups.groups.get(group_id) is not None:
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
    group = coordinator.share_groups.groups.get(group_id)
    if group is None and must_exist:
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
    if group is not None and group.members:
        return ErrorCode.NON_EMPTY_GROUP, "The group is not empty."
    return None


def topic_refusal(ctx: "RequestContext", name: str) -> int:
    """Why a topic's offsets may not be changed (READ on the topic, and it must exist), or NONE."""
    if not ctx.allowed(Op.READ, Res.TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if ctx.broker.metadata.topic(name) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return ErrorCode.NONE
