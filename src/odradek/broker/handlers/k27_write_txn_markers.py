"""WriteTxnMarkers (key 27), versions 0-1 — inter-broker.

A transaction coordinator asks the leader of each partition of a transaction to write its COMMIT or ABORT
marker. Per marker and partition (broker/txn_markers.py): the partition's leader appends the control batch
(with the coordinator epoch) and answers once the in-sync replicas hold it; a `__consumer_offsets` partition
then also makes the producer's transactional offsets committed or drops them. Errors per partition:
NOT_LEADER_OR_FOLLOWER (leadership moved: the coordinator asks the new leader), UNKNOWN_TOPIC_OR_PARTITION
(deleted: no marker needed), INVALID_PRODUCER_EPOCH (the producer has a newer epoch there), REQUEST_TIMED_OUT
(the ISR did not all get it in time), KAFKA_STORAGE_ERROR.
Gaps: v2 (KIP-890 transaction version) is not advertised; no CLUSTER_ACTION authorization.
"""

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.broker.txn_markers import write_markers_here
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.WRITE_TXN_MARKERS, 0, 1)
async def write_txn_markers(ctx: RequestContext, request: dict) -> dict:
    results = []
    allowed = ctx.allowed(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME)  # brokers only
    for marker in request["markers"]:
        partitions = [(t["name"], p) for t in marker["topics"] for p in t["partition_indexes"]]
        if not allowed:
            results.append({"producer_id": marker["producer_id"], "topics": [
                {"name": t["name"], "partitions": [
                    {"partition_index": p, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
                    for p in t["partition_indexes"]]} for t in marker["topics"]]})
            continue
        errors = await write_markers_here(ctx.broker, marker["producer_id"], marker["producer_epoch"],
                                          marker["coordinator_epoch"], marker["transaction_result"], partitions)
        results.append({"producer_id": marker["producer_id"], "topics": [
            {"name": t["name"], "partitions": [{"partition_index": p, "error_code": errors[(t["name"], p)]}
                                               for p in t["partition_indexes"]]}
            for t in marker["topics"]]})
    return {"markers": results}
