"""The KAFKA07 listener under the authorizer (legacy07/service.py; docs/kafka07.md, "Security").

One secured broker: `authorizer.class.name` set, `super.users=User:admin`, `allow.everyone.if.no.acl.found=false`,
auto-creation on. admin logs in on a SASL_PLAINTEXT listener and manages topics and ACLs with confluent-kafka's
AdminClient; clients of the PLAINTEXT listener are User:ANONYMOUS; the KAFKA07 listener's clients are
User:ANONYMOUS too, and those of a second KAFKA07 listener (APP07) are User:alice by `legacy.principal`.

Every 0.7 outcome is compared in the same test with the outcome the same principal gets from the current
protocol's counterpart (PLAINTEXT for User:ANONYMOUS, SASL for alice): FETCH against Fetch (READ), OFFSETS
against ListOffsets (DESCRIBE), PRODUCE against Produce (WRITE), a produce to a missing topic against Metadata
with auto-creation (CREATE). A 0.7 refusal is Unknown (-1) for a fetch or offsets request and a closed
connection for a produce; the current protocol's is TOPIC_AUTHORIZATION_FAILED. Whether anything was written
or created is checked as admin over the current protocol.
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass
from typing import Iterator

import pytest
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)
from prometheus_client.parser import text_string_to_metric_families

from odradek.config import BrokerConfig, ConfigError
from odradek.legacy07 import codec
from odradek.protocol.errors import ErrorCode
from odradek.records.codec import build_batch
from tests.conftest import BrokerProcess, free_port
from tests.interop.helpers import wait_until
from tests.kafka07.client07 import Client07, payloads
from tests.security.test_acl_every_api import Session
from tests.security.test_acls import JAAS, USERS

ANONYMOUS = "User:ANONYMOUS"
ALICE = "User:alice"
REFUSED_07 = codec.ErrorCode07.UNKNOWN  # what a refused 0.7 fetch or offsets request is answered
DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
LATEST = codec.LATEST_TIME


@dataclass
class Secured07:
    process: BrokerProcess
    plain: int  # PLAINTEXT: User:ANONYMOUS
    sasl: int  # SASL_PLAINTEXT (PLAIN): admin, alice
    kafka07: int  # KAFKA07: User:ANONYMOUS
    app07: int  # KAFKA07 with legacy.principal=User:alice
    metrics: int
    admin: AdminClient

    def port07(self, principal: str) -> int:
        return self.kafka07 if principal == ANONYMOUS else self.app07

    def session(self, principal: str) -> Session:
        """A current-protocol connection as ``principal``: PLAINTEXT for User:ANONYMOUS, SASL otherwise."""
        if principal == ANONYMOUS:
            return Session(self.plain)
        user = principal.split(":", 1)[1]
        return Session(self.sasl, user, USERS[user])

    def grant(self, *acls: AclBinding) -> None:
        for future in self.admin.create_acls(list(acls)).values():
            future.result(20)

    def revoke(self, *acls: AclBinding) -> None:
        filters = [AclBindingFilter(a.restype, a.name, a.resource_pattern_type, a.principal, a.host, a.operation,
                                    a.permission_type) for a in acls]
        for future in self.admin.delete_acls(filters).values():
            future.result(20)

    def create_topics(self, *names: str) -> None:
        for future in self.admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
            future.result(20)
        admin = self.session("User:admin")
        try:  # one record in each, written by admin: something a refused reader must not see
            for name in names:
                assert modern_produce(admin, name) == 0
        finally:
            admin.close()

    def end_offset(self, topic: str) -> int:
        """The topic's partition 0 log end, as admin sees it over the current protocol (-1: no such topic)."""
        admin = self.session("User:admin")
        try:
            answer = admin.call(2, 7, {"replica_id": -1, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "timestamp": -1}]}]})["topics"][0]["partitions"][0]
        finally:
            admin.close()
        if answer["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return -1
        assert answer["error_code"] == 0, answer
        return answer["offset"]

    def exists(self, topic: str) -> bool:
        admin = self.session("User:admin")
        try:
            answer = admin.call(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
        finally:
            admin.close()
        return answer["topics"][0]["error_code"] == 0


def acl(principal: str, operation: AclOperation, name: str, *,
        pattern: ResourcePatternType = ResourcePatternType.LITERAL, resource: ResourceType = ResourceType.TOPIC,
        permission: AclPermissionType = AclPermissionType.ALLOW, host: str = "*") -> AclBinding:
    return AclBinding(resource, name, pattern, principal, host, operation, permission)


@pytest.fixture(scope="module")
def secured07_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured07]:
    plain, sasl, kafka07, app07, metrics = (free_port() for _ in range(5))
    process = BrokerProcess(tmp_path_factory.mktemp("acls07") / "data", {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},"
                     f"KAFKA07://127.0.0.1:{kafka07},APP07://127.0.0.1:{app07}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,KAFKA07:KAFKA07,"
                                          "APP07:KAFKA07",
        "listener.name.app07.legacy.principal": ALICE,
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "false",
        "auto.create.topics.enable": "true",
        "metrics.listen": f"127.0.0.1:{metrics}",
    }, port=plain).start()
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{sasl}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": USERS["admin"],
                         "broker.address.family": "v4"})
    yield Secured07(process, plain, sasl, kafka07, app07, metrics, admin)
    process.stop()


@pytest.fixture
def secured07(secured07_broker: Secured07) -> Iterator[Secured07]:
    """The module's broker; every test starts and ends without ACLs (each names topics of its own)."""
    yield secured07_broker
    every_acl = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                 AclPermissionType.ANY)
    for future in secured07_broker.admin.delete_acls([every_acl]).values():
        future.result(20)


# -- the two sides of each comparison ---------------------------------------------------------------------

def modern_read(session: Session, topic: str) -> int:
    answer = session.call(1, 12, {"max_wait_ms": 0, "max_bytes": 10000, "topics": [
        {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 10000}]}]})
    return answer["responses"][0]["partitions"][0]["error_code"]


def modern_describe(session: Session, topic: str) -> int:
    answer = session.call(2, 7, {"replica_id": -1, "topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "timestamp": -1}]}]})
    return answer["topics"][0]["partitions"][0]["error_code"]


def modern_produce(session: Session, topic: str) -> int:
    records = build_batch([(None, b"current", (), 1_700_000_000_000)])
    answer = session.call(0, 9, {"acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    return answer["responses"][0]["partition_responses"][0]["error_code"]


def modern_auto_create(session: Session, topic: str) -> int:
    answer = session.call(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": True})
    return answer["topics"][0]["error_code"]


def produce07(port: int, topic: str, payload: bytes) -> bool:
    """Whether a 0.7 PRODUCE was taken: the connection answers the OFFSETS request sent after it (answers come
    in request order), rather than being closed."""
    with Client07("127.0.0.1", port) as client:
        client.produce(topic, 0, [payload])
        return answered_after(client, topic)


def answered_after(client: Client07, topic: str) -> bool:
    try:
        client.offsets(topic, 0, LATEST)
    except ConnectionError:
        return False
    return True


def compare_read(broker: Secured07, principal: str, topic: str) -> bool:
    """Whether ``principal`` may read ``topic``: FETCH and OFFSETS over 0.7 agree with Fetch and ListOffsets
    over the current protocol, and a refused 0.7 client gets nothing."""
    with Client07("127.0.0.1", broker.port07(principal)) as client:
        fetch_error, messages = client.fetch(topic, 0, 0)
        offsets_error, offsets = client.offsets(topic, 0, LATEST)
    session = broker.session(principal)
    try:
        read, describe = modern_read(session, topic), modern_describe(session, topic)
    finally:
        session.close()
    refused07 = fetch_error == REFUSED_07
    assert refused07 == (read == DENIED), f"{principal} reading {topic}: 0.7 {fetch_error}, current {read}"
    assert (offsets_error == REFUSED_07) == (describe == DENIED), \
        f"{principal} describing {topic}: 0.7 {offsets_error}, current {describe}"
    if refused07:
        assert messages == []
    if offsets_error == REFUSED_07:
        assert offsets == []
    return not refused07


def compare_produce(broker: Secured07, principal: str, topic: str, payload: bytes) -> bool:
    """Whether ``principal`` may write ``topic`` (existing): 0.7 PRODUCE agrees with Produce, and nothing is
    written where they refuse."""
    before = broker.end_offset(topic)
    taken07 = produce07(broker.port07(principal), topic, payload)
    session = broker.session(principal)
    try:
        produced = modern_produce(session, topic)
    finally:
        session.close()
    assert taken07 == (produced != DENIED), f"{principal} writing {topic}: 0.7 taken={taken07}, current {produced}"
    assert broker.end_offset(topic) == before + 2 * taken07
    return taken07


def errors_counted(broker: Secured07, request: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == "kafka_network_requestmetrics_errors_total" and s.labels.get("request") == request
               and s.labels.get("error") == "TOPIC_AUTHORIZATION_FAILED")


# -- tests --------------------------------------------------------------------------------------------------

def test_a_topic_no_acl_allows_is_refused(secured07):
    secured07.create_topics("unacled")
    fetches_before = errors_counted(secured07, "Kafka07Fetch")
    assert not compare_read(secured07, ANONYMOUS, "unacled")
    # a missing topic is refused the same way: the refusal tells nothing of which topics exist
    assert not compare_read(secured07, ANONYMOUS, "never-created")
    assert errors_counted(secured07, "Kafka07Fetch") == fetches_before + 2
    assert errors_counted(secured07, "Kafka07Offsets") >= 2


def test_a_deny_wins_over_an_allow_all_wildcard(secured07):
    secured07.create_topics("open", "secret")
    secured07.grant(acl(ANONYMOUS, AclOperation.ALL, "*"),
                    acl(ANONYMOUS, AclOperation.READ, "secret", permission=AclPermissionType.DENY))
    assert compare_read(secured07, ANONYMOUS, "open")
    assert not compare_read(secured07, ANONYMOUS, "secret")
    with Client07("127.0.0.1", secured07.kafka07) as client:
        error, messages = client.fetch("open", 0, 0)
        assert (error, payloads(messages)) == (0, [b"current"])
    # a DENY for everyone (User:*) beats the ALLOW named for ANONYMOUS too
    secured07.grant(acl("User:*", AclOperation.ALL, "open", permission=AclPermissionType.DENY))
    assert not compare_read(secured07, ANONYMOUS, "open")
    assert not compare_produce(secured07, ANONYMOUS, "open", b"denied")


def test_a_refused_produce_writes_nothing_and_closes_the_connection(secured07):
    secured07.create_topics("read-only", "writable")
    secured07.grant(acl(ANONYMOUS, AclOperation.READ, "read-only"), acl(ANONYMOUS, AclOperation.WRITE, "writable"))
    assert not compare_produce(secured07, ANONYMOUS, "read-only", b"refused")
    # MULTIPRODUCE: one refused part refuses the request whole, the part the principal may write included
    with Client07("127.0.0.1", secured07.kafka07) as client:
        client.send(codec.encode_multiproduce([("writable", 0, codec.encode_message(b"part")),
                                               ("read-only", 0, codec.encode_message(b"part"))]))
        assert not answered_after(client, "writable")
    # a corrupt set to a refused topic: closed before the broker looks at it
    with Client07("127.0.0.1", secured07.kafka07) as client:
        client.send(codec.encode_produce("read-only", 0, b"\x00\x00\x00\x09garbage!!"))
        assert client.is_closed_by_peer()
    assert (secured07.end_offset("read-only"), secured07.end_offset("writable")) == (1, 1)
    with Client07("127.0.0.1", secured07.kafka07) as client:
        error, messages = client.fetch("read-only", 0, 0)
        assert (error, payloads(messages)) == (0, [b"current"])
    # granted WRITE: the same produce is taken, and read back over 0.7
    assert compare_produce(secured07, ANONYMOUS, "writable", b"taken")
    secured07.grant(acl(ANONYMOUS, AclOperation.WRITE, "read-only"))
    assert compare_produce(secured07, ANONYMOUS, "read-only", b"taken")
    with Client07("127.0.0.1", secured07.kafka07) as client:
        error, messages = client.fetch("read-only", 0, 0)
        assert (error, payloads(messages)) == (0, [b"current", b"taken", b"current"])


def test_auto_creation_needs_create(secured07):
    # WRITE on the names, no CREATE: neither protocol creates the topic
    secured07.grant(acl(ANONYMOUS, AclOperation.WRITE, "auto-", pattern=ResourcePatternType.PREFIXED))
    for attempt in ("auto-07", "auto-current"):
        assert not secured07.exists(attempt)
    assert not produce07(secured07.kafka07, "auto-07", b"creating")
    session = secured07.session(ANONYMOUS)
    try:
        assert modern_auto_create(session, "auto-current") == DENIED
    finally:
        session.close()
    assert not secured07.exists("auto-07") and not secured07.exists("auto-current")
    # nor without any ACL at all
    assert not produce07(secured07.kafka07, "unnamed-07", b"creating")
    assert not secured07.exists("unnamed-07")
    # CREATE on the topics (a prefixed ACL): both create
    secured07.grant(acl(ANONYMOUS, AclOperation.CREATE, "auto-", pattern=ResourcePatternType.PREFIXED))
    assert produce07(secured07.kafka07, "auto-07", b"created")
    session = secured07.session(ANONYMOUS)
    try:
        assert modern_auto_create(session, "auto-current") != DENIED
    finally:
        session.close()
    wait_until(lambda: secured07.exists("auto-current"), timeout=20, message="auto-current created")
    assert secured07.end_offset("auto-07") == 1
    # CREATE on the cluster does it as well
    secured07.grant(acl(ANONYMOUS, AclOperation.WRITE, "cluster-created"),
                    acl(ANONYMOUS, AclOperation.CREATE, "kafka-cluster", resource=ResourceType.BROKER))  # the cluster
    assert produce07(secured07.kafka07, "cluster-created", b"created")
    assert secured07.end_offset("cluster-created") == 1


def test_acl_changes_apply_to_open_connections(secured07):
    secured07.create_topics("granted-later")
    read = acl(ANONYMOUS, AclOperation.READ, "granted-later", host="127.0.0.1")
    with Client07("127.0.0.1", secured07.kafka07) as client:
        assert client.fetch("granted-later", 0, 0)[0] == REFUSED_07
        assert not compare_read(secured07, ANONYMOUS, "granted-later")
        # an ACL for another host is not this client's: the ACL host is the 0.7 client's address
        secured07.grant(acl(ANONYMOUS, AclOperation.READ, "granted-later", host="192.0.2.7"))
        assert client.fetch("granted-later", 0, 0)[0] == REFUSED_07
        assert not compare_read(secured07, ANONYMOUS, "granted-later")
        secured07.grant(read)
        error, messages = client.fetch("granted-later", 0, 0)
        assert (error, payloads(messages)) == (0, [b"current"])
        assert client.offsets("granted-later", 0, LATEST)[0] == 0  # READ implies DESCRIBE
        assert compare_read(secured07, ANONYMOUS, "granted-later")
        secured07.revoke(read)
        assert client.fetch("granted-later", 0, 0)[0] == REFUSED_07
        assert not compare_read(secured07, ANONYMOUS, "granted-later")


def test_a_prefixed_acl(secured07):
    secured07.create_topics("team-a", "teamb")
    secured07.grant(acl(ANONYMOUS, AclOperation.READ, "team-", pattern=ResourcePatternType.PREFIXED))
    assert compare_read(secured07, ANONYMOUS, "team-a")
    assert not compare_read(secured07, ANONYMOUS, "teamb")
    with Client07("127.0.0.1", secured07.kafka07) as client:
        client.send(codec.encode_multifetch([("team-a", 0, 0, 10000), ("teamb", 0, 0, 10000)]))
        error, body = client.response()
        parts = codec.decode_multifetch_body(body)
    assert error == 0 and [code for code, _ in parts] == [0, REFUSED_07] and parts[1][1] == b""


def test_the_listener_principal(secured07):
    secured07.create_topics("alices")
    secured07.grant(acl(ALICE, AclOperation.READ, "alices"), acl(ALICE, AclOperation.WRITE, "alices"))
    assert compare_read(secured07, ALICE, "alices")
    assert compare_produce(secured07, ALICE, "alices", b"from alice")
    assert not compare_read(secured07, ANONYMOUS, "alices")
    assert not compare_produce(secured07, ANONYMOUS, "alices", b"from anyone")
    # the ACLs of the principal in force, not of ANONYMOUS: alice's listener does not read what ANONYMOUS may
    secured07.create_topics("anonymous-only")
    secured07.grant(acl(ANONYMOUS, AclOperation.READ, "anonymous-only"))
    assert compare_read(secured07, ANONYMOUS, "anonymous-only")
    assert not compare_read(secured07, ALICE, "anonymous-only")


def test_the_principal_property_is_checked():
    assert BrokerConfig({"listener.name.old.legacy.principal": "User:app"}).for_listener("old", "legacy.principal") \
        == "User:app"
    assert BrokerConfig({}).for_listener("old", "legacy.principal") == ANONYMOUS
    for bad in ("app", "User:", ":app"):
        with pytest.raises(ConfigError):
            BrokerConfig({"listener.name.old.legacy.principal": bad})


def test_a_0_7_client_sees_the_refusal(secured07, node07):
    """prozess 0.7.0, a real 0.7 consumer: a refused topic fails its consume with the code -1, and the records
    come once READ is granted. (prozess maps -1 to Error("Unknown"), but on Node 20 it first trips over its own
    re-encoding of the response, UInt16BE(-1), and reports that RangeError: either way the error reaches the
    application. It rejects codes outside 0.7's -1..4, so Kafka's 29 would be "Invalid error code".)"""
    secured07.create_topics("prozess-read")
    code, result = node07.attempt("prozess_driver.js", "consume", "127.0.0.1", secured07.kafka07, "prozess-read", 0,
                                  0, 1, 10000)
    assert code == 1 and set(result) == {"error"}
    assert result["error"] == "Error: Unknown" or "Received -1" in result["error"], result
    secured07.grant(acl(ANONYMOUS, AclOperation.READ, "prozess-read"))
    result = node07.run("prozess_driver.js", "consume", "127.0.0.1", secured07.kafka07, "prozess-read", 0, 0, 1, 10000)
    assert [m["payload"] for m in result["messages"]] == ["current"]


def test_a_super_user_principal_is_warned_about(broker07_factory):
    broker = broker07_factory(**{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                 "super.users": "User:admin;User:ANONYMOUS", "auto.create.topics.enable": "false"})
    assert "User:ANONYMOUS is among super.users" in broker.process.log_tail(20000)
    # and it is one: a topic no ACL names is served (and absent ones answered as without an authorizer)
    with Client07("127.0.0.1", broker.kafka07_port) as client:
        assert client.fetch("no-acl-names-it", 0, 0) == (0, [])
        assert client.offsets("no-acl-names-it", 0, LATEST) == (0, [0])
