"""CreateTopics (key 19), versions 0-7.

Per topic: name rules (INVALID_TOPIC_EXCEPTION), a name given twice in one request (INVALID_REQUEST, answered once), existing
topic (TOPIC_ALREADY_EXISTS), partition count (INVALID_PARTITIONS; -1 means `num.partitions`, v4+),
replication factor (INVALID_REPLICATION_FACTOR when larger than the live brokers — a single node holds
only 1 replica; -1 means `default.replication.factor`), explicit assignments (partitions 0..n-1 on
distinct known brokers, else INVALID_REPLICA_ASSIGNMENT; count and factor must then be -1), configs
(INVALID_CONFIG for unknown names or bad values). `validate_only` (v1+) runs every check and creates
nothing. From v5 the reply carries the partition count, replication factor and every effective config; from
v7 the topic id.
In a cluster only the controller creates topics (NOT_CONTROLLER elsewhere, as Kafka's ZooKeeper-mode
brokers answer): it spreads the replicas over the live brokers (cluster/admin.py), writes the topic to
ZooKeeper, and answers once every new partition has a leader, or REQUEST_TIMED_OUT after `timeout_ms`
(the topic is then still being created). A single node creates the topic at once.
Gaps: config sources are reported as topic (1) for overrides and default (5) otherwise.
"""

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.cluster.admin import AdminError
from odradek.cluster.topics import topic_name_error
from odradek.topic_config import validate_topic_config
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

CONFIG_SOURCE_TOPIC = 1
CONFIG_SOURCE_DEFAULT = 5
MAX_PARTITIONS = 10000


@handler(ApiKey.CREATE_TOPICS, 0, 7)
async def create_topics(ctx: RequestContext, request: dict) -> dict:
    names = [t["name"] for t in request["topics"]]
    duplicates = {n for n in names if names.count(n) > 1}
    results = []
    try:
        ctx.broker.admin.check_controller()
    except AdminError as exc:
        return {"throttle_time_ms": 0, "topics": [_error(n, exc.error_code, exc.message) for n in names]}
    for topic in request["topics"]:
        if topic["name"] in duplicates:
            if all(r["name"] != topic["name"] for r in results):  # answered once, as Kafka does
                results.append(_error(topic["name"], ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
        else:
            results.append(await _create_one(ctx, topic, request["validate_only"], request["timeout_ms"]))
    return {"throttle_time_ms": 0, "topics": results}


def _error(name: str, code: int, message: str) -> dict:
    return {"name": name, "error_code": code, "error_message": message, "configs": []}


async def _create_one(ctx: RequestContext, topic: dict, validate_only: bool, timeout_ms: int) -> dict:
    broker = ctx.broker
    name = topic["name"]
    if not (ctx.allowed(Op.CREATE, Res.CLUSTER, CLUSTER_NAME) or ctx.allowed(Op.CREATE, Res.TOPIC, name)):
        return _error(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
    problem = topic_name_error(name)
    if problem:
        return _error(name, ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    partitions, replication = topic["num_partitions"], topic["replication_factor"]
    assignments = None
    if topic["assignments"]:
        if partitions != -1 or replication != -1:
            return _error(name, ErrorCode.INVALID_REQUEST,
                          "Both numPartitions or replicationFactor and replicasAssignments were set.")
        assignments = {a["partition_index"]: list(a["broker_ids"]) for a in topic["assignments"]}
        if sorted(assignments) != list(range(len(assignments))):
            return _error(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions should be a consecutive 0-based integer sequence")
        partitions = len(assignments)
        replication = len(next(iter(assignments.values())))
    if partitions == -1:
        partitions = broker.config.int("num.partitions")
    if replication == -1:
        replication = broker.config.int("default.replication.factor")
    if partitions <= 0 or partitions > MAX_PARTITIONS:
        return _error(name, ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication <= 0:
        return _error(name, ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    overrides: dict[str, str] = {}
    for config in topic["configs"]:
        problem = validate_topic_config(config["name"], config["value"])
        if problem:
            return _error(name, ErrorCode.INVALID_CONFIG, problem)
        overrides[config["name"]] = config["value"]
    try:
        created = await broker.admin.create_topic(name, partitions, replication, assignments, overrides,
                                                  validate_only, timeout_ms)
    except AdminError as exc:
        return _error(name, exc.error_code, exc.message)
    effective = {**broker.topic_defaults, **overrides}
    return {
        "name": name,
        "topic_id": created.topic_id,
        "error_code": 0,
        "error_message": None,
        "num_partitions": partitions,
        "replication_factor": replication,
        "configs": [
            {
                "name": k,
                "value": v,
                "read_only": False,
                "config_source": CONFIG_SOURCE_TOPIC if k in overrides else CONFIG_SOURCE_DEFAULT,
                "is_sensitive": False,
            }
            for k, v in sorted(effective.items())
        ],
    }
