"""SaslAuthenticate (key 36), versions 0-2.

Carries one SASL token each way after a v1 SaslHandshake (net/sasl.py). A wrong password (or an unreadable
token) is answered with SASL_AUTHENTICATION_FAILED and its message, and the connection is closed once that is
sent. Once the mechanism completes, the connection's principal is User:<name>; from v1 the answer carries
the session lifetime (`connections.max.reauth.ms`, 0: no limit), before whose end the client re-authenticates.
Out of order, or on a listener without SASL: ILLEGAL_SASL_STATE.
"""

import time

from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.net.sasl import AuthenticationFailed, SaslSession
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.SASL_AUTHENTICATE, 0, 2)
def sasl_authenticate(ctx: RequestContext, request: dict) -> dict:
    session = ctx.connection.sasl
    if session is None or session.state != SaslSession.AUTHENTICATE:
        if session is not None:
            session.state = SaslSession.FAILED
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE,
                "error_message": "SaslAuthenticate is only valid after a SaslHandshake (v1)"}
    try:
        answer = session.authenticate(request["auth_bytes"])
    except AuthenticationFailed as exc:
        return {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": str(exc)}
    lifetime_ms = 0
    if session.state == SaslSession.AUTHENTICATED:
        ctx.connection.principal = session.principal
        if session.session_expires_s is not None:
            lifetime_ms = max(1, int((session.session_expires_s - time.monotonic()) * 1000))
    return {"error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": answer,
            "session_lifetime_ms": lifetime_ms}
