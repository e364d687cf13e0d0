"""Log compaction in a three-broker cluster: every replica cleans its own copy of a compacted partition, and a
leader killed with kill -9 leaves a new leader whose compacted log still holds every key's latest
acknowledged value and none of the deleted keys; a replica that was away while the leader cleaned copies the
compacted log (gaps, rewritten batches) and serves it alone.

The brokers scan for cleanable logs every 100 ms (log.cleaner.backoff.ms; the maintenance tick runs every
second); the topic rolls 4 KiB segments and cleans at any dirty ratio, so a few hundred records make a dozen
segments to clean. What each replica holds is read from its own segment files, since consumers only read
from leaders.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402

from odradek.records.batch import iter_batches  # noqa: E402
from odradek.records.codec import decode_batch  # noqa: E402
from tests.cluster.common import REPLICATED, create_topic  # noqa: E402
from tests.interop.helpers import bounded, consumer_config, producer_config, wait_until  # noqa: E402

COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01",
             "delete.retention.ms": "4000", "min.insync.replicas": "2"}
KEYS = 40
ROUNDS = 8
DELETED = [b"key-%03d" % k for k in (3, 17, 31)]

Record = tuple[int, bytes, "bytes | None"]  # (offset, key, value)


def produce(bootstrap: str, topic: str, items: list[tuple[bytes, bytes | None]]) -> list[Record]:
    """Produce with acks=all, small batches (the 4 KiB segments roll between them); every record must be
    acknowledged. Returns (offset, key, value) of each, as its delivery report gave it."""
    p = Producer(producer_config(bootstrap, **{"acks": "all", "batch.num.messages": 10}))
    acked: list[Record] = []
    errors: list = []

    def report(err, msg) -> None:
        if err is None:
            acked.append((msg.offset(), msg.key(), msg.value()))
        else:
            errors.append(err)

    for key, value in items:
        p.produce(topic, key=key, value=value, partition=0, on_delivery=report)
        p.poll(0)
    assert p.flush(30) == 0
    assert not errors and len(acked) == len(items), errors[:5]
    return acked


def latest(records: list[Record]) -> dict[bytes, bytes | None]:
    """Each key's value at its highest offset (None: deleted)."""
    return {k: v for _, k, v in sorted(records)}


def first_dirty(data_dir: Path, topic: str) -> int:
    """The first dirty offset of the replica's cleaner checkpoint; 0 while its cleaner never cleaned it."""
    try:
        return int((data_dir / f"{topic}-0" / "cleaner-offset-checkpoint").read_text().split("\n")[1])
    except (OSError, IndexError, ValueError):
        return 0


def replica_records(data_dir: Path, topic: str) -> list[Record]:
    """(offset, key, value) of every record in the replica's segment files, in file order. A swap of the
    cleaner meanwhile can remove a file under the read: the caller asks again (wait_until)."""
    out: list[Record] = []
    for path in sorted((data_dir / f"{topic}-0").glob("*.log")):
        data = path.read_bytes()
        for pos, header in iter_batches(data):  # a batch being appended is left out
            if not header.is_control:
                out += [(r.offset, r.key, r.value) for r in decode_batch(data, pos)[1]]
    return out


def check_compacted(records: list[Record], expected: dict[bytes, bytes | None], cleaned_below: int,
                    acked_up_to: int) -> list[str]:
    """What is wrong with a compacted copy of the partition (empty: nothing). `expected` is each key's latest
    acknowledged value (None: deleted); below `cleaned_below` every key may appear once only; every record up
    to offset `acked_up_to` must be there."""
    problems = []
    offsets = [o for o, _, _ in records]
    if offsets != sorted(set(offsets)):
        problems.append("offsets do not only grow")
    seen = latest([r for r in records if r[0] <= acked_up_to])
    for key, value in expected.items():
        if value is None and key in seen:
            problems.append(f"deleted key {key!r} still there ({seen[key]!r})")
        elif value is not None and seen.get(key) != value:
            problems.append(f"{key!r}: latest value {seen.get(key)!r}, acknowledged {value!r}")
    clean_keys = [k for o, k, _ in records if o < cleaned_below]
    if len(clean_keys) != len(set(clean_keys)):
        problems.append(f"below the first dirty offset {cleaned_below} a key appears twice")
    return problems


def read_all(bootstrap: str, topic: str, high: int) -> list[Record]:
    """Every record from offset 0 up to `high` (the caller waited for the high watermark to get there)."""
    c = Consumer(consumer_config(bootstrap))
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[Record] = []
        for _ in bounded(5000, 30):
            if out and out[-1][0] >= high - 1:
                return out
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                continue
            out.append((m.offset(), m.key(), m.value()))
        raise AssertionError(f"{topic}: read {len(out)} records, not up to offset {high}")
    finally:
        c.close()


def high_watermark(bootstrap: str, topic: str) -> int:
    c = Consumer(consumer_config(bootstrap))
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5, cached=False)[1]
    finally:
        c.close()


@pytest.mark.timeout(150)
def test_every_replica_compacts_and_a_new_leader_serves_latest_values(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings={**REPLICATED, "log.cleaner.backoff.ms": "100"}).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name, partitions=1, replication=3, **COMPACTED)

    # rounds of values for KEYS keys, then tombstones for some, then other keys (unique, so compaction keeps
    # them) that roll the tombstones' segment out of the active one, which is never cleaned
    items = [(b"key-%03d" % k, b"r%d-key-%03d-" % (r, k) + b"x" * 80) for r in range(ROUNDS) for k in range(KEYS)]
    acked = produce(cluster.bootstrap, topic_name, items)
    tombstones = produce(cluster.bootstrap, topic_name, [(key, None) for key in DELETED])
    acked += tombstones
    tail_start = max(o for o, _, _ in acked) + 1
    acked += produce(cluster.bootstrap, topic_name, [(b"tail-%03d" % i, b"t" * 100) for i in range(60)])
    expected = latest(acked)
    end = max(o for o, _, _ in acked) + 1
    assert end == len(acked) and sorted(o for o, _, _ in acked) == list(range(end))

    # every replica cleans its own copy: its cleaner checkpoint moves past the tombstones, which stay for
    # delete.retention.ms after that cleaning (seen on every replica: the window is over 3 s, polled every
    # 0.2 s); then its files hold neither the deleted keys nor two records of a key in the cleaned range
    state = cluster.partition_state(topic_name, 0)
    assert sorted(state.replicas) == [1, 2, 3] and len(state.isr) == 3
    leader = state.leader
    replica_dirs = {b: cluster.broker(b).data_dir for b in cluster.ids}
    cleaned_below: dict[int, int] = {}
    tombstones_kept: set[int] = set()  # replicas seen with their tombstones cleaned once and still there
    last_tombstone = max(o for o, _, _ in tombstones)

    def replica_compacted(b: int) -> bool:
        below = first_dirty(replica_dirs[b], topic_name)
        records = replica_records(replica_dirs[b], topic_name)
        if below > last_tombstone and {(o, k, v) for o, k, v in records if k in DELETED} == set(tombstones):
            tombstones_kept.add(b)
        if below < tail_start:
            return False
        if check_compacted(records, expected, below, end - 1):
            return False
        cleaned_below[b] = below
        return True

    try:
        wait_until(lambda: all([replica_compacted(b) for b in cluster.ids]), timeout=45, interval=0.2,
                   message="every replica compacted, its tombstones removed")
    except AssertionError:
        detail = {b: (first_dirty(replica_dirs[b], topic_name),
                      check_compacted(replica_records(replica_dirs[b], topic_name), expected,
                                      first_dirty(replica_dirs[b], topic_name), end - 1)[:3])
                  for b in cluster.ids}
        raise AssertionError(f"replicas not compacted (first dirty offset, problems): {detail}\n"
                             f"{cluster.logs(3000)}") from None
    assert tombstones_kept == set(cluster.ids), f"only {tombstones_kept} seen with their tombstones cleaned and kept"
    for b in cluster.ids:
        # the cleaner of each broker did it (followers do not receive cleaned batches: they had every
        # record before any cleaning), and it logged its work
        assert f"{topic_name}-0: cleaned [" in cluster.broker(b).log_tail(200_000), f"broker {b} never cleaned"
        assert len(replica_records(replica_dirs[b], topic_name)) < len(acked) // 2

    cluster.kill(leader)
    survivors = ",".join(cluster.broker(b).bootstrap for b in cluster.ids if b != leader)
    new = wait_until(lambda: (s := cluster.partition_state(topic_name, 0)).leader not in (-1, leader) and s,
                     timeout=30, message="a new leader").leader
    wait_until(lambda: high_watermark(survivors, topic_name) >= end, timeout=30,
               message="the new leader's high watermark at the log end")

    read = read_all(survivors, topic_name, end)
    problems = check_compacted(read, expected, cleaned_below[new], end - 1)
    assert not problems, problems
    assert all(k not in DELETED for _, k, _ in read)
    # no acknowledged latest value is lost: each is read at the offset its acknowledgement gave it
    latest_at = {k: (o, v) for o, k, v in sorted(acked)}
    by_offset = {o: (k, v) for o, k, v in read}
    lost = [(o, k) for k, (o, v) in latest_at.items() if v is not None and by_offset.get(o) != (k, v)]
    assert not lost, lost[:5]
    assert len(read) < len(acked) // 2  # compacted, not merely copied

    # the new leader takes acks=all writes with the two replicas left, and serves them with the rest
    more = produce(survivors, topic_name, [(b"key-%03d" % k, b"after-failover-%03d" % k) for k in range(0, KEYS, 4)])
    assert min(o for o, _, _ in more) >= end
    expected = latest(acked + more)
    wait_until(lambda: high_watermark(survivors, topic_name) >= end + len(more), timeout=15,
               message="the new records committed")
    after = read_all(survivors, topic_name, end + len(more))
    problems = check_compacted(after, expected, cleaned_below[new], end + len(more) - 1)
    assert not problems, problems

    # the killed leader comes back, catches up with the new leader, rejoins the ISR, and its own copy ends
    # compacted with the same latest values
    cluster.broker(leader).start()
    wait_until(lambda: len(cluster.partition_state(topic_name, 0).isr) == 3, timeout=45,
               message=f"broker {leader} back in the ISR")
    total = end + len(more)
    back = replica_dirs[leader]
    wait_until(lambda: not check_compacted([r for r in replica_records(back, topic_name) if r[0] < total], expected,
                                           first_dirty(back, topic_name), total - 1),
               timeout=30, interval=0.2, message=f"broker {leader}'s copy compacted with the latest values")


@pytest.mark.timeout(150)
def test_a_replica_away_during_compaction_copies_the_compacted_log(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings={**REPLICATED, "log.cleaner.backoff.ms": "100"}).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name, partitions=1, replication=3, **COMPACTED)
    state = cluster.partition_state(topic_name, 0)
    away = next(b for b in state.replicas if b != state.leader)
    cluster.kill(away)
    wait_until(lambda: away not in cluster.partition_state(topic_name, 0).isr, timeout=30,
               message=f"broker {away} out of the ISR")
    leader = cluster.partition_state(topic_name, 0).leader
    up = ",".join(cluster.broker(b).bootstrap for b in cluster.ids if b != away)

    items = [(b"key-%03d" % k, b"r%d-key-%03d-" % (r, k) + b"x" * 80) for r in range(ROUNDS) for k in range(KEYS)]
    acked = produce(up, topic_name, items)
    acked += produce(up, topic_name, [(key, None) for key in DELETED])
    tail_start = max(o for o, _, _ in acked) + 1
    acked += produce(up, topic_name, [(b"tail-%03d" % i, b"t" * 100) for i in range(60)])
    expected = latest(acked)
    end = len(acked)
    leader_dir = cluster.broker(leader).data_dir
    wait_until(lambda: first_dirty(leader_dir, topic_name) >= tail_start and not check_compacted(
        replica_records(leader_dir, topic_name), expected, first_dirty(leader_dir, topic_name), end - 1),
        timeout=45, interval=0.2, message="the leader's log compacted, its tombstones removed")
    leader_cleaned = first_dirty(leader_dir, topic_name)

    # the replica comes back and copies the leader's compacted log, gaps and rewritten batches included
    cluster.broker(away).start()
    wait_until(lambda: len(cluster.partition_state(topic_name, 0).isr) == 3, timeout=45,
               message=f"broker {away} back in the ISR")
    away_dir = cluster.broker(away).data_dir
    wait_until(lambda: not check_compacted(replica_records(away_dir, topic_name), expected, leader_cleaned, end - 1)
               and max(o for o, _, _ in replica_records(away_dir, topic_name)) == end - 1,
               timeout=30, interval=0.2, message=f"broker {away}'s copy complete and compacted")
    copied = replica_records(away_dir, topic_name)
    assert len(copied) < len(acked) // 2  # what it copied was compacted already

    # and it alone serves every latest value once the other two are gone
    for other in [b for b in cluster.ids if b != away]:
        cluster.kill(other)
    only = cluster.broker(away).bootstrap
    wait_until(lambda: cluster.partition_state(topic_name, 0, broker_id=away).leader == away, timeout=30,
               message=f"broker {away} leading")
    wait_until(lambda: high_watermark(only, topic_name) >= end, timeout=30, message="its high watermark at the end")
    read = read_all(only, topic_name, end)
    problems = check_compacted(read, expected, leader_cleaned, end - 1)
    assert not problems, problems
