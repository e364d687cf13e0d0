"""CreateTopics (key 19), versions 0-7.

Per topic: name rules (INVALID_TOPIC_EXCEPTION), duplicates within one request (INVALID_REQUEST), existing
topic (TOPIC_ALREADY_EXISTS), partition count (INVALID_PARTITIONS; -1 means `num.partitions`, v4+),
replication factor (INVALID_REPLICATION_FACTOR: a single node can hold only 1 replica; -1 means the
default), explicit assignments (INVALID_REPLICA_ASSIGNMENT unless partitions 0..n-1 each on this node,
and then count and factor must be -1), configs (INVALID_CONFIG for unknown names or bad values).
`validate_only` (v1+) runs every check and creates nothing. From v5 the reply carries the partition
count, replication factor and every effective config; from v7 the topic id.
Gaps: `timeout_ms` is moot (creation is synchronous); config sources are reported as topic (1) for
overrides and default (5) otherwise.
"""

from odradek.broker.core import RequestContext
from odradek.broker.registry import handler
from odradek.cluster.topics import topic_name_error
from odradek.config import validate_topic_config
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

CONFIG_SOURCE_TOPIC = 1
CONFIG_SOURCE_DEFAULT = 5
MAX_PARTITIONS = 10000


@handler(ApiKey.CREATE_TOPICS, 0, 7)
def create_topics(ctx: RequestContext, request: dict) -> dict:
    names = [t["name"] for t in request["topics"]]
    duplicates = {n for n in names if names.count(n) > 1}
    results = []
    for topic in request["topics"]:
        if topic["name"] in duplicates:
            results.append(_error(topic["name"], ErrorCode.INVALID_REQUEST, "Duplicate topic name in request"))
        else:
            results.append(_create_one(ctx, topic, request["validate_only"]))
    return {"throttle_time_ms": 0, "topics": results}


def _error(name: str, code: int, message: str) -> dict:
    return {"name": name, "error_code": code, "error_message": message, "configs": None}


def _create_one(ctx: RequestContext, topic: dict, validate_only: bool) -> dict:
    broker = ctx.broker
    name = topic["name"]
    problem = topic_name_error(name)
    if problem:
        return _error(name, ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    if broker.topics.get(name) is not None:
        return _error(name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    partitions, replication = topic["num_partitions"], topic["replication_factor"]
    assignments = topic["assignments"]
    if assignments:
        if partitions != -1 or replication != -1:
            return _error(name, ErrorCode.INVALID_REQUEST,
                          "Both numPartitions or replicationFactor and replicasAssignments were set.")
        indexes = sorted(a["partition_index"] for a in assignments)
        if indexes != list(range(len(indexes))):
            return _error(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions should be a consecutive 0-based integer sequence")
        for a in assignments:
            if a["broker_ids"] != [broker.node_id]:
                return _error(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                              f"Replica assignment {a['broker_ids']} for partition {a['partition_index']} is not [{broker.node_id}]")
        partitions, replication = len(indexes), 1
    if partitions == -1:
        partitions = broker.config.int("num.partitions")
    if replication == -1:
        replication = broker.config.int("default.replication.factor")
    if partitions <= 0 or partitions > MAX_PARTITIONS:
        return _error(name, ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication <= 0:
        return _error(name, ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication > 1:
        return _error(name, ErrorCode.INVALID_REPLICATION_FACTOR,
                      f"Replication factor: {replication} larger than available brokers: 1.")
    overrides: dict[str, str] = {}
    for config in topic["configs"]:
        problem = validate_topic_config(config["name"], config["value"])
        if problem:
            return _error(name, ErrorCode.INVALID_CONFIG, problem)
        overrides[config["name"]] = config["value"]
    if validate_only:
        topic_id = bytes(16)
        effective = {**broker.topic_defaults, **overrides}
    else:
        created = broker.create_topic(name, partitions, overrides)
        topic_id = created.topic_id
        effective = broker.effective_configs(created)
    return {
        "name": name,
        "topic_id": topic_id,
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
