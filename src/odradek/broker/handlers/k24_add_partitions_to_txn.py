"""AddPartitionsToTxn (key 24), versions 0-5.

Adds data partitions to the producer's transaction (coordinator/transactions.py), which moves it to
Ongoing; the new state is written to `__transaction_state` before the reply. Errors apply to every
partition of the request: INVALID_PRODUCER_ID_MAPPING (unknown transactional id or producer id), the fenced
code for a stale epoch (PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before), CONCURRENT_TRANSACTIONS
while a commit/abort is still completing, COORDINATOR_NOT_AVAILABLE on a storage error. A partition that
does not exist gets UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED (nothing is added).
v0-3 carry one transaction (clients); v4-5 batch several with `verify_only` (the broker-to-broker form of
KIP-890): each is handled the same way, except that an add waits (up to 5 s) for another change of the id in
flight instead of answering CONCURRENT_TRANSACTIONS (a v2 producer's first writes reach several leaders at
once; Kafka's brokers retry the add on their side), and a verify-only one only checks that its partitions are
already in the transaction (INVALID_TXN_STATE for those that are not): a group coordinator asks it before it
writes transactional offsets. Only the transactional id's coordinator answers (NOT_COORDINATOR elsewhere).

Authorization, where Kafka checks it: v0-3 need WRITE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition) and WRITE on each topic, internal topics never
writable (TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED). v4+ come from brokers only: they
need CLUSTER_ACTION on the cluster, else the whole request is answered CLUSTER_AUTHORIZATION_FAILED in the
top-level error with no results; with it, no per-transaction or per-topic check is made.
"""

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.cluster.topics import INTERNAL_TOPICS
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


def _results(topics: list, errors: dict) -> list:
    return [{"name": t["name"], "results_by_partition": [
        {"partition_index": p, "partition_error_code": errors[(t["name"], p)]} for p in t["partitions"]]}
        for t in topics]


async def _add(ctx: RequestContext, txn_id: str, pid: int, epoch: int, topics: list, verify_only: bool = False) -> list:
    broker = ctx.broker
    wanted = [(t["name"], p) for t in topics for p in t["partitions"]]
    from_client = ctx.api_version < 4  # v4+: a broker, authorized as one by the caller
    if from_client and not ctx.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, txn_id):
        return _results(topics, dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    denied = {tp for tp in wanted if from_client and (tp[0] in INTERNAL_TOPICS
                                                      or not ctx.allowed(Op.WRITE, Res.TOPIC, tp[0]))}
    if denied:
        return _results(topics, {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp in denied
                                 else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted})
    if not broker.txn_coordinator.owns(txn_id):
        return _results(topics, {tp: ErrorCode.NOT_COORDINATOR for tp in wanted})
    missing = {tp for tp in wanted if not broker.partition_exists(*tp)}
    if missing:
        errors = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in missing else ErrorCode.OPERATION_NOT_ATTEMPTED
                  for tp in wanted}
        return _results(topics, errors)
    coordinator = broker.txn_coordinator
    fenced = ErrorCode.PRODUCER_FENCED if ctx.api_version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH
    if verify_only:
        return _results(topics, coordinator.verify(txn_id, pid, epoch, wanted, fenced))
    # a broker's add (v4+: a partition leader's, for a transactions v2 producer's first write) waits for a change
    # of the id in flight, as Kafka's brokers retry it; a client's gets CONCURRENT_TRANSACTIONS and retries
    error = await coordinator.add_partitions(txn_id, pid, epoch, wanted, fenced, wait=not from_client)
    return _results(topics, {tp: error for tp in wanted})


@handler(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5)
async def add_partitions_to_txn(ctx: RequestContext, request: dict) -> dict:
    if ctx.api_version <= 3:
        results = await _add(ctx, request["v3_and_below_transactional_id"], request["v3_and_below_producer_id"],
                       request["v3_and_below_producer_epoch"], request["v3_and_below_topics"])
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": results}
    if not ctx.allowed(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "results_by_transaction": []}
    out = []
    for txn in request["transactions"]:
        results = await _add(ctx, txn["transactional_id"], txn["producer_id"], txn["producer_epoch"], txn["topics"],
                       txn["verify_only"])
        out.append({"transactional_id": txn["transactional_id"], "topic_results": results})
    return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": out}
