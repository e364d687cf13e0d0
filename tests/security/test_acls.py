"""ACLs: Kafka's authorizer, turned on with `authorizer.class.name`, managed with CreateAcls, DescribeAcls and
DeleteAcls from confluent-kafka's AdminClient, and enforced on the clients of a SASL listener: an
unauthorised principal gets the right code and learns no topic names; an authorised one works."""

from __future__ import annotations

import socket
import struct

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

from odradek.protocol.errors import ErrorCode
from tests.conftest import BrokerProcess, free_port
from tests.interop.helpers import frame, read_frame, request_header_v1, wait_until

DESCRIBE_ACLS = 29
USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}
JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(
    f'user_{user}="{password}"' for user, password in USERS.items()) + ";"


class SecuredBroker:
    def __init__(self, tmp_path) -> None:
        self.plain, self.sasl = free_port(), free_port()
        self.process = BrokerProcess(tmp_path / "data", {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.plain},SASL_PLAINTEXT://127.0.0.1:{self.sasl}",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
            "auto.create.topics.enable": "false",
        }, port=self.plain).start()

    def config(self, user: str) -> dict[str, str]:
        return {"bootstrap.servers": f"127.0.0.1:{self.sasl}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user],
                "broker.address.family": "v4"}

    def admin(self, user: str = "admin") -> AdminClient:
        return AdminClient(self.config(user))


@pytest.fixture
def secured(tmp_path):
    broker = SecuredBroker(tmp_path)
    yield broker
    broker.process.stop()


def allow(principal: str, operation: AclOperation, resource: ResourceType, name: str,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL,
          permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, permission)


def produce_error(config: dict[str, str], topic: str) -> KafkaError | None:
    """The delivery error of one record (None: delivered)."""
    reports: list = []
    producer = Producer({**config, "acks": "all", "message.timeout.ms": 10000, "retries": 0})
    producer.produce(topic, value=b"v", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(15)
    assert len(reports) == 1
    return reports[0]


def consume_error(config: dict[str, str], topic: str, group: str) -> KafkaError | None:
    """The first error a consumer of ``group`` meets reading ``topic`` (None: it read a record)."""
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        def outcome():
            msg = consumer.poll(0.5)
            if msg is None:
                return None
            return ("error", msg.error()) if msg.error() else ("record", None)
        kind, error = wait_until(outcome, timeout=20, interval=0, message=f"reading {topic} as {group}")
        return error
    finally:
        consumer.close()


def describe_acls_error(port: int) -> int:
    """The error code of a DescribeAcls v1 for every ACL, sent on a connection of its own (librdkafka does not
    raise that request's top-level error)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        any_acl = struct.pack(">bhbhhbb", ResourceType.ANY.value, -1, ResourcePatternType.ANY.value, -1, -1,
                              AclOperation.ANY.value, AclPermissionType.ANY.value)
        sock.sendall(frame(request_header_v1(DESCRIBE_ACLS, 1, 5) + any_acl))
        _, _, error = struct.unpack_from(">iih", read_frame(sock))
    return error


def topic_names(admin: AdminClient) -> set[str]:
    return set(admin.list_topics(timeout=10).topics)


@pytest.mark.timeout(180)
def test_acls_decide_who_reads_and_writes_what(secured, tmp_path):
    admin = secured.admin()
    for future in admin.create_topics([NewTopic("public-events", 1, 1), NewTopic("secret-events", 1, 1)]).values():
        future.result(20)
    alice, bob = secured.config("alice"), secured.config("bob")
    alice_admin = secured.admin("alice")  # kept: a client must outlive its futures

    # no ACLs: alice can do nothing and learns no topic names
    assert not {"public-events", "secret-events"} & topic_names(secured.admin("alice"))
    assert produce_error(alice, "public-events").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as refused:
        for future in alice_admin.create_acls(
                [allow("User:alice", AclOperation.ALL, ResourceType.TOPIC, "*")]).values():
            future.result(10)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    acls = [
        allow("User:alice", AclOperation.WRITE, ResourceType.TOPIC, "public-events"),
        allow("User:alice", AclOperation.READ, ResourceType.TOPIC, "public-", ResourcePatternType.PREFIXED),
        allow("User:alice", AclOperation.READ, ResourceType.GROUP, "alice-group"),
        allow("User:bob", AclOperation.ALL, ResourceType.TOPIC, "*"),
        allow("User:bob", AclOperation.READ, ResourceType.GROUP, "*"),
        allow("User:bob", AclOperation.READ, ResourceType.TOPIC, "public-events", permission=AclPermissionType.DENY),
    ]
    for future in admin.create_acls(acls).values():
        future.result(10)

    # alice: describes what she may write or read, nothing else
    assert topic_names(secured.admin("alice")) & {"public-events", "secret-events"} == {"public-events"}
    assert produce_error(alice, "public-events") is None
    assert produce_error(alice, "secret-events").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert consume_error(alice, "public-events", "alice-group") is None
    assert consume_error(alice, "public-events", "other-group").code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    # bob: ALL on every topic, but the DENY on reading public-events wins
    assert produce_error(bob, "secret-events") is None
    assert consume_error(bob, "secret-events", "bob-group") is None
    assert consume_error(bob, "public-events", "bob-group").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    described = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice",
                                                     None, AclOperation.ANY, AclPermissionType.ANY)).result(10)
    assert sorted(map(str, described)) == sorted(map(str, acls[:3]))
    # alice may not see the ACLs: librdkafka hands her an empty list (it does not raise DescribeAcls' top-level
    # error); over the wire, as an anonymous client on PLAINTEXT, the answer is CLUSTER_AUTHORIZATION_FAILED
    assert alice_admin.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(10) == []
    assert describe_acls_error(secured.plain) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    # authorized operations: the super user may do everything with the cluster, alice nothing; with her group,
    # what READ allows (READ and DESCRIBE)
    everything = admin.describe_cluster(include_authorized_operations=True).result(10).authorized_operations
    assert AclOperation.ALTER in everything and AclOperation.CLUSTER_ACTION in everything
    assert not alice_admin.describe_cluster(include_authorized_operations=True).result(10).authorized_operations
    group = alice_admin.describe_consumer_groups(["alice-group"], include_authorized_operations=True)
    assert sorted(group["alice-group"].result(10).authorized_operations, key=lambda o: o.value) == \
        [AclOperation.READ, AclOperation.DESCRIBE]

    # ACLs survive a restart; deleting alice's WRITE takes it away
    secured.process.restart()
    assert produce_error(alice, "public-events") is None
    deleted = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "public-events", ResourcePatternType.LITERAL,
                                                  "User:alice", None, AclOperation.WRITE,
                                                  AclPermissionType.ALLOW)])
    for future in deleted.values():
        assert [str(a) for a in future.result(10)] == [str(acls[0])]
    assert produce_error(alice, "public-events").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


@pytest.mark.timeout(60)
def test_acl_apis_without_an_authorizer_answer_security_disabled(broker):
    assert describe_acls_error(broker.port) == ErrorCode.SECURITY_DISABLED
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException) as refused:
        for future in admin.create_acls([allow("User:x", AclOperation.READ, ResourceType.TOPIC, "t")]).values():
            future.result(10)
    assert refused.value.args[0].code() == KafkaError.SECURITY_DISABLED
