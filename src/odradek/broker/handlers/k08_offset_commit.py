"""OffsetCommit (key 8), versions 0-10.

Commits are validated against the group (see `coordinator.offset_manager`): generation -1 with an empty
member id is a "simple" commit, allowed for an unknown or Empty group; otherwise ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS (CompletingRebalance), FENCED_INSTANCE_ID (v7+); for a group of the
consumer protocol (KIP-848) the member epoch instead: STALE_MEMBER_EPOCH, and UNSUPPORTED_VERSION below v9
for its members. Per partition:
UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE (`offset.metadata.max.bytes`). Accepted offsets
are appended to `__consumer_offsets` and the reply waits for their fsync, which runs on the log flusher's
thread (the handler then returns a coroutine); a failed fsync → COORDINATOR_NOT_AVAILABLE for them.
v0 has no generation/member; v1 carries a per-partition commit timestamp; v2-4 a retention time (the
offset then expires at commit time + retention, as in Kafka); v6+ the leader epoch, returned by
OffsetFetch.
v10 names topics by id only (KIP-848): an id this broker does not know → UNKNOWN_TOPIC_ID for its partitions
(GROUP_AUTHORIZATION_FAILED when the group is not authorized, so that ids leak nothing).
A broker that does not coordinate the group answers NOT_COORDINATOR for every partition; the id of a share
group (KIP-932), which has no committed offsets, GROUP_ID_NOT_FOUND (as Kafka 4.4 answers).
"""

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.core import when_durable
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.OFFSET_COMMIT, 0, 10)
def offset_commit(ctx: RequestContext, request: dict):
    if ctx.api_version < 10:
        return _offset_commit(ctx, request)
    # v10: topics by id. Commit by name, then answer by id.
    by_id = ctx.broker.metadata.topic_by_id
    named, unknown = [], []
    for t in request["topics"]:
        topic = by_id(t["topic_id"])
        (named if topic is not None else unknown).append({**t, "name": topic.name} if topic is not None else t)
    # the group is authorized first, as in Kafka: a user who may not use the group learns nothing of topic ids
    unknown_error = ErrorCode.UNKNOWN_TOPIC_ID if ctx.allowed(Op.READ, Res.GROUP, request["group_id"]) \
        else ErrorCode.GROUP_AUTHORIZATION_FAILED
    missing = [{"topic_id": t["topic_id"], "partitions": [
        {"partition_index": p["partition_index"], "error_code": unknown_error} for p in t["partitions"]]}
        for t in unknown]
    if not named:
        return {"throttle_time_ms": 0, "topics": missing}
    ids = {t["name"]: t["topic_id"] for t in named}
    body = _offset_commit(ctx, {**request, "topics": named})

    def by_topic_id(b: dict) -> dict:
        for t in b["topics"]:
            t["topic_id"] = ids[t["name"]]
        b["topics"] += missing
        return b
    if isinstance(body, dict):
        return by_topic_id(body)

    async def answer() -> dict:
        return by_topic_id(await body)
    return answer()


def _offset_commit(ctx: RequestContext, request: dict):
    version = ctx.api_version
    topics = []
    for t in request["topics"]:
        parts = [(p["partition_index"], p["committed_offset"], p["committed_leader_epoch"] if version >= 6 else -1,
                  p["committed_metadata"], p["commit_timestamp"] if version == 1 else -1) for p in t["partitions"]]
        topics.append((t["name"], parts))
    retention = request["retention_time_ms"] if 2 <= version <= 4 else -1
    # READ on the group, then on each topic (Kafka's order)
    denied = {name: ErrorCode.GROUP_AUTHORIZATION_FAILED for name, _ in topics} \
        if not ctx.allowed(Op.READ, Res.GROUP, request["group_id"]) else \
        {name: ErrorCode.TOPIC_AUTHORIZATION_FAILED for name, _ in topics if not ctx.allowed(Op.READ, Res.TOPIC, name)}
    if denied:
        refused = [(name, parts) for name, parts in topics if name in denied]
        topics = [(name, parts) for name, parts in topics if name not in denied]
        if not topics:
            return {"throttle_time_ms": 0, "topics": [
                {"name": name, "partitions": [{"partition_index": p[0], "error_code": denied[name]} for p in parts]}
                for name, parts in refused]}
    if not ctx.broker.coordinator.owns(request["group_id"]):
        return _refused(topics, ErrorCode.NOT_COORDINATOR)
    errors, durable = ctx.broker.coordinator.offsets.commit(
        request["group_id"], request["generation_id_or_member_epoch"] if version >= 1 else -1,
        request["member_id"] if version >= 1 else "", request["group_instance_id"] if version >= 7 else None,
        retention, topics, api_version=version)
    body = {
        "throttle_time_ms": 0,
        "topics": [{"name": name, "partitions": [{"partition_index": p[0], "error_code": errors[(name, p[0])]}
                                                for p in parts]} for name, parts in topics],
    }
    if denied:
        body["topics"] += [{"name": name, "partitions": [{"partition_index": p[0], "error_code": denied[name]}
                                                         for p in parts]} for name, parts in refused]
    if durable is None:
        return body
    # every accepted partition (error 0) is in the one write
    accepted = [(part, durable) for topic in body["topics"] for part in topic["partitions"]
                if part["error_code"] == ErrorCode.NONE]
    return when_durable(body, accepted, _not_durable)


def _refused(topics: list, error: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "topics": [
        {"name": name, "partitions": [{"partition_index": p[0], "error_code": error} for p in parts]}
        for name, parts in topics]}


def _not_durable(part: dict, error: BaseException) -> None:
    part["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
