"""Kafka Streams 4.4 word count against odradek and against Apache Kafka 4.4, with either rebalance protocol.

The application (java/WordCount.java: split, groupBy word — a repartition topic —, count — a changelog
topic —, counts out) runs as two instances of one application id on a 4-partition input topic, so 8 tasks
(subtopology 0 reads the input, 1 the repartition topic). The same steps run on both brokers:

1. a first batch of lines is produced and instance A starts: it gets every task;
2. instance B starts: the tasks are shared, each instance some, none on both;
3. a second batch; A is closed; B takes every task over; a third batch;
4. the last count of every word read from the output topic must be the exact count of all three batches.

With group.protocol=streams (KIP-1071) this drives StreamsGroupHeartbeat (the topology, internal topic
creation by the coordinator, task assignment and revocation); with classic the consumer group protocol and
Kafka Streams' own assignor. The outcome (exact counts, sharing, takeover, the group's type in ListGroups)
must be the same on both brokers. Two more runs: the streams protocol on a three-broker odradek cluster, and
exactly_once_v2 with instance A killed by SIGKILL instead of closed (on odradek and on Kafka 4.4).
"""

from __future__ import annotations

import time
from typing import Callable

import pytest

from tests.interop.helpers import wait_until
from tests.reference.differential import Connection

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PARTITIONS = 4
ALL_TASKS = {f"{s}_{p}" for s in (0, 1) for p in range(PARTITIONS)}
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"]
LIST_GROUPS = 16
RUN_TIMEOUT_S = 120


def batch(start: int, n: int) -> list[str]:
    """n lines; line i holds 1 + i % 4 words chosen by i, so the counts differ per word."""
    return [" ".join(WORDS[(i * 3 + j) % len(WORDS)] for j in range(1 + i % 4)) for i in range(start, start + n)]


def expected_counts(lines: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in lines:
        for word in line.split():
            counts[word] = counts.get(word, 0) + 1
    return counts


def produce(bootstrap: str, topic: str, lines: list[str], first_key: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    failures: list = []
    for i, line in enumerate(lines):
        producer.produce(topic, key=str(first_key + i).encode(), value=line.encode(),
                         on_delivery=lambda err, msg: failures.append(err) if err else None)
    assert producer.flush(30) == 0, "records not delivered within 30 s"
    assert not failures, failures


def latest_counts(consumer: Consumer, seen: dict[str, int]) -> dict[str, int]:
    for msg in consumer.consume(num_messages=500, timeout=0.5):
        if msg.error() is None:
            seen[msg.key().decode()] = int(msg.value().decode())
    return seen


def group_type(bootstrap: str, group: str) -> str | None:
    """The group's type in ListGroups v5, asked of every broker (only its coordinator lists it)."""
    for address in bootstrap.split(","):
        conn = Connection(address)
        try:
            body = conn.request(LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
        finally:
            conn.close()
        found = next((g["group_type"] for g in body["groups"] if g["group_id"] == group), None)
        if found is not None:
            return found
    return None


def run_word_count(bootstrap: str, launch: Callable, protocol: str, prefix: str, replication: int = 1,
                   kill: bool = False) -> dict:
    """The steps of the module docstring on one broker (or cluster); what was observed."""
    source, sink, app = f"{prefix}-in", f"{prefix}-out", f"{prefix}-app"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(source, PARTITIONS, replication),
                                       NewTopic(sink, PARTITIONS, replication)]).values():
        future.result(30)
    lines = batch(0, 300)
    produce(bootstrap, source, lines, 0)
    guarantee = "exactly_once_v2" if kill else "at_least_once"
    a = launch(f"{prefix}-a", bootstrap, app, source, sink, protocol, 0, guarantee)

    def has_tasks(instance, tasks: set[str]) -> bool:
        instance.drain()
        assert instance.proc.poll() is None, f"{instance.name} exited:\n{instance.stderr_tail()}"
        return instance.active == tasks

    wait_until(lambda: has_tasks(a, ALL_TASKS), RUN_TIMEOUT_S, 0.2, "instance A running every task")
    b = launch(f"{prefix}-b", bootstrap, app, source, sink, protocol, 0, guarantee)

    def shared() -> bool:
        for i in (a, b):
            i.drain()
            assert i.proc.poll() is None, f"{i.name} exited:\n{i.stderr_tail()}"
        return bool(a.active) and bool(b.active) and not (a.active & b.active) and a.active | b.active == ALL_TASKS

    wait_until(shared, RUN_TIMEOUT_S, 0.2, "the two instances sharing the tasks")
    split = (sorted(a.active), sorted(b.active))
    more = batch(300, 200)
    produce(bootstrap, source, more, 300)
    lines += more
    if kill:
        a.kill()  # its open transaction is aborted when B's producer takes over; its session times out
    else:
        assert a.close() == 0, f"instance A did not close cleanly:\n{a.stderr_tail()}"
        assert a.closed
    wait_until(lambda: has_tasks(b, ALL_TASKS), RUN_TIMEOUT_S, 0.2, "instance B taking every task over")
    last = batch(500, 150)
    produce(bootstrap, source, last, 500)
    lines += last
    want = expected_counts(lines)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{prefix}-reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([sink])
    seen: dict[str, int] = {}
    try:
        wait_until(lambda: latest_counts(consumer, seen) == want, RUN_TIMEOUT_S, 0.1, f"counts {want}")
    finally:
        consumer.close()
    kind = group_type(bootstrap, app)
    assert b.close() == 0, f"instance B did not close cleanly:\n{b.stderr_tail()}"
    return {"counts": dict(seen), "expected": want, "shared": bool(split[0]) and bool(split[1]),
            "group_type": kind, "errors_a": a.states.count("ERROR"), "errors_b": b.states.count("ERROR")}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("protocol", ["streams", "classic"])
def test_word_count_two_instances_then_one(protocol, broker, kafka_reference, streams_launcher):
    """Exact counts through sharing and takeover, on odradek and on Kafka 4.4, the same outcome."""
    token = f"wc-{protocol}-{int(time.time() * 1000) % 10_000_000}"
    ours = run_word_count(broker.bootstrap, streams_launcher, protocol, f"{token}-o")
    theirs = run_word_count(kafka_reference.bootstrap, streams_launcher, protocol, f"{token}-k")
    assert ours["counts"] == ours["expected"]
    assert theirs["counts"] == theirs["expected"]
    assert ours["expected"] == theirs["expected"]
    want_type = "streams" if protocol == "streams" else "classic"
    assert (ours["group_type"], theirs["group_type"]) == (want_type, want_type)
    assert ours["shared"] and theirs["shared"]
    assert ours["errors_a"] == ours["errors_b"] == theirs["errors_a"] == theirs["errors_b"] == 0


@pytest.mark.timeout(900)
def test_word_count_on_three_brokers(cluster_factory, streams_launcher):
    """The same steps with group.protocol=streams on a three-broker odradek cluster (replicated topics, the
    group's coordinator on whichever broker leads its partition): exact counts, sharing, takeover."""
    cluster = cluster_factory(3, settings={"default.replication.factor": "3", "min.insync.replicas": "2",
                                           "offsets.topic.replication.factor": "3",
                                           "offsets.topic.num.partitions": "6",
                                           "group.streams.initial.rebalance.delay.ms": "0"}).start()
    cluster.wait_ready()
    token = f"wc3-{int(time.time() * 1000) % 10_000_000}"
    outcome = run_word_count(cluster.bootstrap, streams_launcher, "streams", token, replication=3)
    assert outcome["counts"] == outcome["expected"]
    assert outcome["group_type"] == "streams" and outcome["shared"]
    assert outcome["errors_a"] == outcome["errors_b"] == 0


@pytest.mark.timeout(900)
def test_word_count_exactly_once_survives_kill_9(short_session_broker, short_session_kafka, streams_launcher):
    """group.protocol=streams and exactly_once_v2: instance A is killed with SIGKILL while both run; B takes
    its tasks over once A's session times out (12 s here: group.streams.session.timeout.ms on both brokers,
    conftest.SHORT_SESSION) and the counts, read with read_committed, are still exact — on odradek and on
    Kafka 4.4."""
    token = f"wck-{int(time.time() * 1000) % 10_000_000}"
    ours = run_word_count(short_session_broker.bootstrap, streams_launcher, "streams", f"{token}-o", kill=True)
    kafka = short_session_kafka()
    theirs = run_word_count(kafka.bootstrap, streams_launcher, "streams", f"{token}-k", kill=True)
    assert ours["counts"] == ours["expected"] == theirs["counts"] == theirs["expected"]
    assert ours["shared"] and theirs["shared"]
    assert ours["errors_b"] == theirs["errors_b"] == 0
