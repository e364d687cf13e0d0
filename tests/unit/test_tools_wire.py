"""tools/wire.py: what the tools' own client refuses before it sends anything."""

from __future__ import annotations

import pytest

from odradek.tools.common import ToolError
from odradek.tools.wire import BrokerConnection, Unsupported, parse_address, tls_context


@pytest.mark.parametrize("mechanism", ["GSSAPI", "OAUTHBEARER"])
def test_a_sasl_mechanism_it_cannot_speak_is_refused_before_connecting(mechanism):
    # port 1 is never reached: the refusal comes first, naming what does work
    config = {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism}
    with pytest.raises(Unsupported, match="PLAINTEXT, SSL or SASL PLAIN"):
        BrokerConnection("127.0.0.1", 1, config, 1.0)


def test_a_keystore_is_refused_with_the_properties_that_work():
    with pytest.raises(Unsupported, match="ssl.certificate.location"):
        tls_context({"ssl.keystore.location": "/x.p12"})


def test_unreachable_broker_is_a_tool_error():
    with pytest.raises(ToolError, match="cannot reach 127.0.0.1:1"):
        BrokerConnection("127.0.0.1", 1, {}, 1.0)


def test_addresses():
    assert parse_address("[::1]:9092") == ("::1", 9092)
    assert parse_address(" broker-1:19092") == ("broker-1", 19092)
    with pytest.raises(ToolError):
        parse_address("no-port")
