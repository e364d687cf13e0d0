"""What the fault tests check after breaking brokers: what the clients were told and saw, against what the
partitions hold afterwards.

Producers record every acknowledged write (topic, partition, offset, key, value) in an `AckLedger`;
consumers (`ConsumerRecorder`, a consumer group member on a thread) record every (partition, offset, value)
they were given; a transactional producer (`TransactionalLoadProducer`) also records the values of the
transactions it aborted. Afterwards every partition is read from its start (`read_partitions`), and
`check_history` gives one `History` report (`ok`, and a `__str__` naming each anomaly) of:

- lost: acknowledged records missing from the read (at their acknowledged offset, or at all);
- duplicated: a value read more than once (with idempotent producers a retry must never be written twice);
- reordered: per partition, values whose sequence number goes down (a producer sends each partition's
  values in increasing order);
- dirty: records a consumer was given that were never acknowledged and are not in the log afterwards (read
  above the high watermark and truncated, or an aborted or never-committed transaction's records that a
  read_committed consumer returned), and any aborted value returned at all;
- unconsumed: acknowledged records a consumer group never returned (when it was meant to read everything);
- producer and consumer errors: the delivery errors and non-retriable consumer errors the clients reported.

Values are ``<prefix>-<n>``; n increases per producer and partition. Everything is bounded in time.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, NamedTuple

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

Record = tuple[int, int, bytes]  # (partition, offset, value)

# Consumer errors a client rides out by itself (leaders moving, coordinators moving, brokers restarting):
# not failures of the cluster as an application sees them.
TRANSIENT_CONSUMER_ERRORS = frozenset({
    KafkaError._PARTITION_EOF, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE,
    KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.REBALANCE_IN_PROGRESS, KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.OFFSET_NOT_AVAILABLE, KafkaError._NO_OFFSET,
    KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID, KafkaError._ASSIGN_PARTITIONS,
    KafkaError._REVOKE_PARTITIONS,
})


def _limited(items: list, n: int = 5) -> str:
    return f"{len(items)} {items[:n]}" if items else "0"


@dataclass
class History:
    """The one report of a fault test: `ok` when every list is empty; `str()` names what is not."""

    lost: list[Record] = field(default_factory=list)
    duplicated: list[bytes] = field(default_factory=list)
    reordered: list[tuple[int, bytes, bytes]] = field(default_factory=list)
    dirty: list[Record] = field(default_factory=list)
    unconsumed: list[Record] = field(default_factory=list)
    producer_errors: list[str] = field(default_factory=list)
    consumer_errors: list[str] = field(default_factory=list)
    acked: int = 0
    read: int = 0
    consumed: int = 0
    # what the final read can tell about the lost records (PartitionRead.explain): not a verdict of its own
    diagnostics: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered or self.dirty or self.unconsumed
                    or self.producer_errors or self.consumer_errors)

    def __str__(self) -> str:
        counts = f"{self.acked} acknowledged, {self.read} read afterwards, {self.consumed} consumed"
        anomalies = [(name, getattr(self, name)) for name in ("lost", "duplicated", "reordered", "dirty",
                                                               "unconsumed", "producer_errors", "consumer_errors")]
        found = [f"{name.replace('_', ' ')} {_limited(items)}" for name, items in anomalies if items]
        text = f"{counts}: " + ("clean" if not found else "; ".join(found))
        if self.diagnostics:
            text += "\n  " + "\n  ".join(self.diagnostics)
        return text


Report = History  # the name the fault tests use


class Ack(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes


class AckLedger:
    """Thread-safe record of acknowledged writes and of delivery errors, with the time of each
    acknowledgement (for unavailability windows). `acked` holds (partition, offset, value) of every
    acknowledgement (what check_history takes); `writes` the same with topic and key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.acked: list[Record] = []
        self.writes: list[Ack] = []
        self.ack_times: list[tuple[float, int]] = []
        self.errors: list[str] = []
        self.error_codes: list[int] = []

    def delivery(self, err: Any, msg: Any) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(str(err))
                self.error_codes.append(err.code())
            else:
                self._ack(msg.topic(), msg.partition(), msg.offset(), msg.key(), bytes(msg.value()))

    def _ack(self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes) -> None:
        self.acked.append((partition, offset, value))
        self.writes.append(Ack(topic, partition, offset, None if key is None else bytes(key), value))
        self.ack_times.append((time.monotonic(), partition))

    def add(self, acks: Iterable[Ack]) -> None:
        """Record writes acknowledged as a whole later than their delivery (a committed transaction)."""
        with self._lock:
            for ack in acks:
                self._ack(*ack)

    def error(self, message: str, code: int = KafkaError.UNKNOWN) -> None:
        with self._lock:
            self.errors.append(message)
            self.error_codes.append(code)

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def snapshot(self) -> list[Record]:
        with self._lock:
            return list(self.acked)

    def longest_gap_after(self, since: float) -> float:
        """The longest time without any acknowledgement from ``since`` on (monotonic seconds)."""
        with self._lock:
            times = [t for t, _ in self.ack_times if t >= since]
        points = [since] + sorted(times)
        return max((b - a for a, b in zip(points, points[1:])), default=0.0)


def sequence(value: bytes) -> int:
    return int(value.rsplit(b"-", 1)[1])


def check_history(acked: list[Record], read: dict[int, list[tuple[int, bytes]]],
                  consumed: list[Record] | None = None, *, aborted: Iterable[bytes] = (),
                  expect_all_consumed: bool = False, producer_errors: Iterable[str] = (),
                  consumer_errors: Iterable[str] = ()) -> History:
    """Compare what producers were told (`acked`) and consumers given (`consumed`) with the final `read` of
    every partition (from its start, by a consumer of the isolation level the consumers had).

    `aborted`: values of transactions the producer aborted, which no read_committed read may return.
    `expect_all_consumed`: the consumers were meant to read every acknowledged record (a group that ran to
    the end). The errors the clients reported are carried into the report as they are."""
    history = History(producer_errors=list(producer_errors), consumer_errors=list(consumer_errors),
                      acked=len(acked), read=sum(len(r) for r in read.values()),
                      consumed=len(consumed or []))
    position = {(p, o): v for p, records in read.items() for o, v in records}
    seen: dict[bytes, int] = {}
    for records in read.values():
        for _, value in records:
            seen[value] = seen.get(value, 0) + 1
    history.duplicated = sorted(v for v, n in seen.items() if n > 1)
    for p, o, v in acked:
        if position.get((p, o)) != v:
            history.lost.append((p, o, v))
    if history.lost and isinstance(read, PartitionRead):
        history.diagnostics = read.explain(history.lost)
    for p, records in read.items():
        last: dict[bytes, tuple[int, bytes]] = {}
        for _, value in records:
            prefix = value.rsplit(b"-", 1)[0]
            previous = last.get(prefix)
            if previous is not None and sequence(value) < previous[0]:
                history.reordered.append((p, previous[1], value))
            last[prefix] = (sequence(value), value)
    acked_values = {v for _, _, v in acked}
    aborted_values = set(aborted)
    dirty: set[Record] = set()
    for p, o, v in consumed or []:
        if v in aborted_values or (v not in acked_values and position.get((p, o)) != v):
            dirty.add((p, o, v))
    for (p, o), v in position.items():
        if v in aborted_values:
            dirty.add((p, o, v))
    history.dirty = sorted(dirty)
    if expect_all_consumed:
        consumed_values = {v for _, _, v in consumed or []}
        history.unconsumed = sorted(r for r in acked if r[2] not in consumed_values)
    return history


class LoadProducer:
    """An idempotent acks=all confluent-kafka producer writing ``<prefix>-<n>`` values round-robin over the
    partitions (or over ``partition_ids`` only) from a thread, every ``interval_s``, until stopped or
    ``max_records`` sent. ``config`` overrides the producer's (e.g. acks=1 without idempotence)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, prefix: str = "v", interval_s: float = 0.005,
                 max_records: int = 20_000, partition_ids: list[int] | None = None, **config: Any) -> None:
        self.topic = topic
        self.partitions = partitions
        self.partition_ids = list(partition_ids) if partition_ids is not None else list(range(partitions))
        self.prefix = prefix
        self.interval_s = interval_s
        self.max_records = max_records
        self.ledger = AckLedger()
        self.sent = 0
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                   "linger.ms": 2, "message.timeout.ms": 60_000, "broker.address.family": "v4",
                                   "retry.backoff.ms": 50, **config})
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "LoadProducer":
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set() and self.sent < self.max_records:
            partition = self.partition_ids[self.sent % len(self.partition_ids)]
            self._producer.produce(self.topic, key=self.prefix.encode(), value=f"{self.prefix}-{self.sent}".encode(),
                                   partition=partition, on_delivery=self.ledger.delivery)
            self.sent += 1
            self._producer.poll(0)
            time.sleep(self.interval_s)
        while not self._stop.is_set():
            self._producer.poll(0.1)  # acknowledgements are delivered by poll()

    def wait_acked(self, count: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.ledger.count() < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"only {self.ledger.count()} of {count} writes acknowledged in {timeout}s "
                                     f"(errors: {self.ledger.errors[:3]})")
            time.sleep(0.05)

    def stop(self, flush_timeout: float = 90.0) -> AckLedger:
        self._stop.set()
        self._thread.join(10)
        remaining = self._producer.flush(flush_timeout)
        assert remaining == 0, f"{remaining} writes neither acknowledged nor failed after {flush_timeout}s"
        return self.ledger


class TransactionalLoadProducer:
    """A transactional confluent-kafka producer writing ``<prefix>-<n>`` values round-robin over the
    partitions, `per_transaction` at a time, committing each transaction except every `abort_every`-th,
    which it aborts, until stopped or `max_records` sent.

    Only a commit acknowledges: the records of a committed transaction go into `ledger` (at the offsets their
    deliveries reported) when commit_transaction returns; those of an aborted one into `aborted`, which no
    read_committed read may ever return. A transaction whose outcome the client could not learn (a commit
    that failed fatally) goes into `uncertain`, and its error into `ledger.errors`."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, transactional_id: str, prefix: str = "t",
                 per_transaction: int = 10, abort_every: int = 3, interval_s: float = 0.005,
                 max_records: int = 20_000, **config: Any) -> None:
        self.topic = topic
        self.partitions = partitions
        self.prefix = prefix
        self.per_transaction = per_transaction
        self.abort_every = abort_every
        self.interval_s = interval_s
        self.max_records = max_records
        self.ledger = AckLedger()
        self.aborted: list[bytes] = []
        self.uncertain: list[bytes] = []
        self.transactions = 0
        self.sent = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                                   "acks": "all", "linger.ms": 2, "message.timeout.ms": 60_000,
                                   "transaction.timeout.ms": 60_000, "broker.address.family": "v4",
                                   "retry.backoff.ms": 50, **config})
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self, init_timeout: float = 60.0) -> "TransactionalLoadProducer":
        self._producer.init_transactions(init_timeout)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set() and self.sent < self.max_records:
                self._one_transaction()
        except KafkaException as exc:  # fatal: the producer is unusable (recorded, the thread ends)
            self.ledger.error(f"fatal: {exc.args[0]}", exc.args[0].code())

    def _one_transaction(self) -> None:
        delivered: list[Ack] = []
        values: list[bytes] = []
        failed: list[str] = []

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                failed.append(str(err))
            else:
                delivered.append(Ack(msg.topic(), msg.partition(), msg.offset(), msg.key(), bytes(msg.value())))

        self._producer.begin_transaction()
        self.transactions += 1
        abort = self.abort_every > 0 and self.transactions % self.abort_every == 0
        for _ in range(self.per_transaction):
            value = f"{self.prefix}-{self.sent}".encode()
            self._producer.produce(self.topic, key=self.prefix.encode(), value=value,
                                   partition=self.sent % self.partitions, on_delivery=on_delivery)
            values.append(value)
            self.sent += 1
            self._producer.poll(0)
            time.sleep(self.interval_s)
        if not abort:
            try:
                self._commit()
                self._producer.poll(0)
                for error in failed:  # a committed transaction delivered every record, or this is wrong
                    self.ledger.error(f"delivery failed in a committed transaction: {error}")
                self.ledger.add(delivered)
                return
            except KafkaException as exc:
                error = exc.args[0]
                if not error.txn_requires_abort():
                    with self._lock:
                        self.uncertain.extend(values)
                    raise
                self.ledger.error(f"transaction aborted: {error}", error.code())
        self._abort()
        with self._lock:
            self.aborted.extend(values)

    def _commit(self) -> None:
        self._retrying(self._producer.commit_transaction)

    def _abort(self) -> None:
        # Every record is delivered (written, not yet visible) before the abort: librdkafka sends EndTxn as soon
        # as an AddPartitionsToTxn has been sent, not answered, so an abort right after the first records can
        # reach the coordinator before the partitions are registered and fail fatally with INVALID_TXN_STATE,
        # as it does against Kafka (librdkafka issue #4849). A delivery proves the registration.
        self._producer.flush(60)
        self._retrying(self._producer.abort_transaction)

    @staticmethod
    def _retrying(end_transaction: Callable[[float], None], timeout: float = 60.0) -> None:
        """Commit or abort, again after each retriable error until `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                end_transaction(max(1.0, deadline - time.monotonic()))
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or time.monotonic() >= deadline:
                    raise

    def wait_committed(self, count: int, timeout: float = 30.0) -> None:
        wait_for(lambda: self.ledger.count() >= count, timeout,
                 lambda: f"only {self.ledger.count()} of {count} transactional writes committed "
                         f"(errors: {self.ledger.errors[:3]})")

    def stop(self, timeout: float = 90.0) -> AckLedger:
        """Finish the current transaction and stop; the ledger of committed writes."""
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the transactional producer did not finish in {timeout}s"
        self._producer.flush(10)
        return self.ledger


class ConsumerRecorder:
    """A consumer group member on a thread, recording every (partition, offset, value) its consumer returns
    and every error it reports, for at most `max_seconds`: what an application reading during the faults
    was given (read_committed by default, so the dirty-read check applies)."""

    def __init__(self, bootstrap: str, topics: list[str], group: str, isolation: str = "read_committed",
                 max_seconds: float = 150.0, **config: Any) -> None:
        self.topics = topics
        self.max_seconds = max_seconds
        self._lock = threading.Lock()
        self.records: list[tuple[str, int, int, bytes]] = []
        self.errors: list[KafkaError] = []
        self._stop = threading.Event()
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": isolation,
                                   "auto.offset.reset": "earliest", "enable.auto.commit": True,
                                   "auto.commit.interval.ms": 500, "session.timeout.ms": 10_000,
                                   "broker.address.family": "v4", "error_cb": self._on_error, **config})
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_error(self, error: KafkaError) -> None:
        with self._lock:
            self.errors.append(error)

    def start(self) -> "ConsumerRecorder":
        self._consumer.subscribe(self.topics)
        self._thread.start()
        return self

    def _run(self) -> None:
        deadline = time.monotonic() + self.max_seconds
        try:
            while not self._stop.is_set() and time.monotonic() < deadline:
                msg = self._consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    self._on_error(msg.error())
                    continue
                with self._lock:
                    self.records.append((msg.topic(), msg.partition(), msg.offset(), bytes(msg.value())))
        finally:
            self._consumer.close()

    def consumed(self, topic: str | None = None) -> list[Record]:
        """(partition, offset, value) of what it returned (of one topic, or of its only one)."""
        topic = topic or self.topics[0]
        with self._lock:
            return [(p, o, v) for t, p, o, v in self.records if t == topic]

    def values(self, topic: str | None = None) -> set[bytes]:
        return {v for _, _, v in self.consumed(topic)}

    def non_retriable_errors(self) -> list[str]:
        """The errors an application would have to act on: not the transient ones a client rides out."""
        with self._lock:
            return [str(e) for e in self.errors
                    if e.fatal() or not (e.retriable() or e.code() in TRANSIENT_CONSUMER_ERRORS)]

    def wait_for(self, values: Iterable[bytes], timeout: float = 60.0, topic: str | None = None) -> None:
        """Until it has returned every one of `values` (AssertionError naming some missing at the deadline)."""
        wanted = set(values)
        wait_for(lambda: wanted <= self.values(topic), timeout,
                 lambda: f"the consumer group still misses {len(wanted - self.values(topic))} records, e.g. "
                         f"{sorted(wanted - self.values(topic))[:5]}")

    def stop(self, timeout: float = 30.0) -> "ConsumerRecorder":
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the consumer did not stop in {timeout}s"
        return self


def wait_for(condition: Any, timeout: float, message: Any) -> None:
    """Poll `condition()` until true; AssertionError with `message()` at the deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(message())
        time.sleep(0.05)


class _LineCollector(logging.Handler):
    """librdkafka's log lines (its `logger`), the last `limit` of them."""

    def __init__(self, limit: int) -> None:
        super().__init__(logging.DEBUG)
        self.lines: deque[str] = deque(maxlen=limit)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


# librdkafka's debug contexts kept by the final read: every Fetch it sends (offset, leader epoch), every response
# (high watermark, what it enqueued up to which offset), position validations (OffsetForLeaderEpoch answers,
# KIP-320), offset resets and leader changes
READ_DEBUG = "topic,fetch"
CLIENT_LOG_LINES = 20_000


class PartitionRead(dict):
    """What `read_partitions` returns: {partition: [(offset, value), ...]} as read, plus what is needed to tell,
    when a record is missing from the read, whether the reading consumer skipped it or the cluster lacks it:

    - `gaps`: per partition, (offset returned, next offset returned) wherever the next one is not offset + 1
      (normal for transaction markers and compacted logs, suspect otherwise);
    - `client_log`: the consumer's own debug log (READ_DEBUG), its last CLIENT_LOG_LINES lines;
    - `explain(lost)`: for each lost record, the gap it falls in, the client's log lines about that stretch of
      the partition, and what a fresh consumer placed at exactly that offset returns now."""

    def __init__(self, records: dict[int, list[tuple[int, bytes]]], bootstrap: str, topic: str,
                 config: dict[str, Any], client_log: list[str]) -> None:
        super().__init__(records)
        self.bootstrap = bootstrap
        self.topic = topic
        self.config = config
        self.client_log = client_log
        self.gaps: dict[int, list[tuple[int, int]]] = {}
        for p, recs in records.items():
            offsets = [o for o, _ in recs]
            self.gaps[p] = [(a, b) for a, b in zip(offsets, offsets[1:]) if b != a + 1]

    def gap_around(self, partition: int, offset: int) -> tuple[int, int] | None:
        for a, b in self.gaps.get(partition, ()):
            if a < offset < b:
                return a, b
        return None

    def explain(self, lost: list[Record], limit: int = 3) -> list[str]:
        notes = []
        for p, o, v in lost[:limit]:
            gap = self.gap_around(p, o)
            if gap is None:
                notes.append(f"partition {p} offset {o} ({v!r}): not in a gap of the read (read with another value, "
                             f"or past the end it read)")
            else:
                notes.append(f"partition {p} offset {o} ({v!r}): the reading consumer returned offset {gap[0]} and "
                             f"then {gap[1]}")
                notes += [f"    client: {line}" for line in self._log_about(p, gap)]
            notes.append(f"    re-read at offset {o}: {self.reread(p, o)}")
        return notes

    def _log_about(self, partition: int, gap: tuple[int, int], limit: int = 40) -> list[str]:
        """The client's log lines about this partition that name an offset in [gap start, gap end], or that
        tell of a validation, a reset, a seek or a leader change."""
        tag = f"[{partition}]"
        keywords = ("validat", "truncat", "reset", "seek", "leader", "epoch", "outdated", "drop")
        picked = []
        for line in self.client_log:
            if tag not in line:
                continue
            numbers = {int(n) for n in re.findall(r"\b\d+\b", line)}
            lowered = line.lower()
            if any(gap[0] <= n <= gap[1] for n in numbers) or any(k in lowered for k in keywords):
                picked.append(line)
        return picked[-limit:]

    def reread(self, partition: int, offset: int, timeout: float = 15.0) -> str:
        """What a fresh consumer assigned at exactly `offset` returns first."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "checker-reread",
                             "enable.auto.commit": False, "broker.address.family": "v4",
                             "auto.offset.reset": "error", **self.config})
        try:
            consumer.assign([TopicPartition(self.topic, partition, offset)])
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        return f"end of partition at {msg.offset()}"
                    continue
                return f"offset {msg.offset()} value {bytes(msg.value())!r} leader epoch {msg.leader_epoch()}"
            return f"nothing in {timeout:.0f} s"
        except KafkaException as exc:
            return f"error {exc}"
        finally:
            consumer.close()


def read_partitions(bootstrap: str, topic: str, partitions: int, ends: dict[int, int] | None = None,
                    timeout: float = 60.0, **config: Any) -> PartitionRead:
    """Every record of every partition, from the start up to the high watermark (or ``ends``), with what
    PartitionRead keeps to explain a record missing from it."""
    collector = _LineCollector(CLIENT_LOG_LINES)
    client_logger = logging.getLogger(f"{__name__}.read_partitions")
    client_logger.propagate = False  # kept for the report, not printed
    client_logger.setLevel(logging.DEBUG)
    client_logger.addHandler(collector)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker", "enable.auto.commit": False,
                         "broker.address.family": "v4", "enable.partition.eof": True, "debug": READ_DEBUG,
                         **config}, logger=client_logger)
    try:
        if ends is None:
            ends = {}
            for p in range(partitions):
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        done = {p for p in range(partitions) if ends[p] == 0}
        deadline = time.monotonic() + timeout
        while len(done) < partitions and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            p = msg.partition()
            if msg.error():
                # the end (a read_committed read ends after the last marker, which it never returns)
                if msg.error().code() == KafkaError._PARTITION_EOF and msg.offset() >= ends[p]:
                    done.add(p)
                continue  # retriable errors: keep going until the deadline
            out[p].append((msg.offset(), bytes(msg.value())))
            if msg.offset() + 1 >= ends[p]:
                done.add(p)
        assert len(done) == partitions, f"read partitions {sorted(done)} of {partitions} by the deadline: ends {ends}"
    finally:
        consumer.close()
        client_logger.removeHandler(collector)
    return PartitionRead(out, bootstrap, topic, config, list(collector.lines))
