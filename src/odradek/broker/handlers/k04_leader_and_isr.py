"""LeaderAndIsr (key 4), versions 0-7 — inter-broker.

The controller tells a broker which partitions it leads or follows, in which leader epoch, with which replicas
and ISR (cluster/replica_manager.py). A request from a controller older than one already heard from →
STALE_CONTROLLER_EPOCH (top level); one meant for an earlier registration of this broker → STALE_BROKER_EPOCH.
Per partition: a state older than the one applied (leader epoch, then partition epoch) →
STALE_CONTROLLER_EPOCH, a partition this broker is not a replica of → UNKNOWN_TOPIC_OR_PARTITION, a log that
cannot be opened → KAFKA_STORAGE_ERROR. The topic's config overrides are read from ZooKeeper before its logs
are created. v0-1 list partitions ungrouped, v2+ by topic, v5+ with topic ids; v4+ is flexible. A single node
has no other controller: it answers STALE_CONTROLLER_EPOCH.
Gaps: `type` (full vs incremental, v5+) is not used: every request is applied as an increment; adding/removing
replicas (reassignment) are ignored.
"""

from odradek.broker.controller_requests import states_by_topic
from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.LEADER_AND_ISR, 0, 7)
async def leader_and_isr(ctx: RequestContext, request: dict) -> dict:
    if not ctx.allowed(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME):  # brokers only
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    version = ctx.api_version
    topics = states_by_topic(request, grouped=version >= 2, with_ids=version >= 5)
    cluster = ctx.broker.cluster
    error = cluster.check_request(request["controller_epoch"], request["broker_epoch"] if version >= 2 else -1)
    if error:
        errors = {(name, s["partition_index"]): error for name, _, states in topics for s in states}
    else:
        leaders = [(b["broker_id"], b["host_name"], b["port"]) for b in request["live_leaders"]]
        errors = await cluster.leader_and_isr(request["controller_epoch"], topics, leaders)
    body = {"error_code": error}
    if version >= 5:
        body["topics"] = [{"topic_id": topic_id, "partition_errors": [
            {"partition_index": s["partition_index"], "error_code": errors[(name, s["partition_index"])]}
            for s in states]} for name, topic_id, states in topics]
    else:
        body["partition_errors"] = [{"topic_name": name, "partition_index": s["partition_index"],
                                     "error_code": errors[(name, s["partition_index"])]}
                                    for name, _, states in topics for s in states]
    return body
