"""CreatePartitions (key 37), versions 0-3.

Grows a topic to `count` partitions; new partitions start empty at offset 0. A count not above the
current one → INVALID_PARTITIONS; explicit assignments must name exactly this node for each new partition
(INVALID_REPLICA_ASSIGNMENT); unknown topic → UNKNOWN_TOPIC_OR_PARTITION; a topic named twice →
INVALID_REQUEST. `validate_only` checks and changes nothing.
"""

from odradek.broker.core import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

MAX_PARTITIONS = 10000


@handler(ApiKey.CREATE_PARTITIONS, 0, 3)
def create_partitions(ctx: RequestContext, request: dict) -> dict:
    names = [t["name"] for t in request["topics"]]
    results = []
    for topic in request["topics"]:
        if names.count(topic["name"]) > 1:
            error = (ErrorCode.INVALID_REQUEST, "Duplicate topic name in request")
        else:
            error = _grow(ctx, topic, request["validate_only"])
        results.append({"name": topic["name"], "error_code": error[0], "error_message": error[1]})
    return {"throttle_time_ms": 0, "results": results}


def _grow(ctx: RequestContext, request_topic: dict, validate_only: bool) -> tuple[int, str | None]:
    broker = ctx.broker
    topic = broker.topics.get(request_topic["name"])
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {request_topic['name']} does not exist"
    count = request_topic["count"]
    if count <= topic.partitions:
        return ErrorCode.INVALID_PARTITIONS, f"Topic currently has {topic.partitions} partitions, {count} is not an increase"
    if count > MAX_PARTITIONS:
        return ErrorCode.INVALID_PARTITIONS, f"At most {MAX_PARTITIONS} partitions per topic"
    assignments = request_topic["assignments"]
    if assignments is not None:
        if len(assignments) != count - topic.partitions:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "One assignment is needed per new partition"
        if any(a["broker_ids"] != [broker.node_id] for a in assignments):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Replicas must be [{broker.node_id}] on a single node"
    if not validate_only:
        broker.add_partitions(topic.name, count)
    return ErrorCode.NONE, None
