"""DescribeClientQuotas (key 48), versions 0-1.

The configured client quotas (security/quotas.py) whose entity the filter selects. Each component names an
entity type (`user` or `client-id`) and a match: 0 the exact name, 1 the default, 2 any name; every
component must match, and `strict` also leaves out entities with parts the filter does not name. An
entity type other than those two, or one named twice, is INVALID_REQUEST for the whole request, as is an
exact match without a name.

Needs DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.security.quotas import CLIENT_ID, USER
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


def _refused(code: int, message: str | None) -> dict:
    return {"error_code": code, "error_message": message, "entries": None}


@handler(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1)
def describe_client_quotas(ctx: RequestContext, request: dict) -> dict:
    if not ctx.allowed(Op.DESCRIBE_CONFIGS, Res.CLUSTER, CLUSTER_NAME):
        return _refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    components = []
    for c in request["components"]:
        kind, match_type, match = c["entity_type"], c["match_type"], c["match"]
        if kind not in (USER, CLIENT_ID):
            return _refused(ErrorCode.INVALID_REQUEST, f"Unsupported quota entity type {kind!r}")
        if any(kind == seen for seen, _, _ in components):
            return _refused(ErrorCode.INVALID_REQUEST, f"Duplicate filter component entity type {kind}")
        if match_type not in (0, 1, 2) or (match_type == 0 and match is None):
            return _refused(ErrorCode.INVALID_REQUEST, f"Invalid match type {match_type} for {kind}")
        components.append((kind, match_type, match))
    selected = ctx.broker.quotas.describe(components, request["strict"])
    entries = [{"entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity.parts()],
                "values": [{"key": key, "value": value} for key, value in sorted(values.items())]}
               for entity, values in sorted(selected.items(), key=lambda item: repr(item[0]))]
    return {"error_code": ErrorCode.NONE, "error_message": None, "entries": entries}
