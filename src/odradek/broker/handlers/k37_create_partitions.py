"""CreatePartitions (key 37), versions 0-3.

Grows a topic to `count` partitions; new partitions start empty at offset 0. A count not above the
current one → INVALID_PARTITIONS; explicit assignments need one list of distinct known brokers per new
partition, as many as the topic's replication factor (INVALID_REPLICA_ASSIGNMENT; a single node: exactly
itself); unknown topic → UNKNOWN_TOPIC_OR_PARTITION; a topic named twice → INVALID_REQUEST.
`validate_only` checks and changes nothing. In a cluster only the controller grows topics (NOT_CONTROLLER
elsewhere); it answers once the new partitions have leaders, or REQUEST_TIMED_OUT after `timeout_ms`.
"""

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.cluster.admin import AdminError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

MAX_PARTITIONS = 10000


@handler(ApiKey.CREATE_PARTITIONS, 0, 3)
async def create_partitions(ctx: RequestContext, request: dict) -> dict:
    names = [t["name"] for t in request["topics"]]
    results = []
    try:
        ctx.broker.admin.check_controller()
    except AdminError as exc:
        return {"throttle_time_ms": 0, "results": [
            {"name": n, "error_code": exc.error_code, "error_message": exc.message} for n in names]}
    for topic in request["topics"]:
        if names.count(topic["name"]) > 1:
            error = (ErrorCode.INVALID_REQUEST, "Duplicate topic name in request")
        else:
            error = await _grow(ctx, topic, request["validate_only"], request["timeout_ms"])
        results.append({"name": topic["name"], "error_code": error[0], "error_message": error[1]})
    return {"throttle_time_ms": 0, "results": results}


async def _grow(ctx: RequestContext, request_topic: dict, validate_only: bool, timeout_ms: int) -> tuple[int, str | None]:
    broker = ctx.broker
    if not ctx.allowed(Op.ALTER, Res.TOPIC, request_topic["name"]):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
    topic = broker.metadata.topic(request_topic["name"])
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {request_topic['name']} does not exist"
    count = request_topic["count"]
    # Kafka 4.4's controller's words (kafka-topics --alter prints them)
    if count == topic.partitions:
        return ErrorCode.INVALID_PARTITIONS, f"Topic already has {count} partition(s)."
    if count < topic.partitions:
        return ErrorCode.INVALID_PARTITIONS, (f"The topic {topic.name} currently has {topic.partitions} partition(s); "
                                              f"{count} would not be an increase.")
    if count > MAX_PARTITIONS:
        return ErrorCode.INVALID_PARTITIONS, f"At most {MAX_PARTITIONS} partitions per topic"
    assignments = request_topic["assignments"]
    if assignments is not None and len(assignments) != count - topic.partitions:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "One assignment is needed per new partition"
    try:
        await broker.admin.create_partitions(topic.name, count, None if assignments is None else
                                             [list(a["broker_ids"]) for a in assignments], validate_only, timeout_ms)
    except AdminError as exc:
        return exc.error_code, exc.message
    return ErrorCode.NONE, None
