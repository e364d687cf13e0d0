"""FindCoordinator (key 10), versions 0-6.

Single node: this broker coordinates every group (key_type 0) and every transactional id (key_type 1), so
the answer is always this node. v4+ batch several keys (`coordinator_keys`) with a result per key; v0-3
carry one key and a top-level result. Any other key_type gets INVALID_REQUEST.
Gaps: no authorization.
"""

from odradek.broker.core import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

GROUP, TRANSACTION = 0, 1


@handler(ApiKey.FIND_COORDINATOR, 0, 6)
def find_coordinator(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    error = 0 if request["key_type"] in (GROUP, TRANSACTION) else ErrorCode.INVALID_REQUEST
    node = {"node_id": broker.node_id, "host": broker.advertised_host, "port": broker.advertised_port}
    if error:
        node = {"node_id": -1, "host": "", "port": -1}
    message = None if not error else "unsupported key type"
    if ctx.api_version < 4:
        return {"throttle_time_ms": 0, "error_code": error, "error_message": message, **node}
    return {
        "throttle_time_ms": 0,
        "coordinators": [{"key": key, "error_code": error, "error_message": message, **node}
                         for key in request["coordinator_keys"]],
    }
