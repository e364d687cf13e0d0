"""StopReplica (key 5), versions 0-4 — inter-broker.

The controller tells a broker to stop being a replica of partitions (it stops fetching and leading them), and
with `delete_partition` to delete their logs (topic deletion). Controller and broker epochs are checked as for
LeaderAndIsr (STALE_CONTROLLER_EPOCH, STALE_BROKER_EPOCH). v0 lists partitions ungrouped with one delete flag,
v1-2 by topic with one flag, v3+ by topic with a flag and the leader epoch per partition. A single node
answers STALE_CONTROLLER_EPOCH.
Gaps: the per-partition leader epoch (v3+) is not checked.
"""

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.STOP_REPLICA, 0, 4)
def stop_replica(ctx: RequestContext, request: dict) -> dict:
    if not ctx.allowed(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME):  # brokers only
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    version = ctx.api_version
    if version >= 3:
        wanted = [(t["topic_name"], p["partition_index"], p["delete_partition"])
                  for t in request["topic_states"] for p in t["partition_states"]]
    elif version >= 1:
        wanted = [(t["name"], p, request["delete_partitions"]) for t in request["topics"] for p in t["partition_indexes"]]
    else:
        wanted = [(p["topic_name"], p["partition_index"], request["delete_partitions"])
                  for p in request["ungrouped_partitions"]]
    cluster = ctx.broker.cluster
    error = cluster.check_request(request["controller_epoch"], request["broker_epoch"] if version >= 1 else -1)
    errors = {(t, p): error for t, p, _ in wanted} if error else cluster.stop_replicas(request["controller_epoch"], wanted)
    return {"error_code": error, "partition_errors": [
        {"topic_name": t, "partition_index": p, "error_code": errors[(t, p)]} for t, p, _ in wanted]}
