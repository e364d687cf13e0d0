"""ACLs in cluster mode: created through one broker, kept in ZooKeeper in Kafka's layout (/kafka-acl), and
enforced by every broker once the change notification reaches it."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import AclBinding, AclBindingFilter, AclOperation, AclPermissionType, NewTopic
from confluent_kafka.admin import ResourcePatternType, ResourceType
from kazoo.client import KazooClient

from tests.interop.helpers import wait_until

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-pw";'


def alice_writes(port: int, topic: str) -> bool:
    """One record written by alice through the broker at ``port``: True if delivered, False if refused."""
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-pw",
                             acks="all", retries=0, max_block_ms=5000)
    try:
        producer.send(topic, b"v").get(timeout=10)
        return True
    except TopicAuthorizationFailedError:
        return False
    finally:
        producer.close(timeout=5)


@pytest.mark.timeout(150)
def test_acls_live_in_zookeeper_and_every_broker_enforces_them(cluster_factory):
    cluster = cluster_factory(2, settings={
        "offsets.topic.replication.factor": "2", "transaction.state.log.replication.factor": "2",
        "transaction.state.log.min.isr": "1", "default.replication.factor": "2",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",  # the brokers and this test's admin, on PLAINTEXT
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS})
    sasl_ports = cluster.add_listener("SASL_PLAINTEXT")
    cluster.start()
    cluster.wait_ready()
    admin = cluster.admin([1])
    for future in admin.create_topics([NewTopic("audit", 2, 2)]).values():
        future.result(30)
    wait_until(lambda: all(len(cluster.partition_state("audit", p).isr) == 2 for p in range(2)), timeout=30,
               message="audit fully replicated")
    assert not alice_writes(sasl_ports[2], "audit")

    write = AclBinding(ResourceType.TOPIC, "audit", ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.WRITE, AclPermissionType.ALLOW)
    for future in admin.create_acls([write]).values():
        future.result(10)
    for bid, port in sasl_ports.items():  # both partitions, one led by each broker, must take the write
        wait_until(lambda: all(alice_writes(port, "audit") for _ in range(4)), timeout=20, interval=0.3,
                   message=f"broker {bid} letting alice write")

    zk = KazooClient(hosts=cluster.zk_connect)
    zk.start(timeout=10)
    try:
        stored = json.loads(zk.get("/kafka-acl/Topic/audit")[0])
    finally:
        zk.stop()
    assert stored == {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                              "operation": "Write", "host": "*"}]}

    cluster.restart(2)
    cluster.wait_ready()
    assert alice_writes(sasl_ports[2], "audit")
    for future in admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "audit", ResourcePatternType.LITERAL,
                                                      "User:alice", None, AclOperation.ANY,
                                                      AclPermissionType.ANY)]).values():
        assert len(future.result(10)) == 1
    for bid, port in sasl_ports.items():
        wait_until(lambda: not alice_writes(port, "audit"), timeout=20, interval=0.3,
                   message=f"broker {bid} refusing alice again")
