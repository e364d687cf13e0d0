"""DescribeShareGroupOffsets (key 90), versions 0-1: where share groups stand in their partitions (KIP-932).

Per group and partition: the share-partition start offset (SPSO: everything below it is acknowledged or
archived) and, from v1 (KIP-1226), the lag: records below the high watermark not yet finished (in flight
and not acknowledged or archived, or never delivered). A partition the group has no state for answers start
offset -1 (and lag -1), as does one the group was assigned but never handed a record from (Kafka 4.4 shows
no start offset until then; a leader does not store the start it opened a window at before the window first
holds a record); `topics` null lists every partition the group has state for. An id no group holds is
answered as Kafka 4.4 answers it, as a share group with no state (NONE, each partition asked for at -1); an
id of a classic or consumer group GROUP_ID_NOT_FOUND; an unknown topic of a known group
UNKNOWN_TOPIC_OR_PARTITION per partition; GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED (topics the
principal may not describe), NOT_COORDINATOR.

The start offset and the finished count come from each partition's share coordinator
(ReadShareGroupStateSummary, or the local one: coordinator/share_coordinator.py), so they are what is
stored, as is `leader_epoch` (the state's: 0 after AlterShareGroupOffsets, as in Kafka); the high watermark
is this broker's replica's. Gaps: the lag is -1
for a partition with no replica here; `topics` null lists the partitions assigned to the group's members
since this coordinator took the group or set by AlterShareGroupOffsets (`ShareGroup.seen`, wherever their
share coordinator is), and those it has state for at this broker's share coordinator: Kafka's group
coordinator stores the list of a group's initialized partitions, odradek's keeps it in memory only, so after a
coordinator move a partition whose state is on another broker is listed once it is assigned again.
"""

import asyncio

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.coordinator.share_partition import FINISHED
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

PROVEN_BY = "interop and cluster suites, franz-go's share tests, differential suite"
ZERO_UUID = bytes(16)


def _group(group_id: str, code: int, message: str | None = None) -> dict:
    return {"group_id": group_id, "topics": [], "error_code": code, "error_message": message}


def _partition(index: int, start: int = -1, lag: int = -1, code: int = 0, leader_epoch: int = -1) -> dict:
    return {"partition_index": index, "start_offset": start, "leader_epoch": leader_epoch, "lag": lag,
            "error_code": code, "error_message": None}


def _unknown_group(ctx: RequestContext, group_id: str, asked: list[dict] | None) -> dict:
    """A group id no group holds, answered as Kafka 4.4 does: a group with no state, NONE, every partition
    asked for at start offset -1 (TOPIC_AUTHORIZATION_FAILED where the topic may not be described), none
    when all are asked for."""
    topics = [{"topic_name": t["topic_name"], "topic_id": ZERO_UUID, "partitions": [
        _partition(i, code=0 if ctx.allowed(Op.DESCRIBE, Res.TOPIC, t["topic_name"])
                   else ErrorCode.TOPIC_AUTHORIZATION_FAILED) for i in t["partitions"]]} for t in asked or ()]
    return {"group_id": group_id, "topics": topics, "error_code": 0, "error_message": None}


@handler(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1)
async def describe_share_group_offsets(ctx: RequestContext, request: dict) -> dict:
    coordinator = ctx.broker.coordinator
    share = coordinator.share_groups
    metadata = ctx.broker.metadata
    out = []
    for asked in request["groups"]:
        gid = asked["group_id"]
        if not ctx.allowed(Op.DESCRIBE, Res.GROUP, gid):
            out.append(_group(gid, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        if not coordinator.owns(gid):
            out.append(_group(gid, ErrorCode.NOT_COORDINATOR))
            continue
        if gid not in share.groups:
            if coordinator.groups.groups.get(gid) is not None:
                out.append(_group(gid, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group."))
            else:
                out.append(_unknown_group(ctx, gid, asked["topics"]))
            continue
        wanted: dict[str, list[int]] = {}
        if asked["topics"] is None:
            known = {(t, p) for _, t, p in coordinator.share_coordinator.keys_of(gid)}
            known |= {tp for m in share.groups[gid].members.values() for tp in m.assigned}
            known |= share.groups[gid].seen  # state kept by other brokers' share coordinators, in a cluster
            for topic_id, index in sorted(known):
                topic = metadata.topic_by_id(topic_id)
                if topic is not None:
                    wanted.setdefault(topic.name, []).append(index)
        else:
            for t in asked["topics"]:
                wanted.setdefault(t["topic_name"], []).extend(t["partitions"])
        topics = []
        for name, indexes in wanted.items():
            topic = metadata.topic(name)
            if not ctx.allowed(Op.DESCRIBE, Res.TOPIC, name):
                topics.append({"topic_name": name, "topic_id": ZERO_UUID, "partitions": [
                    _partition(i, code=ErrorCode.TOPIC_AUTHORIZATION_FAILED) for i in indexes]})
                continue
            if topic is None:
                topics.append({"topic_name": name, "topic_id": ZERO_UUID, "partitions": [
                    _partition(i, code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for i in indexes]})
                continue
            parts = []
            for index in indexes:
                key = (gid, topic.topic_id, index)
                sp = share.partitions.get(key)
                if sp is not None and sp.dirty and not sp.untouched:  # led here and newer than what is stored
                    start, finished = sp.start, sum(1 for r in sp.records.values() if r.state in FINISHED)
                    leader_epoch = share.epochs.get(key, (0, -1))[1]
                else:
                    code, stored = await asyncio.wrap_future(share.persister.summary(key))
                    if code or stored is None or stored.start < 0:
                        # a partition the group was assigned is initialized by Kafka's group coordinator
                        # with no start offset and leader epoch 0; shown so until the group gets a record
                        assigned = (topic.topic_id, index) in share.groups[gid].seen
                        parts.append(_partition(index, code=code, leader_epoch=0 if assigned and not code else -1))
                        continue
                    start, finished = stored.start, stored.delivery_complete()
                    leader_epoch = stored.leader_epoch
                plog = ctx.broker.logs.get(name, index)
                lag = max(plog.high_watermark - start - finished, 0) if plog is not None else -1
                parts.append(_partition(index, start, lag, leader_epoch=leader_epoch))
            topics.append({"topic_name": name, "topic_id": topic.topic_id, "partitions": parts})
        out.append({"group_id": gid, "topics": topics, "error_code": 0, "error_message": None})
    return {"throttle_time_ms": 0, "groups": out}
