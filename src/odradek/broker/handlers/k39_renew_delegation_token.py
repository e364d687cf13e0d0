"""RenewDelegationToken (key 39), versions 1-2 (Kafka 4.4's range).

odradek issues no tokens (broker/delegation_tokens.py): DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on a PLAINTEXT
listener or from an anonymous SSL client (expiry -1), else DELEGATION_TOKEN_AUTH_DISABLED (expiry 0), as a
Kafka without `delegation.token.secret.key` answers.

Gaps: tokens are not implemented.
"""

from odradek.broker.context import RequestContext
from odradek.broker.delegation_tokens import expiry_answer
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey


@handler(ApiKey.RENEW_DELEGATION_TOKEN, 1, 2)
def renew_delegation_token(ctx: RequestContext, request: dict) -> dict:
    return expiry_answer(ctx)
