"""ListPartitionReassignments (key 46), version 0 (KIP-455).

The partitions being reassigned, with their current replicas (the target ones first, then those being
removed), `adding_replicas` and `removing_replicas`, as the controller keeps them (the topic znode's
`adding_replicas`/`removing_replicas` in ZooKeeper). `topics` null lists every reassignment; named
partitions that are not being reassigned (or do not exist) are left out, as Kafka leaves them out. Only
the controller answers (NOT_CONTROLLER elsewhere). A single node never reassigns anything: an empty list.
"""

import asyncio

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.cluster.admin import AdminError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0)
async def list_partition_reassignments(ctx: RequestContext, request: dict) -> dict:
    if not ctx.allowed(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": "Authorization failed.", "topics": []}
    wanted = None if request["topics"] is None else [
        (t["name"], p) for t in request["topics"] for p in t["partition_indexes"]]
    try:
        ctx.broker.admin.check_controller()
        ongoing = await ctx.broker.admin.list_reassignments(wanted, request["timeout_ms"])
    except AdminError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.error_code, "error_message": exc.message, "topics": []}
    except (asyncio.TimeoutError, ConnectionError):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.REQUEST_TIMED_OUT,
                "error_message": "The controller did not answer in time", "topics": []}
    by_topic: dict[str, list] = {}
    for (topic, index), (replicas, adding, removing) in sorted(ongoing.items()):
        by_topic.setdefault(topic, []).append({"partition_index": index, "replicas": replicas,
                                               "adding_replicas": adding, "removing_replicas": removing})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()]}
