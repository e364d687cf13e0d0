"""Helpers for the Spark suite: topic setup and verification with plain confluent-kafka clients."""

from __future__ import annotations

import time
from typing import Any

from interop.helpers import assert_delivered, consumer_config, produce_messages, wait_until

__all__ = ["create_topic", "produce", "read_all", "end_offsets", "wait_until", "stream_run"]


def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(30)
    wait_until(lambda: topic in admin.list_topics(timeout=10).topics, timeout=10, message=f"topic {topic}")


def produce(bootstrap: str, topic: str, messages: list[dict[str, Any]]) -> list[Any]:
    return assert_delivered(produce_messages(bootstrap, topic, messages))


def end_offsets(bootstrap: str, topic: str, partitions: int, isolation: str = "read_uncommitted") -> list[tuple[int, int]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(consumer_config(bootstrap, **{"isolation.level": isolation}))
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False) for p in range(partitions)]
    finally:
        c.close()


def read_all(bootstrap: str, topic: str, partitions: int = 1, isolation: str = "read_uncommitted",
             timeout: float = 30.0) -> list[Any]:
    """Every record of every partition up to the current end (read_committed: up to the LSO)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer(consumer_config(bootstrap, **{"isolation.level": isolation, "enable.partition.eof": True}))
    try:
        marks = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False) for p in range(partitions)]
        todo = {p for p in range(partitions) if marks[p][1] > marks[p][0]}
        c.assign([TopicPartition(topic, p, marks[p][0]) for p in todo])
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while todo:
            assert time.monotonic() < deadline, f"read_all timed out; partitions left {todo}"
            for m in c.consume(1000, 0.5):
                err = m.error()
                if err is None:
                    out.append(m)
                elif err.code() == KafkaError._PARTITION_EOF:
                    if m.offset() >= marks[m.partition()][1]:
                        todo.discard(m.partition())
                else:
                    raise AssertionError(str(err))
        return out
    finally:
        c.close()


def stream_run(query: Any, timeout: float = 120.0) -> None:
    """Wait for an availableNow query to finish; re-raise its failure."""
    finished = query.awaitTermination(timeout)
    if not finished:
        query.stop()
        raise AssertionError(f"streaming query did not finish within {timeout}s")
    exc = query.exception()
    if exc is not None:
        raise exc
