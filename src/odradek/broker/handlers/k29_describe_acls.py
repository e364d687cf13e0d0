"""DescribeAcls (key 29), versions 0-3.

The ACLs matching one filter (security/authorizer.py), grouped by resource; v0 has no pattern type (LITERAL).
Needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED); without an authorizer configured the answer
is SECURITY_DISABLED, as Kafka's.
"""

from odradek.security.authorizer import AclFilter, Operation, ResourceType
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


def acl_filter(request: dict) -> AclFilter:
    """A DescribeAcls request's, or one DeleteAcls filter's, fields as an AclFilter."""
    return AclFilter(request["resource_type_filter"], request["resource_name_filter"],
                     request["pattern_type_filter"], request["principal_filter"], request["host_filter"],
                     request["operation"], request["permission_type"])


@handler(ApiKey.DESCRIBE_ACLS, 0, 3)
def describe_acls(ctx: RequestContext, request: dict) -> dict:
    authorizer = ctx.broker.authorizer
    if not authorizer.enabled:
        return {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": "No Authorizer is configured."}
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None}
    resources: dict[tuple, list[dict]] = {}
    for acl in authorizer.acls(acl_filter(request)):
        resources.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
            {"principal": acl.principal, "host": acl.host, "operation": acl.operation,
             "permission_type": acl.permission})
    return {"error_code": ErrorCode.NONE, "error_message": None, "resources": [
        {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
        for (t, n, p), acls in resources.items()]}
