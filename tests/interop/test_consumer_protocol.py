"""KIP-848 consumer groups end to end (`group.protocol=consumer`) with real clients.

ConsumerGroupHeartbeat (API 68) and ConsumerGroupDescribe (API 69), the server-side assignors (`uniform`, the
default, and `range`), incremental rebalances (members that stay keep consuming), session expiry, offset commits
validated by member epoch, the conversion of an empty group between the classic and the consumer protocol,
regex subscriptions resolved by the broker, ListGroups/DescribeGroups as the admin clients see them, static
members, and the error codes of the heartbeat and of epoch-checked commits request by request. Clients:
librdkafka (confluent-kafka, in process, or as a subprocess that can be SIGKILLed: consumer_protocol_member.py)
and the Java client 4.x (the `cg-member` mode of java/OdradekClient.java).

Every test passes against Apache Kafka 4.4, the reference. To check that again:

    ODRADEK_TEST_AGAINST_KAFKA=1 PYTHONPATH=src .venv/bin/python -m pytest -q tests/interop/test_consumer_protocol.py

starts one Kafka for the module (reference/kafka.py, installed by `make reference`) with BROKER_SETTINGS;
ODRADEK_TEST_AGAINST_KAFKA=HOST:PORT uses a broker already running (started with those settings). By default
each test starts its own odradek broker with the same settings (broker_factory).

The broker settings are Kafka's: a 6 s session timeout and a 500 ms heartbeat interval, so that a killed member
is expired in seconds. Waits are conditions with deadlines; every loop is bounded in count and in time.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from odradek.protocol import codec

from .helpers import assert_delivered, bounded, connect, produce_messages, read_frame, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import (  # noqa: E402
    Consumer,
    ConsumerGroupState,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

SESSION_MS = 6000
HEARTBEAT_MS = 500
BROKER_SETTINGS = {
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
    "group.consumer.min.heartbeat.interval.ms": str(HEARTBEAT_MS),
    "group.consumer.assignors": "uniform,range",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",  # for the classic groups of the conversion test
}
AGAINST_KAFKA = os.environ.get("ODRADEK_TEST_AGAINST_KAFKA", "").strip()
MEMBER_SCRIPT = Path(__file__).with_name("consumer_protocol_member.py")

# error codes (Kafka's)
UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_MEMBER_ID = 25
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
GROUP_ID_NOT_FOUND = 69
FENCED_MEMBER_EPOCH = 110
UNSUPPORTED_ASSIGNOR = 112
STALE_MEMBER_EPOCH = 113
INVALID_REGULAR_EXPRESSION = 128


# ------------------------------------------------------------------------------------------------ the broker


@dataclass(frozen=True)
class Target:
    bootstrap: str


@pytest.fixture(scope="module")
def reference_kafka() -> Iterator[Target | None]:
    """With ODRADEK_TEST_AGAINST_KAFKA set: Apache Kafka for the whole module ("1": started here; HOST:PORT: one
    already running). Otherwise None."""
    if AGAINST_KAFKA in ("", "0"):
        yield None
        return
    if AGAINST_KAFKA != "1":
        yield Target(AGAINST_KAFKA)
        return
    from tests.reference.conftest import _unavailable, load_launcher

    ref = load_launcher()
    status = ref.install_status()
    if not status.installed:
        _unavailable(status.reason, status.unreachable)
    kafka = ref.KafkaReference(status.libs, settings=BROKER_SETTINGS)
    try:
        kafka.start()
    except RuntimeError as exc:
        kafka.stop()
        pytest.fail(f"Apache Kafka {ref.kafka_version()} did not start: {exc}")
    yield Target(kafka.bootstrap)
    kafka.stop()


@pytest.fixture
def cg_broker(reference_kafka: Target | None, broker_factory: Callable) -> Target:
    """The broker under test: odradek with BROKER_SETTINGS (one per test), or the reference Kafka."""
    if reference_kafka is not None:
        return reference_kafka
    return Target(broker_factory(BROKER_SETTINGS).bootstrap)


@pytest.fixture
def topic_name(topic_name: str) -> str:
    """The test's topic name made unique: a broker kept across runs (ODRADEK_TEST_AGAINST_KAFKA=HOST:PORT)
    already has the last run's topics and groups."""
    return f"{topic_name[:160]}-{uuid.uuid4().hex[:6]}"


# ------------------------------------------------------------------------------------------------- helpers


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    admin = admin_client(bootstrap)  # referenced until the futures are done: its destruction fails them
    futures = admin.create_topics([NewTopic(name, n, 1) for name, n in topics.items()])
    for f in futures.values():
        f.result(30)


def produce_spread(bootstrap: str, topic: str, partitions: int, per_partition: int,
                   tag: str = "") -> dict[tuple[int, int], bytes]:
    """`per_partition` records to each partition; returns (partition, offset) -> value."""
    msgs = [{"value": f"{tag}{p}-{i}".encode(), "partition": p}
            for i in range(per_partition) for p in range(partitions)]
    sent = assert_delivered(produce_messages(bootstrap, topic, msgs))
    return {(m.partition(), m.offset()): m.value() for m in sent}


def cg_config(bootstrap: str, group: str, **overrides: Any) -> dict[str, Any]:
    """librdkafka with the consumer protocol. It refuses the classic-only properties (session.timeout.ms,
    heartbeat.interval.ms, partition.assignment.strategy, group.protocol.type): the broker decides those."""
    cfg: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False,
                           "broker.address.family": "v4", "socket.timeout.ms": 10000, "enable.partition.eof": False}
    cfg.update(overrides)
    return cfg


def classic_config(bootstrap: str, group: str, **overrides: Any) -> dict[str, Any]:
    """librdkafka with its default, the classic protocol."""
    cfg: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6000,
                           "auto.offset.reset": "earliest", "enable.auto.commit": False,
                           "broker.address.family": "v4", "socket.timeout.ms": 10000, "enable.partition.eof": False}
    cfg.update(overrides)
    return cfg


class Tracked:
    """An in-process librdkafka group member that records what it reads and its assignment over time, and
    commits synchronously what it read: after every batch, and on revocation before the partitions go."""

    def __init__(self, name: str, config: dict[str, Any], topics: list[str]) -> None:
        self.name = name
        self.consumer = Consumer(config)
        self.records: list[tuple[str, int, int, bytes, float]] = []  # topic, partition, offset, value, read at
        self.uncommitted: dict[tuple[str, int], int] = {}
        self.commit_errors: list[str] = []
        self.history: list[tuple[float, frozenset[tuple[str, int]]]] = []  # assignment changes, when seen
        self.closed = False
        self.consumer.subscribe(topics, on_assign=self._changed, on_revoke=self._revoked, on_lost=self._lost)

    def _changed(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        self._note(new={(p.topic, p.partition) for p in parts})  # not in the assignment yet

    def _revoked(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        self.commit({(p.topic, p.partition) for p in parts})
        self._note(gone={(p.topic, p.partition) for p in parts})

    def _lost(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        for p in parts:
            self.uncommitted.pop((p.topic, p.partition), None)
        self._note(gone={(p.topic, p.partition) for p in parts})

    def _note(self, gone: frozenset[tuple[str, int]] | set[tuple[str, int]] = frozenset(),
              new: frozenset[tuple[str, int]] | set[tuple[str, int]] = frozenset()) -> None:
        now = frozenset((self.assignment() | new) - gone)
        if not self.history or self.history[-1][1] != now:
            self.history.append((time.monotonic(), now))

    def assignment(self) -> set[tuple[str, int]]:
        return {(p.topic, p.partition) for p in self.consumer.assignment()}

    def partitions(self) -> set[int]:
        return {p for _, p in self.assignment()}

    def poll(self, timeout: float = 0.05) -> int:
        msgs = self.consumer.consume(500, timeout)
        now = time.monotonic()
        for m in msgs:
            assert m.error() is None, f"{self.name}: {m.error()}"
            self.records.append((m.topic(), m.partition(), m.offset(), m.value(), now))
            self.uncommitted[(m.topic(), m.partition())] = m.offset() + 1
        if self.uncommitted:
            self.commit()
        self._note()
        return len(msgs)

    def commit(self, only: set[tuple[str, int]] | None = None) -> None:
        offsets = [TopicPartition(t, p, o) for (t, p), o in self.uncommitted.items() if only is None or (t, p) in only]
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            self.commit_errors.append(str(exc))
        for tp in offsets:
            self.uncommitted.pop((tp.topic, tp.partition), None)

    def read(self, topic: str | None = None) -> list[tuple[int, int]]:
        return [(p, o) for t, p, o, _, _ in self.records if topic is None or t == topic]

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.commit()
            self.leave()
            close_bounded(self.consumer)

    def leave(self, seconds: float = 5.0) -> None:
        """Unsubscribe and poll until the assignment is revoked, so that close() finds no rebalance to serve:
        librdkafka's close can hang in the rebalance callback's assign (confluentinc/librdkafka#4884), and
        confluent-kafka holds the GIL there, which no thread of this process can then bound."""
        try:
            self.consumer.unsubscribe()
            for _ in bounded(200, seconds):
                self.consumer.consume(500, 0.05)
                if not self.consumer.assignment():
                    break
        except KafkaException:  # a consumer already broken by the test: close() reports nothing either
            pass


CLOSE_TIMEOUT_S = 30.0


def close_bounded(consumer: Consumer) -> None:
    """consumer.close(), given CLOSE_TIMEOUT_S in a thread of its own. confluent-kafka 2.16 with
    group.protocol=consumer may, when close() races an assignment it is still fetching, either block in C
    (out of pytest-timeout's reach: the whole xdist worker hung in CI) or raise a bare KafkaError, which is not
    an exception class (pytest cannot catch it and its worker dies). The handle is being destroyed either way,
    and closing is not what these tests check; any other error is re-raised here."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            consumer.close()
        except:  # noqa: E722 - a bare KafkaError is not an exception class: nothing narrower catches it
            err = sys.exc_info()[1]
            if not (isinstance(err, KafkaError) and err.code() == KafkaError._DESTROY):
                failure.append(err if isinstance(err, BaseException) else RuntimeError(repr(err)))

    closer = threading.Thread(target=run, name="consumer-close", daemon=True)
    # should close() hang holding the GIL, neither this thread nor pytest-timeout runs again: faulthandler's
    # own thread then dumps every stack and ends the worker, which fails the test instead of hanging the run
    faulthandler.dump_traceback_later(CLOSE_TIMEOUT_S + 30.0, exit=True)
    try:
        closer.start()
        closer.join(CLOSE_TIMEOUT_S)
    finally:
        faulthandler.cancel_dump_traceback_later()
    if failure:
        raise failure[0]


def poll_until(members: list[Tracked], condition: Callable[[], bool], seconds: float, message: str) -> None:
    """Poll every member round-robin until `condition()`; AssertionError after `seconds`."""
    for _ in bounded(100_000, seconds):
        for m in members:
            m.poll()
        if condition():
            return
    raise AssertionError(f"timed out after {seconds}s waiting for {message}; assignments: "
                         + ", ".join(f"{m.name}={sorted(m.assignment())}" for m in members))


def is_partitioning(owned: list[set], everything: set) -> bool:
    """Each element of `everything` owned by exactly one member."""
    return sum(len(o) for o in owned) == len(everything) and set().union(*owned) == everything


def ownership_overlaps(members: list[Tracked]) -> list[tuple[int, str, str]]:
    """(partition, member, member) for every two members whose ownership of a partition overlapped in time, by
    their histories. All members are polled by one thread, so the histories are in one order: a member notes a
    revocation in its callback, before it acknowledges it, and a new owner notes an assignment after the broker
    gave it, so with a correct broker (KIP-848: a partition is assigned only once its previous owner released it)
    there is no overlap."""
    spans: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    for m in members:
        since: dict[int, float] = {}
        for t, owned in m.history:
            now = {p for _, p in owned}
            for p in now - set(since):
                since[p] = t
            for p in set(since) - now:
                spans[p].append((since.pop(p), t, m.name))
        for p, t in since.items():
            spans[p].append((t, float("inf"), m.name))
    return [(p, x[2], y[2]) for p, ss in spans.items() for i, x in enumerate(ss) for y in ss[i + 1:]
            if x[2] != y[2] and x[0] < y[1] and y[0] < x[1]]


def group_listing(bootstrap: str, group: str) -> tuple[Any, Any] | None:
    """(type, state) of `group` as ListGroups reports it, None when it is not listed."""
    admin = admin_client(bootstrap)
    listed = admin.list_consumer_groups().result(15)
    found = [(g.type, g.state) for g in listed.valid if g.group_id == group]
    return found[0] if found else None


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer(cg_config(bootstrap, group))
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in got if tp.offset >= 0}


def close_all(members: list[Tracked]) -> None:
    for m in members:
        try:
            m.close()
        except Exception:  # noqa: BLE001 - closing after a failure: report the failure, not this
            pass


# -------------------------------------------------------------------------------- 1. three members, one topic


@pytest.mark.timeout(90)
def test_three_members_share_six_partitions_and_read_each_record_once(cg_broker, topic_name):
    """Three librdkafka consumers (group.protocol=consumer) on a 6-partition topic: the `uniform` assignor gives
    each two partitions, each partition to exactly one member (and never to two at once while they join); every
    record is read exactly once, by the member that owns its partition, and the end offsets are committed."""
    b = cg_broker.bootstrap
    create_topics(b, {topic_name: 6})
    members = [Tracked(f"c{i}", cg_config(b, f"g-{topic_name}"), [topic_name]) for i in range(3)]
    try:
        poll_until(members, lambda: sorted(len(m.assignment()) for m in members) == [2, 2, 2], 30,
                   "two partitions each")
        owned = [m.partitions() for m in members]
        assert is_partitioning(owned, set(range(6))), owned
        expected = produce_spread(b, topic_name, 6, 10)
        poll_until(members, lambda: sum(len(m.records) for m in members) >= len(expected), 30, "every record")
        for _ in bounded(10, 0.5):  # a moment for anything read twice to show up
            for m in members:
                m.poll()
        read = [(p, o) for m in members for p, o in m.read()]
        assert sorted(read) == sorted(expected), "each record read exactly once"
        assert [m.partitions() for m in members] == owned, "a rebalance meanwhile"
        for m, mine in zip(members, owned):
            assert {p for p, _ in m.read()} == mine, f"{m.name} read partitions it does not own"
        assert not ownership_overlaps(members), ownership_overlaps(members)
        values = {(p, o): v for m in members for _, p, o, v, _ in m.records}
        assert values == expected
        assert not any(m.commit_errors for m in members), [m.commit_errors for m in members]
    finally:
        close_all(members)
    assert committed_offsets(b, f"g-{topic_name}", topic_name, 6) == {p: 10 for p in range(6)}


# --------------------------------------------------------------- 2. incremental rebalance: arrival, departure


class FlowProducer:
    """Produces records to every partition in turn from a thread, one every `interval` seconds; each value is
    `seq:monotonic time of its production`. Bounded: at most `limit` records and `seconds`."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, interval: float = 0.01,
                 limit: int = 20_000, seconds: float = 90.0) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "linger.ms": 5,
                                  "enable.idempotence": False, "message.timeout.ms": 30000})
        self.topic, self.partitions, self.interval = topic, partitions, interval
        self.limit, self.seconds = limit, seconds
        self.delivered: list[tuple[int, int, float]] = []  # partition, offset, produced at
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _report(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.delivered.append((msg.partition(), msg.offset(), float(msg.value().split(b":")[1])))

    def _run(self) -> None:
        for i in bounded(self.limit, self.seconds):
            if self._stop.is_set():
                break
            self.producer.produce(self.topic, value=f"{i}:{time.monotonic():.6f}".encode(),
                                  partition=i % self.partitions, on_delivery=self._report)
            self.producer.poll(0)
            time.sleep(self.interval)
        for _ in bounded(60, 30):
            if self.producer.flush(0.5) == 0:
                break

    def start(self) -> "FlowProducer":
        self._thread.start()
        return self

    def halt(self) -> None:
        """Stop producing and wait for the thread (it flushes while the broker is still there)."""
        self._stop.set()
        self._thread.join(40)

    def stop(self) -> list[tuple[int, int, float]]:
        self.halt()
        assert not self._thread.is_alive(), "producer did not stop"
        assert not self.errors, self.errors[:5]
        return self.delivered


@pytest.mark.timeout(120)
def test_members_arriving_and_leaving_do_not_stop_the_others(cg_broker, topic_name):
    """While records flow into 6 partitions, a 4th member joins a group of 3, then one of the first three
    leaves (close). The two that stayed throughout never lose all their partitions and keep reading records
    produced after the change began, before it ended (no stop-the-world); at the end each partition is owned
    by exactly one live member, and no partition was ever owned by two at once; no record is lost, and a record is
    read twice only where its partition changed hands (by two different members; with each member committing
    what it read before it releases a partition, Kafka reads none twice)."""
    b = cg_broker.bootstrap
    create_topics(b, {topic_name: 6})
    group = f"g-{topic_name}"
    flow = FlowProducer(b, topic_name, 6).start()
    a, gone, c = (Tracked(n, cg_config(b, group), [topic_name]) for n in ("a", "b", "c"))
    members = [a, gone, c]
    everyone = list(members)
    try:
        poll_until(members, lambda: sorted(len(m.assignment()) for m in members) == [2, 2, 2]
                   and all(m.records for m in members), 30, "three members reading two partitions each")
        change_began = time.monotonic()
        d = Tracked("d", cg_config(b, group), [topic_name])
        members.append(d)
        everyone.append(d)
        poll_until(members, lambda: bool(d.assignment())
                   and is_partitioning([m.partitions() for m in members], set(range(6))),
                   30, "the 4th member to get partitions")
        gone.close()
        members.remove(gone)
        poll_until(members, lambda: is_partitioning([m.partitions() for m in members], set(range(6)))
                   and all(m.records and m.records[-1][4] > change_began for m in members), 30,
                   "the leaver's partitions to move to the three others")
        change_ended = time.monotonic()
        for _ in bounded(100, 1.0):
            for m in members:
                m.poll()
        produced = flow.stop()
        expected = {(p, o) for p, o, _ in produced}
        poll_until(members, lambda: expected <= {(p, o) for m in everyone for p, o in m.read()}, 30,
                   "every produced record")
        final = [m.partitions() for m in members]
        assert is_partitioning(final, set(range(6))), final
    finally:
        flow.halt()
        close_all(everyone)

    for stayer in (a, c):
        during = [owned for t, owned in stayer.history if change_began <= t <= change_ended]
        before = [owned for t, owned in stayer.history if t < change_began][-1:]
        kept = frozenset.intersection(*(before + during))
        assert kept, f"{stayer.name} lost all its partitions during the change: {before + during}"
        produced_at = {(p, o): t for p, o, t in produced}
        fresh = [(p, o) for _, p, o, _, read_at in stayer.records
                 if read_at < change_ended and produced_at.get((p, o), 0) > change_began]
        assert fresh, f"{stayer.name} read nothing produced during the change"

    assert not ownership_overlaps(everyone), f"a partition owned by two members at once: {ownership_overlaps(everyone)}"
    readers: dict[tuple[int, int], list[str]] = defaultdict(list)
    for m in everyone:
        for p, o in m.read():
            readers[(p, o)].append(m.name)
    assert expected <= set(readers), f"lost: {sorted(expected - set(readers))[:10]}"
    owners: dict[int, set[str]] = defaultdict(set)
    for m in everyone:
        for _, owned in m.history:
            for _, p in owned:
                owners[p].add(m.name)
    for (p, o), names in readers.items():
        if len(names) > 1:
            assert len(set(names)) == len(names), f"{names} read {p}@{o} twice"
            assert len(owners[p]) > 1, f"{p}@{o} read by {names}, but partition {p} never changed hands"
    assert not any(m.commit_errors for m in everyone), [m.commit_errors for m in everyone]


# -------------------------------------------------------------------------------------------- 3. kill -9


class MemberProcess:
    """consumer_protocol_member.py in a subprocess; its output lines collected on a thread."""

    def __init__(self, bootstrap: str, topic: str, group: str, commit_limit: int, log: Path) -> None:
        with open(log, "w") as err:  # librdkafka's own log, if any
            self.proc = subprocess.Popen(
                [sys.executable, str(MEMBER_SCRIPT), bootstrap, topic, group, str(commit_limit)],
                stdout=subprocess.PIPE, stderr=err, text=True)
        self.lines: list[str] = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def assignment(self) -> set[int]:
        for line in reversed(list(self.lines)):
            if line.startswith("ASSIGNED"):
                rest = line[len("ASSIGNED"):].strip()
                return {int(tp.rsplit(":", 1)[1]) for tp in rest.split(",") if tp}
        return set()

    def read(self) -> list[tuple[int, int]]:
        return [tuple(int(x) for x in line.split()[1:3]) for line in list(self.lines) if line.startswith("MSG ")]

    def committed(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for line in list(self.lines):
            if line.startswith("COMMITTED "):
                for kv in line.split()[1].split(","):
                    p, o = kv.split("=")
                    out[int(p)] = int(o)
        return out

    def errors(self) -> list[str]:
        return [line for line in list(self.lines) if line.startswith("ERROR")]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


@pytest.mark.timeout(120)
def test_killed_member_partitions_move_after_session_timeout_and_resume_from_commits(cg_broker, topic_name, tmp_path):
    """A member in a subprocess reads its two partitions of six to the end but commits only up to offset 4; it is
    killed with SIGKILL (no leave). Its partitions stay assigned until the session timeout (6 s) expires it,
    then move to the two others, which resume exactly at the committed offset 4 (re-reading what the dead member
    read but did not commit, nothing lost, nothing before 4); their own partitions are not read twice."""
    b = cg_broker.bootstrap
    create_topics(b, {topic_name: 6})
    group = f"g-{topic_name}"
    limit = 4
    dying = MemberProcess(b, topic_name, group, limit, tmp_path / "member.log")
    members = [Tracked(n, cg_config(b, group), [topic_name]) for n in ("a", "b")]
    try:
        # records only once the assignment is settled: none is read before a handover
        poll_until(members, lambda: sorted([len(dying.assignment())] + [len(m.assignment()) for m in members])
                   == [2, 2, 2], 45, "three members with two partitions each")
        moved = dying.assignment()
        kept = {m.name: m.partitions() for m in members}
        produce_spread(b, topic_name, 6, 10, tag="w1-")

        def settled() -> bool:
            return (all(dying.committed().get(p) == limit for p in moved)
                    and set(dying.read()) >= {(p, o) for p in moved for o in range(10)}
                    and all(len(m.read()) >= 20 for m in members))

        poll_until(members, settled, 30, "the subprocess to read to the end and commit up to 4, the others to read")
        assert dying.proc.poll() is None and not dying.errors(), dying.errors()
        assert dying.assignment() == moved and {m.name: m.partitions() for m in members} == kept, "a rebalance"
        dying.kill()
        killed_at = time.monotonic()
        poll_until(members, lambda: is_partitioning([m.partitions() for m in members], set(range(6))),
                   SESSION_MS / 1000 + 20, "the dead member's partitions to move")
        elapsed = time.monotonic() - killed_at
        assert elapsed >= SESSION_MS / 1000 - 1.5, \
            f"partitions moved {elapsed:.1f}s after the kill: before the session timeout"
        for m in members:
            assert kept[m.name] <= m.partitions(), f"{m.name} lost its own partitions"
        produce_spread(b, topic_name, 6, 5, tag="w2-")
        poll_until(members, lambda: {(p, o) for m in members for p, o in m.read()}
                   >= {(p, o) for p in range(6) for o in range(15)} - {(p, o) for p in moved for o in range(limit)},
                   30, "every record from the committed offsets on")
        for _ in bounded(10, 0.5):
            for m in members:
                m.poll()
    finally:
        dying.kill()
        close_all(members)

    read = [(p, o) for m in members for p, o in m.read()]
    for p in range(6):
        offsets = sorted(o for q, o in read if q == p)
        if p in moved:
            assert offsets == list(range(limit, 15)), f"partition {p} of the killed member: read {offsets}"
        else:
            assert offsets == list(range(15)), f"partition {p}: read {offsets}"


# --------------------------------------------------------------------------------------- 4. the Java client


@dataclass
class JavaMember:
    """A `cg-member` harness process (java/OdradekClient.java) and what its output says so far."""

    proc: subprocess.Popen
    out: Path
    err: Path
    member_id: str = ""
    assigned: set[tuple[str, int]] = field(default_factory=set)
    assignments: int = 0
    records: list[tuple[str, int, int, str]] = field(default_factory=list)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    commit_errors: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, client: Any, tmp_path: Path, name: str, bootstrap: str, topics: str, group: str, stop: Path,
              *props: str) -> "JavaMember":
        out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        args = ("cg-member", bootstrap, topics, group, stop, 120000, *props)
        with open(out, "w") as o, open(err, "w") as e:
            proc = subprocess.Popen(client.command(args), stdout=o, stderr=e, text=True)
        return cls(proc, out, err)

    def refresh(self, running: bool = True) -> "JavaMember":
        self.assigned, self.assignments, self.records = set(), 0, []
        self.committed, self.commit_errors = {}, []
        for line in self.out.read_text().split("\n")[:-1]:  # complete lines only
            kind, _, rest = line.partition("\t")
            if kind == "member":
                self.member_id = rest
            elif kind == "assignment":
                self.assigned = {(tp.rsplit(":", 1)[0], int(tp.rsplit(":", 1)[1])) for tp in rest.split(",") if tp}
                self.assignments += 1
            elif kind == "record":
                t, p, off, value = rest.split("\t", 3)
                self.records.append((t, int(p), int(off), value))
            elif kind == "committed":
                for kv in rest.split(","):
                    tp, off = kv.rsplit("=", 1)
                    self.committed[(tp.rsplit(":", 1)[0], int(tp.rsplit(":", 1)[1]))] = int(off)
            elif kind == "commit-error":
                self.commit_errors.append(rest)
        if running and self.proc.poll() is not None:
            raise AssertionError(f"java member exited {self.proc.returncode}: {self.err.read_text()[-3000:]}")
        return self

    def partitions(self) -> set[int]:
        return {p for _, p in self.assigned}

    def finish(self, client: Any) -> None:
        """After the stop file: it must leave and exit 0, with nothing bad in its log."""
        assert self.proc.wait(timeout=60) == 0, self.err.read_text()[-3000:]
        client.check_log(("cg-member",), self.err.read_text())

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.mark.timeout(150)
def test_java_consumer_protocol_member_consumes_and_commits(cg_broker, topic_name, java4_client, tmp_path):
    """The Java client 4.x with group.protocol=consumer joins alone, gets all three partitions, reads every
    record and commits the end offsets; the Java admin (ConsumerGroupDescribe) and librdkafka's see one member
    with the `uniform` assignor; after it leaves, the group is empty with its offsets kept."""
    b = cg_broker.bootstrap
    create_topics(b, {topic_name: 3})
    group = f"g-{topic_name}"
    expected = produce_spread(b, topic_name, 3, 10)
    stop = tmp_path / "stop"
    j = JavaMember.start(java4_client, tmp_path, "j", b, topic_name, group, stop, "group.protocol=consumer")
    try:
        wait_until(lambda: j.refresh().committed == {(topic_name, p): 10 for p in range(3)}, timeout=60,
                   interval=0.2, message="the Java member to read and commit everything")
        assert j.assigned == {(topic_name, p) for p in range(3)} and j.member_id
        assert sorted((p, o) for _, p, o, _ in j.records) == sorted(expected)
        assert not j.commit_errors, j.commit_errors
        described = [line.split("\t") for line in java4_client.run("admin", b, "groups", f"group={group}")]
        assert ["group", group, "consumer"] in described
        assert [line for line in described if line[0] == "group-state"] == [
            ["group-state", group, "Stable", "uniform", "1"]]
        assert [line[3] for line in described if line[0] == "member"] == [
            ",".join(f"{topic_name}-{p}" for p in range(3))]
        admin = admin_client(b)
        d = admin.describe_consumer_groups([group])[group].result(15)
        assert (d.type, d.state, d.partition_assignor) == (
            ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE, "uniform")
        assert [m.member_id for m in d.members] == [j.member_id]
        stop.touch()
        j.finish(java4_client)
    finally:
        j.kill()
    assert committed_offsets(b, group, topic_name, 3) == {p: 10 for p in range(3)}
    wait_until(lambda: group_listing(b, group) == (ConsumerGroupType.CONSUMER, ConsumerGroupState.EMPTY),
               timeout=15, message="the group empty after the Java member left")


@pytest.mark.timeout(180)
def test_mixed_java_and_librdkafka_members_share_partitions(cg_broker, topic_name, java4_client, tmp_path):
    """Two Java 4.x members and two librdkafka members, all with group.protocol=consumer, in one group on six
    partitions: each partition is owned by exactly one of the four, every member has some; every record is
    read exactly once, by its partition's owner."""
    b = cg_broker.bootstrap
    create_topics(b, {topic_name: 6})
    group = f"g-{topic_name}"
    stops = [tmp_path / f"stop-j{i}" for i in range(2)]
    javas = [JavaMember.start(java4_client, tmp_path, f"j{i}", b, topic_name, group, stops[i],
                              "group.protocol=consumer") for i in range(2)]
    libs = [Tracked(f"l{i}", cg_config(b, group), [topic_name]) for i in range(2)]
    try:
        def shared() -> bool:  # `uniform`: 2 + 2 + 1 + 1
            owned = [j.refresh().partitions() for j in javas] + [m.partitions() for m in libs]
            return sorted(len(o) for o in owned) == [1, 1, 2, 2] and is_partitioning(owned, set(range(6)))

        poll_until(libs, shared, 60, "four members sharing six partitions")
        owned = {**{f"j{i}": j.partitions() for i, j in enumerate(javas)}, **{m.name: m.partitions() for m in libs}}
        seen_assignments = [j.assignments for j in javas]
        expected = produce_spread(b, topic_name, 6, 10)

        def all_read() -> bool:
            got = {(p, o) for j in javas for _, p, o, _ in j.refresh().records}
            got |= {(p, o) for m in libs for p, o in m.read()}
            return got >= set(expected)

        poll_until(libs, all_read, 60, "every record")
        for _ in bounded(10, 1.0):
            for m in libs:
                m.poll()
        assert [j.refresh().assignments for j in javas] == seen_assignments, "a rebalance meanwhile"
        assert {**{f"j{i}": j.partitions() for i, j in enumerate(javas)}, **{m.name: m.partitions() for m in libs}} \
            == owned, "a rebalance meanwhile"
        read = {f"j{i}": [(p, o) for _, p, o, _ in j.records] for i, j in enumerate(javas)}
        read.update({m.name: m.read() for m in libs})
        every = [r for rs in read.values() for r in rs]
        assert sorted(every) == sorted(expected), "each record read exactly once"
        for name, rs in read.items():
            assert {p for p, _ in rs} <= owned[name], f"{name} read partitions it does not own"
        admin = admin_client(b)
        d = admin.describe_consumer_groups([group])[group].result(15)
        assert d.type == ConsumerGroupType.CONSUMER and len(d.members) == 4
        assert {m.member_id for m in d.members} == {j.member_id for j in javas} | {m.consumer.memberid() for m in libs}
        # One Java member after the other, once the group has settled: the 4.x client logs an ERROR when it is
        # closed while it reconciles a new assignment (the partitions of a member that just left).
        stops[0].touch()
        javas[0].finish(java4_client)
        poll_until(libs, lambda: is_partitioning([javas[1].refresh().partitions()] + [m.partitions() for m in libs],
                                                 set(range(6))), 30, "the first Java member's partitions to move")
        stops[1].touch()
        javas[1].finish(java4_client)
    finally:
        for j in javas:
            j.kill()
        close_all(libs)


# ------------------------------------------------------------------ 5. offsets across a protocol conversion


def first_offsets(config: dict[str, Any], topic: str, partitions: int, commit: dict[int, int],
                  seconds: float = 30) -> tuple[dict[int, int], Any]:
    """A consumer with `config` subscribes to `topic`, reads until it has a record of every partition, and
    returns the first offset it read of each, and the group's (type, state) while it is a member; then it
    commits `commit` and closes."""
    c = Consumer(config)
    bootstrap, group = config["bootstrap.servers"], config["group.id"]
    first: dict[int, int] = {}
    try:
        c.subscribe([topic])
        for _ in bounded(10_000, seconds):
            for m in c.consume(100, 0.1):
                assert m.error() is None, m.error()
                first.setdefault(m.partition(), m.offset())
            if len(first) == partitions:
                break
        listing = group_listing(bootstrap, group)
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in commit.items()], asynchronous=False)
    finally:
        c.close()
    return first, listing


@pytest.mark.timeout(120)
def test_committed_offsets_survive_protocol_conversion_both_ways(cg_broker, topic_name):
    """One group id, used in turn by a consumer-protocol member, a classic member, and a consumer-protocol member
    again, each alone: when the group is empty, a member of the other protocol converts it (ListGroups shows the
    type change), and each resumes exactly from the offsets the previous one committed."""
    b = cg_broker.bootstrap
    create_topics(b, {topic_name: 2})
    group = f"g-{topic_name}"
    produce_spread(b, topic_name, 2, 12)

    first, listing = first_offsets(cg_config(b, group), topic_name, 2, {0: 3, 1: 5})
    assert first == {0: 0, 1: 0}
    assert listing == (ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE)
    assert committed_offsets(b, group, topic_name, 2) == {0: 3, 1: 5}
    wait_until(lambda: group_listing(b, group) == (ConsumerGroupType.CONSUMER, ConsumerGroupState.EMPTY),
               timeout=15, message="the consumer group empty")

    first, listing = first_offsets(classic_config(b, group), topic_name, 2, {0: 7, 1: 8})
    assert first == {0: 3, 1: 5}, "the classic member did not resume from the consumer group's offsets"
    assert listing == (ConsumerGroupType.CLASSIC, ConsumerGroupState.STABLE)
    assert committed_offsets(b, group, topic_name, 2) == {0: 7, 1: 8}
    wait_until(lambda: group_listing(b, group) == (ConsumerGroupType.CLASSIC, ConsumerGroupState.EMPTY),
               timeout=15, message="the classic group empty")

    first, listing = first_offsets(cg_config(b, group), topic_name, 2, {0: 12, 1: 12})
    assert first == {0: 7, 1: 8}, "the consumer-protocol member did not resume from the classic group's offsets"
    assert listing == (ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE)
    assert committed_offsets(b, group, topic_name, 2) == {0: 12, 1: 12}


# --------------------------------------------------------------------------------------- 6. range assignor


def range_assignment(member_ids: list[str], partitions: int) -> dict[str, list[int]]:
    """Range: members in member id order, each a contiguous run; the first `partitions % members` one longer."""
    ids = sorted(member_ids)
    q, r = divmod(partitions, len(ids))
    out, start = {}, 0
    for i, m in enumerate(ids):
        n = q + (1 if i < r else 0)
        out[m] = list(range(start, start + n))
        start += n
    return out


@pytest.mark.timeout(90)
def test_range_server_assignor(cg_broker, topic_name):
    """Three members with group.remote.assignor=range subscribed to two topics (7 and 3 partitions): per topic,
    each member gets a contiguous range, in member id order, the first ones one more (7 = 3+2+2); the group
    reports the `range` assignor."""
    b = cg_broker.bootstrap
    t7, t3 = f"{topic_name}-7", f"{topic_name}-3"
    create_topics(b, {t7: 7, t3: 3})
    group = f"g-{topic_name}"
    members = [Tracked(f"r{i}", cg_config(b, group, **{"group.remote.assignor": "range"}), [t7, t3]) for i in range(3)]
    admin = admin_client(b)
    try:
        def stable() -> bool:
            if sum(len(m.assignment()) for m in members) != 10:
                return False
            d = admin.describe_consumer_groups([group])[group].result(15)
            return d.state == ConsumerGroupState.STABLE and all(
                {(tp.topic, tp.partition) for tp in x.assignment.topic_partitions}
                == {(tp.topic, tp.partition) for tp in x.target_assignment.topic_partitions} for x in d.members)

        poll_until(members, stable, 40, "a stable range assignment")
        ids = {m.name: m.consumer.memberid() for m in members}
        for topic, n in ((t7, 7), (t3, 3)):
            want = range_assignment(list(ids.values()), n)
            got = {ids[m.name]: sorted(p for t, p in m.assignment() if t == topic) for m in members}
            assert got == want, f"{topic}: {got} (members in id order: {sorted(ids.values())})"
        d = admin.describe_consumer_groups([group])[group].result(15)
        assert d.partition_assignor == "range"
    finally:
        close_all(members)


# ------------------------------------------------------------------------------------ 7. regex subscription


@pytest.mark.timeout(120)
def test_regex_subscription_resolved_by_the_broker(cg_broker, topic_name):
    """Two librdkafka members subscribe to "^<prefix>.*" (sent to the broker as SubscribedTopicRegex): they
    share the partitions of the matching topics and none of the other; a matching topic created afterwards is
    assigned too (Kafka re-resolves regexes at most every 10 s), and records of every matching topic are read,
    none of the other. (librdkafka sends the regex as "(^<prefix>.*)", with SubscribedTopicNames [].)"""
    b = cg_broker.bootstrap
    prefix = f"{topic_name}-"
    ta, tb, tc, other = f"{prefix}a", f"{prefix}b", f"{prefix}c", f"{topic_name}_other"
    create_topics(b, {ta: 3, tb: 2, other: 2})
    group = f"g-{topic_name}"
    members = [Tracked(f"x{i}", cg_config(b, group), [f"^{prefix}.*"]) for i in range(2)]
    try:
        first = {(t, p) for t, n in ((ta, 3), (tb, 2)) for p in range(n)}
        poll_until(members, lambda: all(m.assignment() for m in members)
                   and is_partitioning([m.assignment() for m in members], first), 40, "the matching topics' partitions")
        create_topics(b, {tc: 2})
        everything = first | {(tc, 0), (tc, 1)}
        # Kafka refreshes a group's regexes when topics change, at most every 10 s: here 10-20 s
        poll_until(members, lambda: is_partitioning([m.assignment() for m in members], everything), 45,
                   "the new matching topic's partitions")
        expected = set()
        for t, n in ((ta, 3), (tb, 2), (tc, 2)):
            expected |= {(t, p, o) for (p, o) in produce_spread(b, t, n, 2)}
        produce_spread(b, other, 2, 2)
        poll_until(members, lambda: {(t, p, o) for m in members for t, p, o, _, _ in m.records} >= expected, 30,
                   "the records of the matching topics")
        for _ in bounded(20, 1.0):
            for m in members:
                m.poll()
        read = [(t, p, o) for m in members for t, p, o, _, _ in m.records]
        assert sorted(read) == sorted(expected), "read a record twice, or one of a topic that does not match"
    finally:
        close_all(members)


# ------------------------------------------------------------------------- 8. ListGroups and DescribeGroups


@pytest.mark.timeout(90)
def test_list_and_describe_consumer_protocol_group(cg_broker, topic_name):
    """confluent-kafka's AdminClient on a consumer-protocol group (two members) next to a classic group:
    ListGroups gives each its type (CONSUMER, CLASSIC) and filters by type and state; describing both at once
    (ConsumerGroupDescribe, then DescribeGroups for the classic one, which ConsumerGroupDescribe refuses) gives
    the consumer group's members with their ids, client ids and (target) assignments, the `uniform` assignor."""
    b = cg_broker.bootstrap
    create_topics(b, {topic_name: 4})
    group, classic = f"g-{topic_name}", f"g-{topic_name}-classic"
    members = [Tracked(f"m{i}", cg_config(b, group, **{"client.id": f"cp-{i}"}), [topic_name]) for i in range(2)]
    old = Tracked("classic", classic_config(b, classic, **{"client.id": "classic-0"}), [topic_name])
    admin = admin_client(b)
    try:
        poll_until(members + [old], lambda: sorted(len(m.assignment()) for m in members) == [2, 2]
                   and len(old.assignment()) == 4, 30, "both groups assigned")

        def listed(**kw: Any) -> dict[str, tuple[Any, Any]]:
            result = admin.list_consumer_groups(**kw).result(15)
            assert not result.errors, result.errors
            return {g.group_id: (g.type, g.state) for g in result.valid if g.group_id in (group, classic)}

        wait_until(lambda: listed() == {group: (ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE),
                                        classic: (ConsumerGroupType.CLASSIC, ConsumerGroupState.STABLE)},
                   timeout=20, message="both groups listed, Stable, with their types")
        assert set(listed(types={ConsumerGroupType.CONSUMER})) == {group}
        assert set(listed(types={ConsumerGroupType.CLASSIC})) == {classic}
        assert set(listed(states={ConsumerGroupState.STABLE})) == {group, classic}
        assert set(listed(states={ConsumerGroupState.EMPTY})) == set()

        futures = admin.describe_consumer_groups([group, classic])
        d = futures[group].result(15)
        assert (d.group_id, d.type, d.state, d.partition_assignor, d.is_simple_consumer_group) == (
            group, ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE, "uniform", False)
        by_id = {m.consumer.memberid(): m for m in members}
        assert sorted(x.member_id for x in d.members) == sorted(by_id)
        for x in d.members:
            mine = by_id[x.member_id]
            assert x.client_id == f"cp-{mine.name[1:]}"
            assert x.group_instance_id is None
            assert {(tp.topic, tp.partition) for tp in x.assignment.topic_partitions} == mine.assignment()
            assert {(tp.topic, tp.partition) for tp in x.target_assignment.topic_partitions} == mine.assignment()
        dc = futures[classic].result(15)
        assert (dc.type, dc.state, dc.partition_assignor) == (
            ConsumerGroupType.CLASSIC, ConsumerGroupState.STABLE, "range")
        assert [(x.client_id, len(x.assignment.topic_partitions)) for x in dc.members] == [("classic-0", 4)]
    finally:
        close_all(members + [old])
    wait_until(lambda: listed().get(group) == (ConsumerGroupType.CONSUMER, ConsumerGroupState.EMPTY), timeout=15,
               message="the consumer group empty after both closed")
    d = admin.describe_consumer_groups([group])[group].result(15)
    assert (d.state, d.members, d.partition_assignor) == (ConsumerGroupState.EMPTY, [], "uniform")


# --------------------------------------------------------------------------------- 9. static membership


@pytest.mark.timeout(90)
def test_static_member_restart_keeps_its_partitions(cg_broker, topic_name):
    """A static member (group.instance.id) closes: librdkafka leaves with member epoch -2, so its partitions stay
    its own, not handed to the other member, while it restarts; the new consumer with the same instance id (a
    new member id) gets exactly those partitions back, the other member's never change. A second consumer with
    that instance id while it is in use is refused (UNRELEASED_INSTANCE_ID, fatal to librdkafka)."""
    b = cg_broker.bootstrap
    create_topics(b, {topic_name: 4})
    group = f"g-{topic_name}"
    static = Tracked("s", cg_config(b, group, **{"group.instance.id": "inst-1"}), [topic_name])
    other = Tracked("o", cg_config(b, group), [topic_name])
    clash: Consumer | None = None
    members = [static, other]
    try:
        poll_until(members, lambda: sorted(len(m.assignment()) for m in members) == [2, 2], 30, "two partitions each")
        theirs, mine, first_id = other.partitions(), static.partitions(), static.consumer.memberid()
        settled = len(other.history)
        static.close()
        members = [other]
        for _ in bounded(10_000, 2.0):  # four heartbeat intervals: the other member gets nothing more
            other.poll()
        assert other.partitions() == theirs
        admin = admin_client(b)
        d = admin.describe_consumer_groups([group])[group].result(15)
        held = {x.group_instance_id: {tp.partition for tp in x.assignment.topic_partitions} for x in d.members}
        assert held == {"inst-1": mine, None: theirs}, held
        again = Tracked("s2", cg_config(b, group, **{"group.instance.id": "inst-1"}), [topic_name])
        members = [again, other]
        poll_until(members, lambda: again.partitions() == mine, 30, "the restarted static member's partitions")
        assert again.consumer.memberid() != first_id
        assert [{p for _, p in owned} for _, owned in other.history[settled - 1:]] == [theirs], \
            "the other member's partitions changed"

        clash = Consumer(cg_config(b, group, **{"group.instance.id": "inst-1"}))
        clash.subscribe([topic_name])
        refused = None
        for _ in bounded(10_000, 20):
            for m in members:
                m.poll()
            msg = clash.poll(0.05)
            if msg is not None and msg.error() is not None and msg.error().code() == KafkaError._FATAL:
                refused = msg.error()
                break
        assert refused is not None and "instance ID is still used" in refused.str(), refused
        assert again.partitions() == mine and other.partitions() == theirs
    finally:
        if clash is not None:
            clash.close()
        close_all([static] + members)


# --------------------------------------------------------------- 10. the wire: heartbeat and commit errors


class Raw:
    """Requests on one connection, encoded and decoded by odradek's codec."""

    def __init__(self, bootstrap: str) -> None:
        self.sock = connect(bootstrap)
        self.cid = 0

    def call(self, api_key: int, version: int, body: dict) -> dict:
        self.cid += 1
        self.sock.sendall(codec.encode_request(api_key, version, self.cid, "raw-cg", body))
        cid, resp = codec.decode_response(api_key, version, read_frame(self.sock, 15))
        assert cid == self.cid
        return resp

    def close(self) -> None:
        self.sock.close()


@pytest.mark.timeout(60)
def test_heartbeat_and_offset_commit_errors_on_the_wire(cg_broker, topic_name):
    """ConsumerGroupHeartbeat's validation and member epochs, and what OffsetCommit/OffsetFetch make of member
    epochs, request by request: the error codes Kafka 4.4 answers with."""
    b = cg_broker.bootstrap
    create_topics(b, {topic_name: 2})
    group = f"g-{topic_name}"
    raw = Raw(b)
    try:
        wait_until(lambda: raw.call(10, 4, {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]
                   ["error_code"] == 0, timeout=30, interval=0.2, message="a coordinator for the group")

        def hb(version: int = 1, **fields: Any) -> dict:
            body = {"group_id": group, "member_id": "", "member_epoch": 0, "instance_id": None, "rack_id": None,
                    "rebalance_timeout_ms": -1, "subscribed_topic_names": None, "subscribed_topic_regex": None,
                    "server_assignor": None, "topic_partitions": None}
            body.update(fields)
            return raw.call(68, version, body)

        member = uuid.uuid4().hex[:22]
        join = {"member_id": member, "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic_name],
                "topic_partitions": []}
        # v1: the client makes its member id; a join must carry a subscription, a rebalance timeout, no partitions
        assert hb(**{**join, "member_id": ""})["error_code"] == INVALID_REQUEST
        assert hb(**{**join, "subscribed_topic_names": None})["error_code"] == INVALID_REQUEST
        assert hb(**{**join, "topic_partitions": None})["error_code"] == INVALID_REQUEST
        assert hb(**{**join, "rebalance_timeout_ms": -1})["error_code"] == INVALID_REQUEST
        assert hb(**{**join, "group_id": ""})["error_code"] == INVALID_REQUEST
        assert hb(**{**join, "server_assignor": "no-such-assignor"})["error_code"] == UNSUPPORTED_ASSIGNOR
        bad_regex = hb(**{**join, "subscribed_topic_names": None, "subscribed_topic_regex": "["})
        assert bad_regex["error_code"] == INVALID_REGULAR_EXPRESSION

        joined = hb(**join)
        assert joined["error_code"] == 0, joined
        assert joined["member_id"] == member and joined["member_epoch"] > 0
        assert joined["heartbeat_interval_ms"] == HEARTBEAT_MS
        epoch = joined["member_epoch"]
        assert hb(member_id=member, member_epoch=epoch)["error_code"] == 0
        # an epoch the broker never gave is fenced; Kafka keeps the member (it may rejoin with epoch 0, or go on at
        # its epoch, as below, until the session timeout)
        assert hb(member_id=member, member_epoch=epoch + 5)["error_code"] == FENCED_MEMBER_EPOCH
        assert hb(member_id=f"{member}-x", member_epoch=epoch)["error_code"] == UNKNOWN_MEMBER_ID
        # v0: the broker makes the member id when the client sends none
        v0 = hb(0, **{**join, "member_id": "", "rebalance_timeout_ms": 30000})
        assert v0["error_code"] == 0 and v0["member_id"] and v0["member_epoch"] > 0

        def commit(version: int = 9, epoch_: int = epoch, member_id: str = member, partition: int = 0) -> int:
            resp = raw.call(8, version, {
                "group_id": group, "generation_id_or_member_epoch": epoch_, "member_id": member_id,
                "group_instance_id": None, "retention_time_ms": -1,
                "topics": [{"name": topic_name, "partitions": [{
                    "partition_index": partition, "committed_offset": 1, "committed_leader_epoch": -1,
                    "commit_timestamp": -1, "committed_metadata": ""}]}]})
            return resp["topics"][0]["partitions"][0]["error_code"]

        assert commit() == 0
        assert commit(epoch_=epoch + 1) == STALE_MEMBER_EPOCH
        assert commit(member_id="ghost") == UNKNOWN_MEMBER_ID
        assert commit(epoch_=-1, member_id="") == UNKNOWN_MEMBER_ID  # not while the group has members
        assert commit(version=8) == UNSUPPORTED_VERSION  # a consumer-protocol member must use v9+
        assert commit(partition=7) == UNKNOWN_TOPIC_OR_PARTITION

        def fetch(epoch_: int, member_id: str | None) -> dict:
            return raw.call(9, 9, {"group_id": "", "topics": None, "require_stable": True, "groups": [{
                "group_id": group, "member_id": member_id, "member_epoch": epoch_,
                "topics": [{"name": topic_name, "partition_indexes": [0, 1]}]}]})["groups"][0]

        ok = fetch(epoch, member)
        assert ok["error_code"] == 0
        assert [(p["partition_index"], p["committed_offset"]) for p in ok["topics"][0]["partitions"]] == [
            (0, 1), (1, -1)]
        assert fetch(epoch + 1, member)["error_code"] == STALE_MEMBER_EPOCH
        assert fetch(epoch, "ghost")["error_code"] == UNKNOWN_MEMBER_ID
        assert fetch(-1, None)["error_code"] == 0  # no member: an admin's fetch

        described = raw.call(69, 0, {"group_ids": [group, f"{group}-none"], "include_authorized_operations": False})
        by_group = {g["group_id"]: g for g in described["groups"]}
        ours, none = by_group[group], by_group[f"{group}-none"]
        assert (ours["error_code"], ours["group_id"], ours["assignor_name"]) == (0, group, "uniform")
        assert sorted(m["member_id"] for m in ours["members"]) == sorted([member, v0["member_id"]])
        assert none["error_code"] == GROUP_ID_NOT_FOUND

        left = hb(member_id=member, member_epoch=-1)
        assert (left["error_code"], left["member_epoch"]) == (0, -1)
        assert hb(member_id=member, member_epoch=-1)["error_code"] == UNKNOWN_MEMBER_ID
        assert hb(member_id=member, member_epoch=epoch)["error_code"] == UNKNOWN_MEMBER_ID
        assert hb(member_id=v0["member_id"], member_epoch=-1)["error_code"] == 0
        assert commit(epoch_=-1, member_id="") == 0  # the group is empty now: an admin's commit is fine
    finally:
        raw.close()
