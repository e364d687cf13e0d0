"""Log compaction through a real broker and confluent-kafka: latest value per key, gaps read across,
tombstones, keyless records refused, transactions, kill -9 while the cleaner works, a consumer reading
during a cleaning. Every broker here cleans at once (backoff 100 ms, any dirty ratio) on tiny segments."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from .helpers import bounded, consumer_config, producer_config, wait_until  # noqa: E402

FAST_CLEANER = {"log.cleaner.backoff.ms": "100"}
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"}


def create_topic(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(timeout=15)


def produce(bootstrap: str, topic: str, items: list[tuple[bytes | None, bytes | None]], **extra) -> list:
    """Produce with acks=all; returns the delivery errors (None for a success), in order."""
    # small batches, so the tiny segments roll between them
    p = Producer(producer_config(bootstrap, **{"acks": "all", "batch.num.messages": 10, **extra}))
    errors: list = [0] * len(items)
    for i, (key, value) in enumerate(items):
        def report(err, _msg, i=i) -> None:
            errors[i] = err
        p.produce(topic, key=key, value=value, on_delivery=report)
        p.poll(0)
    assert p.flush(30) == 0
    return errors


def read_all(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> list[tuple[int, bytes, bytes]]:
    """(offset, key, value) of every record from the start up to the high watermark at the call."""
    c = Consumer(consumer_config(bootstrap, **{"isolation.level": isolation}))
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[int, bytes, bytes]] = []
        position = 0
        for _ in bounded(2000, 30):
            if position >= high:
                break
            m = c.poll(0.5)
            if m is None:
                # read_committed stops at the LSO and markers are not delivered: the position tells
                pos = c.position([TopicPartition(topic, 0)])[0].offset
                position = max(position, pos)
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                continue
            out.append((m.offset(), m.key(), m.value()))
            position = m.offset() + 1
        else:
            raise AssertionError(f"did not reach offset {high} of {topic}")
        return out
    finally:
        c.close()


def latest(records: list[tuple[int, bytes, bytes]]) -> dict[bytes, bytes]:
    return {k: v for _, k, v in records}


def cleaned_up_to(data_dir: Path, topic: str) -> int:
    """The first dirty offset of the partition's cleaner checkpoint (0: never cleaned)."""
    try:
        return int((data_dir / f"{topic}-0" / "cleaner-offset-checkpoint").read_text().split("\n")[1])
    except (OSError, IndexError, ValueError):
        return 0


def rounds(n_rounds: int, keys: int, tag: str = "v") -> list[tuple[bytes, bytes]]:
    return [(b"key-%03d" % k, b"%s-%d-%03d-" % (tag.encode(), r, k) + b"x" * 60)
            for r in range(n_rounds) for k in range(keys)]


@pytest.mark.timeout(120)
def test_latest_value_per_key_survives_and_consumers_read_across_gaps(broker_factory, topic_name):
    broker = broker_factory(FAST_CLEANER)
    create_topic(broker.bootstrap, topic_name, COMPACTED)
    items = rounds(8, 20)
    assert produce(broker.bootstrap, topic_name, items) == [None] * len(items)
    expected = dict(items)
    wait_until(lambda: cleaned_up_to(broker.data_dir, topic_name) > 100, timeout=30, message="a cleaning")
    records = read_all(broker.bootstrap, topic_name)
    assert latest(records) == expected
    assert len(records) < len(items)
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets)) and offsets[-1] == len(items) - 1  # gaps, never renumbered
    first_dirty = cleaned_up_to(broker.data_dir, topic_name)
    clean_keys = [k for o, k, _ in records if o < first_dirty]
    assert len(clean_keys) == len(set(clean_keys))
    # a consumer starting inside a gap is served the next record
    gap = next(o for o in range(len(items)) if o not in set(offsets))
    c = Consumer(consumer_config(broker.bootstrap))
    try:
        c.assign([TopicPartition(topic_name, 0, gap)])
        m = wait_until(lambda: c.poll(0.5), timeout=15, message="a record after the gap")
        assert m.error() is None and m.offset() > gap
    finally:
        c.close()
    # ListOffsets: earliest is still 0 and latest the log end
    c = Consumer(consumer_config(broker.bootstrap))
    try:
        assert c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10, cached=False) == (0, len(items))
    finally:
        c.close()
    broker.restart()  # and the compacted log reads the same after a restart
    after = read_all(broker.bootstrap, topic_name)
    assert latest(after) == expected and set(after) <= set(records)


@pytest.mark.timeout(90)
def test_keyless_records_refused_on_compacted_topics(broker_factory, topic_name):
    broker = broker_factory(FAST_CLEANER)
    create_topic(broker.bootstrap, topic_name, {"cleanup.policy": "compact,delete"})
    fast_fail = {"message.timeout.ms": 5000, "retries": 0}
    errors = produce(broker.bootstrap, topic_name, [(None, b"no key")], **fast_fail)
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD
    assert produce(broker.bootstrap, topic_name, [(b"k", b"keyed")]) == [None]
    assert [(k, v) for _, k, v in read_all(broker.bootstrap, topic_name)] == [(b"k", b"keyed")]  # nothing else

    other = topic_name + "-switched"
    create_topic(broker.bootstrap, other, {"cleanup.policy": "delete"})
    assert produce(broker.bootstrap, other, [(None, b"fine while delete")]) == [None]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"})
    resource = ConfigResource(ResourceType.TOPIC, other, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)
    errors = produce(broker.bootstrap, other, [(None, b"refused now")], **fast_fail)
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD


@pytest.mark.timeout(120)
def test_tombstones_disappear_after_delete_retention(broker_factory, topic_name):
    broker = broker_factory(FAST_CLEANER)
    create_topic(broker.bootstrap, topic_name, {**COMPACTED, "delete.retention.ms": "8000"})
    items = rounds(3, 10) + [(b"key-003", None)]
    tombstone_offset = len(items) - 1
    assert produce(broker.bootstrap, topic_name, items) == [None] * len(items)
    filled = [0]

    def filler() -> None:
        # records of other keys roll the active segment, so the tombstone's segment becomes cleanable
        batch = [(b"filler-%d" % (filled[0] + i), b"f" * 80) for i in range(30)]
        filled[0] += 30
        assert produce(broker.bootstrap, topic_name, batch) == [None] * 30

    def cleaned_past_tombstone() -> bool:
        if cleaned_up_to(broker.data_dir, topic_name) > tombstone_offset:
            return True
        filler()
        return False

    wait_until(cleaned_past_tombstone, timeout=30, interval=0.2, message="the tombstone's segment cleaned")
    # within delete.retention.ms of that cleaning the tombstone is still there (and key-003's values gone)
    first = read_all(broker.bootstrap, topic_name)
    assert [(k, v) for _, k, v in first if k == b"key-003"] == [(b"key-003", None)]

    def tombstone_gone():
        filler()
        records = read_all(broker.bootstrap, topic_name)
        return records if not any(k == b"key-003" for _, k, _ in records) else None

    gone = wait_until(tombstone_gone, timeout=45, interval=0.5, message="the tombstone removed")
    assert latest(gone)[b"key-004"] == dict(items)[b"key-004"]


@pytest.mark.timeout(150)
def test_transactions_through_compaction(broker_factory, topic_name):
    broker = broker_factory(FAST_CLEANER)
    create_topic(broker.bootstrap, topic_name, COMPACTED)
    p = Producer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4",
                  "transactional.id": topic_name, "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    for k in range(10):
        p.produce(topic_name, key=b"t-%d" % k, value=b"aborted" + b"x" * 60)
    p.flush(30)
    p.abort_transaction(30)
    for r in range(12):  # committed values, then more batches of the producer (its last 5 are kept whole)
        p.begin_transaction()
        for k in range(10):
            p.produce(topic_name, key=b"t-%d" % k, value=b"committed-%d" % r + b"y" * 60)
        p.commit_transaction(30)
    wait_until(lambda: cleaned_up_to(broker.data_dir, topic_name) > 60, timeout=40, message="a cleaning")
    committed = read_all(broker.bootstrap, topic_name, "read_committed")
    assert latest(committed) == {b"t-%d" % k: b"committed-11" + b"y" * 60 for k in range(10)}
    assert not any(v.startswith(b"aborted") for _, _, v in committed)
    uncommitted = read_all(broker.bootstrap, topic_name, "read_uncommitted")
    assert not any(v.startswith(b"aborted") for _, _, v in uncommitted)  # removed by the cleaner
    assert len(uncommitted) < 130
    p.flush(10)


@pytest.mark.timeout(150)
@pytest.mark.parametrize("kill_when", ["while-map-built", "while-cleaned-written", "after-a-swap"])
def test_kill_9_during_cleaning_loses_nothing(broker_factory, topic_name, kill_when):
    # a throttled cleaner: reading ~30 KiB for the map, then reading and writing them again, takes seconds
    # at 5 KB/s, so the kill lands while the .cleaned file is being written
    slow = {**FAST_CLEANER, "log.cleaner.io.max.bytes.per.second": "20000" if kill_when == "after-a-swap"
            else "5000", "log.flush.interval.messages": "1"}
    broker = broker_factory(slow)
    create_topic(broker.bootstrap, topic_name, COMPACTED)
    items = rounds(6, 40)
    assert produce(broker.bootstrap, topic_name, items) == [None] * len(items)
    expected = dict(items)
    pdir = broker.data_dir / f"{topic_name}-0"
    if kill_when == "while-map-built":  # the cleaning started (the broker logs it), no .cleaned file yet
        wait_until(lambda: "cleaning offsets" in broker.log_tail(20000), timeout=30, interval=0.01,
                   message="a cleaning started")
        assert not any(p.name.endswith(".cleaned") for p in pdir.iterdir())
    elif kill_when == "while-cleaned-written":
        wait_until(lambda: any(p.name.endswith(".cleaned") for p in pdir.iterdir()), timeout=30,
                   interval=0.01, message="a .cleaned file")
    else:
        wait_until(lambda: cleaned_up_to(broker.data_dir, topic_name) > 0, timeout=60, interval=0.01,
                   message="a cleaning swapped in")
        # and more writes, so the next cleaning starts and is cut short too
        more = rounds(2, 40, "late")
        assert produce(broker.bootstrap, topic_name, more) == [None] * len(more)
        expected.update(more)
    broker.kill()
    broker.settings["log.cleaner.io.max.bytes.per.second"] = "100000000"
    broker.start()
    records = wait_until(lambda: read_all(broker.bootstrap, topic_name), timeout=30, message="the log")
    assert latest(records) == expected
    assert not [p for p in pdir.iterdir() if p.name.endswith((".cleaned", ".swap", ".swap-end"))]
    # and the cleaner goes on after the restart
    wait_until(lambda: cleaned_up_to(broker.data_dir, topic_name) > 200, timeout=30, message="cleaning resumed")
    assert latest(read_all(broker.bootstrap, topic_name)) == expected


@pytest.mark.timeout(120)
def test_consumer_reads_while_the_cleaner_runs(broker_factory, topic_name):
    broker = broker_factory({**FAST_CLEANER, "log.cleaner.io.max.bytes.per.second": "20000"})
    create_topic(broker.bootstrap, topic_name, COMPACTED)
    items = rounds(6, 30)
    assert produce(broker.bootstrap, topic_name, items) == [None] * len(items)
    expected = dict(items)
    reads = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # bounded: the deadline, or two full reads after the first cleaning
        records = read_all(broker.bootstrap, topic_name)
        assert latest(records) == expected  # every read, whatever the cleaner has swapped in meanwhile
        offsets = [o for o, _, _ in records]
        assert offsets == sorted(set(offsets))
        reads += 1
        if cleaned_up_to(broker.data_dir, topic_name) > 0 and reads >= 3:
            break
    assert cleaned_up_to(broker.data_dir, topic_name) > 0
