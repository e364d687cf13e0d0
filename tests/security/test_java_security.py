"""The official Java client (tests/interop/java/OdradekClient.java, kafka-clients from the pyflink wheel)
against odradek's security: mutual TLS, the client's own certificate (PEM keystore) naming its principal,
and OAUTHBEARER through Kafka's OIDC client-credentials login, which fetches RS256 JWTs from a token
endpoint; tokens signed by another key, and the client's default unsecured (alg "none") tokens, are refused."""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)

from tests.interop.conftest import java_client  # noqa: F401 - the session fixture, shared with tests/interop
from tests.interop.helpers import java_value, wait_until
from tests.security.certs import TestCA
from tests.security.test_oauthbearer import oauth_broker, rsa_key, token  # noqa: F401 - oauth_broker: fixture
from tests.security.test_tls import ca, ssl_config, tls_broker  # noqa: F401 - ca, tls_broker: fixtures

# Short client timeouts, so a refused client fails in seconds rather than the harness's tens of seconds.
FAIL_FAST = {"max.block.ms": "5000", "request.timeout.ms": "5000", "delivery.timeout.ms": "6000",
             "default.api.timeout.ms": "6000", "retries": "0"}
REFUSED_WITHIN_S = 30  # a refused client's whole run, JVM start included
RECORDS = 20


def properties(path: Path, settings: dict[str, str]) -> Path:
    """A client properties file for ODRADEK_CLIENT_CONFIG, the values written as given."""
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return path


def inline(pem: bytes) -> str:
    """A PEM block as one properties-file value (`\\n` escapes, which Properties.load turns into newlines)."""
    return pem.decode().strip().replace("\n", "\\n")


def refused(java_client, bootstrap: str, topic: str, client_config: Path,  # noqa: F811
            java_opts: tuple[str, ...] = ()) -> str:
    """Produce one record as the client ``client_config`` describes, expecting it to fail; its stderr."""
    return java_client.run_failing("produce", bootstrap, topic, 1, "all", "none", "", timeout=REFUSED_WITHIN_S,
                                   client_config=client_config, java_opts=java_opts)


def high_watermark(config: dict[str, str], topic: str) -> int:
    consumer = Consumer({**config, "group.id": "watermarks", "enable.auto.commit": False})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


def acl(principal: str, operation: AclOperation, resource: ResourceType, name: str) -> AclBinding:
    return AclBinding(resource, name, ResourcePatternType.LITERAL, principal, "*", operation,
                      AclPermissionType.ALLOW)


def apply(admin: AdminClient, topics: list[str], acls: list[AclBinding]) -> None:
    if topics:
        for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
            future.result(20)
    for future in admin.create_acls(acls).values():
        future.result(10)


# -- mutual TLS ------------------------------------------------------------------------------------------------


class MtlsBroker:
    """A broker whose SSL listener insists on a client certificate, the principal its CN lower-cased
    (CN=Alice,OU=eng,O=odradek tests,C=XX -> User:alice), and ACLs on: User:admin (a certificate too) is
    the super user; the topic exists, Alice may write and read it (and read in ``group``), Bob may only read."""

    group = "alice-group"

    def __init__(self, tmp_path: Path, ca: TestCA, tls_broker, topic: str) -> None:  # noqa: F811
        self.tmp_path, self.ca, self.topic = tmp_path, ca, topic
        self.process, secure = tls_broker({
            "ssl.client.auth": "required",
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/L,DEFAULT",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
            "auto.create.topics.enable": "false",
        })
        self.bootstrap = f"127.0.0.1:{secure}"
        self.ca_file = tmp_path / "ca.pem"  # tls_broker wrote it
        admin_cert = ca.issue("admin")
        self.as_admin = ssl_config(secure, self.ca_file, **{
            "ssl.certificate.location": str(admin_cert.cert_file(tmp_path / "admin.crt")),
            "ssl.key.location": str(admin_cert.key_file(tmp_path / "admin.key"))})
        apply(AdminClient(self.as_admin), [topic], [
            acl("User:alice", AclOperation.WRITE, ResourceType.TOPIC, topic),
            acl("User:alice", AclOperation.READ, ResourceType.TOPIC, topic),
            acl("User:alice", AclOperation.READ, ResourceType.GROUP, self.group),
            acl("User:bob", AclOperation.READ, ResourceType.TOPIC, topic),
        ])

    def java_config(self, name: str, **extra: str) -> Path:
        """A Java client's properties: SSL, the CA as a PEM truststore, plus ``extra`` (a keystore, say)."""
        return properties(self.tmp_path / f"{name}.properties", {
            "security.protocol": "SSL", "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_file), **extra})


@pytest.fixture
def mtls(tmp_path, ca, tls_broker, topic_name) -> MtlsBroker:  # noqa: F811
    return MtlsBroker(tmp_path, ca, tls_broker, topic_name)


@pytest.mark.timeout(60)
def test_java_client_certificate_is_its_principal(mtls, java_client):  # noqa: F811
    bootstrap, topic = mtls.bootstrap, mtls.topic
    # Alice: key (PKCS#8, unencrypted) and chain in one PEM keystore file
    alice_pem = mtls.ca.issue("Alice", organizational_unit="eng").keystore(mtls.tmp_path / "alice.pem")
    assert alice_pem.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    alice = mtls.java_config("alice", **{"ssl.keystore.type": "PEM", "ssl.keystore.location": str(alice_pem)})
    offsets = java_client.run("produce", bootstrap, topic, RECORDS, client_config=alice)
    assert [int(x) for x in offsets] == list(range(RECORDS))
    read = java_client.run("group-consume", bootstrap, topic, mtls.group, RECORDS, 30000, client_config=alice)
    assert sorted((int(line.split("\t")[1]), line.split("\t")[2]) for line in read) == [
        (i, java_value("", i)) for i in range(RECORDS)]

    # Bob: another valid certificate, its key and chain given inline -> User:bob, who may not write
    bob_cert = mtls.ca.issue("Bob", organizational_unit="ops")
    bob = mtls.java_config("bob", **{"ssl.keystore.type": "PEM", "ssl.keystore.key": inline(bob_cert.key_pem),
                                     "ssl.keystore.certificate.chain": inline(bob_cert.cert_pem), **FAIL_FAST})
    stderr = refused(java_client, bootstrap, topic, bob)
    assert "TopicAuthorizationException" in stderr, stderr[-4000:]
    # ... but Bob is known as himself: his READ grant lets him read Alice's records
    bob_read = java_client.run("consume", bootstrap, topic, 0, RECORDS, 30000, client_config=bob)
    assert [line.split("\t")[2] for line in bob_read] == [java_value("", i) for i in range(RECORDS)]

    # no client certificate: the handshake is refused, with the TLS alert that tells the client why
    anonymous = mtls.java_config("anonymous", **FAIL_FAST)
    stderr = refused(java_client, bootstrap, topic, anonymous)
    assert "SslAuthenticationException" in stderr, stderr[-4000:]
    assert high_watermark(mtls.as_admin, topic) == RECORDS  # neither Bob's nor the anonymous record written
    assert mtls.process.is_running()


@pytest.mark.timeout(60)
def test_java_client_without_a_certificate_is_told_why(mtls, java_client):  # noqa: F811
    anonymous = mtls.java_config("anonymous", **FAIL_FAST)
    stderr = refused(java_client, mtls.bootstrap, mtls.topic, anonymous)
    assert "SslAuthenticationException" in stderr, stderr[-4000:]


# -- OAUTHBEARER --------------------------------------------------------------------------------------------------


class TokenEndpoint:
    """An OAuth token endpoint on loopback (client-credentials grant): each POST gets ``mint()``'s token.
    Records each request's Authorization header and form; serves until ``close()``."""

    def __init__(self, client_id: str, client_secret: str, mint: Callable[[], str]) -> None:
        self.mint = mint
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        self.expected_auth = "Basic " + base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                auth = self.headers.get("Authorization") or ""
                endpoint.requests.append((auth, form))
                if auth != endpoint.expected_auth or form.get("grant_type") != ["client_credentials"]:
                    self._reply(401, {"error": "invalid_client"})
                    return
                self._reply(200, {"access_token": endpoint.mint(), "token_type": "Bearer", "expires_in": 300})

            def _reply(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/token"
        self.thread = threading.Thread(target=self.server.serve_forever, name="token-endpoint", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.mark.timeout(60)
def test_java_client_oauthbearer_with_client_credentials(oauth_broker, java_client, tmp_path):  # noqa: F811
    broker, port, key = oauth_broker  # topic "orders"; User:svc-orders may write it; tokens: sub svc-orders
    bootstrap, group = f"127.0.0.1:{port}", "orders-app"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"})
    apply(admin, [], [acl("User:svc-orders", AclOperation.READ, ResourceType.TOPIC, "orders"),
                      acl("User:svc-orders", AclOperation.READ, ResourceType.GROUP, group)])
    endpoint = TokenEndpoint("orders-app", "orders-secret", mint=lambda: token(key))
    try:
        # kafka-clients 4.x refuses token endpoints not listed in this system property (3.9.x allows all)
        java_opts = (f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={endpoint.url}",)
        common = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}
        oidc_settings = {
            **common,
            "sasl.login.callback.handler.class":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
            "sasl.oauthbearer.token.endpoint.url": endpoint.url,
            "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                                'clientId="orders-app" clientSecret="orders-secret";',
        }
        oidc = properties(tmp_path / "oidc.properties", oidc_settings)
        offsets = java_client.run("produce", bootstrap, "orders", RECORDS, client_config=oidc,
                                  java_opts=java_opts)
        assert [int(x) for x in offsets] == list(range(RECORDS))
        read = java_client.run("group-consume", bootstrap, "orders", group, RECORDS, 30000, client_config=oidc,
                               java_opts=java_opts)
        assert sorted((int(line.split("\t")[1]), line.split("\t")[2]) for line in read) == [
            (i, java_value("", i)) for i in range(RECORDS)]
        # the tokens came from the endpoint, asked for with the client's credentials
        assert len(endpoint.requests) >= 2
        assert all(auth == endpoint.expected_auth for auth, _ in endpoint.requests), endpoint.requests

        oidc_fail_fast = properties(tmp_path / "oidc-fast.properties", {**oidc_settings, **FAIL_FAST})
        # a valid token of another subject: authenticated as User:svc-other, who may not write "orders"
        endpoint.mint = lambda: token(key, subject="svc-other")
        stderr = refused(java_client, bootstrap, "orders", oidc_fail_fast, java_opts)
        assert "TopicAuthorizationException" in stderr, stderr[-4000:]

        # a token signed by a key the JWKS does not hold (same key id): authentication fails
        endpoint.mint = lambda: token(rsa_key())
        stderr = refused(java_client, bootstrap, "orders", oidc_fail_fast, java_opts)
        assert "SaslAuthenticationException" in stderr, stderr[-4000:]
        wait_until(lambda: "Signature verification failed" in broker.log_tail(100_000), timeout=5,
                   message="the bad signature logged")
    finally:
        endpoint.close()

    # the client's default login: an unsecured JWT (alg "none") naming svc-orders, refused
    unsecured = properties(tmp_path / "unsecured.properties", {
        **common, **FAIL_FAST,
        "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                            'unsecuredLoginStringClaim_sub="svc-orders";',
    })
    stderr = refused(java_client, bootstrap, "orders", unsecured)
    assert "SaslAuthenticationException" in stderr, stderr[-4000:]
    wait_until(lambda: broker.log_tail(100_000).count("failed OAUTHBEARER login") >= 2, timeout=5,
               message="both refused logins logged")
    # only the good client's records were written (asked over PLAINTEXT, where ANONYMOUS is a super user)
    plaintext = {"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"}
    assert high_watermark(plaintext, "orders") == RECORDS
    assert broker.is_running()
