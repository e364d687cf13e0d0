"""DescribeUserScramCredentials (key 50), version 0.

The mechanisms and iteration counts of users' SCRAM credentials (security/scram_store.py), never salts or
keys. No users named (null or empty): every user with a credential. A user without one gets
RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE.

Needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.net.sasl import SCRAM_MECHANISM_IDS
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

MECHANISM_NUMBERS = {name: number for number, name in SCRAM_MECHANISM_IDS.items()}


@handler(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0)
def describe_user_scram_credentials(ctx: RequestContext, request: dict) -> dict:
    if not ctx.allowed(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "results": []}
    users = ctx.broker.scram.users()
    asked = [u["name"] for u in request["users"] or []]
    names = asked or sorted(users)
    results = []
    for name in dict.fromkeys(names):
        if asked.count(name) > 1:
            results.append({"user": name, "error_code": ErrorCode.DUPLICATE_RESOURCE,
                            "error_message": f"Cannot describe SCRAM credentials for the same user twice: {name}"})
        elif name not in users:
            results.append({"user": name, "error_code": ErrorCode.RESOURCE_NOT_FOUND,
                            "error_message": f"Attempt to describe a user credential that does not exist: {name}"})
        else:
            results.append({"user": name, "error_code": ErrorCode.NONE, "error_message": None, "credential_infos": [
                {"mechanism": MECHANISM_NUMBERS[m], "iterations": c.iterations} for m, c in sorted(users[name].items())]})
    return {"error_code": ErrorCode.NONE, "error_message": None, "results": results}
