"""DeleteAcls (key 31), versions 0-3.

Removes every ACL matching each filter (security/authorizer.py) and lists them per filter. Needs ALTER on the
cluster (CLUSTER_AUTHORIZATION_FAILED); without an authorizer configured: SECURITY_DISABLED.
"""

import logging

from odradek.security.authorizer import Operation, ResourceType
from odradek.broker.context import RequestContext
from odradek.broker.handlers.k29_describe_acls import acl_filter
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


@handler(ApiKey.DELETE_ACLS, 0, 3)
async def delete_acls(ctx: RequestContext, request: dict) -> dict:
    authorizer = ctx.broker.authorizer
    filters = request["filters"]
    if not authorizer.enabled or not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, "kafka-cluster"):
        error = ErrorCode.SECURITY_DISABLED if not authorizer.enabled else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return {"filter_results": [{"error_code": error, "error_message": None} for _ in filters]}
    matched = [authorizer.acls(acl_filter(f)) for f in filters]
    doomed = {acl for acls in matched for acl in acls}
    error, message = ErrorCode.NONE, None
    if doomed:
        try:
            await authorizer.change(remove=doomed)
        except Exception as exc:  # the file or ZooKeeper: nothing removed
            log.error("cannot store ACLs: %s", exc)
            error, message = ErrorCode.UNKNOWN_SERVER_ERROR, f"Cannot store: {exc}"
        else:
            log.info("ACLs removed by %s: %s", ctx.connection.principal, sorted(doomed, key=str))
    return {"filter_results": [{"error_code": error, "error_message": message, "matching_acls": [] if error else [
        {"error_code": 0, "error_message": None, "resource_type": a.resource_type, "resource_name": a.resource_name,
         "pattern_type": a.pattern_type, "principal": a.principal, "host": a.host, "operation": a.operation,
         "permission_type": a.permission} for a in acls]} for acls in matched]}
