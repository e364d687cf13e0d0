"""Network partitions between real processes: a leader cut off from ZooKeeper and the other brokers, a follower
cut off from the other brokers, and links that flap for a minute.

Every broker and the ZooKeeper server runs in a network namespace of its own (netns.py); cuts are routes
between two namespaces, so the test's producers and consumers in the root namespace still reach every
broker, also a cut-off one: a partitioned leader keeps being written to, as it would be by clients on its
side of a real partition. What the clients were told is then checked against what the cluster holds
(tests/cluster/checker.py): nothing acknowledged is lost, nothing is written twice, nothing is reordered.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import socket
import time

import pytest
from confluent_kafka.admin import NewTopic

from odradek.protocol.errors import ErrorCode
from tests.cluster.checker import LoadProducer, check_history, read_partitions
from tests.cluster.common import REPLICATED, create_topic, full_isr
from tests.faults.netns import NetnsCluster
from tests.interop.helpers import (parse_produce_response_v3, produce_request_v3, read_frame, record_batch,
                                   wait_until)

log = logging.getLogger(__name__)

PARTITIONS = 3


def seen_by(spread: NetnsCluster, broker_ids: list[int], topic: str, partition: int) -> list:
    """The partition's state as each of these brokers answers Metadata."""
    return [spread.cluster.partition_state(topic, partition, broker_id=b) for b in broker_ids]


def agreed(spread: NetnsCluster, broker_ids: list[int], topic: str, partition: int, check) -> bool:
    """Whether every one of these brokers' view of the partition passes `check` (a broker that does not
    answer counts as no)."""
    try:
        return all(check(state) for state in seen_by(spread, broker_ids, topic, partition))
    except Exception:  # noqa: BLE001 - not answering yet: asked again until the caller's deadline
        return False


def refuses_clients(broker) -> bool:
    """Whether the broker closes a new client connection at once, before any request (fenced)."""
    try:
        with socket.create_connection((broker.host, broker.port), timeout=2.0) as sock:
            sock.settimeout(1.0)
            return sock.recv(1) == b""
    except (socket.timeout, ConnectionError):
        return False


def produce_directly(broker, topic: str, partition: int, value: bytes) -> int | str:
    """One acks=all Produce (timeout 5 s) on a connection of its own: the partition's error code, or why there
    is none (the connection refused or closed)."""
    try:
        with socket.create_connection((broker.host, broker.port), timeout=10.0) as sock:
            sock.sendall(produce_request_v3(1, topic, partition, record_batch([value]), acks=-1, timeout_ms=5000))
            _, results = parse_produce_response_v3(read_frame(sock, timeout=15.0))
    except (OSError, EOFError, AssertionError) as exc:
        return f"no answer: {exc!r}"
    return results[0][2]


def acked_since(ledger, since: float, partitions: set[int]) -> int:
    """How many acknowledgements of those partitions arrived after `since` (monotonic)."""
    return sum(1 for t, p in list(ledger.ack_times) if t > since and p in partitions)


@pytest.mark.timeout(170)
def test_partitioned_leader_stops_acknowledging_and_rejoins(netns_cluster, topic_name):
    spread = netns_cluster(3, settings=REPLICATED)
    cluster = spread.cluster
    view = cluster.wait_ready()
    # each broker advertises the address it listens on in its namespace, and the root namespace reaches it
    assert view.brokers == {b: (spread.host(b).address, cluster.broker(b).port) for b in cluster.ids}
    create_topic(cluster, topic_name, partitions=PARTITIONS)
    victim = cluster.partition_state(topic_name, 0).leader
    majority = [b for b in cluster.ids if b != victim]
    led = {p for p in range(PARTITIONS) if cluster.partition_state(topic_name, p).leader == victim}
    load = LoadProducer(cluster.bootstrap, topic_name, PARTITIONS, max_records=100_000).start()
    load.wait_acked(300)

    cut_at = time.monotonic()
    spread.isolate(victim)  # from ZooKeeper and both other brokers; the test still reaches it
    wait_until(lambda: all(agreed(spread, majority, topic_name, p, lambda s: s.leader in majority) for p in led),
               timeout=40, message=f"the majority electing new leaders for {sorted(led)} (was broker {victim})")
    elected_at = time.monotonic()
    log.info("new leaders %.1f s after the cut", elected_at - cut_at)

    # Asked directly, the cut-off broker takes no acks=all write any more: it can neither reach its followers
    # nor change the ISR in ZooKeeper (where its session has expired by now). Asked over a socket of its own,
    # not through a client, which would learn the other brokers from it and write to the new leaders.
    for p in sorted(led):
        answer = produce_directly(cluster.broker(victim), topic_name, p, f"probe-{p}".encode())
        assert answer != ErrorCode.NONE, f"the cut-off leader acknowledged an acks=all write to partition {p}"
    # a whole session timeout without ZooKeeper or any broker, it knows its session is gone: it leads
    # nothing and closes client connections (its Metadata could only repeat its stale view), so that
    # clients ask the brokers that know the new leaders
    session_s = int(REPLICATED["zookeeper.session.timeout.ms"]) / 1000
    wait_until(lambda: refuses_clients(cluster.broker(victim)), timeout=session_s + 15,
               message=f"broker {victim}, cut off, closing client connections")

    # the producers go on being acknowledged by the new leaders
    load.wait_acked(load.ledger.count() + 300, timeout=60)
    wait_until(lambda: acked_since(load.ledger, elected_at, led) >= 50, timeout=60,
               message=f"writes to {sorted(led)} acknowledged after the election")

    # healed, the old leader finds its session gone, follows the new leaders, truncates what only it had
    # written during the cut (what the producers sent it before it gave up leading) and rejoins every ISR
    spread.heal_all()
    wait_until(lambda: all(agreed(spread, cluster.ids, topic_name, p, lambda s: len(s.isr) == 3)
                           for p in range(PARTITIONS)),
               timeout=60, message=f"broker {victim} back in every ISR")
    ledger = load.stop()
    assert not ledger.errors, ledger.errors[:5]
    read = read_partitions(cluster.bootstrap, topic_name, PARTITIONS)
    history = check_history(ledger.acked, read)
    assert history.ok, str(history)
    values = {v for records in read.values() for _, v in records}
    assert not any(v.startswith(b"probe-") for v in values), "an unacknowledged write of the cut-off leader survived"
    victim_log = cluster.broker(victim).log_tail(2_000_000)
    for p in led:
        assert f"{topic_name}-{p}: truncating from" in victim_log, f"broker {victim} never truncated partition {p}"

    # ...and holds every acknowledged record: with the other two gone, it alone serves them
    for other in majority:
        cluster.kill(other)
    wait_until(lambda: all(cluster.partition_state(topic_name, p, broker_id=victim).leader == victim
                           for p in range(PARTITIONS)), timeout=30, message=f"broker {victim} leading every partition")
    alone = read_partitions(cluster.broker(victim).bootstrap, topic_name, PARTITIONS)
    history = check_history(ledger.acked, alone)
    assert history.ok, str(history)


@pytest.mark.timeout(150)
def test_partitioned_follower_leaves_and_rejoins_the_isr(netns_cluster, topic_name):
    spread = netns_cluster(3, settings=REPLICATED)
    cluster = spread.cluster
    controller = cluster.wait_ready().controller_id
    follower = next(b for b in reversed(cluster.ids) if b != controller)
    a, b = [x for x in cluster.ids if x != follower]
    # the follower leads nothing: each partition is led by one of the other two and followed by it
    assignment = [[a, b, follower], [b, a, follower], [a, follower, b]]
    admin = cluster.admin()
    created = admin.create_topics([NewTopic(topic_name, num_partitions=PARTITIONS, replica_assignment=assignment)])
    created[topic_name].result(30)
    wait_until(lambda: full_isr(cluster, topic_name, PARTITIONS), timeout=30, message="a full ISR everywhere")
    load = LoadProducer(cluster.bootstrap, topic_name, PARTITIONS, max_records=100_000).start()
    load.wait_acked(300)

    cut_at = time.monotonic()
    spread.isolate(follower, [a, b])  # ZooKeeper still reaches it: only the leaders can drop it
    wait_until(lambda: all(agreed(spread, [a, b], topic_name, p, lambda s: sorted(s.isr) == sorted([a, b]))
                           for p in range(PARTITIONS)),
               timeout=30, message=f"broker {follower} out of every ISR")
    shrunk_at = time.monotonic()
    log.info("ISR shrunk %.1f s after the cut", shrunk_at - cut_at)
    # acks=all goes on with two in-sync replicas (min.insync.replicas 2), in every partition
    load.wait_acked(load.ledger.count() + 300, timeout=30)
    wait_until(lambda: all(acked_since(load.ledger, shrunk_at, {p}) >= 20 for p in range(PARTITIONS)), timeout=30,
               message="every partition acknowledged after the shrink")
    # no acknowledgement waited much longer than it took the leaders to give up on the follower
    # (replica.lag.time.max.ms) and write the smaller ISR
    lag_s = int(REPLICATED["replica.lag.time.max.ms"]) / 1000
    assert load.ledger.longest_gap_after(cut_at) < lag_s + 6.0

    spread.heal_all()
    wait_until(lambda: all(agreed(spread, cluster.ids, topic_name, p, lambda s: len(s.isr) == 3)
                           for p in range(PARTITIONS)),
               timeout=60, message=f"broker {follower} back in every ISR")
    load.wait_acked(load.ledger.count() + 100, timeout=30)
    ledger = load.stop()
    assert not ledger.errors, ledger.errors[:5]
    history = check_history(ledger.acked, read_partitions(cluster.bootstrap, topic_name, PARTITIONS))
    assert history.ok, str(history)


FLAP_SECONDS = 60.0


@pytest.mark.timeout(200)
def test_flapping_links_leave_no_partition_stuck(netns_cluster, topic_name):
    spread = netns_cluster(3, settings=REPLICATED)
    cluster = spread.cluster
    cluster.wait_ready()
    create_topic(cluster, topic_name, partitions=PARTITIONS)
    load = LoadProducer(cluster.bootstrap, topic_name, PARTITIONS, max_records=1_000_000).start()
    load.wait_acked(200)

    # brokers in turn, ZooKeeper every fourth time; cuts shorter and longer than the session timeout (4 s)
    seed = int(os.environ.get("FLAP_SEED") or random.randrange(1 << 30))  # FLAP_SEED repeats a schedule
    rng = random.Random(seed)
    log.info("flapping with seed %d", seed)
    rotation = itertools.cycle([1, 2, 3, "zk", 2, 3, 1, "zk", 3, 1, 2, "zk"])
    schedule = []
    end = time.monotonic() + FLAP_SECONDS
    while time.monotonic() < end:
        node = next(rotation)
        cut_s, healed_s = rng.choice([1.0, 2.5, 5.0]), rng.uniform(1.0, 3.0)
        schedule.append((node, cut_s, healed_s))
        spread.isolate(node)
        time.sleep(cut_s)  # the fault's length (the schedule), not a wait for a condition
        spread.heal_all()
        time.sleep(healed_s)
    log.info("flapped (seed %d): %s", seed, schedule)

    # no partition stuck: every broker names a leader and a full ISR for every partition within a deadline
    wait_until(lambda: all(agreed(spread, cluster.ids, topic_name, p, lambda s: s.leader >= 0 and len(s.isr) == 3)
                           for p in range(PARTITIONS)),
               timeout=60, message=f"every partition led with a full ISR after flapping (seed {seed}: {schedule})")
    load.wait_acked(load.ledger.count() + 300, timeout=60)
    ledger = load.stop()
    assert not ledger.errors, (seed, ledger.errors[:5])
    history = check_history(ledger.acked, read_partitions(cluster.bootstrap, topic_name, PARTITIONS))
    assert history.ok, f"seed {seed}: {history}"
