"""AlterReplicaLogDirs (key 34), versions 1-2 (Kafka 4.4's range).

Moves replicas between a broker's log directories. An odradek broker has one log directory, its data
directory (the path DescribeLogDirs reports), so no replica ever moves; each partition asked for is
answered as Kafka answers for it: a path other than that directory, spelt exactly, is LOG_DIR_NOT_FOUND;
then a partition the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION, one this broker holds no replica
of is REPLICA_NOT_AVAILABLE, and one it holds is already there (NONE, nothing done). A partition named under
several paths is answered once, for the last (Kafka keeps one destination per partition).
Needs ALTER on the cluster: otherwise every partition is CLUSTER_AUTHORIZATION_FAILED.
"""

import os

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.ALTER_REPLICA_LOG_DIRS, 1, 2)
def alter_replica_log_dirs(ctx: RequestContext, request: dict) -> dict:
    destinations: dict[tuple[str, int], str] = {}
    for entry in request["dirs"]:
        for topic in entry["topics"]:
            for index in topic["partitions"]:
                destinations.pop((topic["name"], index), None)  # the last one named wins, in its place
                destinations[(topic["name"], index)] = entry["path"]
    broker = ctx.broker
    authorized = ctx.allowed(Op.ALTER, Res.CLUSTER, CLUSTER_NAME)
    log_dir = os.path.abspath(broker.data_dir)
    held = broker.logs.logs()
    by_topic: dict[str, list[dict]] = {}
    for (topic, index), path in destinations.items():
        if not authorized:
            error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        elif path != log_dir:
            error = ErrorCode.LOG_DIR_NOT_FOUND
        elif not broker.metadata.has_partition(topic, index):
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif (topic, index) not in held:
            error = ErrorCode.REPLICA_NOT_AVAILABLE
        else:
            error = ErrorCode.NONE
        by_topic.setdefault(topic, []).append({"partition_index": index, "error_code": error})
    return {"throttle_time_ms": 0, "results": [{"topic_name": t, "partitions": p} for t, p in by_topic.items()]}
