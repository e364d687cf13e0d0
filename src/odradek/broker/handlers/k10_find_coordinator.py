"""FindCoordinator (key 10), versions 0-6.

A group's coordinator is the leader of its `__consumer_offsets` partition, a transactional id's the leader
of its `__transaction_state` partition (the partition is the key's Java string hash modulo the topic's
partition count, as in Kafka), so the answer is that partition's leader from the metadata cache — on a
single node always this broker. While the partition has no leader, or the internal topic does not exist yet
(a cluster creates it on the first request, with `offsets.topic.replication.factor` /
`transaction.state.log.replication.factor` replicas), the answer is COORDINATOR_NOT_AVAILABLE, which
clients retry. v4+ batch several keys (`coordinator_keys`) with a result per key; v0-3 carry one key and a
top-level result. Key type 2 (SHARE, v6, KIP-932) finds the share coordinator of a share-partition key
`group:topic-id:partition`, the leader of its `__share_group_state` partition (created on the first ask, with
`share.coordinator.state.topic.replication.factor` replicas); it needs CLUSTER_ACTION on the cluster (brokers
ask it), else CLUSTER_AUTHORIZATION_FAILED, and a key of that form, else INVALID_REQUEST. Any other key_type
gets INVALID_REQUEST.
Gaps: no authorization.
"""

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

GROUP, TRANSACTION, SHARE = 0, 1, 2
SHARE_KEY_VERSION = 6  # the first version that knows key type SHARE
NO_NODE = {"node_id": -1, "host": "", "port": -1}


@handler(ApiKey.FIND_COORDINATOR, 0, 6)
def find_coordinator(ctx: RequestContext, request: dict) -> dict:
    key_type = request["key_type"]
    if ctx.api_version < 4:
        error, message, node = _find(ctx, key_type, request["key"])
        return {"throttle_time_ms": 0, "error_code": error, "error_message": message, **node}
    results = []
    for key in request["coordinator_keys"]:
        error, message, node = _find(ctx, key_type, key)
        results.append({"key": key, "error_code": error, "error_message": message, **node})
    return {"throttle_time_ms": 0, "coordinators": results}


def _share_key(key: str) -> bool:
    """Whether ``key`` is a share-partition key: group, topic id and partition joined by colons."""
    parts = key.rsplit(":", 2)
    return len(parts) == 3 and bool(parts[0]) and bool(parts[1]) and parts[2].isdigit()


def _find(ctx: RequestContext, key_type: int, key: str) -> tuple[int, str | None, dict]:
    if key_type == SHARE and ctx.api_version >= SHARE_KEY_VERSION:
        if not ctx.allowed(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, NO_NODE
        if not _share_key(key):
            return ErrorCode.INVALID_REQUEST, "Invalid share coordinator key.", NO_NODE
        return _answer(ctx, ctx.broker.share_coordinator_node(key))
    if key_type not in (GROUP, TRANSACTION):
        return ErrorCode.INVALID_REQUEST, "unsupported key type", NO_NODE
    if key_type == GROUP and not ctx.allowed(Op.DESCRIBE, Res.GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None, NO_NODE
    if key_type == TRANSACTION and not ctx.allowed(Op.DESCRIBE, Res.TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, NO_NODE
    return _answer(ctx, ctx.broker.coordinator_node(key_type == TRANSACTION, key))


def _answer(ctx: RequestContext, leader) -> tuple[int, str | None, dict]:
    address = leader.address(ctx.connection.listener) if leader is not None else None
    if address is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", NO_NODE
    return ErrorCode.NONE, None, {"node_id": leader.node_id, "host": address[0], "port": address[1]}
