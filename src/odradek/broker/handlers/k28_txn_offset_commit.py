"""TxnOffsetCommit (key 28), versions 0-4.

Stages consumer offsets in the producer's transaction (coordinator/transactions.py): they are written to
`__transaction_state` with it before the reply, become the group's committed offsets when the transaction
commits, and are dropped when it aborts. Until then OffsetFetch with `require_stable` answers
UNSTABLE_OFFSET_COMMIT for them. The group's offsets partition must have joined the transaction
(AddOffsetsToTxn) and the transaction be open, else INVALID_TXN_STATE.
Errors (for every partition): INVALID_GROUP_ID, INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH (a
stale epoch), CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE; v3+ check the member as Kafka does for
transactional commits: UNKNOWN_MEMBER_ID (a non-empty member id the group lacks), ILLEGAL_GENERATION (a
generation >= 0 that is not the group's), FENCED_INSTANCE_ID. Per partition: UNKNOWN_TOPIC_OR_PARTITION,
OFFSET_METADATA_TOO_LARGE. v2+ carry the leader epoch.
"""

from odradek.broker.core import RequestContext
from odradek.broker.registry import handler
from odradek.coordinator.persistence import OffsetValue
from odradek.protocol.api_keys import ApiKey


@handler(ApiKey.TXN_OFFSET_COMMIT, 0, 4)
def txn_offset_commit(ctx: RequestContext, request: dict) -> dict:
    version = ctx.api_version
    broker = ctx.broker
    offsets = []
    for t in request["topics"]:
        for p in t["partitions"]:
            epoch = p["committed_leader_epoch"] if version >= 2 else -1
            offsets.append((t["name"], p["partition_index"],
                            OffsetValue(p["committed_offset"], epoch, p["committed_metadata"] or "")))
    errors = broker.txn_coordinator.txn_offset_commit(
        request["transactional_id"], request["group_id"], request["producer_id"], request["producer_epoch"],
        request["generation_id"] if version >= 3 else -1, request["member_id"] if version >= 3 else "",
        request["group_instance_id"] if version >= 3 else None, offsets,
        lambda topic, partition: broker.partition_log(topic, partition) is not None)
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": errors[(t["name"], p["partition_index"])]}
            for p in t["partitions"]]} for t in request["topics"]]}
