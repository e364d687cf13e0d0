"""Real clients against a three-broker cluster (real ZooKeeper, three `odradek serve` processes).

Every topic here has replication factor 3 and min.insync.replicas 2; the internal topics are replicated
three ways too. The clients only get the bootstrap list, find the leaders through Metadata and must work
unchanged:

- confluent-kafka: AdminClient topic creation, metadata (brokers, controller, replicas, ISR, leaders spread),
  an idempotent acks=all producer, a consumer group that commits, a second member resuming there; and a
  consume-transform-produce transaction that commits the group's offsets with the output.
- kcat: `-L` agrees with the metadata, `-P` / `-C -e` through the cluster.
- kafka-python: KafkaProducer(acks='all'), KafkaConsumer in a group.
- the Java client (tests/interop/java/OdradekClient.java): the default (idempotent) producer, a group
  consumer, committed and aborted transactions under read_committed; and a load run during which the
  leader of partition 0 is SIGKILLed: every record acknowledged exactly once at its offset, and the killed
  broker, restarted and back in the ISR, holds the same log when it is the only broker left.

Every wait is bounded and waits for a condition (leaders, ISR, positions), never for a fixed time.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from tests.cluster import common
from tests.interop.conftest import java_client  # noqa: F401 - the session fixture, shared with tests/interop
from tests.interop.helpers import bounded, flush_fully, java_value, wait_until

if TYPE_CHECKING:
    from tests.cluster.conftest import Cluster

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

KCAT = shutil.which("kcat") or shutil.which("kafkacat")

REPLICATED = {**common.REPLICATED, "transaction.state.log.num.partitions": "1"}
BROKERS = [1, 2, 3]
TOPIC_READY_S = 60.0
CLIENT_TIMEOUT_S = 60.0


# ---------------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------------


def start_cluster(cluster_factory: Any, settings: dict[str, str] = REPLICATED) -> Cluster:
    cluster = cluster_factory(3, settings=settings).start()
    view = cluster.wait_ready(timeout=60)
    assert sorted(view.brokers) == BROKERS, view
    return cluster


def zookeeper_state(cluster: Cluster) -> str:
    zk = cluster.zookeeper
    code = None if zk.proc is None else zk.proc.poll()
    return f"ZooKeeper {zk.connect_string}: exit code {code}; log: {zk.log_tail(2000)}"


def wait_or_logs(cluster: Cluster, predicate: Any, timeout: float, message: str) -> Any:
    """wait_until, failing with the brokers' logs."""
    try:
        return wait_until(predicate, timeout=timeout, interval=0.2, message=message)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{zookeeper_state(cluster)}\n{cluster.logs()}") from None


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(cluster: Cluster, name: str, partitions: int = 3, replication_factor: int = 3) -> None:
    """CreateTopics through confluent-kafka's AdminClient, then wait until every running broker knows
    every partition with a leader and a full ISR."""
    admin = cluster.admin()
    futures = admin.create_topics([NewTopic(name, partitions, replication_factor)], operation_timeout=30,
                                  request_timeout=40)
    futures[name].result(timeout=45)
    wait_topic_in_sync(cluster, name, partitions, replication_factor)


def wait_topic_in_sync(cluster: Cluster, topic: str, partitions: int, replication_factor: int = 3,
                       timeout: float = TOPIC_READY_S) -> None:
    """Every running broker's metadata: `partitions` partitions, each led by a running broker, with
    `replication_factor` replicas, all of them in the ISR."""
    last: dict[int, Any] = {}

    def in_sync() -> bool:
        running = cluster.running_ids()
        for bid in running:
            view = cluster.metadata(bid)
            parts = view.topics.get(topic, {})
            last[bid] = sorted((p.partition, p.leader, p.replicas, p.isr) for p in parts.values())
            if sorted(parts) != list(range(partitions)):
                return False
            for p in parts.values():
                if p.leader not in running or len(p.replicas) != replication_factor or set(p.isr) != set(p.replicas):
                    return False
        return True

    try:
        wait_until(in_sync, timeout=timeout, interval=0.2, message=f"{topic}: {partitions} partitions in sync")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last metadata per broker {last}\n{cluster.logs()}") from None


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "group.id": unique("wm")})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1] for p in range(partitions)}
    finally:
        c.close()


def read_to_end(bootstrap: str, topic: str, partitions: int, isolation: str = "read_uncommitted",
                timeout: float = CLIENT_TIMEOUT_S) -> dict[int, list[Any]]:
    """Every record of every partition, read (assign, from the beginning) until each partition's position
    reaches its high watermark as it was when the read started."""
    ends = end_offsets(bootstrap, topic, partitions)
    c = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "group.id": unique("reader"),
                  "isolation.level": isolation, "enable.auto.commit": False, "enable.partition.eof": False,
                  "auto.offset.reset": "earliest"})
    out: dict[int, list[Any]] = {p: [] for p in range(partitions)}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])

        def done() -> bool:
            positions = {tp.partition: tp.offset for tp in c.position([TopicPartition(topic, p)
                                                                       for p in range(partitions)])}
            return all(ends[p] == 0 or positions[p] >= ends[p] for p in range(partitions))

        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() >= deadline:
                got = {p: len(v) for p, v in out.items()}
                raise AssertionError(f"{topic}: read {got} records, ends {ends}, not at the end in {timeout}s")
            for m in c.consume(num_messages=500, timeout=0.5):
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF or not m.error().fatal():
                        continue
                    raise AssertionError(f"consumer error: {m.error()}")
                out[m.partition()].append(m)
    finally:
        c.close()
    return out


def group_offsets(cluster: Cluster, group: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = cluster.admin()
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=30)
    result = futures[group].result(timeout=40)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def assert_spread(cluster: Cluster, topic: str, partitions: int = 3) -> None:
    """3 brokers, a controller among them, each partition on all 3 with a full ISR, leaders on > 1 broker."""
    view = cluster.metadata()
    assert sorted(view.brokers) == BROKERS, view
    assert view.controller_id in BROKERS, view
    parts = view.topics[topic]
    assert sorted(parts) == list(range(partitions)), parts
    for p in parts.values():
        assert sorted(p.replicas) == BROKERS, p
        assert sorted(p.isr) == BROKERS, p
        assert p.leader in BROKERS and p.error is None, p
    assert len({p.leader for p in parts.values()}) > 1, f"every leader on one broker: {parts}"


def idempotent_producer(bootstrap: str, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "acks": "all",
                     "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 45000, **extra})


def produce_acked(producer: Producer, topic: str, values: list[bytes], partitions: int = 3) -> list[tuple[int, int]]:
    """Produce values[i] to partition i % partitions (key "k-i"); (partition, offset) of each, in order."""
    reports: list[Any] = [None] * len(values)

    def cb(i: int):
        def on_delivery(err: Any, msg: Any) -> None:
            reports[i] = (err, msg.partition(), msg.offset())
        return on_delivery

    for i, value in enumerate(values):
        for _ in bounded(1000, 30):
            try:
                producer.produce(topic, value=value, key=f"k-{i}".encode(), partition=i % partitions,
                                 on_delivery=cb(i))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    flush_fully(producer, 60)
    errors = [(i, r[0]) for i, r in enumerate(reports) if r is None or r[0] is not None]
    assert not errors, f"delivery errors: {errors[:5]}"
    return [(r[1], r[2]) for r in reports]


# ---------------------------------------------------------------------------------------------------
# 1. confluent-kafka: admin, metadata, idempotent produce, a group that commits and resumes
# ---------------------------------------------------------------------------------------------------


def group_consumer(bootstrap: str, group: str, **extra: Any) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                     "enable.partition.eof": False, **extra})


class FetchStats:
    """librdkafka's statistics (stats_cb): the fetcher's state and next offset per partition of one topic,
    which position() does not tell before the application consumed something."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.partitions: dict[int, tuple[str, int]] = {}

    def __call__(self, raw: str) -> None:
        parts = json.loads(raw).get("topics", {}).get(self.topic, {}).get("partitions", {})
        self.partitions = {int(p): (v.get("fetch_state"), v.get("next_offset")) for p, v in parts.items()
                           if int(p) >= 0}


@pytest.mark.timeout(240)
def test_confluent_admin_metadata_idempotent_produce_and_group(cluster_factory):
    cluster = start_cluster(cluster_factory)
    topic, group = unique("confluent"), unique("group")
    create_topic(cluster, topic)
    assert_spread(cluster, topic)

    producer = idempotent_producer(cluster.bootstrap)
    values = [f"v-{i}".encode() for i in range(300)]
    acked = produce_acked(producer, topic, values)
    assert len(set(acked)) == 300
    for p in range(3):  # each partition's offsets are 0..99, in produce order
        assert [o for (q, o) in acked if q == p] == list(range(100)), acked

    first = group_consumer(cluster.bootstrap, group)
    try:
        first.subscribe([topic])
        got: list[Any] = []
        for _ in bounded(100_000, CLIENT_TIMEOUT_S):
            for m in first.consume(num_messages=500, timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m)
            if len(got) >= 300:
                break
        assert len(got) == 300, f"group consumer got {len(got)} of 300\n{cluster.logs()}"
        assert sorted(m.value() for m in got) == sorted(values)  # every record exactly once
        assert {(m.partition(), m.offset()) for m in got} == set(acked)
        committed = first.commit(asynchronous=False)
        assert {(tp.partition, tp.offset) for tp in committed if tp.error is None} == {(0, 100), (1, 100), (2, 100)}
    finally:
        first.close()
    assert group_offsets(cluster, group) == {0: 100, 1: 100, 2: 100}

    stats = FetchStats(topic)
    second = group_consumer(cluster.bootstrap, group, **{"statistics.interval.ms": 100, "stats_cb": stats})
    try:
        second.subscribe([topic])
        early: list[Any] = []

        def resumed() -> bool:  # fetching every partition, from the committed offset
            early.extend(m for m in second.consume(num_messages=500, timeout=0.2) if m.error() is None)
            return len(second.assignment()) == 3 and stats.partitions == {p: ("active", 100) for p in range(3)}

        wait_until(resumed, timeout=CLIENT_TIMEOUT_S, interval=0.0,
                   message=f"the second member fetching at the committed offsets (last stats {stats.partitions})")
        assert early == [], f"re-read {[(m.partition(), m.offset()) for m in early][:10]}"

        more = [f"more-{i}".encode() for i in range(30)]
        acked_more = produce_acked(producer, topic, more)
        later: list[Any] = []
        for _ in bounded(100_000, CLIENT_TIMEOUT_S):
            later.extend(m for m in second.consume(num_messages=100, timeout=0.5) if m.error() is None)
            if len(later) >= 30:
                break
        assert sorted(m.value() for m in later) == sorted(more)
        assert {(m.partition(), m.offset()) for m in later} == set(acked_more)
        assert all(o >= 100 for _, o in acked_more)
        second.commit(asynchronous=False)
    finally:
        second.close()
    assert group_offsets(cluster, group) == {0: 110, 1: 110, 2: 110}


# ---------------------------------------------------------------------------------------------------
# 2. kcat
# ---------------------------------------------------------------------------------------------------

KCAT_BROKER = re.compile(r"^\s*broker (\d+) at (\S+):(\d+)( \(controller\))?$", re.M)
KCAT_TOPIC = re.compile(r'^\s*topic "([^"]+)" with (\d+) partitions:$', re.M)
KCAT_PARTITION = re.compile(r"^\s*partition (\d+), leader (-?\d+), replicas: ([\d,]*), isrs: ([\d,]*)", re.M)


def kcat(bootstrap: str, *args: str, stdin: bytes | None = None) -> bytes:
    assert KCAT is not None
    cmd = [KCAT, "-b", bootstrap, "-X", "broker.address.family=v4", *args]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, timeout=60)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}: {proc.stderr.decode(errors='replace')}"
    return proc.stdout


def ids(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def kcat_listing(out: str) -> tuple[dict[int, tuple[str, int, bool]], dict[str, dict[int, tuple]]]:
    """`kcat -L` text: {broker: (host, port, is_controller)}, {topic: {partition: (leader, replicas, isr)}}."""
    brokers = {int(b): (host, int(port), bool(ctl)) for b, host, port, ctl in KCAT_BROKER.findall(out)}
    topics: dict[str, dict[int, tuple]] = {}
    heads = list(KCAT_TOPIC.finditer(out))
    for head, after in zip(heads, heads[1:] + [None]):
        section = out[head.end():after.start() if after is not None else len(out)]
        topics[head.group(1)] = {int(p): (int(leader), ids(reps), ids(isrs))
                                 for p, leader, reps, isrs in KCAT_PARTITION.findall(section)}
        assert len(topics[head.group(1)]) == int(head.group(2)), section
    return brokers, topics


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (tools/install-system-deps.sh)")
@pytest.mark.timeout(180)
def test_kcat_metadata_produce_consume(cluster_factory):
    cluster = start_cluster(cluster_factory)
    topic = unique("kcat")
    create_topic(cluster, topic)
    view = cluster.metadata()
    expected = {p.partition: (p.leader, p.replicas, p.isr) for p in view.topics[topic].values()}

    # Through the whole bootstrap list, then through each broker alone: the same answer.
    for bootstrap in [cluster.bootstrap] + [cluster.broker(b).bootstrap for b in BROKERS]:
        out = kcat(bootstrap, "-L").decode()
        assert " 3 brokers:" in out, out
        brokers, topics = kcat_listing(out)
        assert brokers == {b: (*view.brokers[b], b == view.controller_id) for b in BROKERS}, out
        assert topics.get(topic) == expected, out
    assert all(sorted(r) == BROKERS and sorted(i) == BROKERS for _, r, i in expected.values()), expected

    lines = [b"key-%d:value-%d" % (i, i) for i in range(90)]
    kcat(cluster.bootstrap, "-P", "-t", topic, "-K:", "-X", "acks=all", "-X", "enable.idempotence=true",
         stdin=b"".join(line + b"\n" for line in lines))
    kcat(cluster.bootstrap, "-P", "-t", topic, "-p", "2", stdin=b"pinned-a\npinned-b\n")
    ends = end_offsets(cluster.bootstrap, topic, 3)
    assert sum(ends.values()) == 92, ends

    out = kcat(cluster.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%p\t%o\t%k\t%s\n")
    rows = [line.split(b"\t") for line in out.splitlines()]
    assert len(rows) == 92, out
    assert sorted((int(p), int(o)) for p, o, _, _ in rows) == sorted((p, o) for p in range(3) for o in range(ends[p]))
    keyed = sorted((k + b":" + v) for _, _, k, v in rows if k)
    assert keyed == sorted(lines)
    assert [v for p, _, k, v in rows if not k] == [b"pinned-a", b"pinned-b"]
    assert {p for p, _, k, _ in rows if not k} == {b"2"}
    assert len({p for p, _, k, _ in rows if k}) > 1  # keys hashed over the partitions (consistent_random)


# ---------------------------------------------------------------------------------------------------
# 3. kafka-python
# ---------------------------------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_kafka_python_produce_and_group_consume(cluster_factory):
    kafka = pytest.importorskip("kafka")
    cluster = start_cluster(cluster_factory)
    topic, group = unique("kafka-python"), unique("kp-group")
    create_topic(cluster, topic)
    bootstrap = cluster.bootstrap.split(",")

    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, request_timeout_ms=20000,
                                   max_block_ms=30000)
    try:
        futures = [producer.send(topic, key=f"k-{i}".encode(), value=f"kp-{i}".encode(), partition=i % 3)
                   for i in range(150)]
        producer.flush(timeout=60)
        acked = [f.get(timeout=30) for f in futures]
    finally:
        producer.close(timeout=10)
    assert [(md.partition, md.offset) for md in acked] == [(i % 3, i // 3) for i in range(150)]

    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                   enable_auto_commit=False, session_timeout_ms=6000, request_timeout_ms=30000)
    try:
        consumer.subscribe([topic])
        got: list[Any] = []
        for _ in bounded(100_000, CLIENT_TIMEOUT_S):
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
            if len(got) >= 150:
                break
        assert sorted(r.value for r in got) == sorted(f"kp-{i}".encode() for i in range(150)), len(got)
        assert sorted((r.partition, r.offset) for r in got) == sorted((i % 3, i // 3) for i in range(150))
        consumer.commit()
        tps = [kafka.TopicPartition(topic, p) for p in range(3)]
        assert [consumer.committed(tp) for tp in tps] == [50, 50, 50]
    finally:
        consumer.close()
    assert group_offsets(cluster, group) == {0: 50, 1: 50, 2: 50}


# ---------------------------------------------------------------------------------------------------
# 4. the Java client
# ---------------------------------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_java_idempotent_group_and_transactions(cluster_factory, java_client):  # noqa: F811
    cluster = start_cluster(cluster_factory)
    topic, group = unique("java"), unique("java-group")
    create_topic(cluster, topic)

    acked = [tuple(int(x) for x in line.split("\t"))
             for line in java_client.run("produce-default", cluster.bootstrap, topic, 240, 3, "d-")]
    assert len(acked) == 240 and len(set(acked)) == 240
    assert [a[0] for a in acked] == [i % 3 for i in range(240)]
    for p in range(3):
        assert [o for q, o in acked if q == p] == list(range(80)), acked
    expected = {acked[i]: java_value("d-", i) for i in range(240)}

    lines = java_client.run("group-consume", cluster.bootstrap, topic, group, 240, 60000)
    got = [line.split("\t") for line in lines]
    assert len(got) == 240, lines[:5]
    assert {(int(p), int(o)): v for p, o, v in got} == expected
    assert group_offsets(cluster, group) == {0: 80, 1: 80, 2: 80}

    txn_topic = unique("java-txn")
    create_topic(cluster, txn_topic)
    out = java_client.run("produce-txn", cluster.bootstrap, txn_topic, 50, "commit", unique("java-tx"), "c-")
    assert out[-1] == "committed" and [int(x) for x in out[:-1]] == list(range(50)), out
    seen = java_client.consume(cluster.bootstrap, txn_topic, 50, isolation="read_committed")
    assert [r["value"] for r in seen] == [java_value("c-", i) for i in range(50)]

    out = java_client.run("produce-txn", cluster.bootstrap, txn_topic, 40, "abort", unique("java-tx"), "a-")
    assert out[-1] == "aborted" and len(out) == 41, out
    aborted_offsets = [int(x) for x in out[:-1]]
    assert aborted_offsets == list(range(51, 91)), aborted_offsets  # after the commit marker at 50
    # A committed transaction after the aborted one: read_committed reads the first and the last only.
    out = java_client.run("produce-txn", cluster.bootstrap, txn_topic, 10, "commit", unique("java-tx"), "c2-")
    assert out[-1] == "committed", out
    seen = java_client.consume(cluster.bootstrap, txn_topic, 60, isolation="read_committed")
    assert [r["value"] for r in seen] == ([java_value("c-", i) for i in range(50)]
                                          + [java_value("c2-", i) for i in range(10)])
    assert not set(r["offset"] for r in seen) & set(aborted_offsets)
    # confluent-kafka agrees, read to the end: nothing aborted, nothing more
    committed_read = read_to_end(cluster.bootstrap, txn_topic, 3, isolation="read_committed")
    assert [m.value().decode() for m in committed_read[0]] == [r["value"] for r in seen]
    uncommitted_read = read_to_end(cluster.bootstrap, txn_topic, 3)
    assert len(uncommitted_read[0]) == 100  # read_uncommitted sees the aborted records (never the markers)


class JavaLoad:
    """`produce-load BOOT TOPIC N 3 10` (record i to partition i % 3, one every 10 ms) as a child process
    whose stdout a thread collects, so the test can break brokers while it runs."""

    def __init__(self, java_client: Any, bootstrap: str, topic: str, n: int, stderr_path: Any) -> None:  # noqa: F811
        self.cmd = [java_client.java, "-Xmx256m", "-XX:+UseSerialGC", "-Djava.net.preferIPv4Stack=true",
                    "-cp", java_client.classpath, "OdradekClient", "produce-load", bootstrap, topic, str(n), "3", "10"]
        self.stderr_path = stderr_path
        self._lines: list[str] = []

    def _collect(self, stdout: Any) -> None:
        for line in stdout:
            self._lines.append(line)

    def lines(self) -> list[str]:
        return [line.rstrip("\n") for line in list(self._lines) if line.strip()]

    def run(self, on_acks: int, action: Any, timeout: float = 200.0) -> tuple[list[str], int]:
        """Start; once `on_acks` acknowledgements arrived call `action()`; wait (bounded) for the end.
        Returns (stdout lines, exit code)."""
        with open(self.stderr_path, "w") as err:
            proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=err, text=True)
            stdout = proc.stdout
            assert stdout is not None
            reader = threading.Thread(target=self._collect, args=(stdout,), daemon=True)
            reader.start()
            try:
                wait_until(lambda: sum(1 for x in self.lines() if x.startswith("ack\t")) >= on_acks
                           or proc.poll() is not None, timeout=90, interval=0.02,
                           message=f"{on_acks} acks from produce-load")
                assert proc.poll() is None, f"produce-load ended early ({proc.returncode}): {self.lines()[-5:]}"
                action()
                rc = proc.wait(timeout=timeout)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            reader.join(10)
        return self.lines(), rc


@pytest.mark.timeout(420)
def test_java_load_survives_leader_kill_and_restarted_broker_has_same_log(cluster_factory, java_client,  # noqa: F811
                                                                          tmp_path):
    cluster = start_cluster(cluster_factory)
    topic = unique("java-load")
    create_topic(cluster, topic)
    n = 600
    victim = cluster.partition_state(topic, 0).leader
    others = [b for b in BROKERS if b != victim]
    acked_before_kill: list[int] = []

    def kill_leader() -> None:
        cluster.kill(victim)
        acked_before_kill.append(len(lines_so_far()))

    load = JavaLoad(java_client, cluster.bootstrap, topic, n, tmp_path / "java-load.err")
    lines_so_far = load.lines
    lines, rc = load.run(on_acks=150, action=kill_leader)
    stderr = (tmp_path / "java-load.err").read_text(errors="replace")
    errors = [line for line in lines if not line.startswith("ack\t")]
    assert rc == 0 and not errors, (f"rc {rc}, errors {errors[:10]}\n{stderr[-3000:]}\n{zookeeper_state(cluster)}\n"
                                    f"{cluster.logs()}")
    acks = [tuple(int(x) for x in line.split("\t")[1:]) for line in lines]  # (partition, offset, i)
    assert sorted(i for _, _, i in acks) == list(range(n)), "an index acked twice or never"
    assert all(p == i % 3 for p, _, i in acks)
    assert len({(p, o) for p, o, _ in acks}) == n, "two records acknowledged at the same offset"
    after_kill = [(o, i) for p, o, i in acks[acked_before_kill[0]:] if p == 0]
    assert after_kill, "no record of partition 0 was acknowledged after its leader was killed"

    # The partition moved to a surviving broker
    wait_or_logs(cluster, lambda: cluster.partition_state(topic, 0, others[0]).leader in others, timeout=30,
                 message="a new leader of partition 0")

    def check_log(bootstrap: str) -> dict[int, list[tuple[int, bytes]]]:
        read = read_to_end(bootstrap, topic, 3)
        for p in range(3):
            mine = sorted((o, i) for q, o, i in acks if q == p)
            stored = [(m.offset(), m.value()) for m in read[p]]
            assert stored == [(o, f"load-{i}".encode()) for o, i in mine], (
                f"partition {p}: {len(stored)} stored, {len(mine)} acked; first differences "
                f"{[(s, m) for s, m in zip(stored, mine) if s != (m[0], f'load-{m[1]}'.encode())][:5]}")
        return {p: [(m.offset(), m.value()) for m in read[p]] for p in range(3)}

    survivors_bootstrap = ",".join(cluster.broker(b).bootstrap for b in others)
    before = check_log(survivors_bootstrap)
    for p in range(3):
        indexes = [int(v.split(b"-")[1]) for _, v in before[p]]
        assert indexes == sorted(indexes), f"partition {p} out of order"

    # The killed broker comes back, catches up, and joins every ISR again.
    cluster.restart(victim)
    cluster.wait_ready(timeout=60)
    wait_or_logs(cluster, lambda: all(victim in cluster.partition_state(topic, p, b).isr
                                      for p in range(3) for b in BROKERS),
                 timeout=90, message=f"broker {victim} back in every ISR")

    # Alone, it serves the same log.
    for b in others:
        cluster.kill(b)
    wait_or_logs(cluster, lambda: all(cluster.partition_state(topic, p, victim).leader == victim for p in range(3)),
                 timeout=60, message=f"broker {victim} leading every partition")
    after = check_log(cluster.broker(victim).bootstrap)
    assert after == before


# ---------------------------------------------------------------------------------------------------
# 5. confluent-kafka transactions: consume-transform-produce with the group's offsets in the transaction
# ---------------------------------------------------------------------------------------------------


@pytest.mark.timeout(240)
def test_confluent_consume_transform_produce_transaction(cluster_factory):
    cluster = start_cluster(cluster_factory)
    source, sink, group = unique("ctp-in"), unique("ctp-out"), unique("ctp-group")
    create_topic(cluster, source)
    create_topic(cluster, sink)
    inputs = [f"in-{i}".encode() for i in range(100)]
    plain = idempotent_producer(cluster.bootstrap)
    produce_acked(plain, source, inputs)
    source_ends = end_offsets(cluster.bootstrap, source, 3)
    assert sum(source_ends.values()) == 100

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "broker.address.family": "v4", "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                         "isolation.level": "read_committed", "enable.partition.eof": False})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "broker.address.family": "v4",
                         "transactional.id": unique("ctp-tx"), "linger.ms": 5, "transaction.timeout.ms": 60000})
    producer.init_transactions(45)
    transformed: list[bytes] = []
    transactions = 0
    try:
        consumer.subscribe([source])
        for _ in bounded(100_000, 120):
            batch = [m for m in consumer.consume(num_messages=30, timeout=0.5) if m.error() is None]
            if not batch:
                if len(transformed) >= 100:
                    break
                continue
            producer.begin_transaction()
            for m in batch:
                out = m.value().upper()
                producer.produce(sink, value=out, key=m.value(), partition=m.partition())
                transformed.append(out)
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(45)
            transactions += 1
            if len(transformed) >= 100 and all(
                    tp.offset == source_ends[tp.partition] for tp in consumer.position(consumer.assignment())):
                break
    finally:
        consumer.close()
    assert transactions >= 1
    assert sorted(transformed) == sorted(v.upper() for v in inputs)

    read = read_to_end(cluster.bootstrap, sink, 3, isolation="read_committed")
    values = [m.value() for p in range(3) for m in read[p]]
    assert len(values) == 100 and sorted(values) == sorted(v.upper() for v in inputs)
    assert group_offsets(cluster, group) == source_ends
