"""OffsetFetch (key 9), versions 0-10.

Returns committed offsets; a partition without one gets offset -1, empty metadata and no error (also for
unknown groups and topics). `topics` null (v2+) means every partition the group has committed. v8+ ask
for several groups at once (per-group results). v7+ `require_stable`: a partition with an offset staged
by an open transaction (TxnOffsetCommit, coordinator/service.py) gets UNSTABLE_OFFSET_COMMIT and
offset -1 until that transaction completes; without it the last committed offset is returned. v9+ carry a
member id and epoch: for a group of the consumer protocol (KIP-848) a named member must be known
(UNKNOWN_MEMBER_ID) and at its current epoch (STALE_MEMBER_EPOCH); a null id with epoch -1 (admin tools)
is always answered.
v10 names topics by id only (KIP-848): an id this broker does not know → UNKNOWN_TOPIC_ID for its partitions;
asked for every topic, the answer names each by its current id (a deleted topic's offsets are left out).
A broker that does not coordinate the group answers NOT_COORDINATOR (per group from v8).
A principal without DESCRIBE on the group gets GROUP_AUTHORIZATION_FAILED: per group from v8, in the top-level
error in v2-7, and in v0-1, which have no top-level error, on every partition asked for (offset -1, empty
metadata), as Kafka answers; NOT_COORDINATOR is given the same way.
"""

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.coordinator.consumer_group import ConsumerGroup
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


ZERO_UUID = bytes(16)


def _topics_by_id(ctx: RequestContext, group_id: str, requested, require_stable: bool) -> list[dict]:
    """v10: `_topics` with topics named by id, answered by id."""
    metadata = ctx.broker.metadata
    if requested is None:
        out = _topics(ctx, group_id, None, require_stable)
        for t in out:
            topic = metadata.topic(t["name"])
            t["topic_id"] = topic.topic_id if topic is not None else ZERO_UUID
        return [t for t in out if t["topic_id"] != ZERO_UUID]
    named, missing = [], []
    for t in requested:
        topic = metadata.topic_by_id(t["topic_id"])
        if topic is None:
            missing.append({"topic_id": t["topic_id"], "partitions": [
                {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
                 "error_code": ErrorCode.UNKNOWN_TOPIC_ID} for p in t["partition_indexes"]]})
        else:
            named.append({"name": topic.name, "partition_indexes": t["partition_indexes"]})
    out = _topics(ctx, group_id, named, require_stable) if named else []
    for t in out:
        t["topic_id"] = metadata.topic(t["name"]).topic_id
    return out + missing


def _topics(ctx: RequestContext, group_id: str, requested, require_stable: bool = False) -> list[dict]:
    wanted = None if requested is None else [(t["name"], list(t["partition_indexes"])) for t in requested]
    out = []
    coordinator = ctx.broker.coordinator
    for name, parts in coordinator.offsets.fetch(group_id, wanted):
        if not ctx.allowed(Op.DESCRIBE, Res.TOPIC, name):
            if wanted is not None:  # named: refused; all: left out
                out.append({"name": name, "partitions": [
                    {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
                     "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED} for p, _ in parts]})
            continue
        partitions = []
        for p, v in parts:
            if require_stable and coordinator.has_pending_offset(group_id, name, p):
                partitions.append({"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
                                   "metadata": "", "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT})
                continue
            partitions.append({"partition_index": p, "committed_offset": v.offset if v else -1,
                               "committed_leader_epoch": v.leader_epoch if v else -1,
                               "metadata": v.metadata if v else "", "error_code": 0})
        out.append({"name": name, "partitions": partitions})
    return out


def _check_member(ctx: RequestContext, group_id: str, member_id: str | None, member_epoch: int) -> int:
    """v9+: a member of a consumer-protocol group names itself and its epoch (Kafka's check)."""
    group = ctx.broker.coordinator.groups.groups.get(group_id)
    if not isinstance(group, ConsumerGroup) or (member_id is None and member_epoch < 0):
        return 0
    member = group.members.get(member_id or "")
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return ErrorCode.STALE_MEMBER_EPOCH if member_epoch != member.member_epoch else 0


@handler(ApiKey.OFFSET_FETCH, 0, 10)
def offset_fetch(ctx: RequestContext, request: dict) -> dict:
    owns = ctx.broker.coordinator.owns
    if ctx.api_version >= 8:
        stable = request["require_stable"]
        topics = _topics_by_id if ctx.api_version >= 10 else _topics
        groups = []
        for g in request["groups"]:
            gid = g["group_id"]
            if not ctx.allowed(Op.DESCRIBE, Res.GROUP, gid):
                error = ErrorCode.GROUP_AUTHORIZATION_FAILED
            elif not owns(gid):
                error = ErrorCode.NOT_COORDINATOR
            elif ctx.api_version >= 9:
                error = _check_member(ctx, gid, g["member_id"], g["member_epoch"])
            else:
                error = 0
            groups.append({"group_id": gid, "topics": topics(ctx, gid, g["topics"], stable) if not error else [],
                           "error_code": error})
        return {"throttle_time_ms": 0, "groups": groups}
    if not ctx.allowed(Op.DESCRIBE, Res.GROUP, request["group_id"]):
        return _group_error(ctx, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not owns(request["group_id"]):
        return _group_error(ctx, request, ErrorCode.NOT_COORDINATOR)
    requested = request["topics"]
    if requested is None and ctx.api_version < 2:
        requested = []
    stable = ctx.api_version >= 7 and request["require_stable"]
    return {"throttle_time_ms": 0, "topics": _topics(ctx, request["group_id"], requested, stable), "error_code": 0}


def _group_error(ctx: RequestContext, request: dict, error: int) -> dict:
    """v0-7: the group's error; v0-1 carry it on each partition asked for, having no top-level error."""
    if ctx.api_version >= 2:
        return {"throttle_time_ms": 0, "topics": [], "error_code": error}
    return {"throttle_time_ms": 0, "error_code": error, "topics": [
        {"name": t["name"], "partitions": [{"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
                                            "metadata": "", "error_code": error} for p in t["partition_indexes"]]}
        for t in request["topics"] or []]}
