"""Client quotas: the Java Admin client sets and lists them (AlterClientQuotas, DescribeClientQuotas), they
survive a restart, and the broker holds clients to them. A producer and a consumer over their byte rates
are slowed to the quota (measured over a steady stretch, within 20 %) while another client id on the same
broker is not; a client over its request_percentage gets throttle_time_ms and its connection muted."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from odradek.protocol import codec
from tests.conftest import BrokerProcess
from tests.interop.conftest import java_client  # noqa: F401 - the session fixture, shared with tests/interop

# Three one-second samples: the rate follows the client within seconds (Kafka's default, 11, lets a
# client burst ten seconds' worth of its quota first, which a short test would mostly measure).
QUICK_WINDOW = {"quota.window.num": "3", "quota.window.size.seconds": "1"}
VALUE = b"q" * 1024


@pytest.fixture
def quota_broker(tmp_path):
    broker = BrokerProcess(tmp_path / "data", QUICK_WINDOW).start()
    yield broker
    broker.stop()


def describe(java_client, bootstrap: str, *components: str) -> list[str]:  # noqa: F811
    return java_client.run("quotas-describe", bootstrap, *components)


def test_java_admin_alters_and_describes_client_quotas(quota_broker, java_client):  # noqa: F811
    boot = quota_broker.bootstrap
    assert java_client.run("quotas-alter", boot, "user=alice", "producer_byte_rate=1048576",
                           "consumer_byte_rate=2097152") == ["ok"]
    assert java_client.run("quotas-alter", boot, "user=alice,client-id=<default>", "request_percentage=50") == ["ok"]
    assert java_client.run("quotas-alter", boot, "client-id=<default>", "producer_byte_rate=500000") == ["ok"]

    everything = ["client-id=<default>\tproducer_byte_rate=500000.0",
                  "client-id=<default>,user=alice\trequest_percentage=50.0",
                  "user=alice\tconsumer_byte_rate=2097152.0,producer_byte_rate=1048576.0"]
    assert describe(java_client, boot) == everything
    assert describe(java_client, boot, "user=alice") == everything[1:]
    assert describe(java_client, boot, "strict", "user=alice") == everything[2:]
    assert describe(java_client, boot, "client-id=<default>") == everything[:2]
    assert describe(java_client, boot, "strict", "client-id") == everything[:1]
    assert describe(java_client, boot, "user=bob") == []

    # refused: a fractional byte rate, an unknown key, an entity type odradek does not enforce
    for entity, op in [("user=bob", "producer_byte_rate=1.5"), ("user=bob", "unknown_rate=10"),
                       ("user=bob", "request_percentage=-1"), ("ip=127.0.0.1", "connection_creation_rate=5")]:
        out = java_client.run("quotas-alter", boot, entity, op, expect_rc=4)
        assert out[0].startswith("error\tInvalidRequestException"), out

    assert java_client.run("quotas-alter", boot, "user=alice", "consumer_byte_rate=") == ["ok"]
    quota_broker.restart()
    assert describe(java_client, boot) == [everything[0], everything[1], "user=alice\tproducer_byte_rate=1048576.0"]


def test_odradek_quotas_cli_agrees_with_the_java_admin(quota_broker, java_client):  # noqa: F811
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "odradek", "quotas", *args, "--bootstrap",
                               quota_broker.bootstrap], capture_output=True, text=True, timeout=30)

    done = cli("alter", "--user-default", "--client-id", "etl", "--add-config",
               "consumer_byte_rate=4096,request_percentage=12.5")
    assert done.returncode == 0 and "changed the quotas of user=<default>, client-id=etl" in done.stdout, done
    assert describe(java_client, quota_broker.bootstrap) == [
        "client-id=etl,user=<default>\tconsumer_byte_rate=4096.0,request_percentage=12.5"]
    assert java_client.run("quotas-alter", quota_broker.bootstrap, "client-id=etl", "producer_byte_rate=10") == ["ok"]
    listed = cli("describe", "--client-id", "etl")
    assert listed.stdout.splitlines() == ["client-id=etl: producer_byte_rate=10",
                                          "user=<default>, client-id=etl: consumer_byte_rate=4096, request_percentage=12.5"], listed
    assert cli("describe", "--client-id", "etl", "--strict").stdout.splitlines() == ["client-id=etl: producer_byte_rate=10"]
    refused = cli("alter", "--user", "bob", "--add-config", "producer_byte_rate=0.5")
    assert refused.returncode == 1 and "error 42" in refused.stderr, refused


def produce_for(bootstrap: str, client_id: str, seconds: float) -> list[float]:
    """Produce 1 KiB records as fast as the broker lets ``client_id`` for ``seconds``; the delivery times."""
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": 1, "linger.ms": 5,
                         "batch.size": 65536, "broker.address.family": "v4"})
    delivered: list[float] = []

    def done(err, msg) -> None:
        if err is None:
            delivered.append(time.monotonic())

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            producer.produce("quota-topic", VALUE, on_delivery=done)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.flush(30)
    return delivered


def rate_between(times: list[float], start: float, end: float, size: int = len(VALUE)) -> float:
    return sum(size for t in times if start <= t < end) / (end - start)


def set_quota(java_client, bootstrap: str, entity: str, op: str) -> None:  # noqa: F811
    assert java_client.run("quotas-alter", bootstrap, entity, op) == ["ok"]


@pytest.mark.timeout(120)
def test_throttled_producer_is_slowed_to_its_quota(quota_broker, java_client):  # noqa: F811
    quota = 200_000
    set_quota(java_client, quota_broker.bootstrap, "client-id=slow-producer", f"producer_byte_rate={quota}")
    start = time.monotonic()
    delivered = produce_for(quota_broker.bootstrap, "slow-producer", 12.0)
    # after the first samples, which a client may fill at once
    measured = rate_between(delivered, start + 4.0, start + 12.0)
    assert abs(measured - quota) <= 0.2 * quota, f"{measured:.0f} B/s against a quota of {quota}"

    free = produce_for(quota_broker.bootstrap, "free-producer", 3.0)
    assert len(free) * len(VALUE) / 3.0 > 3 * quota, "the other client id is not held to the quota"


@pytest.mark.timeout(120)
def test_throttled_consumer_is_slowed_to_its_quota(quota_broker, java_client):  # noqa: F811
    quota = 300_000
    produce_for(quota_broker.bootstrap, "filler", 3.0)  # several megabytes to read
    set_quota(java_client, quota_broker.bootstrap, "client-id=slow-consumer", f"consumer_byte_rate={quota}")

    def consume_for(client_id: str, seconds: float) -> list[float]:
        consumer = Consumer({"bootstrap.servers": quota_broker.bootstrap, "client.id": client_id,
                             "group.id": client_id, "enable.auto.commit": False,
                             "fetch.max.bytes": 65536, "message.max.bytes": 65536, "max.partition.fetch.bytes": 65536,
                             "broker.address.family": "v4"})
        consumer.assign([TopicPartition("quota-topic", 0, OFFSET_BEGINNING)])
        received: list[float] = []
        end = time.monotonic() + seconds
        try:
            while time.monotonic() < end:
                for msg in consumer.consume(1000, timeout=0.2):
                    if msg.error() is None:
                        received.append(time.monotonic())
        finally:
            consumer.close()
        return received

    start = time.monotonic()
    received = consume_for("slow-consumer", 12.0)
    assert received, "the throttled consumer read nothing"
    measured = rate_between(received, start + 4.0, start + 12.0)
    # records go out batched (about 70 bytes of framing per 1 KiB record here), so count what the wire carried
    assert abs(measured - quota) <= 0.2 * quota, f"{measured:.0f} B/s against a quota of {quota}"

    free = consume_for("free-consumer", 4.0)
    assert len(free) * len(VALUE) / 4.0 > 3 * quota, "the other client id is not held to the quota"


def call(sock: socket.socket, api_key: int, version: int, body: dict, correlation_id: int) -> dict:
    sock.sendall(codec.encode_request(api_key, version, correlation_id, "busy-client", body))
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    return codec.decode_response(api_key, version, sock.recv(size, socket.MSG_WAITALL))[1]


def test_request_percentage_throttles_and_mutes_the_connection(quota_broker, java_client):  # noqa: F811
    # a millionth of a thread: any request is over it
    set_quota(java_client, quota_broker.bootstrap, "user=<default>", "request_percentage=0.0001")
    with socket.create_connection(("127.0.0.1", quota_broker.port), timeout=30) as sock:
        first = call(sock, 3, 9, {"topics": None, "allow_auto_topic_creation": False}, 1)
        assert first["throttle_time_ms"] > 0
        sent = time.monotonic()
        second = call(sock, 3, 9, {"topics": None, "allow_auto_topic_creation": False}, 2)
        # the broker read nothing more on this connection until the throttle was over
        assert time.monotonic() - sent >= first["throttle_time_ms"] / 1000.0 * 0.9
        assert second["throttle_time_ms"] > 0
        # ApiVersions is exempt, as in Kafka
        assert call(sock, 18, 3, {"client_software_name": "t", "client_software_version": "1"}, 3)[
            "throttle_time_ms"] == 0
