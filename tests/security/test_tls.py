"""TLS listeners: a broker serving PLAINTEXT and SSL at once to real clients (confluent-kafka, kafka-python,
aiokafka, kcat), mutual TLS, certificates replaced without a restart, and configurations refused at start."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from tests.conftest import BrokerProcess, free_port
from tests.interop.helpers import wait_until
from tests.security.certs import TestCA

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
RECORDS = 300


@pytest.fixture
def ca() -> TestCA:
    return TestCA()


@pytest.fixture
def tls_broker(tmp_path: Path, ca: TestCA):
    """Start a broker with a PLAINTEXT listener (its bootstrap) and an SSL one: `tls_broker(extra_settings)`
    gives (the broker, the SSL port); every one is stopped at teardown."""
    started: list[BrokerProcess] = []

    def start(extra: dict[str, str] | None = None) -> tuple[BrokerProcess, int]:
        plain, secure = free_port(), free_port()
        settings = {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{secure}",
            "ssl.keystore.location": str(ca.issue("broker", server=True).keystore(tmp_path / "broker.pem")),
            "ssl.truststore.location": str(ca.truststore(tmp_path / "ca.pem")),
            **(extra or {}),
        }
        broker = BrokerProcess(tmp_path / "data", settings, port=plain)
        started.append(broker)
        return broker.start(), secure

    yield start
    for broker in started:
        broker.stop()


def ssl_config(port: int, ca_file: Path, **extra: str) -> dict[str, str]:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL", "ssl.ca.location": str(ca_file),
            "broker.address.family": "v4", **extra}


def produce(config: dict[str, str], topic: str, count: int) -> None:
    producer = Producer({**config, "acks": "all", "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=bytes([i % 251]) * 1024)
    assert producer.flush(30) == 0


def consume_keys(config: dict[str, str], topic: str, count: int, timeout_s: float = 30.0) -> list[bytes]:
    consumer = Consumer({**config, "group.id": f"g-{topic}-{config['bootstrap.servers']}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    keys: list[bytes] = []
    try:
        def done() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                assert msg.value() == bytes([int(msg.key()) % 251]) * 1024
                keys.append(msg.key())
            return len(keys) >= count
        wait_until(done, timeout=timeout_s, interval=0, message=f"{count} records over {config['bootstrap.servers']}")
    finally:
        consumer.close()
    return keys


def advertised_ports(config: dict[str, str]) -> set[int]:
    metadata = AdminClient(config).list_topics(timeout=10)
    return {b.port for b in metadata.brokers.values()}


@pytest.mark.timeout(120)
def test_one_broker_serves_plaintext_and_ssl_listeners(tmp_path, tls_broker, topic_name):
    broker, secure = tls_broker()
    over_tls = ssl_config(secure, tmp_path / "ca.pem")
    produce(over_tls, topic_name, RECORDS)
    # each listener advertises itself: a client on SSL must not be sent to the PLAINTEXT port
    assert advertised_ports(over_tls) == {secure}
    assert advertised_ports({"bootstrap.servers": broker.bootstrap}) == {broker.port}
    keys = consume_keys(over_tls, topic_name, RECORDS)  # fetches over TLS: no sendfile, records read and encrypted
    assert sorted(keys, key=int) == [str(i).encode() for i in range(RECORDS)]
    assert len(consume_keys({"bootstrap.servers": broker.bootstrap}, topic_name, RECORDS)) == RECORDS


@pytest.mark.timeout(120)
def test_kafka_python_aiokafka_and_kcat_over_ssl(tmp_path, tls_broker, topic_name):
    from aiokafka import AIOKafkaConsumer
    from kafka import KafkaConsumer, KafkaProducer

    broker, secure = tls_broker()
    ca_file = str(tmp_path / "ca.pem")
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{secure}", security_protocol="SSL", ssl_cafile=ca_file,
                             acks="all")
    for i in range(RECORDS):
        producer.send(topic_name, key=str(i).encode(), value=b"kp-%d" % i)
    producer.flush(30)
    producer.close()

    consumer = KafkaConsumer(topic_name, bootstrap_servers=f"127.0.0.1:{secure}", security_protocol="SSL",
                             ssl_cafile=ca_file, auto_offset_reset="earliest", consumer_timeout_ms=10000)
    values = [m.value for m in consumer]
    consumer.close()
    assert values == [b"kp-%d" % i for i in range(RECORDS)]

    async def aio() -> list[bytes]:
        context = ssl.create_default_context(cafile=ca_file)
        consumer = AIOKafkaConsumer(topic_name, bootstrap_servers=f"127.0.0.1:{secure}", security_protocol="SSL",
                                    ssl_context=context, auto_offset_reset="earliest")
        await consumer.start()
        try:
            out: list[bytes] = []
            while len(out) < RECORDS:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 20)
                out.extend(m.value for msgs in batch.values() for m in msgs)
            return out
        finally:
            await consumer.stop()

    assert asyncio.run(aio()) == [b"kp-%d" % i for i in range(RECORDS)]

    if KCAT is None:
        pytest.skip("kcat is not installed")
    out = subprocess.run([KCAT, "-b", f"127.0.0.1:{secure}", "-X", "security.protocol=SSL", "-X",
                          f"ssl.ca.location={ca_file}", "-C", "-t", topic_name, "-o", "beginning", "-e", "-q",
                          "-f", "%s\\n"], capture_output=True, timeout=30)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert out.stdout.decode().split() == ["kp-%d" % i for i in range(RECORDS)]


@pytest.mark.timeout(120)
def test_mutual_tls_refuses_a_client_without_a_certificate(tmp_path, ca, tls_broker, topic_name):
    broker, secure = tls_broker({"ssl.client.auth": "required"})
    ca_file = tmp_path / "ca.pem"
    anonymous = AdminClient(ssl_config(secure, ca_file))
    with pytest.raises(KafkaException):
        anonymous.list_topics(timeout=5)
    # a certificate from another CA is refused as well
    stranger = TestCA("another CA").issue("mallory")
    with pytest.raises(KafkaException):
        AdminClient(ssl_config(secure, ca_file, **{
            "ssl.certificate.location": str(stranger.cert_file(tmp_path / "mallory.crt")),
            "ssl.key.location": str(stranger.key_file(tmp_path / "mallory.key"))})).list_topics(timeout=5)
    alice = ca.issue("alice", organizational_unit="eng")
    with_cert = ssl_config(secure, ca_file, **{"ssl.certificate.location": str(alice.cert_file(tmp_path / "a.crt")),
                                               "ssl.key.location": str(alice.key_file(tmp_path / "a.key"))})
    produce(with_cert, topic_name, 50)
    assert len(consume_keys(with_cert, topic_name, 50)) == 50


@pytest.mark.timeout(60)
@pytest.mark.parametrize("version, alert", [(ssl.TLSVersion.TLSv1_3, "CERTIFICATE_REQUIRED"),
                                            (ssl.TLSVersion.TLSv1_2, "HANDSHAKE_FAILURE")])
def test_a_refused_handshake_sends_its_alert(tmp_path, ca, tls_broker, version, alert):
    """The client is told why (a TLS alert), not just disconnected, and the refusal is logged."""
    broker, secure = tls_broker({"ssl.client.auth": "required"})
    context = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    context.minimum_version = context.maximum_version = version
    with socket.create_connection(("127.0.0.1", secure), timeout=10) as raw:
        with pytest.raises(ssl.SSLError, match=alert):
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"\0\0\0\0")
                tls.recv(1)
    wait_until(lambda: "TLS handshake refused" in broker.log_tail(20_000), timeout=10, message="the refusal logged")


@pytest.mark.timeout(120)
def test_certificates_are_reloaded_without_a_restart(tmp_path, ca, tls_broker, topic_name):
    broker, secure = tls_broker()
    old_ca_file = ca.truststore(tmp_path / "old-ca.pem")
    AdminClient(ssl_config(secure, old_ca_file)).list_topics(timeout=10)

    # the operator replaces the broker's certificate with one from a new CA, in place
    new_ca = TestCA("the new CA")
    new_ca_file = new_ca.truststore(tmp_path / "new-ca.pem")
    fresh = tmp_path / "broker.pem.new"
    new_ca.issue("broker", server=True).keystore(fresh)
    fresh.replace(tmp_path / "broker.pem")

    def new_certificate_served() -> bool:
        AdminClient(ssl_config(secure, new_ca_file)).list_topics(timeout=3)
        return True

    wait_until(new_certificate_served, timeout=20, interval=0.5, message="the new certificate served")
    with pytest.raises(KafkaException):
        AdminClient(ssl_config(secure, old_ca_file)).list_topics(timeout=3)
    produce(ssl_config(secure, new_ca_file), topic_name, 20)
    assert broker.is_running()


@pytest.mark.timeout(90)
def test_keystore_changed_by_a_dynamic_broker_config(tmp_path, ca, tls_broker, topic_name):
    """A keystore rotation as `kafka-configs --entity-type brokers --alter --add-config
    listener.name.ssl.ssl.keystore.location=...` does it: new handshakes get the new certificate at once, with
    no restart; a keystore that does not load leaves the one in use (the broker keeps serving)."""
    from odradek.protocol.errors import ErrorCode
    from tests.interop.test_broker_configs_hostile import SET, alter
    from tests.interop.test_broker_configs_runtime import alter_broker

    broker, secure = tls_broker({"node.id": "1"})
    old_ca_file = ca.truststore(tmp_path / "old-ca.pem")
    AdminClient(ssl_config(secure, old_ca_file)).list_topics(timeout=10)
    new_ca = TestCA("the rotated CA")
    new_ca_file = new_ca.truststore(tmp_path / "new-ca.pem")
    rotated = new_ca.issue("broker", server=True).keystore(tmp_path / "rotated.pem")
    alter_broker(broker.bootstrap, "1", {"listener.name.ssl.ssl.keystore.location": str(rotated)})
    AdminClient(ssl_config(secure, new_ca_file)).list_topics(timeout=10)
    with pytest.raises(KafkaException):
        AdminClient(ssl_config(secure, old_ca_file)).list_topics(timeout=3)
    # hostile: a path that does not exist, a file that is no keystore, a key password that does not open the key:
    # refused as Kafka refuses them (INVALID_REQUEST), the rotated certificate served on
    (tmp_path / "garbage.pem").write_bytes(b"-----BEGIN NOTHING-----\n\x00\xff\n")
    encrypted = new_ca.issue("broker", server=True).keystore(tmp_path / "encrypted.pem", password=b"right")
    for changes in ({"listener.name.ssl.ssl.keystore.location": str(tmp_path / "missing.pem")},
                    {"listener.name.ssl.ssl.keystore.location": str(tmp_path / "garbage.pem")},
                    {"listener.name.SSL.ssl.keystore.location": str(tmp_path / "garbage.pem")},
                    {"listener.name.ssl.ssl.keystore.location": str(encrypted),
                     "listener.name.ssl.ssl.key.password": "wrong"},
                    {"listener.name.ssl.ssl.keystore.location": str(encrypted)}):
        answer = alter(broker.bootstrap, "1", [(k, SET, v) for k, v in changes.items()])
        assert answer["error_code"] == ErrorCode.INVALID_REQUEST, (changes, answer)
        assert answer["error_message"].startswith("Validation of dynamic config update of SSLFactory failed")
        AdminClient(ssl_config(secure, new_ca_file)).list_topics(timeout=10)
    # a listener without TLS has no keystore to check, as in Kafka: stored, nothing changes
    assert alter(broker.bootstrap, "1", [("listener.name.plaintext.ssl.keystore.location", SET, "/none")])[
        "error_code"] == 0
    # the encrypted keystore with its password: taken
    alter_broker(broker.bootstrap, "1", {"listener.name.ssl.ssl.keystore.location": str(encrypted),
                                         "listener.name.ssl.ssl.key.password": "right"})
    AdminClient(ssl_config(secure, new_ca_file)).list_topics(timeout=10)
    produce(ssl_config(secure, new_ca_file), topic_name, 20)
    # deleted: back to the static keystore, the first CA's certificate
    alter_broker(broker.bootstrap, "1", {"listener.name.ssl.ssl.keystore.location": None,
                                         "listener.name.ssl.ssl.key.password": None})
    AdminClient(ssl_config(secure, old_ca_file)).list_topics(timeout=10)
    assert broker.is_running()


@pytest.mark.timeout(60)
def test_an_encrypted_key_needs_its_password(tmp_path, ca):
    key_password = "s3cret"
    plain, secure = free_port(), free_port()
    settings = {"listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{secure}",
                "ssl.keystore.location": str(ca.issue("broker", server=True).keystore(tmp_path / "b.pem",
                                                                                         key_password.encode()))}
    refused = serve(tmp_path / "d1", settings)
    assert refused.returncode == 2 and "ssl.keystore.location" in refused.stderr, refused.stderr
    broker = BrokerProcess(tmp_path / "d2", {**settings, "ssl.key.password": key_password}, port=plain).start()
    try:
        assert advertised_ports(ssl_config(secure, ca.truststore(tmp_path / "ca.pem"))) == {secure}
    finally:
        broker.stop()


def serve(data_dir: Path, settings: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """`odradek serve` expected to refuse its configuration (it exits at once)."""
    cmd = [sys.executable, "-m", "odradek", "serve", "--data-dir", str(data_dir), *args]
    for key, value in settings.items():
        cmd += ["--set", f"{key}={value}"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("settings, expected", [
    ({"listeners": "SSL://127.0.0.1:0"}, "ssl.keystore.location"),
    ({"listeners": "PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"}, "given twice"),
    ({"listeners": "INTERNAL://127.0.0.1:0"}, "listener.security.protocol.map"),
    ({"listeners": "PLAINTEXT://127.0.0.1:0", "advertised.listeners": "SSL://h:1"}, "not among the listeners"),
    ({"listeners": "PLAINTEXT://127.0.0.1:0", "inter.broker.listener.name": "SSL"}, "inter.broker.listener.name"),
    ({"listeners": "SASL_SSL://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"}, "ssl.keystore.location"),
    ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": "/nonexistent.pem"}, "cannot load"),
    ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": "x", "ssl.keystore.type": "JKS"}, "only PEM"),
    ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": "x", "ssl.enabled.protocols": "TLSv1"}, "TLSv1"),
])
def test_bad_listener_configurations_are_refused_at_start(tmp_path, settings, expected):
    result = serve(tmp_path / "data", settings)
    assert result.returncode == 2, result.stderr
    assert "configuration error" in result.stderr and expected in result.stderr, result.stderr
