"""The registry's durable state: the compacted topic `_schemas`, through confluent-kafka.

On start the store creates the topic if it is missing (one partition, so the log has one order;
cleanup.policy=compact), then reads it from the beginning up to its end offset before the registry serves.
A background thread keeps tailing it, so several registry instances on one topic converge on the same
state. A write produces records, then waits until the tailing thread has applied the last of them, so an
answer reflects the write (read-your-writes).

Ids are the log's max id + 1, checked against the state under one lock: that is safe with a single writing
instance. Two instances writing at once could hand out the same id; Confluent avoids that by electing a
primary that takes every write, which is not done here (docs/schema-registry.md).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Callable, TypeVar

from odradek.registry import errors
from odradek.registry.state import Record, State

TOPIC = "_schemas"
TIMEOUT_S = 30.0
log = logging.getLogger(__name__)
T = TypeVar("T")


class Store:
    def __init__(self, bootstrap: str, client_config: dict[str, str] | None = None, topic: str = TOPIC) -> None:
        self.topic = topic
        self.client_config = {"bootstrap.servers": bootstrap, **(client_config or {})}
        self.state = State()
        # guards `state` and `applied`; writers wait on it until their record is applied
        self.cond = threading.Condition()
        # held from a write's checks until its records are applied, so checks see every earlier write
        self.write_lock = threading.Lock()
        self.applied = -1  # offset of the last record applied
        self.error: str | None = None
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.producer: Any = None

    # -- start and stop -----------------------------------------------------------------------------------

    def start(self, timeout: float = TIMEOUT_S) -> None:
        """Create the topic if needed, read it to its end, start tailing it. Raises RuntimeError on failure."""
        from confluent_kafka import Consumer, Producer, TopicPartition

        self._ensure_topic(timeout)
        consumer = Consumer({**self.client_config, "group.id": "odradek-registry", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "enable.partition.eof": False,
                             "isolation.level": "read_committed"})
        tp = TopicPartition(self.topic, 0, 0)
        _low, high = consumer.get_watermark_offsets(tp, timeout=timeout)
        # assign() with no commits: the registry joins no group, every start reads the whole log
        consumer.assign([tp])
        self.producer = Producer({**self.client_config, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 0})
        self.thread = threading.Thread(target=self._tail, args=(consumer,), name="registry-tail", daemon=True)
        self.thread.start()
        self.wait_applied(high - 1, timeout)
        log.info("read %d records of %s", high, self.topic)

    def _ensure_topic(self, timeout: float) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(self.client_config)
        metadata = admin.list_topics(timeout=timeout)
        if self.topic in metadata.topics and metadata.topics[self.topic].error is None:
            return
        # three copies where the cluster has three brokers, fewer on a smaller one
        replicas = max(1, min(3, len(metadata.brokers)))
        futures = admin.create_topics([NewTopic(self.topic, num_partitions=1, replication_factor=replicas,
                                                config={"cleanup.policy": "compact"})],
                                      operation_timeout=timeout, request_timeout=timeout)
        try:
            futures[self.topic].result(timeout)
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":  # another instance created it first
                raise RuntimeError(f"cannot create topic {self.topic}: {exc}") from None

    def close(self) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(10)
        if self.producer is not None:
            self.producer.flush(5)

    # -- the log ------------------------------------------------------------------------------------------

    def _tail(self, consumer: Any) -> None:
        try:
            while not self.stopping.is_set():
                msg = consumer.poll(0.2)
                if msg is None:
                    # caught up: count offsets that hold nothing to apply (compacted away, control
                    # records) as applied, so a wait for the end offset does not hang on them
                    position = consumer.position(consumer.assignment())[0].offset
                    if position > self.applied + 1:
                        with self.cond:
                            self.applied = position - 1
                            self.cond.notify_all()
                    continue
                if msg.error():
                    if msg.error().fatal():
                        raise RuntimeError(str(msg.error()))
                    log.warning("reading %s: %s", self.topic, msg.error())
                    continue
                with self.cond:
                    try:
                        key = json.loads(msg.key())
                        value = None if msg.value() is None else json.loads(msg.value())
                        if isinstance(key, dict):
                            self.state.apply(key, value)
                    except (TypeError, ValueError, KeyError) as exc:  # someone else's record: skip it
                        log.warning("skipping record %d of %s: %s", msg.offset(), self.topic, exc)
                    self.applied = msg.offset()
                    self.cond.notify_all()
        except Exception as exc:  # noqa: BLE001 - reported to every waiting and later request
            log.exception("tailing %s failed", self.topic)
            with self.cond:
                self.error = str(exc)
                self.cond.notify_all()
        finally:
            consumer.close()

    def wait_applied(self, offset: int, timeout: float = TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.applied < offset:
                if self.error is not None:
                    raise errors.store_error(f"reading {self.topic} failed: {self.error}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise errors.store_timeout(f"timed out reading {self.topic} up to offset {offset}")
                self.cond.wait(left)

    # -- reading and writing --------------------------------------------------------------------------------

    def read(self, fn: Callable[[State], T]) -> T:
        with self.cond:
            if self.error is not None:
                raise errors.store_error(f"reading {self.topic} failed: {self.error}")
            return fn(self.state)

    def write(self, plan: Callable[[State], tuple[list[Record], T]]) -> T:
        """Check a change against the state (`plan` raises RegistryError or returns records and the answer),
        write its records, and return the answer once they are applied."""
        with self.write_lock:
            records, answer = self.read(plan)
            if records:
                self.wait_applied(self._produce(records))
            return answer

    def _produce(self, records: list[Record]) -> int:
        """Produce `records` in order; the offset of the last one."""
        offsets: list[int] = []
        failures: list[str] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                failures.append(str(err))
            else:
                offsets.append(msg.offset())

        for key, value in records:
            self.producer.produce(self.topic, key=_encode(key), value=None if value is None else _encode(value),
                                  partition=0, on_delivery=delivered)
        left = self.producer.flush(TIMEOUT_S)
        if failures:
            raise errors.store_error(f"writing to {self.topic} failed: {failures[0]}")
        if left or len(offsets) != len(records):
            raise errors.store_timeout(f"timed out writing to {self.topic}")
        return max(offsets)


def _encode(obj: dict) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
