"""SaslHandshake (key 17), versions 0-1.

Chooses the connection's SASL mechanism (net/sasl.py has the exchange): v0 means the client's tokens follow
as bare size-prefixed frames, v1 that they come in SaslAuthenticate requests. The answer lists the
listener's mechanisms; one it does not offer gets UNSUPPORTED_SASL_MECHANISM and the connection is closed
once that is sent. A second handshake after authentication starts re-authentication (KIP-368; v1 only). On
a listener without SASL, and out of order, the answer is ILLEGAL_SASL_STATE.
"""

from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.net.sasl import SaslSession
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.SASL_HANDSHAKE, 0, 1)
def sasl_handshake(ctx: RequestContext, request: dict) -> dict:
    session = ctx.connection.sasl
    if session is None:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    reauthenticating = session.state == SaslSession.AUTHENTICATED
    if session.state != SaslSession.HANDSHAKE and not (reauthenticating and ctx.api_version >= 1):
        session.state = SaslSession.FAILED
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": list(session.listener.mechanisms)}
    accepted = session.handshake(request["mechanism"], raw_tokens=ctx.api_version == 0)
    return {"error_code": ErrorCode.NONE if accepted else ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            "mechanisms": list(session.listener.mechanisms)}
