"""Share groups (KIP-932) against a real broker, with confluent-kafka's `ShareConsumer` (librdkafka's share consumer,
ShareGroupHeartbeat/ShareFetch/ShareAcknowledge v1) and raw requests where a client cannot show the detail.

Each test uses its own topic and group; group configs (`share.auto.offset.reset=earliest`, a 2 s record lock) are
set with the AdminClient's incremental_alter_configs on GROUP resources, as an operator would.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import (AcknowledgeType, Consumer, KafkaError, KafkaException, Producer, ShareConsumer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from odradek.protocol.errors import ErrorCode
from tests.interop.helpers import assert_delivered, bounded, flush_fully, produce_messages, producer_config
from tests.interop.test_broker_semantics import create_topic, request
from tests.security.test_acl_every_api import Session, first
from tests.security.test_acls import SecuredBroker

LOCK_MS = 2000
MEMBER_SCRIPT = Path(__file__).with_name("share_member.py")
JAVA_HARNESS = Path(__file__).parent / "java" / "ShareClient.java"


def set_group_configs(bootstrap: str, group: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    resource = ConfigResource("GROUP", group, incremental_configs=[
        ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=15)


def share_group(bootstrap: str, group: str, **configs: str) -> None:
    """A group reading from the earliest record, with a short record lock (and any other group configs)."""
    set_group_configs(bootstrap, group, **{"share_auto_offset_reset": "earliest",
                                           "share_record_lock_duration_ms": str(LOCK_MS), **configs})


def prepared_group(bootstrap: str, topic: str, records: int, partitions: int = 1, **configs: str) -> str:
    """Create ``topic``, configure its share group (earliest, short lock, ``configs``), produce ``records``
    spread over the partitions; returns the group's id."""
    create_topic(bootstrap, topic, partitions=partitions)
    group = topic + "-g"
    share_group(bootstrap, group, **configs)
    if records:
        produce(bootstrap, topic, records, partitions=partitions)
    return group


def share_consumer(bootstrap: str, group: str, explicit: bool = False) -> ShareConsumer:
    config = {"bootstrap.servers": bootstrap, "group.id": group, "broker.address.family": "v4"}
    if explicit:
        config["share.acknowledgement.mode"] = "explicit"
    return ShareConsumer(config)


def produce(bootstrap: str, topic: str, count: int, partitions: int = 1, prefix: str = "v") -> None:
    assert_delivered(produce_messages(bootstrap, topic, [
        {"value": f"{prefix}{i}".encode(), "partition": i % partitions} for i in range(count)]))


def poll_records(consumer: ShareConsumer, want: int, seconds: float, explicit_ack: AcknowledgeType | None = None
                 ) -> list:
    """Poll until ``want`` records came or ``seconds`` passed; in explicit mode each is acknowledged with
    ``explicit_ack`` (and committed) before the next poll."""
    got = []
    for _ in bounded(1000, seconds):
        if len(got) >= want:
            break
        batch = [m for m in consumer.poll(0.3) if m.error() is None]
        got.extend(batch)
        if explicit_ack is not None and batch:
            for msg in batch:
                consumer.acknowledge(msg, explicit_ack)
            consumer.commit_sync(15)
    return got


def close_quietly(consumer: ShareConsumer) -> None:
    try:
        consumer.close()
    except Exception:  # noqa: BLE001 - a consumer whose broker is gone may fail to leave
        pass


def start_member(bootstrap: str, topic: str, group: str, accept: int, release: int | None = None
                 ) -> subprocess.Popen:
    """share_member.py: accepts offsets below ``accept``, releases those below ``release``, holds the rest."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    extra = [] if release is None else [str(release)]
    return subprocess.Popen([sys.executable, str(MEMBER_SCRIPT), bootstrap, topic, group, str(accept), *extra],
                            stdout=subprocess.PIPE, text=True, env=env)


def member_output(proc: subprocess.Popen, seconds: float = 30.0) -> tuple[list[tuple[int, int, int]], int]:
    """The records a share_member.py process holds and how many it accepted (read up to its ACKED line)."""
    held = []
    assert proc.stdout is not None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"member exited with {proc.wait()}")
        kind, *rest = line.split()
        if kind == "MSG":
            held.append(tuple(int(x) for x in rest))
        elif kind == "ACKED":
            return held, int(rest[0])
    raise AssertionError("member did not report its records in time")


def kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(10)


@pytest.mark.timeout(60)
def test_consumers_of_one_group_get_distinct_records(broker, topic_name):
    bootstrap = broker.bootstrap
    group = prepared_group(bootstrap, topic_name, 0, partitions=3)
    # a few records per poll (librdkafka asks ShareFetch for max.poll.records), so that all members get some
    consumers = [ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "broker.address.family": "v4",
                                "max.poll.records": 5}) for _ in range(3)]
    try:
        for c in consumers:
            c.subscribe([topic_name])
        produce(bootstrap, topic_name, 30, partitions=3)
        seen: list[list[tuple[int, int]]] = [[] for _ in consumers]
        for _ in bounded(200, 30):
            if sum(map(len, seen)) >= 30:
                break
            for i, c in enumerate(consumers):  # implicit mode: the next poll accepts the previous batch
                seen[i].extend((m.partition(), m.offset()) for m in c.poll(0.2) if m.error() is None)
        every = [r for s in seen for r in s]
        assert len(every) == len(set(every)) == 30  # each record to one member only, and all of them
        assert set(every) == {(p, o) for p in range(3) for o in range(10)}
        assert all(seen), [len(s) for s in seen]
    finally:
        for c in consumers:
            close_quietly(c)


@pytest.mark.timeout(60)
def test_members_fetching_in_turn_share_the_records(broker, topic_name):
    """Two members (raw ShareGroupHeartbeat/ShareFetch v2 in record-limit mode, KIP-1206) asking for a few
    records at a time each acquire different ones, and acknowledge them with ShareAcknowledge."""
    bootstrap = broker.bootstrap
    group = prepared_group(bootstrap, topic_name, 6)
    topic_id = None
    for member in ("member-a", "member-b"):
        joined = request(bootstrap, 76, 1, {"group_id": group, "member_id": member, "member_epoch": 0,
                                            "rack_id": None, "subscribed_topic_names": [topic_name]})
        assert joined["error_code"] == 0 and joined["member_epoch"] > 0
        (assigned,) = joined["assignment"]["topic_partitions"]
        assert assigned["partitions"] == [0]
        topic_id = assigned["topic_id"]
    fetch = {"group_id": group, "share_session_epoch": 0, "max_wait_ms": 500, "min_bytes": 1,
             "max_bytes": 1 << 20, "max_records": 3, "batch_size": 3, "share_acquire_mode": 1, "is_renew_ack": False,
             "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}],
             "forgotten_topics_data": []}
    acquired = {}
    for member in ("member-a", "member-b"):
        response = request(bootstrap, 78, 2, {**fetch, "member_id": member})
        assert response["error_code"] == 0 and response["acquisition_lock_timeout_ms"] == LOCK_MS
        (partition,) = response["responses"][0]["partitions"]
        acquired[member] = [(r["first_offset"], r["last_offset"], r["delivery_count"])
                            for r in partition["acquired_records"]]
    assert acquired == {"member-a": [(0, 2, 1)], "member-b": [(3, 5, 1)]}
    # ShareAcknowledge needs the session's next epoch; accepting another member's records is refused
    ack = {"group_id": group, "member_id": "member-a", "share_session_epoch": 1, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
            {"first_offset": 3, "last_offset": 3, "acknowledge_types": [1]}]}]}]}
    response = request(bootstrap, 79, 1, ack)
    assert response["responses"][0]["partitions"][0]["error_code"] == 121  # INVALID_RECORD_STATE
    ack["share_session_epoch"] = 1  # the refused request still used up epoch 1
    assert request(bootstrap, 79, 1, ack)["error_code"] == 123  # INVALID_SHARE_SESSION_EPOCH
    ack["share_session_epoch"] = 2
    ack["topics"][0]["partitions"][0]["acknowledgement_batches"] = [
        {"first_offset": 0, "last_offset": 2, "acknowledge_types": [1]}]
    response = request(bootstrap, 79, 1, ack)
    assert response["error_code"] == 0 and response["responses"][0]["partitions"][0]["error_code"] == 0
    assert request(bootstrap, 79, 1, {**ack, "member_id": "nobody"})["error_code"] == 122  # SHARE_SESSION_NOT_FOUND
    described = request(bootstrap, 77, 1, {"group_ids": [group, "no-such-group"],
                                           "include_authorized_operations": False})["groups"]
    assert described[0]["error_code"] == 0 and described[0]["group_state"] == "Stable"
    assert sorted(m["member_id"] for m in described[0]["members"]) == ["member-a", "member-b"]
    assert described[1]["error_code"] == 69  # GROUP_ID_NOT_FOUND
    listed = request(bootstrap, 16, 5, {"states_filter": [], "types_filter": ["share"]})["groups"]
    assert {"group_id": group, "protocol_type": "share", "group_state": "Stable", "group_type": "share"} in listed
    for member in ("member-a", "member-b"):
        left = request(bootstrap, 76, 1, {"group_id": group, "member_id": member, "member_epoch": -1,
                                          "rack_id": None, "subscribed_topic_names": None})
        assert left["error_code"] == 0 and left["member_epoch"] == -1
    # member-a accepted 0-2, member-b holds 3-5 until its lock runs out: the group starts at 3, 3 records to go
    (offsets,) = request(bootstrap, 90, 1, {"groups": [{"group_id": group, "topics": None}]})["groups"]
    assert offsets["error_code"] == 0
    assert [(t["topic_name"], [(p["partition_index"], p["start_offset"], p["lag"]) for p in t["partitions"]])
            for t in offsets["topics"]] == [(topic_name, [(0, 3, 3)])]
    # the other group APIs know it is a share group; an empty one can be deleted
    (classic,) = request(bootstrap, 15, 6, {"groups": [group], "include_authorized_operations": False})["groups"]
    assert (classic["error_code"], classic["error_message"]) == (69, f"Group {group} is not a classic group.")
    (consumer,) = request(bootstrap, 69, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"]
    assert (consumer["error_code"], consumer["error_message"]) == (69, f"Group {group} is not a consumer group.")
    deleted = request(bootstrap, 42, 2, {"groups_names": [group]})["results"]
    assert deleted == [{"group_id": group, "error_code": 0}]
    listed = request(bootstrap, 16, 5, {"states_filter": [], "types_filter": []})["groups"]
    assert group not in {g["group_id"] for g in listed}


@pytest.mark.timeout(60)
def test_released_record_is_redelivered_and_rejected_one_is_not(broker, topic_name):
    bootstrap = broker.bootstrap
    group = prepared_group(bootstrap, topic_name, 2)
    consumer = share_consumer(bootstrap, group, explicit=True)
    try:
        consumer.subscribe([topic_name])
        first = []
        for _ in bounded(100, 20):
            if first:
                break
            first = [m for m in consumer.poll(0.3) if m.error() is None]
        assert sorted((m.offset(), m.delivery_count()) for m in first) == [(0, 1), (1, 1)]
        for msg in first:
            consumer.acknowledge(msg, AcknowledgeType.RELEASE if msg.offset() == 0 else AcknowledgeType.REJECT)
        consumer.commit_sync(15)
        again = poll_records(consumer, 1, 15, explicit_ack=AcknowledgeType.ACCEPT)
        assert [(m.offset(), m.delivery_count(), m.value()) for m in again] == [(0, 2, b"v0")]
        assert poll_records(consumer, 1, 2 * LOCK_MS / 1000, explicit_ack=AcknowledgeType.ACCEPT) == []
    finally:
        close_quietly(consumer)


def test_offset_commit_under_a_share_groups_id_is_refused(broker, topic_name):
    """A share group has no committed offsets: OffsetCommit and TxnOffsetCommit with its id answer
    GROUP_ID_NOT_FOUND (Kafka 4.4 does the same for both), and the group's records are not affected."""
    bootstrap = broker.bootstrap
    group = prepared_group(bootstrap, topic_name, 2)
    member = share_consumer(bootstrap, group)
    classic = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{group}-txn"})
    try:
        member.subscribe([topic_name])
        assert len(poll_records(member, 2, 15)) == 2
        with pytest.raises(KafkaException) as refused:
            classic.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
        assert refused.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND
        transactional.init_transactions(30)
        transactional.begin_transaction()
        with pytest.raises(KafkaException) as refused:
            transactional.send_offsets_to_transaction([TopicPartition(topic_name, 0, 1)],
                                                      classic.consumer_group_metadata(), 20)
        assert refused.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND
        transactional.abort_transaction(20)
        produce(bootstrap, topic_name, 1, prefix="after")
        assert [r.value() for r in poll_records(member, 1, 15)] == [b"after0"]
    finally:
        classic.close()
        close_quietly(member)


@pytest.mark.timeout(60)
def test_records_of_a_killed_consumer_go_to_another_after_the_lock_timeout(broker, topic_name):
    bootstrap = broker.bootstrap
    group = prepared_group(bootstrap, topic_name, 5)
    member = start_member(bootstrap, topic_name, group, accept=0)
    try:
        held, accepted = member_output(member)
        assert held and accepted == 0
    finally:
        kill(member)
    killed_at = time.monotonic()
    consumer = share_consumer(bootstrap, group, explicit=True)
    try:
        consumer.subscribe([topic_name])
        got = poll_records(consumer, 5, 20, explicit_ack=AcknowledgeType.ACCEPT)
        assert sorted(m.offset() for m in got) == [0, 1, 2, 3, 4]
        redelivered = {m.offset(): m.delivery_count() for m in got if m.offset() in {o for _, o, _ in held}}
        assert redelivered and set(redelivered.values()) == {2}  # the killed member's records, delivered again
        assert time.monotonic() - killed_at < 20
    finally:
        close_quietly(consumer)


@pytest.mark.timeout(60)
def test_record_released_again_and_again_is_archived_at_the_delivery_limit(broker, topic_name):
    bootstrap = broker.bootstrap
    group = prepared_group(bootstrap, topic_name, 1)
    consumer = share_consumer(bootstrap, group, explicit=True)
    try:
        consumer.subscribe([topic_name])
        counts = []
        for _ in bounded(200, 30):
            if len(counts) >= 5:
                break
            for msg in consumer.poll(0.3):
                if msg.error() is None:
                    counts.append(msg.delivery_count())
                    consumer.acknowledge(msg, AcknowledgeType.RELEASE)
                    consumer.commit_sync(15)
        assert counts == [1, 2, 3, 4, 5]  # group.share.delivery.count.limit (5): then archived
        assert poll_records(consumer, 1, 2.0, explicit_ack=AcknowledgeType.RELEASE) == []
        produce(bootstrap, topic_name, 1, prefix="after")  # the partition goes on past the archived record
        later = poll_records(consumer, 1, 15, explicit_ack=AcknowledgeType.ACCEPT)
        assert [(m.offset(), m.value()) for m in later] == [(1, b"after0")]
    finally:
        close_quietly(consumer)


@pytest.mark.timeout(90)
def test_kill_9_of_the_broker_keeps_acknowledged_and_unacknowledged_records(broker_factory, topic_name):
    b = broker_factory()
    group = prepared_group(b.bootstrap, topic_name, 10)
    member = start_member(b.bootstrap, topic_name, group, accept=4)
    try:
        held, accepted = member_output(member)
        assert accepted == len([1 for _, o, _ in held if o < 4]) and accepted > 0
        b.kill()
    finally:
        kill(member)
    b.start()
    consumer = share_consumer(b.bootstrap, group, explicit=True)
    try:
        consumer.subscribe([topic_name])
        acked = sorted(o for _, o, _ in held if o < 4)
        got = poll_records(consumer, 10 - len(acked), 20, explicit_ack=AcknowledgeType.ACCEPT)
        offsets = sorted(m.offset() for m in got)
        assert offsets == [o for o in range(10) if o not in acked]  # none acknowledged again, none lost
        topics = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10).topics
        assert "__share_group_state" in topics  # where that state lives, created on first use
        assert poll_records(consumer, 1, 1.0, explicit_ack=AcknowledgeType.ACCEPT) == []
    finally:
        close_quietly(consumer)


@pytest.mark.timeout(90)
def test_a_running_share_consumer_carries_on_after_a_broker_crash(broker_factory, topic_name):
    """Its member and share session are gone with the crash: it rejoins, opens a new session and gets only
    the new records (the accepted ones stay accepted)."""
    b = broker_factory()
    group = prepared_group(b.bootstrap, topic_name, 5)
    consumer = share_consumer(b.bootstrap, group, explicit=True)
    try:
        consumer.subscribe([topic_name])
        before = poll_records(consumer, 5, 20, explicit_ack=AcknowledgeType.ACCEPT)
        assert sorted(m.offset() for m in before) == [0, 1, 2, 3, 4]
        b.kill()
        b.start()
        produce(b.bootstrap, topic_name, 5, prefix="after")
        after = poll_records(consumer, 5, 40, explicit_ack=AcknowledgeType.ACCEPT)
        assert sorted((m.offset(), m.delivery_count()) for m in after) == [(o, 1) for o in range(5, 10)]
    finally:
        close_quietly(consumer)


@pytest.mark.timeout(60)
def test_read_committed_share_group_skips_aborted_transactions(broker, topic_name):
    bootstrap = broker.bootstrap
    group = prepared_group(bootstrap, topic_name, 0, share_isolation_level="read_committed")
    producer = Producer(producer_config(bootstrap, **{"transactional.id": topic_name + "-txn",
                                                      "enable.idempotence": True}))
    producer.init_transactions(15)
    for prefix, commit in (("ok-a", True), ("aborted", False), ("ok-b", True)):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic_name, value=f"{prefix}{i}".encode(), partition=0)
        flush_fully(producer)
        (producer.commit_transaction if commit else producer.abort_transaction)(15)
    consumer = share_consumer(bootstrap, group)
    try:
        consumer.subscribe([topic_name])
        got = poll_records(consumer, 6, 20)
        assert sorted(m.value() for m in got) == [b"ok-a0", b"ok-a1", b"ok-a2", b"ok-b0", b"ok-b1", b"ok-b2"]
        assert poll_records(consumer, 1, 1.0) == []
    finally:
        close_quietly(consumer)


@pytest.mark.timeout(60)
def test_by_duration_reset_skips_older_records(broker, topic_name):
    bootstrap = broker.bootstrap
    group = prepared_group(bootstrap, topic_name, 0, share_auto_offset_reset="by_duration:PT1H")
    now_ms = int(time.time() * 1000)
    assert_delivered(produce_messages(bootstrap, topic_name, [
        {"value": f"old{i}".encode(), "partition": 0, "timestamp": now_ms - 3 * 3_600_000} for i in range(3)] + [
        {"value": f"new{i}".encode(), "partition": 0, "timestamp": now_ms} for i in range(2)]))
    consumer = share_consumer(bootstrap, group)
    try:
        consumer.subscribe([topic_name])
        got = poll_records(consumer, 2, 20)
        assert sorted((m.offset(), m.value()) for m in got) == [(3, b"new0"), (4, b"new1")]
    finally:
        close_quietly(consumer)


@pytest.mark.timeout(30)
def test_group_configs_are_described_and_validated(broker):
    group = "share-config-group"
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    described = request(broker.bootstrap, 32, 4, {"resources": [
        {"resource_type": 32, "resource_name": group, "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})["results"][0]
    configs = {c["name"]: (c["value"], c["config_source"]) for c in described["configs"]}
    assert configs["share.auto.offset.reset"] == ("earliest", 8)  # GROUP_CONFIG
    assert configs["share.isolation.level"] == ("read_uncommitted", 5)  # DEFAULT_CONFIG
    assert configs["share.record.lock.duration.ms"] == ("30000", 5)
    refused = request(broker.bootstrap, 44, 1, {"resources": [
        {"resource_type": 32, "resource_name": group, "configs": [
            {"name": "share.auto.offset.reset", "config_operation": 0, "value": "sometimes"}]}],
        "validate_only": False})["responses"][0]
    assert refused["error_code"] == 40  # INVALID_CONFIG


@pytest.mark.timeout(120)
def test_java_share_consumers_get_distinct_records(broker, topic_name, java4_client, tmp_path):
    """Two KafkaShareConsumers (kafka-clients 4.x, java/ShareClient.java) of one group, explicit accept."""
    classes = tmp_path / "share-classes"
    classes.mkdir()
    javac = shutil.which("javac")
    assert javac is not None  # the java4_client fixture skipped otherwise
    subprocess.run([javac, "-nowarn", "-d", str(classes), "-cp", java4_client.classpath, str(JAVA_HARNESS)],
                   check=True, capture_output=True, timeout=120)
    bootstrap = broker.bootstrap
    group = prepared_group(bootstrap, topic_name, 20, partitions=2)
    cmd = [java4_client.java, "-Xmx256m", "-XX:+UseSerialGC", "-Djava.net.preferIPv4Stack=true",
           *java4_client.jvm_options, "-cp", os.pathsep.join([str(classes), java4_client.classpath]), "ShareClient",
           bootstrap, topic_name, group, "20", "2", "30000"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr[-4000:]
    java4_client.check_log(["share"], proc.stderr)
    rows = [line.split("\t") for line in proc.stdout.splitlines() if line.strip()]
    records = [(int(p), int(o)) for _, p, o, _ in rows]
    assert len(records) == len(set(records)) == 20  # every record once, to one of them
    assert set(records) == {(p, o) for p in range(2) for o in range(10)}
    assert {count for *_, count in rows} == {"1"}


SHARE_ACL_CASES = [
    ("ShareGroupHeartbeat", 76, {"group_id": "g", "member_id": "m", "member_epoch": 0, "rack_id": None,
                                 "subscribed_topic_names": ["t"]}, "error_code", (ErrorCode.NONE,)),
    ("ShareGroupDescribe", 77, {"group_ids": ["g"], "include_authorized_operations": False}, "groups.error_code",
     (ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND)),
    ("ShareFetch", 78, {"group_id": "g", "member_id": "m", "share_session_epoch": 0, "max_wait_ms": 0,
                        "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10, "topics": [],
                        "forgotten_topics_data": []}, "error_code", (ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID)),
    ("ShareAcknowledge", 79, {"group_id": "g", "member_id": "m", "share_session_epoch": 1, "topics": []},
     "error_code", (ErrorCode.NONE, ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH)),
    ("DescribeShareGroupOffsets", 90, {"groups": [{"group_id": "g", "topics": None}]}, "groups.error_code",
     (ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND)),
]


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """A broker with SASL PLAIN and ACLs: alice is in no ACL, admin is a super user."""
    broker = SecuredBroker(tmp_path_factory.mktemp("share-acl"))
    yield broker
    broker.process.stop()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name, api_key, body, where, admin_gets", SHARE_ACL_CASES, ids=[c[0] for c in SHARE_ACL_CASES])
def test_share_apis_need_the_group_acl(secured, name, api_key, body, where, admin_gets):
    """As tests/security/test_acl_every_api.py: alice, in no ACL, is refused on the group; admin is not."""
    for user, password, allowed in (("alice", "alice-pw", (ErrorCode.GROUP_AUTHORIZATION_FAILED,)),
                                    ("admin", "admin-pw", admin_gets)):
        session = Session(secured.sasl, user, password)
        try:
            assert first(where)(session.call(api_key, 1, body)) in allowed, (name, user)
        finally:
            session.close()
