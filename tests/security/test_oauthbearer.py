"""OAUTHBEARER: tokens (JWTs signed with a key the test makes) checked against a JWKS file, the principal
taken from `sub`, and refused when expired, for another audience or signed by another key; confluent-kafka
supplies the tokens through its oauth_cb."""

from __future__ import annotations

import json
import time

import jwt
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.conftest import BrokerProcess, free_port
from tests.security.test_tls import serve

AUDIENCE, ISSUER = "odradek", "https://issuer.test"


def rsa_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def token(key, kid: str = "k1", subject: str = "svc-orders", audience: str = AUDIENCE, lifetime_s: int = 300) -> str:
    now = int(time.time())
    return jwt.encode({"sub": subject, "aud": audience, "iss": ISSUER, "iat": now, "exp": now + lifetime_s},
                      key, algorithm="RS256", headers={"kid": kid})


@pytest.fixture
def oauth_broker(tmp_path):
    key = rsa_key()
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}))
    plain, sasl = free_port(), free_port()
    broker = BrokerProcess(tmp_path / "data", {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        "sasl.oauthbearer.expected.audience": AUDIENCE, "sasl.oauthbearer.expected.issuer": ISSUER,
        "sasl.oauthbearer.clock.skew.seconds": "0",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
    }, port=plain).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"})
    for future in admin.create_topics([NewTopic("orders", 1, 1)]).values():
        future.result(20)
    for future in admin.create_acls([AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL,
                                                "User:svc-orders", "*", AclOperation.WRITE,
                                                AclPermissionType.ALLOW)]).values():
        future.result(10)
    yield broker, sasl, key
    broker.stop()


def write(port: int, bearer: str) -> KafkaError | None:
    """The outcome of one record written with ``bearer``: None if delivered, else the error."""
    errors: list = []
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanisms": "OAUTHBEARER", "broker.address.family": "v4", "acks": "all",
                         "message.timeout.ms": 6000, "retries": 0,
                         "oauth_cb": lambda _config: (bearer, time.time() + 300),
                         "error_cb": lambda err: errors.append(err)})
    reports: list = []
    producer.produce("orders", value=b"v", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(10)
    return reports[0] if reports and reports[0] is not None else (errors[0] if errors and not reports else None)


@pytest.mark.timeout(120)
def test_tokens_are_checked_and_name_the_principal(oauth_broker):
    broker, port, key = oauth_broker
    assert write(port, token(key)) is None
    # a valid token of another subject: authenticated, but that principal may not write
    assert write(port, token(key, subject="svc-other")).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    for bad in (token(key, lifetime_s=-60), token(key, audience="someone-else"), token(rsa_key()),
                token(key, kid="unknown"), "not-a-jwt"):
        outcome = write(port, bad)
        assert outcome is not None and outcome.code() != KafkaError.TOPIC_AUTHORIZATION_FAILED, bad
    log = broker.log_tail(200_000)
    assert "failed OAUTHBEARER login" in log and "expired" in log.lower()


@pytest.mark.timeout(60)
def test_oauthbearer_needs_a_jwks(tmp_path):
    result = serve(tmp_path / "data", {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                                       "sasl.enabled.mechanisms": "OAUTHBEARER"})
    assert result.returncode == 2 and "sasl.oauthbearer.jwks.endpoint.url" in result.stderr, result.stderr
