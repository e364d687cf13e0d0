"""Delegation tokens (KIP-48) as a Kafka broker without `delegation.token.secret.key` answers them.

odradek has no token store and no token login, so the four token APIs (CreateDelegationToken 38,
RenewDelegationToken 39, ExpireDelegationToken 40, DescribeDelegationToken 41) are advertised at Kafka 4.4's
versions and answered the way such a Kafka answers: after Kafka's own checks, DELEGATION_TOKEN_AUTH_DISABLED.
Kafka's checks come first and in its order, so a client learns the same things from both brokers:

* a request on a PLAINTEXT listener, or from an anonymous client of a one-way SSL listener, is
  DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (tokens are only handed out over an authenticated channel);
* CreateDelegationToken for another owner needs CREATE_TOKENS on that user (DELEGATION_TOKEN_AUTHORIZATION_FAILED),
  and renewers must be `User` principals (INVALID_PRINCIPAL_TYPE).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.context import RequestContext

ANONYMOUS = "User:ANONYMOUS"
ERROR_TIMESTAMP = -1  # Kafka's DelegationTokenManager.ErrorTimestamp, in answers refused by the broker itself


def security_protocol(ctx: "RequestContext") -> str:
    """The security protocol of the listener the request came in on."""
    name = ctx.connection.listener
    for listener in ctx.broker.listeners.bind:
        if listener.name == name:
            return listener.security_protocol
    return "PLAINTEXT"


def token_requests_allowed(ctx: "RequestContext") -> bool:
    """Kafka's allowTokenRequests: not on PLAINTEXT, not from an anonymous one-way SSL client (a client that
    logged in with a token cannot ask for tokens either; odradek has no token login)."""
    protocol = security_protocol(ctx)
    if protocol == "PLAINTEXT":
        return False
    return not (protocol == "SSL" and ctx.connection.principal == ANONYMOUS)


def expiry_answer(ctx: "RequestContext") -> dict:
    """The answer to RenewDelegationToken and ExpireDelegationToken, whose responses are alike (an error and
    an expiry time): -1 where the broker refuses to look, 0 where tokens are off."""
    if not token_requests_allowed(ctx):
        return {"error_code": ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, "expiry_timestamp_ms": ERROR_TIMESTAMP,
                "throttle_time_ms": 0}
    return {"error_code": ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, "expiry_timestamp_ms": 0, "throttle_time_ms": 0}
