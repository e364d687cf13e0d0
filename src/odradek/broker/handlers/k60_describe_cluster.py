"""DescribeCluster (key 60), versions 0-2.

The live brokers and the controller, from the metadata cache (a single node is the whole cluster and its
controller). v1 `endpoint_type` 1 (brokers) is answered;
2 (controllers) → UNSUPPORTED_ENDPOINT_TYPE, as a broker listener does in Kafka. The cluster's
`authorized_operations` are computed when asked for (security/authorizer.py), and are 0 for a principal
that may not DESCRIBE the cluster, as in Kafka.
"""

from odradek.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

ENDPOINT_BROKERS = 1


@handler(ApiKey.DESCRIBE_CLUSTER, 0, 2)
def describe_cluster(ctx: RequestContext, request: dict) -> dict:
    cache = ctx.broker.metadata
    if ctx.api_version >= 1 and request["endpoint_type"] != ENDPOINT_BROKERS:
        return {"error_code": ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "error_message": "Only broker endpoints are served",
                "endpoint_type": request["endpoint_type"], "cluster_id": cache.cluster_id}
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": ENDPOINT_BROKERS,
        "cluster_id": cache.cluster_id,
        "controller_id": cache.controller_id,
        # v2's include_fenced_brokers (KIP-1073) changes nothing: a ZooKeeper-registered broker is never fenced
        "brokers": [{"broker_id": b.node_id, "host": host, "port": port, "rack": b.rack, "is_fenced": False}
                    for b, host, port in cache.endpoints(ctx.connection.listener)],
        # as in Kafka, only a principal that may DESCRIBE the cluster learns what it may do there (else 0)
        "cluster_authorized_operations": (ctx.broker.authorizer.authorized_operations(
            ctx.connection.principal, ctx.connection.peer_host, ResourceType.CLUSTER, CLUSTER_NAME)
            if ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME) else 0)
        if request["include_cluster_authorized_operations"] else -(1 << 31),
    }
