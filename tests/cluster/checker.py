"""What the fault tests check after breaking brokers: a ledger of acknowledged writes, and what a read of the
partitions afterwards must hold.

Producers record every acknowledged write (partition, offset, value) in an `AckLedger`; afterwards every
partition is read from its start (`read_partitions`), and `check_history` reports:

- lost: acknowledged records missing from the read (at their acknowledged offset, or at all);
- duplicated: a value read more than once (with idempotent producers a retry must never be written twice);
- reordered: per partition, values whose sequence number goes down (a producer sends each partition's
  values in increasing order).

Values are ``<prefix>-<n>``; n increases per producer and partition. Everything is bounded in time.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition


@dataclass
class History:
    lost: list[tuple[int, int, bytes]] = field(default_factory=list)
    duplicated: list[bytes] = field(default_factory=list)
    reordered: list[tuple[int, bytes, bytes]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered)

    def __str__(self) -> str:
        return (f"lost {len(self.lost)} {self.lost[:5]}, duplicated {len(self.duplicated)} {self.duplicated[:5]}, "
                f"reordered {len(self.reordered)} {self.reordered[:5]}")


class AckLedger:
    """Thread-safe record of acknowledged (partition, offset, value) and of delivery errors, with the
    time of each acknowledgement (for unavailability windows)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.acked: list[tuple[int, int, bytes]] = []
        self.ack_times: list[tuple[float, int]] = []
        self.errors: list[str] = []

    def delivery(self, err: Any, msg: Any) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked.append((msg.partition(), msg.offset(), bytes(msg.value())))
                self.ack_times.append((time.monotonic(), msg.partition()))

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def longest_gap_after(self, since: float) -> float:
        """The longest time without any acknowledgement from ``since`` on (monotonic seconds)."""
        with self._lock:
            times = [t for t, _ in self.ack_times if t >= since]
        points = [since] + sorted(times)
        return max((b - a for a, b in zip(points, points[1:])), default=0.0)


def sequence(value: bytes) -> int:
    return int(value.rsplit(b"-", 1)[1])


def check_history(acked: list[tuple[int, int, bytes]], read: dict[int, list[tuple[int, bytes]]]) -> History:
    history = History()
    position = {(p, o): v for p, records in read.items() for o, v in records}
    seen: dict[bytes, int] = {}
    for records in read.values():
        for _, value in records:
            seen[value] = seen.get(value, 0) + 1
    history.duplicated = sorted(v for v, n in seen.items() if n > 1)
    for p, o, v in acked:
        if position.get((p, o)) != v:
            history.lost.append((p, o, v))
    for p, records in read.items():
        last: dict[bytes, tuple[int, bytes]] = {}
        for _, value in records:
            prefix = value.rsplit(b"-", 1)[0]
            previous = last.get(prefix)
            if previous is not None and sequence(value) < previous[0]:
                history.reordered.append((p, previous[1], value))
            last[prefix] = (sequence(value), value)
    return history


class LoadProducer:
    """An idempotent acks=all confluent-kafka producer writing ``<prefix>-<n>`` values round-robin over the
    partitions from a thread, every ``interval_s``, until stopped or ``max_records`` sent."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, prefix: str = "v", interval_s: float = 0.005,
                 max_records: int = 20_000, **config: Any) -> None:
        self.topic = topic
        self.partitions = partitions
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
            partition = self.sent % self.partitions
            self._producer.produce(self.topic, value=f"{self.prefix}-{self.sent}".encode(), partition=partition,
                                   on_delivery=self.ledger.delivery)
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


def read_partitions(bootstrap: str, topic: str, partitions: int, ends: dict[int, int] | None = None,
                    timeout: float = 60.0, **config: Any) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of every partition, from the start up to the high watermark (or ``ends``)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker", "enable.auto.commit": False,
                         "broker.address.family": "v4", "enable.partition.eof": True, **config})
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
        return out
    finally:
        consumer.close()
