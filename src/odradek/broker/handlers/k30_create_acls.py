"""CreateAcls (key 30), versions 0-3.

Adds ACLs (security/authorizer.py); each creation gets its own result: INVALID_REQUEST for an ACL that cannot
be (ANY or UNKNOWN fields, a principal without a type, a cluster not named kafka-cluster). The valid ones are
stored together before any applies (a file, or ZooKeeper). Needs ALTER on the cluster
(CLUSTER_AUTHORIZATION_FAILED); without an authorizer configured: SECURITY_DISABLED.
"""

import logging

from odradek.security.authorizer import AclBinding, Operation, ResourceType, validate
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


@handler(ApiKey.CREATE_ACLS, 0, 3)
async def create_acls(ctx: RequestContext, request: dict) -> dict:
    authorizer = ctx.broker.authorizer
    creations = request["creations"]
    if not authorizer.enabled:
        return {"results": [{"error_code": ErrorCode.SECURITY_DISABLED,
                             "error_message": "No Authorizer is configured."} for _ in creations]}
    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, "kafka-cluster"):
        return {"results": [{"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None}
                            for _ in creations]}
    results: list[dict] = []
    valid: list[AclBinding] = []
    for c in creations:
        acl = AclBinding(c["resource_type"], c["resource_name"], c["resource_pattern_type"], c["principal"],
                         c["host"], c["operation"], c["permission_type"])
        problem = validate(acl)
        if problem:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": problem})
        else:
            valid.append(acl)
            results.append({"error_code": ErrorCode.NONE, "error_message": None})
    if valid:
        try:
            await authorizer.change(add=valid)
        except Exception as exc:  # the file or ZooKeeper: nothing applied
            log.error("cannot store ACLs: %s", exc)
            for result in results:
                if result["error_code"] == ErrorCode.NONE:
                    result.update(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=f"Cannot store: {exc}")
        else:
            log.info("ACLs added by %s: %s", ctx.connection.principal, valid)
    return {"results": results}
