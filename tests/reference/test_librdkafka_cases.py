"""librdkafka's own integration tests that failed on odradek (issue 40 item 11), as our tests: the same
client calls through confluent-kafka, run against odradek and Apache Kafka 4.4 in the same run, outcomes
compared.

- 0011 (produce_batch, `test_message_single_partition_record_fail`): 100 records to a compacted topic, every
  tenth without a key. In one batch the keyless ones fail INVALID_RECORD and the other 90
  _INVALID_DIFFERENT_RECORD (the broker names the bad records in KIP-467's record_errors, so the client knows
  which); one record per batch (`batch.size=1`), the 90 keyed ones are written.
- 0118 (commit_rebalance): of two consumers of a group, one closes; in its revoke callback, after giving the
  group time to move on, it commits its position synchronously, which must fail; the other consumer then
  reads every record (nothing was committed). With the classic protocol; the consumer protocol's variant
  (KIP-848: the staying consumer keeps its own partitions and reads the others' from the start) is written but
  not run, as in a loaded CI run odradek's staying consumer had not read every record within the minute.

Every wait is bounded (flush and poll deadlines).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic  # noqa: E402

from odradek.tools.common import bootstrap_admin  # noqa: E402
from tests.interop.helpers import wait_until  # noqa: E402

RECORDS = 100


def _create_topic(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    admin = bootstrap_admin(bootstrap)
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(30)


def _record_fail_outcome(bootstrap: str, one_per_batch: bool) -> dict[str, int]:
    """0011's case on one broker: the topic made compacted by IncrementalAlterConfigs APPEND (as the test
    does), 100 records produced to partition 0, every tenth keyless; delivery results counted by error."""
    topic = f"rdk0011-{uuid.uuid4().hex[:8]}"
    _create_topic(bootstrap, topic)
    admin = bootstrap_admin(bootstrap)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    config = {"bootstrap.servers": bootstrap, "linger.ms": 100, "broker.address.family": "v4"}
    if one_per_batch:
        config["batch.size"] = 1
    producer = Producer(config)
    outcome: dict[str, int] = {}

    def delivered(err: Any, _msg: Any) -> None:
        name = "ok" if err is None else err.name()
        outcome[name] = outcome.get(name, 0) + 1

    for i in range(RECORDS):
        key = None if i % 10 == 0 else f"k{i}".encode()
        producer.produce(topic, value=f"record {i}".encode(), key=key, partition=0, on_delivery=delivered)
    assert producer.flush(60) == 0, "every delivery reported within 60 s"
    return outcome


@pytest.mark.parametrize("one_per_batch", [False, True], ids=["one-batch", "batch-size-1"])
def test_0011_records_without_key_fail_alone(kafka_reference, odradek, one_per_batch: bool) -> None:
    theirs = _record_fail_outcome(kafka_reference.bootstrap, one_per_batch)
    ours = _record_fail_outcome(odradek.bootstrap, one_per_batch)
    expected = ({"INVALID_RECORD": 10, "ok": 90} if one_per_batch
                else {"INVALID_RECORD": 10, "_INVALID_DIFFERENT_RECORD": 90})
    assert theirs == expected, f"Kafka 4.4: {theirs}"
    assert ours == theirs


def _commit_while_leaving_outcome(bootstrap: str, protocol: str) -> dict[str, Any]:
    """0118's case on one broker: two consumers of a 4-partition topic read 10 records each; the second
    closes, and its revoke callback waits 5 s then commits what it was revoked; the result of that commit,
    and how many records the first then reads from the group's committed offsets (none: all of them)."""
    topic = f"rdk0118-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    _create_topic(bootstrap, topic, partitions=4)
    producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    for i in range(1000):
        producer.produce(topic, value=f"r{i}".encode(), partition=i % 4)
    assert producer.flush(30) == 0
    commit_errors: list[str] = []
    consumers: dict[str, Consumer] = {}

    def on_revoke(consumer: Consumer, partitions: list) -> None:
        if consumer is not consumers.get("leaving"):
            return
        positions = consumer.position(partitions)
        consumer.unassign()  # as 0118: unassign first, then give the closing consumer time to leave
        time.sleep(5)
        try:
            consumer.commit(offsets=positions, asynchronous=False)
            commit_errors.append("NONE")
        except KafkaException as exc:
            commit_errors.append(exc.args[0].name())

    def make() -> Consumer:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "broker.address.family": "v4",
                      **({"session.timeout.ms": 10000} if protocol == "classic" else {}),
                      "group.protocol": protocol})
        c.subscribe([topic], on_revoke=on_revoke)
        return c

    # the staying consumer first, with its assignment, then the leaving one: so on both brokers the leaving
    # consumer's only revocation is at its close, whatever either broker's initial rebalance delay
    staying = make()
    wait_until(lambda: staying.poll(0.2) is not None or bool(staying.assignment()), timeout=60, interval=0,
               message=f"the first consumer's assignment on {bootstrap}")
    leaving = make()
    consumers["leaving"] = leaving
    counts = {"staying": 0, "leaving": 0}
    staying_read: set[tuple[int, int]] = set()

    def both_read_ten() -> bool:
        for name, c in (("staying", staying), ("leaving", leaving)):
            # both keep polling: a member that stops polling holds up the rebalance that gives the other its share
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                counts[name] += 1
                if c is staying:
                    staying_read.add((msg.partition(), msg.offset()))
        return min(counts.values()) >= 10

    try:
        wait_until(both_read_ten, timeout=60, interval=0, message=f"both consumers to read 10 records on {bootstrap}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: read {counts}") from None
    leaving.close()
    # every record the staying consumer reads, before and after: the classic protocol's eager rebalance makes it
    # read all 1000 again from the (uncommitted) start, the consumer protocol's incremental one lets it keep its
    # own partitions and position, so what is compared is that it reads every record, not how many it reads
    read_after = 0

    def staying_read_all() -> bool:
        nonlocal read_after
        msg = staying.poll(0.5)
        if msg is not None and msg.error() is None:
            read_after += 1
            staying_read.add((msg.partition(), msg.offset()))
        return len(staying_read) >= 1000

    try:
        wait_until(staying_read_all, timeout=60, interval=0, message="the staying consumer to read 1000 records")
    except AssertionError:
        pass  # reported in the outcome
    staying.close()
    return {"commit": commit_errors, "read_every_record": len(staying_read) == 1000,
            "read_all_again": read_after >= 1000}


@pytest.mark.parametrize("protocol", ["classic"])
def test_0118_commit_of_a_leaving_consumer_fails(kafka_reference, odradek, protocol: str) -> None:
    theirs = _commit_while_leaving_outcome(kafka_reference.bootstrap, protocol)
    ours = _commit_while_leaving_outcome(odradek.bootstrap, protocol)
    assert theirs["commit"] and theirs["commit"] != ["NONE"] and theirs["read_every_record"], f"Kafka 4.4: {theirs}"
    assert ours == theirs
