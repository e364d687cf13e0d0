"""A cluster whose brokers replicate over TLS: each has a PLAINTEXT and an SSL listener, brokers reach each
other on SSL (`inter.broker.listener.name=SSL`, client certificates required there), and each client is told
the endpoints of the listener it came in on."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from tests.cluster.common import REPLICATED, create_topic, full_isr
from tests.interop.helpers import TCP_ESTABLISHED, process_tcp_ports, wait_until
from tests.security.certs import TestCA

RECORDS = 500


def connected_ports(pid: int) -> set[int]:
    """The remote ports of the process's established TCP connections."""
    return {remote for _, remote in process_tcp_ports(pid, TCP_ESTABLISHED)}


@pytest.mark.timeout(180)
def test_brokers_replicate_over_their_ssl_listener(cluster_factory, tmp_path: Path, topic_name):
    ca = TestCA()
    keystore = ca.issue("broker", server=True, organizational_unit="brokers").keystore(tmp_path / "broker.pem")
    truststore = ca.truststore(tmp_path / "ca.pem")
    cluster = cluster_factory(3, settings={
        **REPLICATED, "inter.broker.listener.name": "SSL", "ssl.keystore.location": str(keystore),
        "ssl.truststore.location": str(truststore), "ssl.client.auth": "required"})
    ssl_ports = cluster.add_listener("SSL")
    cluster.start()
    cluster.wait_ready()
    create_topic(cluster, topic_name, partitions=3)

    client = ca.issue("app")
    over_tls = {"bootstrap.servers": f"127.0.0.1:{ssl_ports[1]}", "security.protocol": "SSL",
                "ssl.ca.location": str(truststore), "broker.address.family": "v4",
                "ssl.certificate.location": str(client.cert_file(tmp_path / "app.crt")),
                "ssl.key.location": str(client.key_file(tmp_path / "app.key"))}
    metadata = AdminClient(over_tls).list_topics(timeout=10)
    assert {b.id: b.port for b in metadata.brokers.values()} == ssl_ports
    plain = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10)
    assert {b.id: b.port for b in plain.brokers.values()} == {bid: b.port for bid, b in cluster.brokers.items()}

    producer = Producer({**over_tls, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic_name, key=str(i).encode(), value=b"v%d" % i, partition=i % 3)
    assert producer.flush(60) == 0
    wait_until(lambda: full_isr(cluster, topic_name, 3), timeout=30, message="full ISR after the load")

    # the followers copied the logs over the SSL listeners: each broker holds connections to another's SSL port
    for bid, broker in cluster.brokers.items():
        others = {port for other, port in ssl_ports.items() if other != bid}
        plain_ports = {b.port for other, b in cluster.brokers.items() if other != bid}
        wait_until(lambda: connected_ports(broker.proc.pid) & others, timeout=10,
                   message=f"broker {bid} connected to another broker's SSL listener")
        assert not connected_ports(broker.proc.pid) & plain_ports, f"broker {bid} talks to a PLAINTEXT listener"

    consumer = Consumer({**over_tls, "group.id": f"g-{topic_name}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic_name])
    seen: set[bytes] = set()

    def all_read() -> bool:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.add(msg.value())
        return len(seen) == RECORDS

    try:
        wait_until(all_read, timeout=60, interval=0, message="every record read back over TLS")
    finally:
        consumer.close()
