"""ControlledShutdown (key 7), versions 1-3 — inter-broker.

A broker about to stop asks the controller to move the leadership of its partitions to other in-sync
replicas first (cluster/controller/broker_changes.py) and to take it out of the ISRs, so clients see only
retriable errors. The answer lists the partitions it still leads (those no other replica can lead); the
broker retries while any remain (`controlled.shutdown.max.retries`). A broker that is not the controller
→ NOT_CONTROLLER; an unknown broker → BROKER_NOT_AVAILABLE; a broker epoch (v2+) that is not the
registered one → STALE_BROKER_EPOCH.
Gaps: v0 (whose request header carries no client id) is not advertised.
"""

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.CONTROLLED_SHUTDOWN, 1, 3)
async def controlled_shutdown(ctx: RequestContext, request: dict) -> dict:
    if not ctx.allowed(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME):  # brokers only
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "remaining_partitions": []}
    epoch = request["broker_epoch"] if ctx.api_version >= 2 else -1
    error, remaining = await ctx.broker.cluster.controlled_shutdown(request["broker_id"], epoch)
    return {"error_code": error, "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining]}
