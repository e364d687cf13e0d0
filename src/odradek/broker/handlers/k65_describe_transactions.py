"""DescribeTransactions (key 65), version 0.

Per transactional id: its state (Kafka's names: Empty, Ongoing, PrepareCommit, ...), timeout, start time of
the open or last transaction (-1 when none since InitProducerId), producer id and epoch, and the partitions in the transaction (the
group's `__consumer_offsets` partition included after AddOffsetsToTxn). Unknown id →
TRANSACTIONAL_ID_NOT_FOUND; an id this broker does not coordinate → NOT_COORDINATOR.
"""

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


def _describe(ctx: RequestContext, txn_id: str) -> dict:
    coordinator = ctx.broker.txn_coordinator
    m = coordinator.describe(txn_id)
    if m is None:
        error = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND if coordinator.owns(txn_id) else ErrorCode.NOT_COORDINATOR
        return {"error_code": error, "transactional_id": txn_id,
                "transaction_state": "", "transaction_timeout_ms": 0, "transaction_start_time_ms": 0,
                "producer_id": 0, "producer_epoch": 0, "topics": []}
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(m.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return {"error_code": 0, "transactional_id": txn_id, "transaction_state": m.state.kafka_name,
            "transaction_timeout_ms": m.timeout_ms, "transaction_start_time_ms": m.start_timestamp,
            "producer_id": m.producer_id, "producer_epoch": m.producer_epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}


@handler(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0)
def describe_transactions(ctx: RequestContext, request: dict) -> dict:
    return {"throttle_time_ms": 0,
            "transaction_states": [
                _describe(ctx, txn_id) if ctx.allowed(Op.DESCRIBE, Res.TRANSACTIONAL_ID, txn_id) else
                {"transactional_id": txn_id, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "topics": []}
                for txn_id in request["transactional_ids"]]}
