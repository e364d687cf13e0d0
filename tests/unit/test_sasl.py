"""The SASL mechanisms (net/sasl.py) against the RFCs' own examples and malformed input."""

from __future__ import annotations

import base64

import pytest

from odradek.net.sasl import (AuthenticationFailed, PlainMechanism, ScramCredential, ScramMechanism,
                              parse_jaas_users)

# RFC 7677 section 3: user "user", password "pencil"
RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC7677_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC7677_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC7677_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc7677_server(password: str = "pencil") -> ScramMechanism:
    credential = ScramCredential.from_password("SCRAM-SHA-256", password, 4096, RFC7677_SALT)
    return ScramMechanism("SCRAM-SHA-256", lambda user, mechanism: credential if user == "user" else None,
                          server_nonce=RFC7677_SERVER_NONCE)


def test_scram_sha_256_exchange_of_rfc_7677():
    server = rfc7677_server()
    assert server.step(RFC7677_CLIENT_FIRST) == RFC7677_SERVER_FIRST
    assert server.step(RFC7677_CLIENT_FINAL) == RFC7677_SERVER_FINAL
    assert server.complete and server.user == "user"


def test_scram_refuses_a_wrong_password_a_wrong_nonce_and_an_unknown_user():
    server = rfc7677_server("not pencil")
    server.step(RFC7677_CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        server.step(RFC7677_CLIENT_FINAL)
    server = rfc7677_server()
    server.step(RFC7677_CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed, match="nonce"):
        server.step(RFC7677_CLIENT_FINAL.replace(b"k0,p=", b"k1,p="))
    # an unknown user gets a salt and iterations like anyone (no user enumeration), then fails
    stranger = rfc7677_server()
    first = stranger.step(b"n,,n=nobody,r=abc")
    assert first.startswith(b"r=abc") and b",s=" in first and first.endswith(b",i=4096")
    with pytest.raises(AuthenticationFailed):
        stranger.step(b"c=biws,r=abc" + RFC7677_SERVER_NONCE.encode() + b",p=" + base64.b64encode(b"x" * 32))


@pytest.mark.parametrize("message", [b"", b"n=user,r=abc", b"p=tls-unique,,n=user,r=abc", b"n,,n=us=er,r=abc",
                                     b"n,,n=user,r=abc,tokenauth=true", b"n,a=other,n=user,r=abc", b"\xff\xfe"])
def test_scram_refuses_malformed_client_first_messages(message):
    with pytest.raises(AuthenticationFailed):
        rfc7677_server().step(message)


def test_scram_names_decode_commas_and_equals_signs():
    seen = []
    server = ScramMechanism("SCRAM-SHA-512", lambda user, mechanism: seen.append(user))
    server.step(b"n,,n=a=2Cb=3Dc,r=xyz")
    assert seen == ["a,b=c"]


def test_credential_text_round_trip():
    credential = ScramCredential.from_password("SCRAM-SHA-512", "secret", 8192)
    text = credential.to_text()
    assert text.startswith("salt=") and "iterations=8192" in text and "secret" not in text
    assert ScramCredential.from_text(text) == credential


def test_plain():
    users = {"alice": "alice-secret"}
    mechanism = PlainMechanism(users)
    assert mechanism.step(b"\0alice\0alice-secret") == b"" and mechanism.complete and mechanism.user == "alice"
    assert PlainMechanism(users).step(b"alice\0alice\0alice-secret") == b""  # authzid = the user
    for token in (b"\0alice\0wrong", b"\0bob\0alice-secret", b"other\0alice\0alice-secret", b"\0alice", b"\0\0",
                  b"\0alice\0alice-secret\0extra"):
        with pytest.raises(AuthenticationFailed):
            PlainMechanism(users).step(token)


def test_jaas_users():
    text = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="a \\"quoted\\" pw";')
    assert parse_jaas_users(text) == {"admin": "admin-secret", "alice": 'a "quoted" pw'}
