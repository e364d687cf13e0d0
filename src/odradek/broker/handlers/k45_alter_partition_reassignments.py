"""AlterPartitionReassignments (key 45), versions 0-1 (KIP-455).

Each named partition gets a target replica list (its reassignment starts; the controller moves the
replicas, see cluster/controller/reassignment.py) or null (its reassignment is cancelled: the partition goes
back to its original replicas). Only the controller takes it (top-level NOT_CONTROLLER elsewhere, as a ZooKeeper-mode
Kafka broker answers). Per partition: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (an empty
list, duplicates, brokers that are not live), NO_REASSIGNMENT_IN_PROGRESS (a cancellation of nothing).
The answer comes once the reassignment has started, not when it is done (ListPartitionReassignments
shows it until then). A partition named twice → INVALID_REQUEST for both. v1's
`allow_replication_factor_change` false refuses a target whose length differs from the current replica
count (INVALID_REPLICA_ASSIGNMENT), as KIP-860 does. A single node holds every partition already: a target
of itself is a no-op, anything else INVALID_REPLICA_ASSIGNMENT.
"""

import asyncio

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.cluster.admin import AdminError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1)
async def alter_partition_reassignments(ctx: RequestContext, request: dict) -> dict:
    if not ctx.allowed(Op.ALTER, Res.CLUSTER, CLUSTER_NAME):
        # each partition named gets the error as well, as in Kafka
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return {"throttle_time_ms": 0, "error_code": denied, "error_message": "Authorization failed.",
                "responses": [{"name": t["name"], "partitions": [
                    {"partition_index": p["partition_index"], "error_code": denied,
                     "error_message": "Authorization failed."} for p in t["partitions"]]} for t in request["topics"]]}
    named = [(t["name"], p["partition_index"]) for t in request["topics"] for p in t["partitions"]]
    outcomes: dict[tuple[str, int], tuple[int, str | None]] = {}
    wanted: dict[tuple[str, int], list[int] | None] = {}
    allow_factor_change = ctx.api_version < 1 or request["allow_replication_factor_change"]
    for topic in request["topics"]:
        for part in topic["partitions"]:
            tp = (topic["name"], part["partition_index"])
            replicas = None if part["replicas"] is None else list(part["replicas"])
            if named.count(tp) > 1:
                outcomes[tp] = ErrorCode.INVALID_REQUEST, "Partition named more than once"
            elif replicas is not None and not allow_factor_change and \
                    (info := ctx.broker.metadata.partition(*tp)) is not None and len(info.replicas) != len(replicas):
                outcomes[tp] = ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The replication factor would change"
            else:
                wanted[tp] = replicas
    error, message = ErrorCode.NONE, None
    try:
        ctx.broker.admin.check_controller()
        if wanted:
            outcomes.update(await ctx.broker.admin.alter_reassignments(wanted, request["timeout_ms"]))
    except AdminError as exc:
        error, message = exc.error_code, exc.message
    except (asyncio.TimeoutError, ConnectionError):
        error, message = ErrorCode.REQUEST_TIMED_OUT, "The controller did not answer in time"
    by_topic: dict[str, list] = {}
    if error == ErrorCode.NONE:
        for topic in request["topics"]:
            for part in topic["partitions"]:
                code, text = outcomes[(topic["name"], part["partition_index"])]
                by_topic.setdefault(topic["name"], []).append(
                    {"partition_index": part["partition_index"], "error_code": code, "error_message": text})
    return {"throttle_time_ms": 0, "allow_replication_factor_change": allow_factor_change, "error_code": error,
            "error_message": message,
            "responses": [{"name": t, "partitions": p} for t, p in by_topic.items()]}
