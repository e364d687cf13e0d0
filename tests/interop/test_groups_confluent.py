"""Consumer groups with confluent-kafka (librdkafka): assignment strategies, failover, commits, bad input."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from odradek.protocol import codec
from odradek.protocol.errors import ErrorCode

from .helpers import (
    assert_delivered,
    bounded,
    connect,
    consumer_config,
    produce_messages,
    read_frame,
)

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

MEMBER_SCRIPT = Path(__file__).with_name("group_member.py")


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def group_consumer(bootstrap: str, group: str, **overrides) -> Consumer:
    cfg = consumer_config(bootstrap, **{"group.id": group, "session.timeout.ms": 6000, **overrides})
    return Consumer(cfg)


def produce_spread(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str = "") -> set[tuple[int, bytes]]:
    msgs = [{"value": f"{tag}{p}-{i}".encode(), "partition": p} for p in range(partitions) for i in range(per_partition)]
    assert_delivered(produce_messages(bootstrap, topic, msgs))
    return {(m["partition"], m["value"]) for m in msgs}


def poll_all(consumers: list[Consumer], until, seconds: float = 30.0) -> dict[int, list]:
    """Poll every consumer round-robin until `until(got)` is true; returns messages per consumer index."""
    got: dict[int, list] = {i: [] for i in range(len(consumers))}
    for _ in bounded(10_000, seconds):
        for i, c in enumerate(consumers):
            for m in c.consume(200, 0.05):
                assert m.error() is None, m.error()
                got[i].append(m)
        if until(got):
            return got
    raise AssertionError(f"condition not reached; assignments {[len(c.assignment()) for c in consumers]}, "
                         f"got {[len(v) for v in got.values()]}")


def assignment_sizes(consumers: list[Consumer]) -> list[int]:
    return sorted(len(c.assignment()) for c in consumers)


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_three_members_get_two_partitions_each(broker, topic_name, strategy):
    create_topic(broker.bootstrap, topic_name, 6)
    group = f"g-{topic_name}"
    consumers = [group_consumer(broker.bootstrap, group, **{"partition.assignment.strategy": strategy})
                 for _ in range(3)]
    try:
        for c in consumers:
            c.subscribe([topic_name])
        poll_all(consumers, lambda got: assignment_sizes(consumers) == [2, 2, 2])
        owned = [{p.partition for p in c.assignment()} for c in consumers]
        assert set().union(*owned) == set(range(6))
        expected = produce_spread(broker.bootstrap, topic_name, 6, 10)
        got = poll_all(consumers, lambda got: sum(len(v) for v in got.values()) >= len(expected))
        seen = [(m.partition(), m.value()) for msgs in got.values() for m in msgs]
        assert len(seen) == len(set(seen)), "a message was consumed twice within one generation"
        assert set(seen) == expected
        for i, msgs in got.items():  # each member only read its own partitions
            assert {m.partition() for m in msgs} <= owned[i]
    finally:
        for c in consumers:
            c.close()


def start_member(bootstrap: str, topic: str, group: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(MEMBER_SCRIPT), bootstrap, topic, group, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


class LineReader:
    """Collect a subprocess's stdout lines on a thread (so the test never blocks on readline)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._t = threading.Thread(target=self._run, args=(proc,), daemon=True)
        self._t.start()

    def _run(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line.strip())

    def last_assignment(self) -> list[str] | None:
        for line in reversed(self.lines):
            if line.startswith("ASSIGNED"):
                rest = line[len("ASSIGNED"):].strip()
                return rest.split(",") if rest else []
        return None


def test_killed_member_partitions_move_after_session_timeout(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 6)
    group = f"g-{topic_name}"
    proc = start_member(broker.bootstrap, topic_name, group)
    reader = LineReader(proc)
    consumers = [group_consumer(broker.bootstrap, group) for _ in range(2)]
    try:
        for c in consumers:
            c.subscribe([topic_name])
        poll_all(consumers, lambda got: assignment_sizes(consumers) == [2, 2]
                 and len(reader.last_assignment() or []) == 2, seconds=60)
        proc.send_signal(signal.SIGKILL)  # no LeaveGroup: only the session timeout can remove it
        proc.wait(10)
        poll_all(consumers, lambda got: assignment_sizes(consumers) == [3, 3], seconds=60)
        expected = produce_spread(broker.bootstrap, topic_name, 6, 5, tag="after-")
        got = poll_all(consumers, lambda got: {(m.partition(), m.value()) for v in got.values() for m in v} >= expected)
        assert {(m.partition(), m.value()) for v in got.values() for m in v} >= expected
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for c in consumers:
            c.close()


def test_graceful_close_moves_partitions_at_once(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 6)
    group = f"g-{topic_name}"
    consumers = [group_consumer(broker.bootstrap, group) for _ in range(3)]
    try:
        for c in consumers:
            c.subscribe([topic_name])
        poll_all(consumers, lambda got: assignment_sizes(consumers) == [2, 2, 2])
        consumers.pop().close()  # sends LeaveGroup
        # well inside the 6 s session timeout in practice; bounded generously, no timing assertion
        poll_all(consumers, lambda got: assignment_sizes(consumers) == [3, 3], seconds=30)
    finally:
        for c in consumers:
            c.close()


def test_commit_and_resume_after_committed_offset(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    group = f"g-{topic_name}"
    expected = produce_spread(broker.bootstrap, topic_name, 2, 10)
    c = group_consumer(broker.bootstrap, group)
    c.subscribe([topic_name])
    got = poll_all([c], lambda got: len(got[0]) >= 12)[0]
    last = {}
    for m in got[:12]:
        last[m.partition()] = max(last.get(m.partition(), -1), m.offset())
    c.commit(offsets=[TopicPartition(topic_name, p, o + 1) for p, o in last.items()], asynchronous=False)
    committed = c.committed([TopicPartition(topic_name, p) for p in range(2)], timeout=10)
    assert {tp.partition: tp.offset for tp in committed if tp.offset >= 0} == {p: o + 1 for p, o in last.items()}
    c.close()
    c2 = group_consumer(broker.bootstrap, group)
    c2.subscribe([topic_name])
    rest = poll_all([c2], lambda got: len(got[0]) >= len(expected) - sum(o + 1 for o in last.values()))[0]
    try:
        for m in rest:
            assert m.offset() > last.get(m.partition(), -1), "consumer did not resume after its committed offset"
        assert len(rest) == len(expected) - sum(o + 1 for o in last.values())
    finally:
        c2.close()


def test_assign_with_group_id_and_no_commits_still_works(broker, topic_name):
    """The pre-existing interop pattern: assign() with a group.id; librdkafka now also finds a coordinator."""
    create_topic(broker.bootstrap, topic_name, 1)
    produce_spread(broker.bootstrap, topic_name, 1, 3)
    c = Consumer(consumer_config(broker.bootstrap, **{"group.id": f"g-{topic_name}"}))
    try:
        c.assign([TopicPartition(topic_name, 0, 0)])
        got = poll_all([c], lambda got: len(got[0]) >= 3)[0]
        assert [m.offset() for m in got] == [0, 1, 2]
    finally:
        c.close()


# ---------------------------------------------------------------------------------------------------
# Bad input over a raw socket (our own codec on the client side)
# ---------------------------------------------------------------------------------------------------


class Raw:
    def __init__(self, bootstrap: str) -> None:
        self.sock = connect(bootstrap)
        self.cid = 0

    def call(self, api_key: int, version: int, body: dict, timeout: float = 15.0) -> dict:
        self.cid += 1
        self.sock.sendall(codec.encode_request(api_key, version, self.cid, "raw-test", body))
        cid, resp = codec.decode_response(api_key, version, read_frame(self.sock, timeout))
        assert cid == self.cid
        return resp

    def close(self) -> None:
        self.sock.close()


def raw_join(raw: Raw, group: str, member_id: str = "", session: int = 10000) -> dict:
    sub = b"\x00\x00" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff"  # ConsumerProtocolSubscription v0, no topics
    return raw.call(11, 5, {"group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": 10000,
                            "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
                            "protocols": [{"name": "range", "metadata": sub}]})


def commit_errors(resp: dict) -> list[int]:
    return [p["error_code"] for t in resp["topics"] for p in t["partitions"]]


def test_bad_commits_get_kafka_error_codes(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    raw = Raw(broker.bootstrap)
    group = f"g-{topic_name}"
    try:
        first = raw_join(raw, group)
        assert first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
        joined = raw_join(raw, group, first["member_id"])
        assert joined["error_code"] == 0 and joined["leader"] == joined["member_id"]
        member, gen = joined["member_id"], joined["generation_id"]
        sync = raw.call(14, 3, {"group_id": group, "generation_id": gen, "member_id": member,
                                "assignments": [{"member_id": member, "assignment": b""}]})
        assert sync["error_code"] == 0

        def commit(generation, member_id, topic=topic_name, partition=0, metadata=""):
            return commit_errors(raw.call(8, 7, {
                "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
                "topics": [{"name": topic, "partitions": [
                    {"partition_index": partition, "committed_offset": 1, "committed_metadata": metadata}]}]}))

        assert commit(gen, member) == [0]
        assert commit(gen + 1, member) == [ErrorCode.ILLEGAL_GENERATION]
        assert commit(gen, "not-a-member") == [ErrorCode.UNKNOWN_MEMBER_ID]
        assert commit(-1, "") == [ErrorCode.UNKNOWN_MEMBER_ID]  # simple commits only for Empty groups
        assert commit(gen, member, topic="no-such-topic-" + topic_name) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert commit(gen, member, partition=5) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert commit(gen, member, metadata="x" * 5000) == [ErrorCode.OFFSET_METADATA_TOO_LARGE]
        hb = raw.call(12, 3, {"group_id": group, "generation_id": gen + 3, "member_id": member})
        assert hb["error_code"] == ErrorCode.ILLEGAL_GENERATION
        bad = raw_join(raw, f"{group}-x", session=10)
        assert bad["error_code"] == ErrorCode.INVALID_SESSION_TIMEOUT
        fetched = raw.call(9, 5, {"group_id": group, "topics": None})
        assert [(t["name"], p["partition_index"], p["committed_offset"]) for t in fetched["topics"]
                for p in t["partitions"]] == [(topic_name, 0, 1)]
        unknown = raw.call(9, 5, {"group_id": group, "topics": [{"name": topic_name, "partition_indexes": [0, 3]}]})
        assert [p["committed_offset"] for p in unknown["topics"][0]["partitions"]] == [1, -1]
        left = raw.call(13, 3, {"group_id": group, "members": [{"member_id": member}, {"member_id": "ghost"}]})
        assert [m["error_code"] for m in left["members"]] == [0, ErrorCode.UNKNOWN_MEMBER_ID]
        assert commit(-1, "") == [0]  # the group is Empty now: a simple commit is fine
        deleted = raw.call(42, 1, {"groups_names": [group, group + "-none"]})
        assert [r["error_code"] for r in deleted["results"]] == [0, ErrorCode.GROUP_ID_NOT_FOUND]
        listed = raw.call(16, 4, {"states_filter": ["Stable"]})
        assert group not in [g["group_id"] for g in listed["groups"]]
    finally:
        raw.close()


def test_find_coordinator_batched_and_transactional(broker):
    raw = Raw(broker.bootstrap)
    try:
        resp = raw.call(10, 4, {"key_type": 0, "coordinator_keys": ["a", "b"]})
        assert [(c["key"], c["error_code"], c["port"]) for c in resp["coordinators"]] == \
            [("a", 0, broker.port), ("b", 0, broker.port)]
        txn = raw.call(10, 2, {"key": "tx-1", "key_type": 1})
        assert txn["error_code"] == 0 and txn["port"] == broker.port
        v0 = raw.call(10, 0, {"key": "g"})
        assert v0["error_code"] == 0 and v0["node_id"] == 0
    finally:
        raw.close()


def test_admin_lists_and_describes_groups(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    group = f"g-{topic_name}"
    c = group_consumer(broker.bootstrap, group)
    c.subscribe([topic_name])
    try:
        poll_all([c], lambda got: len(c.assignment()) == 2)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"})
        listed = admin.list_consumer_groups().result(15)
        assert group in [g.group_id for g in listed.valid]
        desc = admin.describe_consumer_groups([group])[group].result(15)
        assert str(desc.state).endswith("STABLE") and len(desc.members) == 1
        assert {tp.partition for tp in desc.members[0].assignment.topic_partitions} == {0, 1}
    finally:
        c.close()
