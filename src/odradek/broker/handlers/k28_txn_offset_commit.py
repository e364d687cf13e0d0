"""TxnOffsetCommit (key 28), versions 0-5.

Sent to the group's coordinator, which writes the offsets to the group's `__consumer_offsets` partition as
records of the producer's transaction (coordinator/service.py): they stay pending until the transaction's
marker reaches that partition — COMMIT makes them the group's committed offsets, ABORT drops them. Until
then OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT for them. Before writing, the group
coordinator asks the transaction's coordinator (itself, or another broker with AddPartitionsToTxn
`verify_only`, KIP-890) whether the group's partition is in the producer's open transaction
(AddOffsetsToTxn): INVALID_TXN_STATE if not, INVALID_PRODUCER_EPOCH for a stale epoch,
INVALID_PRODUCER_ID_MAPPING for an unknown id, COORDINATOR_NOT_AVAILABLE while the transaction's coordinator
cannot be asked. v5 (transactions v2, KIP-890): the producer sent no AddOffsetsToTxn, so the group coordinator
adds the group's partition to the transaction itself instead of asking.
Errors (for every partition): INVALID_GROUP_ID, NOT_COORDINATOR (another broker coordinates the group),
GROUP_ID_NOT_FOUND (the id of a share group, which has no committed offsets; as Kafka 4.4), the transaction
errors above; v3+ check the member as Kafka does for transactional commits:
UNKNOWN_MEMBER_ID (a non-empty member id the group lacks), ILLEGAL_GENERATION (a generation >= 0 that is
not the group's), FENCED_INSTANCE_ID. Per partition: UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE.
As in Kafka, partitions of topics the user may not READ (TOPIC_AUTHORIZATION_FAILED) and partitions that
do not exist (UNKNOWN_TOPIC_OR_PARTITION) are answered first, and the others committed regardless.
v2+ carry the leader epoch.
"""

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.coordinator import OFFSETS_TOPIC
from odradek.coordinator.persistence import OffsetValue
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.TXN_OFFSET_COMMIT, 0, 5)
async def txn_offset_commit(ctx: RequestContext, request: dict) -> dict:
    errors = await _commit(ctx, request)
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": errors[(t["name"], p["partition_index"])]}
            for p in t["partitions"]]} for t in request["topics"]]}


async def _commit(ctx: RequestContext, request: dict) -> dict[tuple[str, int], int]:
    version = ctx.api_version
    broker = ctx.broker
    coordinator = broker.coordinator
    group_id = request["group_id"]
    keys = [(t["name"], p["partition_index"]) for t in request["topics"] for p in t["partitions"]]
    if not group_id:
        return dict.fromkeys(keys, ErrorCode.INVALID_GROUP_ID)
    if not ctx.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, request["transactional_id"]):
        return dict.fromkeys(keys, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.allowed(Op.READ, Res.GROUP, group_id):
        return dict.fromkeys(keys, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    # as Kafka: topics not authorized, then partitions that do not exist, answered here; the rest go on
    early: dict[tuple[str, int], int] = {}
    for key in keys:
        if not ctx.allowed(Op.READ, Res.TOPIC, key[0]):
            early[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif coordinator.offsets.check_offset(key[0], key[1], "") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            early[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    keys = [k for k in keys if k not in early]
    if not keys:
        return early
    if not coordinator.owns(group_id):
        return {**early, **dict.fromkeys(keys, ErrorCode.NOT_COORDINATOR)}
    error = coordinator.offsets.check_txn_member(
        group_id, request["generation_id"] if version >= 3 else -1, request["member_id"] if version >= 3 else "",
        request["group_instance_id"] if version >= 3 else None)
    if not error:
        offsets_partition = (OFFSETS_TOPIC, coordinator.partition_of(group_id))
        error = (await broker.in_transaction(request["transactional_id"], request["producer_id"],
                                             request["producer_epoch"], [offsets_partition],
                                             add=version >= 5))[offsets_partition]
    if error:
        return {**early, **dict.fromkeys(keys, error)}
    result: dict[tuple[str, int], int] = dict(early)
    accepted = []
    for t in request["topics"]:
        for p in t["partitions"]:
            key = (t["name"], p["partition_index"])
            if key in early:
                continue
            metadata = p["committed_metadata"] or ""
            result[key] = coordinator.offsets.check_offset(key[0], key[1], metadata)
            if not result[key]:
                epoch = p["committed_leader_epoch"] if version >= 2 else -1
                accepted.append((key[0], key[1], OffsetValue(p["committed_offset"], epoch, metadata)))
    if accepted:
        error = await coordinator.commit_transactional(group_id, request["producer_id"], request["producer_epoch"],
                                                       accepted)
        for topic, partition, _ in accepted:
            result[(topic, partition)] = error
    return result
