"""Listener properties (net/listeners.py) and TLS principal rules and cipher names (net/tls.py)."""

from __future__ import annotations

import pytest

from odradek.config import BrokerConfig, ConfigError
from odradek.net.listeners import Listener, listener_setup, parse_protocol_map
from odradek.net.tls import map_principal, openssl_ciphers, parse_mapping_rules, subject_rfc2253


def setup(**values: str):
    return listener_setup(BrokerConfig({k.replace("_", "."): v for k, v in values.items()}))


def test_without_listeners_one_plaintext_listener_at_listen_and_advertise():
    default = listener_setup(BrokerConfig())
    assert default.bind == (Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092),)
    assert default.inter_broker == "PLAINTEXT"
    everywhere = listener_setup(BrokerConfig(), ("0.0.0.0", 9000), None)
    assert everywhere.advertised[0].host == "127.0.0.1"
    told = listener_setup(BrokerConfig(), ("0.0.0.0", 9000), ("broker1.example", 19000))
    assert (told.advertised[0].host, told.advertised[0].port) == ("broker1.example", 19000)


def test_named_listeners_with_a_protocol_map():
    s = listener_setup(BrokerConfig({
        "listeners": "internal://0.0.0.0:9092,EXTERNAL://[::1]:9093",
        "advertised.listeners": "INTERNAL://b1.internal:9092",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT, EXTERNAL:SSL",
        "inter.broker.listener.name": "internal",
    }))
    assert [str(b) for b in s.bind] == ["INTERNAL://0.0.0.0:9092", "EXTERNAL://[::1]:9093"]
    assert s.bind[1].uses_tls and not s.bind[0].uses_tls
    # EXTERNAL has no advertised entry: it advertises where it is bound
    assert [str(a) for a in s.advertised] == ["INTERNAL://b1.internal:9092", "EXTERNAL://[::1]:9093"]
    assert s.inter_broker == "INTERNAL"


def test_bound_ports_replace_port_zero():
    s = setup(listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", advertised_listeners="SSL://h:0")
    bound = s.with_bound_ports({"PLAINTEXT": 4001, "SSL": 4002})
    assert [(a.host, a.port) for a in bound.advertised] == [("127.0.0.1", 4001), ("h", 4002)]
    assert [b.port for b in bound.bind] == [4001, 4002]


def test_inter_broker_listener_defaults_to_plaintext_then_the_first():
    assert setup(listeners="SSL://127.0.0.1:1,PLAINTEXT://127.0.0.1:2").inter_broker == "PLAINTEXT"
    assert setup(listeners="SSL://127.0.0.1:1").inter_broker == "SSL"


@pytest.mark.parametrize("values, message", [
    ({"listeners": "PLAINTEXT:/127.0.0.1:1"}, "NAME://HOST:PORT"),
    ({"listeners": "PLAINTEXT://127.0.0.1:70000"}, "out of range"),
    ({"listeners": "OTHER://127.0.0.1:1"}, "listener.security.protocol.map"),
    ({"listener.security.protocol.map": "A:TLS"}, "NAME:PROTOCOL"),
    ({"listeners": "PLAINTEXT://:1", "advertised.listeners": "PLAINTEXT://0.0.0.0:1"}, "no client can connect"),
    # brokers log in to each other on a SASL inter-broker listener: Kafka's default mechanism, GSSAPI, is not
    # offered (net/sasl_client.py; tests/unit/test_sasl_client.py has the rest)
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:1", "zookeeper.connect": "127.0.0.1:2181"},
     "sasl.mechanism.inter.broker.protocol: brokers cannot log in to each other with GSSAPI"),
])
def test_bad_listener_properties(values, message):
    with pytest.raises(ConfigError, match=message):
        listener_setup(BrokerConfig(values))


def test_listen_and_listeners_together_are_refused():
    with pytest.raises(ConfigError, match="either"):
        listener_setup(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:1"}), ("127.0.0.1", 2))


def test_default_protocol_map_names_each_protocol():
    assert parse_protocol_map("") == {p: p for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}


def test_a_listener_override_applies_to_that_listener_only():
    config = BrokerConfig({"ssl.client.auth": "none", "listener.name.external.ssl.client.auth": "required"})
    assert config.for_listener("EXTERNAL", "ssl.client.auth") == "required"
    assert config.for_listener("INTERNAL", "ssl.client.auth") == "none"
    with pytest.raises(ConfigError):
        BrokerConfig({"listener.name.external.ssl.client.auth": "sometimes"})


def test_subject_in_rfc2253_order_and_escaping():
    # getpeercert() lists the RDNs from the least specific (C) to the most (CN)
    subject = ((("countryName", "XX"),), (("organizationName", "Acme, Inc"),), (("commonName", "alice"),))
    assert subject_rfc2253(subject) == "CN=alice,O=Acme\\, Inc,C=XX"


def test_principal_mapping_rules():
    rules = parse_mapping_rules(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,"
        "DEFAULT")
    assert map_principal("CN=kafka1,OU=ServiceUsers,O=Org,C=US", rules) == "kafka1"
    assert map_principal("CN=Duke,OU=JavaSoft,O=Sun,L=Santa Clara,ST=CA,C=US", rules) == "duke@javasoft"
    assert map_principal("OU=x,CN=bob.smith,O=y", rules) == "BOB.SMITH"
    assert map_principal("O=no common name", rules) == "O=no common name"
    assert map_principal("CN=a,O=b", parse_mapping_rules("DEFAULT")) == "CN=a,O=b"
    with pytest.raises(ConfigError):
        parse_mapping_rules("RULE:^CN=(.*$/$1/")


@pytest.mark.parametrize("suite, name", [
    ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305"),
    ("TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256"),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA"),
    ("ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384"),
    ("TLS_AES_128_GCM_SHA256", ""),  # TLS 1.3: left to OpenSSL
])
def test_cipher_suite_names(suite, name):
    assert openssl_ciphers(suite) == name
