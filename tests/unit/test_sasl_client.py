"""The client half of SASL (net/sasl_client.py): RFC 7677's SCRAM-SHA-256 example byte for byte, exchanges
against the server side of net/sasl.py, the checks on the server's answers, and the inter-broker settings
read from Kafka's properties."""

from __future__ import annotations

import base64

import pytest

from odradek.config import BrokerConfig, ConfigError
from odradek.net.listeners import Listener
from odradek.net.sasl import AuthenticationFailed, PlainMechanism, ScramCredential, ScramMechanism
from odradek.net.sasl_client import (PlainClient, SaslClientSettings, SaslLoginFailed, ScramClient,
                                     inter_broker_sasl, parse_jaas_options)

SASL_PLAINTEXT = Listener("SASL_PLAINTEXT", "SASL_PLAINTEXT", "127.0.0.1", 9093)
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
        'password="b\\"secret" user_broker="b\\"secret" user_alice="alice-secret";')


def test_scram_sha_256_matches_rfc_7677_example():
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.step(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert client.step(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None and client.complete


def exchange(client, server) -> None:
    token = client.first()
    while token is not None:
        token = client.step(server.step(token))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("user", ["admin", "odd,name=1"])
def test_scram_client_logs_in_to_the_server_side(mechanism, user):
    stored = {(user, mechanism): ScramCredential.from_password(mechanism, "s3cret", 8192)}
    server = ScramMechanism(mechanism, lambda u, m: stored.get((u, m)))
    client = ScramClient(mechanism, user, "s3cret")
    exchange(client, server)
    assert client.complete and server.complete and server.user == user
    with pytest.raises(AuthenticationFailed):
        exchange(ScramClient(mechanism, user, "wrong"), ScramMechanism(mechanism, lambda u, m: stored.get((u, m))))


def test_plain_client_logs_in_to_the_server_side():
    server = PlainMechanism({"broker": "b-secret"})
    client = PlainClient("broker", "b-secret")
    exchange(client, server)
    assert client.complete and server.complete and server.user == "broker"
    with pytest.raises(AuthenticationFailed):
        exchange(PlainClient("broker", "wrong"), PlainMechanism({"broker": "b-secret"}))


@pytest.mark.parametrize("server_first, message", [
    (b"r=someone-else,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
    (b"r=N,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),  # our nonce alone: the server added none
    (b"r=Nx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1000", "1000 iterations"),
    (b"r=Nx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=100000", "100000 iterations"),
    (b"r=Nx,s=!!!,i=4096", "base64"),
    (b"m=mandatory,r=Nx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "unreadable"),
    (b"e=unknown-user", "refused: unknown-user"),
])
def test_scram_client_refuses_a_bad_server_first(server_first, message):
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="N")
    client.first()
    with pytest.raises(SaslLoginFailed, match=message):
        client.step(server_first)


def test_scram_client_refuses_a_server_that_does_not_know_the_credential():
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    client.first()
    client.step(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    forged = b"v=" + base64.b64encode(bytes(32))
    with pytest.raises(SaslLoginFailed, match="signature is wrong"):
        client.step(forged)
    assert not client.complete


def test_inter_broker_settings_come_from_the_listener_jaas_config():
    config = BrokerConfig({"sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.enabled.mechanisms": "PLAIN",
                           "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS})
    settings = inter_broker_sasl(config, SASL_PLAINTEXT)
    assert settings == SaslClientSettings("PLAIN", "broker", 'b"secret')
    assert "secret" not in repr(settings)
    assert inter_broker_sasl(config, Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092)) is None
    assert parse_jaas_options(JAAS)["user_alice"] == "alice-secret"

    scram = BrokerConfig({
        "sasl.mechanism.inter.broker.protocol": "scram-sha-512",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="pw";'})
    assert inter_broker_sasl(scram, SASL_PLAINTEXT) == SaslClientSettings("SCRAM-SHA-512", "admin", "pw")


@pytest.mark.parametrize("values, message", [
    ({}, "cannot log in to each other with GSSAPI"),
    ({"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER", "sasl.enabled.mechanisms": "OAUTHBEARER"},
     "with OAUTHBEARER"),
    ({"sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.enabled.mechanisms": "SCRAM-SHA-256"},
     "PLAIN is not among the mechanisms listener SASL_PLAINTEXT enables"),
    ({"sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.enabled.mechanisms": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": 'x required user_broker="b";'},
     'listener.name.sasl_plaintext.plain.sasl.jaas.config must give username="..." and password="..."'),
    # the credentials of another mechanism are not this one's
    ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256", "sasl.enabled.mechanisms": "SCRAM-SHA-256",
      "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": 'x required username="a" password="b";'},
     "scram-sha-256.sasl.jaas.config must give"),
])
def test_bad_inter_broker_sasl_settings_are_refused(values, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        inter_broker_sasl(BrokerConfig(values), SASL_PLAINTEXT)
