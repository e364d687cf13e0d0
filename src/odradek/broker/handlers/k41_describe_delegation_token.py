"""DescribeDelegationToken (key 41), versions 1-3 (Kafka 4.4's range).

odradek issues no tokens (broker/delegation_tokens.py): DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on a PLAINTEXT
listener or from an anonymous SSL client, else DELEGATION_TOKEN_AUTH_DISABLED, with no tokens, as a Kafka
without `delegation.token.secret.key` answers (it checks nothing else first).

Gaps: tokens are not implemented.
"""

from odradek.broker.context import RequestContext
from odradek.broker.delegation_tokens import token_requests_allowed
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.DESCRIBE_DELEGATION_TOKEN, 1, 3)
def describe_delegation_token(ctx: RequestContext, request: dict) -> dict:
    error = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED if token_requests_allowed(ctx) else \
        ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    return {"error_code": error, "tokens": [], "throttle_time_ms": 0}
