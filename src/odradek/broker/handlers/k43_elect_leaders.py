"""ElectLeaders (key 43), versions 0-2.

Preferred elections (type 0; v0 is always preferred) move each partition's leadership back to its first
assigned replica when that replica is live and in the ISR; unclean elections (type 1, v1+) give partitions
without a leader any live replica, losing what the ISR had and it lacks. Only the controller takes them
(NOT_CONTROLLER elsewhere); `topic_partitions` null means every partition. Per partition:
ELECTION_NOT_NEEDED (the preferred replica leads already / the partition has a leader),
PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION. A single node
leads everything already: ELECTION_NOT_NEEDED. When every partition is asked for, the answer lists every
topic but leaves out the partitions whose election was not needed, as Kafka 4.4's controller does
(`kafka-leader-election --all-topic-partitions` on a balanced cluster then prints nothing). An unknown
topic or partition carries Kafka's message ("No such topic as T", "No such partition as T-P").
"""

import asyncio

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.cluster.admin import AdminError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

PREFERRED = 0


@handler(ApiKey.ELECT_LEADERS, 0, 2)
async def elect_leaders(ctx: RequestContext, request: dict) -> dict:
    if not ctx.allowed(Op.ALTER, Res.CLUSTER, CLUSTER_NAME):
        # every partition named gets the error too, as in Kafka (v0 has no top-level error code)
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return {"throttle_time_ms": 0, "error_code": denied, "replica_election_results": [
            {"topic": t["topic"], "partition_result": [{"partition_id": p, "error_code": denied,
                                                        "error_message": "Authorization failed."}
                                                       for p in t["partitions"]]}
            for t in request["topic_partitions"] or ()]}
    preferred = ctx.api_version == 0 or request["election_type"] == PREFERRED
    wanted = None if request["topic_partitions"] is None else [
        (t["topic"], p) for t in request["topic_partitions"] for p in t["partitions"]]
    try:
        results = await ctx.broker.admin.elect_leaders(preferred, wanted, request["timeout_ms"])
    except AdminError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.error_code, "replica_election_results": []}
    except (asyncio.TimeoutError, ConnectionError):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.REQUEST_TIMED_OUT, "replica_election_results": []}
    by_topic: dict[str, list] = {}
    for (topic, p), (code, message) in sorted(results.items()):
        partitions = by_topic.setdefault(topic, [])
        if wanted is None and code == ErrorCode.ELECTION_NOT_NEEDED:
            continue
        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and message is None:  # Kafka's controller's words
            message = (f"No such partition as {topic}-{p}" if ctx.broker.metadata.topic(topic) is not None
                       else f"No such topic as {topic}")
        partitions.append({"partition_id": p, "error_code": code, "error_message": message})
    return {"throttle_time_ms": 0, "error_code": 0,
            "replica_election_results": [{"topic": t, "partition_result": r} for t, r in by_topic.items()]}
