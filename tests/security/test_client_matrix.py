"""Every client library against every way of logging in: confluent-kafka, kafka-python, aiokafka, kcat and
the Java client each write records and read them back over SASL_SSL with SCRAM-SHA-512, SASL_PLAINTEXT with
PLAIN, and mutual TLS (the Java client's mutual TLS is tests/security/test_java_security.py). One broker
serves the three listeners; each case has a topic of its own."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from tests.conftest import BrokerProcess, free_port
from tests.interop.conftest import java_client  # noqa: F401 - the session fixture, shared with tests/interop
from tests.interop.helpers import java_value
from tests.security.certs import TestCA
from tests.security.test_tls import consume_keys, produce

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_alice="alice-secret";')
RECORDS = 20
MODES = ["sasl_ssl-scram512", "sasl_plaintext-plain", "mtls"]


class Listeners:
    """One broker with a PLAINTEXT (administration), a SASL_SSL (SCRAM-SHA-512), a SASL_PLAINTEXT (PLAIN) and an
    SSL listener that insists on client certificates; a SCRAM user bob and a client certificate for carol."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        ca = TestCA()
        self.ca_file = ca.truststore(tmp / "ca.pem")
        carol = ca.issue("carol")
        self.cert_file, self.key_file = carol.cert_file(tmp / "carol.crt"), carol.key_file(tmp / "carol.key")
        self.ports = {name: free_port() for name in ("PLAINTEXT", "SASL_SSL", "SASL_PLAINTEXT", "SSL")}
        self.broker = BrokerProcess(tmp / "data", {
            "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.ports.items()),
            "ssl.keystore.location": str(ca.issue("broker", server=True).keystore(tmp / "broker.pem")),
            "listener.name.ssl.ssl.client.auth": "required",
            "listener.name.ssl.ssl.truststore.location": str(self.ca_file),
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        }, port=self.ports["PLAINTEXT"]).start()
        admin = AdminClient({"bootstrap.servers": self.broker.bootstrap, "broker.address.family": "v4"})
        for future in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"bob-secret")]).values():
            future.result(10)

    def address(self, mode: str) -> str:
        listener = {"sasl_ssl-scram512": "SASL_SSL", "sasl_plaintext-plain": "SASL_PLAINTEXT", "mtls": "SSL"}[mode]
        return f"127.0.0.1:{self.ports[listener]}"

    def librdkafka(self, mode: str) -> dict[str, str]:
        """confluent-kafka's and kcat's settings (both are librdkafka)."""
        if mode == "sasl_ssl-scram512":
            return {"security.protocol": "SASL_SSL", "ssl.ca.location": str(self.ca_file),
                    "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": "bob-secret"}
        if mode == "sasl_plaintext-plain":
            return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                    "sasl.password": "alice-secret"}
        return {"security.protocol": "SSL", "ssl.ca.location": str(self.ca_file),
                "ssl.certificate.location": str(self.cert_file), "ssl.key.location": str(self.key_file)}

    def kafka_python(self, mode: str) -> dict:
        """kafka-python's and aiokafka's keyword arguments (aiokafka takes an ssl_context instead of files)."""
        if mode == "sasl_ssl-scram512":
            return {"security_protocol": "SASL_SSL", "ssl_cafile": str(self.ca_file), "sasl_mechanism": "SCRAM-SHA-512",
                    "sasl_plain_username": "bob", "sasl_plain_password": "bob-secret"}
        if mode == "sasl_plaintext-plain":
            return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice",
                    "sasl_plain_password": "alice-secret"}
        return {"security_protocol": "SSL", "ssl_cafile": str(self.ca_file), "ssl_certfile": str(self.cert_file),
                "ssl_keyfile": str(self.key_file)}

    def aiokafka(self, mode: str) -> dict:
        kwargs = self.kafka_python(mode)
        files = {k: kwargs.pop(k) for k in ("ssl_cafile", "ssl_certfile", "ssl_keyfile") if k in kwargs}
        if files:
            context = ssl.create_default_context(cafile=files["ssl_cafile"])
            if "ssl_certfile" in files:
                context.load_cert_chain(files["ssl_certfile"], files["ssl_keyfile"])
            kwargs["ssl_context"] = context
        return kwargs

    def java(self, mode: str) -> Path:
        settings = {k: v for k, v in self.librdkafka(mode).items() if k in ("security.protocol", "sasl.mechanism")}
        if "ssl.ca.location" in self.librdkafka(mode):
            settings.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca_file)})
        if mode == "sasl_ssl-scram512":
            settings["sasl.jaas.config"] = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                            'username="bob" password="bob-secret";')
        elif mode == "sasl_plaintext-plain":
            settings["sasl.jaas.config"] = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                                            'username="alice" password="alice-secret";')
        path = self.tmp / f"java-{mode}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        return path


@pytest.fixture(scope="module")
def listeners(tmp_path_factory):
    setup = Listeners(tmp_path_factory.mktemp("matrix"))
    yield setup
    setup.broker.stop()


def topic(client: str, mode: str) -> str:
    return f"matrix-{client}-{mode}"


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", MODES)
def test_confluent_kafka(listeners, mode):
    config = {"bootstrap.servers": listeners.address(mode), "broker.address.family": "v4", **listeners.librdkafka(mode)}
    produce(config, topic("confluent", mode), RECORDS)
    assert sorted(consume_keys(config, topic("confluent", mode), RECORDS)) == sorted(
        str(i).encode() for i in range(RECORDS))


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", MODES)
def test_kafka_python(listeners, mode):
    from kafka import KafkaConsumer, KafkaProducer

    name = topic("kafka-python", mode)
    producer = KafkaProducer(bootstrap_servers=listeners.address(mode), acks="all", **listeners.kafka_python(mode))
    for i in range(RECORDS):
        producer.send(name, key=str(i).encode(), value=b"kp-%d" % i)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(name, bootstrap_servers=listeners.address(mode), auto_offset_reset="earliest",
                             consumer_timeout_ms=10000, **listeners.kafka_python(mode))
    values = [m.value for m in consumer]
    consumer.close()
    assert values == [b"kp-%d" % i for i in range(RECORDS)]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", MODES)
def test_aiokafka(listeners, mode):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    name = topic("aiokafka", mode)

    async def roundtrip() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=listeners.address(mode), acks="all", **listeners.aiokafka(mode))
        await producer.start()
        try:
            for i in range(RECORDS):
                await producer.send_and_wait(name, b"aio-%d" % i, key=str(i).encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(name, bootstrap_servers=listeners.address(mode), auto_offset_reset="earliest",
                                    **listeners.aiokafka(mode))
        await consumer.start()
        try:
            out: list[bytes] = []
            while len(out) < RECORDS:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 20)
                out.extend(m.value for msgs in batch.values() for m in msgs)
            return out
        finally:
            await consumer.stop()

    assert asyncio.run(roundtrip()) == [b"aio-%d" % i for i in range(RECORDS)]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", MODES)
def test_kcat(listeners, mode):
    if KCAT is None:
        pytest.skip("kcat is not installed")
    name = topic("kcat", mode)
    settings = [arg for k, v in listeners.librdkafka(mode).items() for arg in ("-X", f"{k}={v}")]
    lines = "".join(f"kc-{i}\n" for i in range(RECORDS)).encode()
    out = subprocess.run([KCAT, "-b", listeners.address(mode), *settings, "-P", "-t", name], input=lines,
                         capture_output=True, timeout=30)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    out = subprocess.run([KCAT, "-b", listeners.address(mode), *settings, "-C", "-t", name, "-o", "beginning", "-e",
                          "-q", "-c", str(RECORDS), "-f", "%s\\n"], capture_output=True, timeout=30)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert out.stdout.decode().split() == [f"kc-{i}" for i in range(RECORDS)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["sasl_ssl-scram512", "sasl_plaintext-plain"])
def test_java_client(listeners, mode, java_client):  # noqa: F811
    name = topic("java", mode)
    config = listeners.java(mode)
    offsets = java_client.run("produce", listeners.address(mode), name, RECORDS, "all", "none", "jm-",
                              client_config=config)
    assert [int(x) for x in offsets] == list(range(RECORDS))
    lines = java_client.run("consume", listeners.address(mode), name, 0, RECORDS, 30000, client_config=config)
    assert [line.split("\t")[2] for line in lines] == [java_value("jm-", i) for i in range(RECORDS)]
