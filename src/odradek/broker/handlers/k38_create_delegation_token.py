"""CreateDelegationToken (key 38), versions 1-3 (Kafka 4.4's range).

odradek issues no tokens (broker/delegation_tokens.py): after Kafka's checks — DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
on a PLAINTEXT listener or from an anonymous SSL client, DELEGATION_TOKEN_AUTHORIZATION_FAILED for another
owner without CREATE_TOKENS on that user, INVALID_PRINCIPAL_TYPE for a renewer that is not a `User` — the
answer is DELEGATION_TOKEN_AUTH_DISABLED, as from a Kafka without `delegation.token.secret.key`. The answer
names the owner (v3: `owner_principal_*`, else the requester) and, from v3, the requester; the timestamps
are -1 for the broker's own refusals and 0 for the disabled answer, as Kafka's are.

Gaps: tokens themselves (creation, SCRAM login with a token) are not implemented.
"""

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.delegation_tokens import ERROR_TIMESTAMP, token_requests_allowed
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


def _split(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


@handler(ApiKey.CREATE_DELEGATION_TOKEN, 1, 3)
def create_delegation_token(ctx: RequestContext, request: dict) -> dict:
    requester = ctx.connection.principal
    owner_name = request.get("owner_principal_name")
    owner = f"{request.get('owner_principal_type')}:{owner_name}" if owner_name else requester
    timestamp = ERROR_TIMESTAMP
    if not token_requests_allowed(ctx):
        error = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    elif owner != requester and not ctx.allowed(Op.CREATE_TOKENS, Res.USER, owner):
        error = ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
    elif any(r["principal_type"] != "User" for r in request["renewers"]):
        error = ErrorCode.INVALID_PRINCIPAL_TYPE
    else:
        error, timestamp = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, 0
    owner_type, owner_name = _split(owner)
    requester_type, requester_name = _split(requester)
    return {"error_code": error, "principal_type": owner_type, "principal_name": owner_name,
            "token_requester_principal_type": requester_type, "token_requester_principal_name": requester_name,
            "issue_timestamp_ms": timestamp, "expiry_timestamp_ms": timestamp, "max_timestamp_ms": timestamp,
            "token_id": "", "hmac": b"", "throttle_time_ms": 0}
