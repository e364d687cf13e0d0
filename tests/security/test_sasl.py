"""SASL listeners: PLAIN (users from the JAAS-style property) and SCRAM-SHA-256/512 (credentials managed
with AlterUserScramCredentials), against confluent-kafka, kafka-python, aiokafka and kcat, over
SASL_PLAINTEXT and SASL_SSL; and the exchange itself, frame by frame, where clients never go wrong."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets
import shutil
import socket
import ssl
import struct
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                   UserScramCredentialUpsertion)

from odradek.protocol.errors import ErrorCode
from tests.conftest import BrokerProcess, free_port
from tests.interop.conftest import java_client  # noqa: F401 - the session fixture, shared with tests/interop
from tests.interop.helpers import frame, read_frame, request_header_v1, wait_closed, wait_until
from tests.security.certs import TestCA
from tests.security.test_tls import consume_keys, produce, serve

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA, API_VERSIONS = 17, 36, 3, 18


class SaslBroker:
    def __init__(self, tmp_path: Path, extra: dict[str, str] | None = None) -> None:
        self.ca = TestCA()
        self.ca_file = self.ca.truststore(tmp_path / "ca.pem")
        self.plain, self.sasl_plaintext, self.sasl_ssl = free_port(), free_port(), free_port()
        self.settings = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.plain},SASL_PLAINTEXT://127.0.0.1:{self.sasl_plaintext},"
                         f"SASL_SSL://127.0.0.1:{self.sasl_ssl}",
            "ssl.keystore.location": str(self.ca.issue("broker", server=True).keystore(tmp_path / "broker.pem")),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
            **(extra or {}),
        }
        self.process = BrokerProcess(tmp_path / "data", self.settings, port=self.plain).start()

    def sasl_plaintext_config(self, mechanism: str, user: str, password: str) -> dict[str, str]:
        return {"bootstrap.servers": f"127.0.0.1:{self.sasl_plaintext}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
                "broker.address.family": "v4"}

    def sasl_ssl_config(self, mechanism: str, user: str, password: str) -> dict[str, str]:
        return {**self.sasl_plaintext_config(mechanism, user, password),
                "bootstrap.servers": f"127.0.0.1:{self.sasl_ssl}", "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(self.ca_file)}

    def add_scram_user(self, user: str, password: str, *mechanisms: ScramMechanism) -> None:
        admin = AdminClient({"bootstrap.servers": self.process.bootstrap})
        futures = admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion(user, ScramCredentialInfo(m, 8192), password.encode())
            for m in mechanisms])
        for future in futures.values():
            future.result(10)


@pytest.fixture
def sasl_broker(tmp_path) -> SaslBroker:
    broker = SaslBroker(tmp_path)
    yield broker
    broker.process.stop()


def refused(config: dict[str, str]) -> bool:
    try:
        AdminClient(config).list_topics(timeout=3)
    except KafkaException:
        return True
    return False


@pytest.mark.timeout(120)
def test_plain_login_over_sasl_plaintext(sasl_broker, topic_name):
    config = sasl_broker.sasl_plaintext_config("PLAIN", "alice", "alice-secret")
    produce(config, topic_name, 100)
    assert len(consume_keys(config, topic_name, 100)) == 100
    # the listener advertises itself to a client that came in on it
    metadata = AdminClient(config).list_topics(timeout=10)
    assert {b.port for b in metadata.brokers.values()} == {sasl_broker.sasl_plaintext}
    assert refused(sasl_broker.sasl_plaintext_config("PLAIN", "alice", "wrong-password"))
    assert refused(sasl_broker.sasl_plaintext_config("PLAIN", "mallory", "alice-secret"))
    log = sasl_broker.process.log_tail(200_000)
    assert "failed PLAIN login from 127.0.0.1:" in log and "'mallory'" in log
    assert "wrong-password" not in log, "a password was logged"


@pytest.mark.timeout(180)
def test_scram_users_created_with_admin_api_log_in_over_sasl_ssl(sasl_broker, topic_name):
    sasl_broker.add_scram_user("bob", "bob-secret", ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
    admin = AdminClient({"bootstrap.servers": sasl_broker.process.bootstrap})  # alive until its futures are done
    described = admin.describe_user_scram_credentials(["bob"])
    description = (described.result(10) if hasattr(described, "result") else
                   {k: v.result(10) for k, v in described.items()})["bob"]
    assert sorted((i.mechanism, i.iterations) for i in description.scram_credential_infos) == \
        [(ScramMechanism.SCRAM_SHA_256, 8192), (ScramMechanism.SCRAM_SHA_512, 8192)]

    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        config = sasl_broker.sasl_ssl_config(mechanism, "bob", "bob-secret")
        produce(config, topic_name, 50)
        assert refused(sasl_broker.sasl_ssl_config(mechanism, "bob", "not-bobs"))
    assert len(consume_keys(sasl_broker.sasl_ssl_config("SCRAM-SHA-512", "bob", "bob-secret"), topic_name, 100)) == 100

    from kafka import KafkaConsumer
    consumer = KafkaConsumer(topic_name, bootstrap_servers=f"127.0.0.1:{sasl_broker.sasl_ssl}",
                             security_protocol="SASL_SSL", ssl_cafile=str(sasl_broker.ca_file),
                             sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob",
                             sasl_plain_password="bob-secret", auto_offset_reset="earliest",
                             consumer_timeout_ms=10000)
    assert len(list(consumer)) == 100
    consumer.close()

    from aiokafka import AIOKafkaConsumer

    async def aio() -> int:
        consumer = AIOKafkaConsumer(topic_name, bootstrap_servers=f"127.0.0.1:{sasl_broker.sasl_plaintext}",
                                    security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                                    sasl_plain_username="bob", sasl_plain_password="bob-secret",
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            count = 0
            while count < 100:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 20)
                count += sum(len(m) for m in batch.values())
            return count
        finally:
            await consumer.stop()

    assert asyncio.run(aio()) == 100

    if KCAT is None:
        pytest.skip("kcat is not installed")
    out = subprocess.run([KCAT, "-b", f"127.0.0.1:{sasl_broker.sasl_ssl}", "-X", "security.protocol=SASL_SSL",
                          "-X", f"ssl.ca.location={sasl_broker.ca_file}", "-X", "sasl.mechanism=SCRAM-SHA-512",
                          "-X", "sasl.username=bob", "-X", "sasl.password=bob-secret",
                          "-C", "-t", topic_name, "-o", "beginning", "-e", "-q", "-f", "%k\\n"],
                         capture_output=True, timeout=30)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert len(out.stdout.split()) == 100


@pytest.mark.timeout(120)
def test_scram_credentials_survive_a_restart_and_can_be_deleted(sasl_broker, topic_name):
    sasl_broker.add_scram_user("carol", "carol-secret", ScramMechanism.SCRAM_SHA_512)
    config = sasl_broker.sasl_ssl_config("SCRAM-SHA-512", "carol", "carol-secret")
    assert not refused(config)
    stored = (sasl_broker.process.data_dir / "scram-credentials.json").read_text()
    assert "carol" in stored and "carol-secret" not in stored
    sasl_broker.process.restart()
    assert not refused(config)
    admin = AdminClient({"bootstrap.servers": sasl_broker.process.bootstrap})
    for future in admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)]).values():
        future.result(10)
    assert refused(config)
    # deleting it again: RESOURCE_NOT_FOUND; too few iterations: UNACCEPTABLE_CREDENTIAL
    with pytest.raises(KafkaException, match="does not exist"):
        for future in admin.alter_user_scram_credentials(
                [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)]).values():
            future.result(10)
    with pytest.raises(KafkaException, match="Iterations"):
        for future in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw")]).values():
            future.result(10)


@pytest.mark.timeout(180)
def test_java_client_over_sasl_ssl_with_scram(sasl_broker, java_client, topic_name, tmp_path):
    sasl_broker.add_scram_user("jvm", "jvm-secret", ScramMechanism.SCRAM_SHA_512)
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                      'username="jvm" password="jvm-secret";\n'
                      f"ssl.truststore.type=PEM\nssl.truststore.location={sasl_broker.ca_file}\n")
    bootstrap = f"127.0.0.1:{sasl_broker.sasl_ssl}"
    offsets = [int(x) for x in java_client.run("produce", bootstrap, topic_name, 20, "all", "none", "",
                                               client_config=config)]
    assert offsets == list(range(20))
    read = java_client.run("group-consume", bootstrap, topic_name, "jvm-group", 20, client_config=config)
    assert len(read) == 20
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(config.read_text().replace('password="jvm-secret"', 'password="nope"'))
    java_client.run("produce", bootstrap, topic_name, 1, "all", "none", "", client_config=wrong,
                    expect_rc=1, timeout=90)


# -- the exchange frame by frame --------------------------------------------------------------------------


def request(api_key: int, version: int, body: bytes, correlation_id: int = 7) -> bytes:
    return frame(request_header_v1(api_key, version, correlation_id) + body)


def string(value: str) -> bytes:
    data = value.encode()
    return struct.pack(">h", len(data)) + data


def handshake(sock: socket.socket, mechanism: str, version: int = 1) -> tuple[int, list[str]]:
    sock.sendall(request(SASL_HANDSHAKE, version, string(mechanism)))
    payload = read_frame(sock)
    error, count = struct.unpack_from(">hi", payload, 4)
    pos, mechanisms = 10, []
    for _ in range(count):
        (n,) = struct.unpack_from(">h", payload, pos)
        mechanisms.append(payload[pos + 2:pos + 2 + n].decode())
        pos += 2 + n
    return error, mechanisms


def authenticate(sock: socket.socket, token: bytes) -> tuple[int, str | None, bytes, int]:
    """SaslAuthenticate v1: (error, message, token, session lifetime ms)."""
    sock.sendall(request(SASL_AUTHENTICATE, 1, struct.pack(">i", len(token)) + token))
    payload = read_frame(sock)
    (error, n) = struct.unpack_from(">hh", payload, 4)
    message = payload[8:8 + n].decode() if n >= 0 else None
    pos = 8 + max(n, 0)
    (size,) = struct.unpack_from(">i", payload, pos)
    answer = payload[pos + 4:pos + 4 + size]
    (lifetime,) = struct.unpack_from(">q", payload, pos + 4 + size)
    return error, message, answer, lifetime


def metadata_answered(sock: socket.socket) -> bool:
    sock.sendall(request(METADATA, 1, struct.pack(">i", 0)))
    return len(read_frame(sock)) > 4


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.settimeout(10)
    return sock


@pytest.mark.timeout(60)
def test_out_of_order_and_unknown_mechanisms_close_the_connection(sasl_broker):
    port = sasl_broker.sasl_plaintext
    with connect(port) as sock:  # any other request before authentication
        sock.sendall(request(METADATA, 1, struct.pack(">i", 0)))
        assert wait_closed(sock)
    with connect(port) as sock:
        error, mechanisms = handshake(sock, "GSSAPI")
        assert error == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert wait_closed(sock)
    with connect(port) as sock:  # SaslAuthenticate before SaslHandshake
        assert authenticate(sock, b"\0alice\0alice-secret")[0] == ErrorCode.ILLEGAL_SASL_STATE
        assert wait_closed(sock)
    with connect(port) as sock:
        assert handshake(sock, "PLAIN")[0] == ErrorCode.NONE
        error, message, _, _ = authenticate(sock, b"\0alice\0nope")
        assert error == ErrorCode.SASL_AUTHENTICATION_FAILED and "Invalid username or password" in message
        assert wait_closed(sock)
    # ApiVersions is answered before authentication; a PLAINTEXT listener refuses SaslHandshake
    with connect(port) as sock:
        sock.sendall(request(API_VERSIONS, 1, b""))
        assert struct.unpack_from(">h", read_frame(sock), 4)[0] == ErrorCode.NONE
        assert handshake(sock, "PLAIN")[0] == ErrorCode.NONE
        assert authenticate(sock, b"\0alice\0alice-secret")[0] == ErrorCode.NONE
        assert metadata_answered(sock)
    with connect(sasl_broker.plain) as sock:
        assert handshake(sock, "PLAIN")[0] == ErrorCode.ILLEGAL_SASL_STATE


@pytest.mark.timeout(60)
def test_handshake_v0_then_raw_tokens(sasl_broker):
    with connect(sasl_broker.sasl_plaintext) as sock:
        assert handshake(sock, "PLAIN", version=0)[0] == ErrorCode.NONE
        token = b"\0admin\0admin-secret"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert read_frame(sock) == b""  # PLAIN's empty answer, as a bare frame
        assert metadata_answered(sock)
    with connect(sasl_broker.sasl_plaintext) as sock:
        assert handshake(sock, "PLAIN", version=0)[0] == ErrorCode.NONE
        token = b"\0admin\0bad"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert wait_closed(sock)


def scram_login(sock: socket.socket, user: str, password: str, digest: str = "sha512") -> tuple[int, int]:
    """A SCRAM exchange written out by hand (RFC 5802): (error of the final step, session lifetime)."""
    nonce = base64.b64encode(secrets.token_bytes(18)).decode()
    first_bare = f"n={user},r={nonce}"
    error, _, server_first, _ = authenticate(sock, ("n,," + first_bare).encode())
    assert error == ErrorCode.NONE
    fields = dict(part.split("=", 1) for part in server_first.decode().split(","))
    assert fields["r"].startswith(nonce)
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{first_bare},{server_first.decode()},{without_proof}".encode()
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    signature = hmac.new(hashlib.new(digest, client_key).digest(), auth_message, digest).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    error, _, server_final, lifetime = authenticate(sock, f"{without_proof},p={proof}".encode())
    if error == ErrorCode.NONE:
        server_key = hmac.new(salted, b"Server Key", digest).digest()
        assert server_final == b"v=" + base64.b64encode(hmac.new(server_key, auth_message, digest).digest())
    return error, lifetime


@pytest.mark.timeout(120)
def test_sessions_end_after_connections_max_reauth_ms(tmp_path):
    broker = SaslBroker(tmp_path, {"connections.max.reauth.ms": "1500"})
    try:
        broker.add_scram_user("erin", "erin-secret", ScramMechanism.SCRAM_SHA_512)
        with connect(broker.sasl_plaintext) as sock:
            assert handshake(sock, "SCRAM-SHA-512")[0] == ErrorCode.NONE
            error, lifetime = scram_login(sock, "erin", "erin-secret")
            assert error == ErrorCode.NONE and 0 < lifetime <= 1500
            assert metadata_answered(sock)
            # re-authentication (KIP-368) renews the session on the same connection
            assert handshake(sock, "SCRAM-SHA-512")[0] == ErrorCode.NONE
            error, lifetime = scram_login(sock, "erin", "erin-secret")
            assert error == ErrorCode.NONE and lifetime > 0
            assert metadata_answered(sock)
            time.sleep(lifetime / 1000.0 + 0.2)  # the session is over: the next request closes the connection
            sock.sendall(request(METADATA, 1, struct.pack(">i", 0)))
            assert wait_closed(sock)
        with connect(broker.sasl_plaintext) as sock:
            assert handshake(sock, "SCRAM-SHA-512")[0] == ErrorCode.NONE
            assert scram_login(sock, "erin", "wrong")[0] == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert wait_closed(sock)
        # librdkafka re-authenticates before its sessions end (KIP-368): producing for several lifetimes, no
        # connection of it is closed for an expired session
        expired_closes = broker.process.log_tail(1_000_000).count("after its SASL session expired")
        producer = Producer({**broker.sasl_plaintext_config("SCRAM-SHA-512", "erin", "erin-secret"), "acks": "all"})
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            producer.produce("reauth", value=b"x")
            producer.poll(0.05)
        assert producer.flush(20) == 0
        assert broker.process.log_tail(1_000_000).count("after its SASL session expired") == expired_closes
    finally:
        broker.process.stop()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("settings, expected", [
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}, "GSSAPI"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"}, "plain.sasl.jaas.config"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER"}, "OAUTHBEARER"),
])
def test_bad_sasl_configurations_are_refused_at_start(tmp_path, settings, expected):
    result = serve(tmp_path / "data", settings)
    assert result.returncode == 2, result.stderr
    assert "configuration error" in result.stderr and expected in result.stderr, result.stderr
