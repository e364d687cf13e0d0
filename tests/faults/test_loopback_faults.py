"""Faults a cluster on one machine can be put through: ZooKeeper down, one server of a ZooKeeper ensemble
killed, every broker restarted in turn, two of three brokers killed at once, a broker's disk lost.

Real broker processes and real ZooKeeper servers on loopback, real clients (confluent-kafka) writing and
reading while it happens. What the clients were told is checked against what the cluster holds afterwards
(tests/cluster/checker.py: one report of lost, duplicated, reordered, dirty-read and unconsumed records and
of client errors). Every wait is a condition with a deadline; nothing times the cluster.

These build on tests/cluster/test_failover.py (a leader killed under load, a controlled shutdown, the
controller killed, a quick ZooKeeper restart, min.insync.replicas with the followers dead before the
writes) and do not repeat it.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import NewTopic

from odradek.cluster import zk_layout as L
from odradek.tools.cluster import ClusterView, read_metadata
from odradek.tools.zookeeper import ZooKeeperEnsemble, ZooKeeperServer, zookeeper_unavailable
from tests.cluster.checker import (AckLedger, ConsumerRecorder, History, LoadProducer, TransactionalLoadProducer,
                                   check_history, read_partitions)
from tests.cluster.common import REPLICATED, create_topic, full_isr
from tests.cluster.conftest import Cluster
from tests.interop.helpers import wait_until

INTERNAL = ["__consumer_offsets", "__transaction_state"]


# -- what the cluster says ----------------------------------------------------------------------------------

def view(cluster: Cluster, broker_id: int | None = None, internal: bool = False) -> ClusterView:
    """One broker's (or any running broker's) metadata, with the internal topics when asked."""
    admin = cluster.admin(None if broker_id is None else [broker_id])
    return read_metadata(admin, 5.0, INTERNAL if internal else ())


def leaders(cluster: Cluster, topic: str, partitions: int, broker_id: int | None = None) -> dict[int, int]:
    v = view(cluster, broker_id)
    return {p: v.partition(topic, p).leader for p in range(partitions)}


def in_every_isr(cluster: Cluster, broker_id: int) -> bool:
    """Every partition the broker replicates (internal topics too) has it in its ISR and has a leader."""
    v = view(cluster, internal=True)
    mine = [s for s in v.partitions() if broker_id in s.replicas]
    return bool(mine) and all(broker_id in s.isr and s.leader >= 0 for s in mine)


def everything_fully_replicated(cluster: Cluster) -> bool:
    v = view(cluster, internal=True)
    return all(s.leader >= 0 and len(s.isr) == len(s.replicas) for s in v.partitions())


def log_offset(cluster: Cluster, broker_id: int) -> int:
    path = cluster.broker(broker_id).log_path
    return path.stat().st_size if path.exists() else 0


def log_since(cluster: Cluster, broker_id: int, offset: int) -> str:
    with open(cluster.broker(broker_id).log_path, "rb") as f:
        f.seek(offset)
        return f.read().decode("utf-8", errors="replace")


def report(ledger_acked: list, read: dict, consumer: ConsumerRecorder | None = None, topic: str | None = None,
           **kwargs: Any) -> History:
    """The checker's report, with the consumer's records and non-retriable errors when there is one."""
    if consumer is not None:
        kwargs.setdefault("consumer_errors", consumer.non_retriable_errors())
        return check_history(ledger_acked, read, consumer.consumed(topic), **kwargs)
    return check_history(ledger_acked, read, **kwargs)


def remote_ports_of(pid: int) -> set[int]:
    """The remote ports of the process's established TCP connections (/proc: its socket inodes matched
    against the connection table), to tell which ZooKeeper server a broker talks to."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[9] in inodes and fields[3] == "01":  # ESTABLISHED
                ports.add(int(fields[2].rsplit(":", 1)[1], 16))
    return ports


def zk_partition_states(cluster: Cluster, topic: str, partitions: int) -> dict[int, L.PartitionState]:
    """Each partition's state as ZooKeeper holds it (leader, leader epoch, ISR): the controller's decisions,
    not a broker's cache of them."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=cluster.zk_connect, timeout=10.0)
    client.start(timeout=10)
    try:
        out = {}
        for p in range(partitions):
            data, stat = client.get(L.partition_state_path(topic, p))
            out[p] = L.decode_partition_state(data, stat.version)
        return out
    finally:
        client.stop()
        client.close()


def kill_at_once(cluster: Cluster, broker_ids: list[int]) -> None:
    """SIGKILL several brokers together: every signal is sent before any is waited for."""
    procs = [cluster.broker(b).proc for b in broker_ids]
    for proc in procs:
        assert proc is not None and proc.poll() is None
        proc.send_signal(signal.SIGKILL)
    for b in broker_ids:
        cluster.kill(b)  # reaps it


# -- ZooKeeper down -----------------------------------------------------------------------------------------

# A session timeout long enough for the short outage's checks on a busy machine: once ZooKeeper is back, the
# killed broker's session expires that long after the restart.
SHORT_OUTAGE_SESSION_MS = 15000
SHORT_OUTAGE_S = 9.0  # ZooKeeper is started again this long after it stopped: well inside the session


@pytest.mark.timeout(170)
@pytest.mark.parametrize("victim_role", ["leader", "controller"])
def test_zookeeper_outage_brokers_serve_and_decide_nothing_until_it_returns(cluster_factory, zookeeper: ZooKeeperServer,
                                                                          victim_role: str, topic_name):
    """While ZooKeeper is down (for less than a session timeout) the brokers go on as they were: leaders lead
    (their sessions are merely disconnected), acks=all is answered while no ISR needs to change, acks=1 by
    any live leader, consumers read. A broker killed during the outage moves no leader and leaves no ISR:
    only the controller moves leaders, and it hears of a death from ZooKeeper, and a leader's own ISR change
    needs ZooKeeper too. When ZooKeeper returns, the live brokers are on their old sessions (none
    re-registers), the dead broker's session expires (a restarted server gives every session a fresh
    timeout), and the controller moves its leaderships and shrinks the ISRs; when the dead broker was the
    controller, a new one is elected first."""
    settings = {**REPLICATED, "zookeeper.session.timeout.ms": str(SHORT_OUTAGE_SESSION_MS)}
    cluster = cluster_factory(3, settings=settings).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name)
    single_topic = topic_name + "-acks1"
    create_topic(cluster, single_topic)
    before = view(cluster)
    controller = before.controller_id
    # the victim is the controller, or another broker leading a partition
    victim = controller if victim_role == "controller" else next(
        b for b in cluster.ids if b != controller and b in {before.partition(topic_name, p).leader for p in range(3)})
    survivors = [b for b in cluster.ids if b != victim]
    # acks=1 only where a survivor leads: an acks=1 write the victim took alone may die with it, as in Kafka
    survivor_led = [p for p in range(3) if before.partition(single_topic, p).leader != victim]
    load = LoadProducer(cluster.bootstrap, topic_name, 3).start()
    single = LoadProducer(cluster.bootstrap, single_topic, 3, prefix="s", partition_ids=survivor_led,
                          **{"enable.idempotence": False, "acks": 1}).start()
    consumer = ConsumerRecorder(cluster.bootstrap, [topic_name], f"g-{topic_name}").start()
    load.wait_acked(200)
    single.wait_acked(100)
    consumer.wait_for({v for _, _, v in load.ledger.snapshot()}, timeout=60)
    offsets = {b: log_offset(cluster, b) for b in cluster.ids}

    zookeeper.stop()
    stopped_at = time.monotonic()
    for b in cluster.ids:
        wait_until(lambda: "ZooKeeper session suspended" in log_since(cluster, b, offsets[b]), timeout=5,
                   message=f"broker {b} to notice ZooKeeper gone")
    # every broker serves: acks=all (no ISR changes), acks=1, reads of what was acknowledged meanwhile
    acked, singles = load.ledger.count(), single.ledger.count()
    load.wait_acked(acked + 100, timeout=5)
    single.wait_acked(singles + 50, timeout=5)
    consumer.wait_for({v for _, _, v in load.ledger.snapshot()}, timeout=5)
    for b in cluster.ids:
        assert leaders(cluster, topic_name, 3, broker_id=b) == {p: before.partition(topic_name, p).leader
                                                                for p in range(3)}

    # a broker dies: nobody can tell the controller, so no leader moves (and no ISR shrinks, though the
    # victim stops fetching for longer than replica.lag.time.max.ms) until ZooKeeper is back
    cluster.kill(victim)
    singles = single.ledger.count()
    while time.monotonic() < stopped_at + SHORT_OUTAGE_S:
        for b in survivors:
            now = view(cluster, b)
            for p in range(3):
                assert now.partition(topic_name, p).leader == before.partition(topic_name, p).leader, \
                    f"broker {b} reports a leader change of {topic_name}-{p} while ZooKeeper is down"
                assert victim in now.partition(topic_name, p).isr
            assert now.controller_id == controller
        time.sleep(0.5)
    # acks=1 to the survivors' partitions went on meanwhile
    single.wait_acked(singles + 50, timeout=5)

    zookeeper.start()
    back_at = time.monotonic()
    assert back_at - stopped_at < SHORT_OUTAGE_SESSION_MS / 1000.0, "the outage outlasted the session timeout"
    wait_until(lambda: all(victim not in (s := view(cluster).partition(topic_name, p)).isr and s.leader in survivors
                           for p in range(3)), timeout=SHORT_OUTAGE_SESSION_MS / 1000.0 + 30,
               message=f"broker {victim}'s leaderships moved and it out of every ISR once ZooKeeper is back")
    assert view(cluster).controller_id in survivors
    acked = load.ledger.count()
    load.wait_acked(acked + 200, timeout=60)
    ledger = load.stop()
    single_ledger = single.stop()
    consumer.wait_for({v for _, _, v in ledger.acked}, timeout=60)
    consumer.stop()
    # the live brokers kept their sessions: none expired, none registered again
    for b in survivors:
        text = log_since(cluster, b, offsets[b])
        assert "ZooKeeper session lost" not in text and "registered at" not in text, f"broker {b}:\n{text[-3000:]}"

    history = report(ledger.acked, read_partitions(cluster.bootstrap, topic_name, 3), consumer,
                     expect_all_consumed=True, producer_errors=ledger.errors)
    print(history)
    assert history.ok, str(history)
    history = report(single_ledger.acked, read_partitions(cluster.bootstrap, single_topic, 3),
                     producer_errors=single_ledger.errors)
    print(history)
    assert history.ok, str(history)
    # and the victim comes back into every ISR
    cluster.broker(victim).start()
    wait_until(lambda: full_isr(cluster, topic_name, 3), timeout=60, message="the ISRs full again")


@pytest.mark.timeout(170)
def test_zookeeper_outage_longer_than_the_session_brokers_serve_on_and_keep_their_sessions(cluster_factory,
                                                                                         zookeeper: ZooKeeperServer,
                                                                                         topic_name):
    """ZooKeeper down for twice the session timeout while the brokers still reach one another: nobody can have
    been elected in anyone's place, so no broker gives its leaderships up (member.py `_presume_expired` looks
    for other brokers' traffic first), acks=all goes on (no ISR has to change) and consumers read. The
    restarted server has kept every session (it gives each a fresh timeout), so no broker registers again,
    and the controller decides again: a topic created afterwards gets leaders and full ISRs."""
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name)
    before = view(cluster)
    load = LoadProducer(cluster.bootstrap, topic_name, 3, **{"message.timeout.ms": 120_000}).start()
    consumer = ConsumerRecorder(cluster.bootstrap, [topic_name], f"g-{topic_name}").start()
    load.wait_acked(200)
    consumer.wait_for({v for _, _, v in load.ledger.snapshot()}, timeout=60)
    offsets = {b: log_offset(cluster, b) for b in cluster.ids}
    session_s = int(REPLICATED["zookeeper.session.timeout.ms"]) / 1000.0
    zookeeper.stop()
    stopped_at = time.monotonic()
    for b in cluster.ids:
        wait_until(lambda: "ZooKeeper session suspended" in log_since(cluster, b, offsets[b]), timeout=10,
                   message=f"broker {b} to notice ZooKeeper gone")
    # the outage's length is the fault itself; what must hold meanwhile is checked as it runs
    while time.monotonic() < stopped_at + 2 * session_s:
        acked = load.ledger.count()
        load.wait_acked(acked + 20, timeout=10)
        time.sleep(0.5)
    for b in cluster.ids:
        assert leaders(cluster, topic_name, 3, broker_id=b) == {p: before.partition(topic_name, p).leader
                                                                for p in range(3)}
        text = log_since(cluster, b, offsets[b])
        assert "its session has expired" not in text, f"broker {b} gave its leaderships up:\n{text[-3000:]}"
    consumer.wait_for({v for _, _, v in load.ledger.snapshot()}, timeout=30)

    zookeeper.start()
    for b in cluster.ids:
        wait_until(lambda: "ZooKeeper session connected" in log_since(cluster, b, offsets[b]), timeout=30,
                   message=f"broker {b} reconnected to ZooKeeper")
    later = topic_name + "-after"
    create_topic(cluster, later)  # a controller decision: leaders and full ISRs for a new topic
    acked = load.ledger.count()
    load.wait_acked(acked + 200, timeout=60)
    ledger = load.stop()
    consumer.wait_for({v for _, _, v in ledger.acked}, timeout=60)
    consumer.stop()
    for b in cluster.ids:
        text = log_since(cluster, b, offsets[b])
        assert "ZooKeeper session lost" not in text and "registered at" not in text, f"broker {b}:\n{text[-3000:]}"
    history = report(ledger.acked, read_partitions(cluster.bootstrap, topic_name, 3), consumer,
                     expect_all_consumed=True, producer_errors=ledger.errors)
    print(history)
    assert history.ok, str(history)


# -- one server of a ZooKeeper ensemble killed --------------------------------------------------------------

@pytest.fixture
def ensemble(tmp_path: Path) -> Iterator[ZooKeeperEnsemble]:
    reason = zookeeper_unavailable()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"ZooKeeper must be available in CI: {reason}")
        pytest.skip(reason)
    servers = ZooKeeperEnsemble(tmp_path / "zookeeper", size=3)
    try:
        yield servers.start()
    finally:
        servers.stop()


@pytest.fixture
def ensemble_cluster(ensemble: ZooKeeperEnsemble, tmp_path: Path) -> Iterator[Cluster]:
    """Three brokers with `zookeeper.connect` naming all three ZooKeeper servers; stopped before them."""
    cluster = Cluster(tmp_path / "cluster", ensemble, 3, settings=REPLICATED)  # type: ignore[arg-type]
    try:
        yield cluster
    finally:
        cluster.stop_all()


@pytest.mark.timeout(170)
@pytest.mark.parametrize("which", ["controllers", "quorum-leader"])
def test_zookeeper_ensemble_member_killed_nothing_visible_and_decisions_go_on(ensemble_cluster: Cluster,
                                                                              ensemble: ZooKeeperEnsemble, which: str,
                                                                              topic_name):
    """Killing one ZooKeeper server of three (the one the controller is connected to, or the quorum's
    leader, which every broker's server loses its quorum with until a new leader is elected): the brokers
    reconnect within their sessions, so no leader changes, no client sees an error, transactions commit; the
    controller still decides (a broker killed afterwards loses its leaderships)."""
    cluster = ensemble_cluster.start()
    cluster.wait_ready()
    create_topic(cluster, topic_name)
    txn_topic = topic_name + "-txn"
    create_topic(cluster, txn_topic)
    before = view(cluster)
    controller = before.controller_id
    load = LoadProducer(cluster.bootstrap, topic_name, 3).start()
    txn = TransactionalLoadProducer(cluster.bootstrap, txn_topic, 3, f"tx-{topic_name}").start()
    consumer = ConsumerRecorder(cluster.bootstrap, [topic_name, txn_topic], f"g-{topic_name}").start()
    load.wait_acked(200)
    txn.wait_committed(50)

    if which == "controllers":
        ports = remote_ports_of(cluster.broker(controller).proc.pid)
        server = next((s for s in ensemble.servers if s.port in ports), None)
        assert server is not None, f"the controller talks to none of {ensemble.connect_string} ({ports})"
    else:
        server = ensemble.leader()
        assert server is not None, "no ZooKeeper server says it leads"
    on_it = [b for b in cluster.ids if server.port in remote_ports_of(cluster.broker(b).proc.pid)]
    offsets = {b: log_offset(cluster, b) for b in cluster.ids}
    server.kill()
    # every broker is on a live server again (the controller's reconnected), under load
    wait_until(lambda: all(remote_ports_of(cluster.broker(b).proc.pid) & {s.port for s in ensemble.servers
                                                                            if s.is_running()}
                           for b in cluster.ids), timeout=30, message="every broker on a live ZooKeeper server")
    acked, committed = load.ledger.count(), txn.ledger.count()
    load.wait_acked(acked + 300)
    txn.wait_committed(committed + 50)
    for b in on_it:  # the brokers that lost their server noticed, and kept their sessions
        wait_until(lambda: "ZooKeeper session connected" in log_since(cluster, b, offsets[b]), timeout=30,
                   message=f"broker {b} reconnected to ZooKeeper")
    for b in cluster.ids:
        text = log_since(cluster, b, offsets[b])
        assert "ZooKeeper session lost" not in text and "registered at" not in text, f"broker {b}:\n{text[-3000:]}"
    after = view(cluster)
    assert after.controller_id == controller
    for topic in (topic_name, txn_topic):
        for p in range(3):
            assert after.partition(topic, p).leader == before.partition(topic, p).leader
            assert sorted(after.partition(topic, p).isr) == sorted(before.partition(topic, p).isr)

    # decisions still work with two of three servers: a broker killed now loses its leaderships
    victim = next(b for b in cluster.ids if b != controller and b in leaders(cluster, topic_name, 3).values())
    cluster.kill(victim)
    wait_until(lambda: all(victim not in (s := view(cluster).partition(topic_name, p)).isr
                           and s.leader not in (-1, victim)
                           for p in range(3)), timeout=30, message=f"broker {victim}'s leaderships moved")
    acked, committed = load.ledger.count(), txn.ledger.count()
    load.wait_acked(acked + 200, timeout=60)
    txn.wait_committed(committed + 30, timeout=60)
    ledger = load.stop()
    txn_ledger = txn.stop()
    consumer.wait_for({v for _, _, v in ledger.acked}, topic=topic_name)
    consumer.wait_for({v for _, _, v in txn_ledger.acked}, topic=txn_topic)
    consumer.stop()
    history = report(ledger.acked, read_partitions(cluster.bootstrap, topic_name, 3), consumer, topic_name,
                     expect_all_consumed=True, producer_errors=ledger.errors)
    print(history)
    assert history.ok, str(history)
    committed_read = read_partitions(cluster.bootstrap, txn_topic, 3, **{"isolation.level": "read_committed"})
    history = report(txn_ledger.acked, committed_read,
                     consumer, txn_topic, aborted=txn.aborted, expect_all_consumed=True,
                     producer_errors=txn_ledger.errors)
    print(history)
    assert history.ok, str(history)
    assert txn.aborted, "the transactional producer aborted none of its transactions"


# -- rolling restart ----------------------------------------------------------------------------------------

@pytest.mark.timeout(175)
def test_rolling_restart_under_load_no_client_error(cluster_factory, topic_name):
    """Every broker restarted in turn with a controlled shutdown, each back in every ISR before the next:
    an idempotent acks=all producer and a consumer group see only retriable errors, nothing acknowledged is
    lost or written twice, and the group reads everything acknowledged."""
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name)
    txn_topic = topic_name + "-txn"
    create_topic(cluster, txn_topic)
    load = LoadProducer(cluster.bootstrap, topic_name, 3).start()
    txn = TransactionalLoadProducer(cluster.bootstrap, txn_topic, 3, f"tx-{topic_name}").start()
    consumer = ConsumerRecorder(cluster.bootstrap, [topic_name, txn_topic], f"g-{topic_name}").start()
    load.wait_acked(200)
    txn.wait_committed(50)
    consumer.wait_for({v for _, _, v in load.ledger.snapshot()}, timeout=60, topic=topic_name)
    wait_until(lambda: everything_fully_replicated(cluster), timeout=30, message="every ISR full")
    for broker_id in cluster.ids:
        assert cluster.stop(broker_id) == 0
        assert f"controlled shutdown of broker {broker_id} done" in cluster.broker(broker_id).log_tail(20000)
        wait_until(lambda: not any(broker_id in s.isr for s in view(cluster, internal=True).partitions()),
                   timeout=30, message=f"broker {broker_id} out of every ISR")
        cluster.broker(broker_id).start()
        wait_until(lambda: in_every_isr(cluster, broker_id) and everything_fully_replicated(cluster), timeout=60,
                   message=f"broker {broker_id} back in every ISR")
        acked, committed = load.ledger.count(), txn.ledger.count()
        load.wait_acked(acked + 100, timeout=60)
        txn.wait_committed(committed + 20, timeout=60)
    ledger = load.stop()
    txn_ledger = txn.stop()
    consumer.wait_for({v for _, _, v in ledger.acked}, timeout=60, topic=topic_name)
    consumer.wait_for({v for _, _, v in txn_ledger.acked}, timeout=60, topic=txn_topic)
    consumer.stop()
    history = report(ledger.acked, read_partitions(cluster.bootstrap, topic_name, 3), consumer, topic_name,
                     expect_all_consumed=True, producer_errors=ledger.errors)
    print(history)
    assert history.ok, str(history)
    history = report(txn_ledger.acked, read_partitions(cluster.bootstrap, txn_topic, 3), consumer, txn_topic,
                     aborted=txn.aborted, expect_all_consumed=True, producer_errors=txn_ledger.errors)
    print(history)
    assert history.ok, str(history)


# -- two of three brokers killed at once -----------------------------------------------------------------

@pytest.mark.timeout(175)
def test_two_brokers_killed_at_once_acks_all_stops_and_nothing_acknowledged_is_lost(cluster_factory, topic_name):
    """RF 3, min.insync.replicas 2, two brokers SIGKILLed together under acks=all load: once the survivor is
    alone in the ISR nothing more is acknowledged (a probe without retries is refused with
    NOT_ENOUGH_REPLICAS); with the two back, the load's stalled writes go through and every
    acknowledged record is there."""
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name)
    controller = view(cluster).controller_id
    survivor = next(b for b in cluster.ids if b != controller)  # the controller dies too: another takes over
    victims = [b for b in cluster.ids if b != survivor]
    load = LoadProducer(cluster.bootstrap, topic_name, 3, **{"message.timeout.ms": 120_000}).start()
    consumer = ConsumerRecorder(cluster.bootstrap, [topic_name], f"g-{topic_name}").start()
    load.wait_acked(300)
    consumer.wait_for({v for _, _, v in load.ledger.snapshot()}, timeout=60)
    kill_at_once(cluster, victims)
    wait_until(lambda: all((s := view(cluster, survivor).partition(topic_name, p)).leader == survivor
                           and list(s.isr) == [survivor] for p in range(3)), timeout=40,
               message=f"broker {survivor} leading every partition with an ISR of itself")
    # acknowledgements stop: what was acknowledged before the ISR shrank is all there is while it is 1
    # (deliveries already on their way are given a moment to reach the ledger first)
    time.sleep(1.0)
    stalled = load.ledger.count()
    sent = load.sent
    wait_until(lambda: load.sent > sent + 200, timeout=30, message="the producer to go on sending")
    probe = Producer({"bootstrap.servers": cluster.broker(survivor).bootstrap, "acks": "all", "retries": 0,
                      "broker.address.family": "v4", "message.timeout.ms": 10000})
    errors: list = []
    probe.produce(topic_name, value=b"probe", partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert probe.flush(15) == 0
    assert [e.code() if e is not None else None for e in errors] in ([KafkaError.NOT_ENOUGH_REPLICAS],
                                                                   [KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND])
    assert load.ledger.count() == stalled, "writes acknowledged while the ISR was the leader alone"
    assert all(list(view(cluster, survivor).partition(topic_name, p).isr) == [survivor] for p in range(3))

    for b in victims:
        cluster.broker(b).start()
    wait_until(lambda: full_isr(cluster, topic_name, 3), timeout=60, message="the ISRs full again")
    load.wait_acked(stalled + 300, timeout=90)
    ledger = load.stop()
    consumer.wait_for({v for _, _, v in ledger.acked}, timeout=60)
    consumer.stop()
    history = report(ledger.acked, read_partitions(cluster.bootstrap, topic_name, 3), consumer,
                     expect_all_consumed=True, producer_errors=ledger.errors)
    print(history)
    assert history.ok, str(history)


# -- a broker's disk lost --------------------------------------------------------------------------------

@pytest.mark.timeout(175)
@pytest.mark.parametrize("how", ["stopped", "killed"])
def test_disk_loss_broker_rebuilds_from_the_leaders_and_alone_holds_everything(cluster_factory, how: str,
                                                                             topic_name):
    """A broker stopped (controlled shutdown: it leaves every ISR first) or killed (still in the ISRs until
    its session expires), its data directory deleted and started again: it adopts the cluster id anew
    (meta.properties is written again), copies every partition from the leaders and rejoins every ISR, never
    counted in sync while empty; then, with the other two killed, it alone serves every acknowledged
    record."""
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name)
    load = LoadProducer(cluster.bootstrap, topic_name, 3).start()
    load.wait_acked(500)
    victim = next(b for b in cluster.ids if b != view(cluster).controller_id)
    versions = {p: s.zk_version for p, s in zk_partition_states(cluster, topic_name, 3).items()}
    if how == "stopped":
        assert cluster.stop(victim) == 0
    else:
        cluster.kill(victim)
    data_dir = cluster.broker(victim).data_dir
    meta = (data_dir / "meta.properties").read_text()
    shutil.rmtree(data_dir)
    acked = load.ledger.count()
    load.wait_acked(acked + 300)  # written while it is gone: it must copy those too
    cluster.broker(victim).start()
    # back in every ISR after having been taken out of it, by the controller or by the leader (the state
    # znode written at least twice since: out, then in): an ISR naming it only because nobody has noticed
    # its death yet would not do
    wait_until(lambda: all(victim in s.isr and s.zk_version >= versions[p] + 2
                           for p, s in zk_partition_states(cluster, topic_name, 3).items()),
               timeout=60, message=f"broker {victim} out of every ISR and back in")
    wait_until(lambda: in_every_isr(cluster, victim), timeout=30, message=f"broker {victim} in every ISR's metadata")
    assert (data_dir / "meta.properties").read_text() == meta
    acked = load.ledger.count()
    load.wait_acked(acked + 200)
    ledger = load.stop()
    others = [b for b in cluster.ids if b != victim]
    kill_at_once(cluster, others)
    wait_until(lambda: all(view(cluster, victim).partition(topic_name, p).leader == victim for p in range(3)),
               timeout=40, message=f"broker {victim} leading every partition alone")
    history = report(ledger.acked, read_partitions(cluster.broker(victim).bootstrap, topic_name, 3),
                     producer_errors=ledger.errors)
    print(history)
    assert history.ok, str(history)


# -- the last in-sync replica lost: clean and unclean elections -------------------------------------------

def produce_acked(bootstrap: str, topics: list[str], prefix: str, count: int) -> dict[str, AckLedger]:
    """`count` acks=all writes to partition 0 of each topic, all flushed; what was acknowledged, per topic."""
    ledgers = {topic: AckLedger() for topic in topics}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 0, "message.timeout.ms": 30_000, "broker.address.family": "v4"})
    for i in range(count):
        for topic in topics:
            producer.produce(topic, value=f"{prefix}-{i}".encode(), partition=0, on_delivery=ledgers[topic].delivery)
    assert producer.flush(45) == 0
    for topic, ledger in ledgers.items():
        assert len(ledger.acked) == count, f"{topic}: {ledger.errors[:3]}"
    return ledgers


@pytest.mark.timeout(175)
def test_last_in_sync_replica_lost_clean_topics_wait_unclean_topics_lose_writes(cluster_factory, topic_name):
    """The ISR shrinks to the leader alone (min.insync.replicas 1, so acks=all goes on with it), then the leader
    dies too and the two out-of-sync replicas come back. A topic with unclean.leader.election.enable false
    stays offline (no leader) rather than lose anything, and gets its leader back, with every acknowledged
    write, when the last in-sync replica returns. A topic with it true is led again at once by a replica
    that lacks the writes made while it was away: they are lost, and the returning old leader truncates
    them from its own log. This is Kafka's trade, and the one unclean elections are off by default for."""
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    clean, unclean = topic_name + "-clean", topic_name + "-unclean"
    admin = cluster.admin()
    for name, allowed in ((clean, "false"), (unclean, "true")):
        admin.create_topics([NewTopic(name, num_partitions=1, replica_assignment=[[1, 2, 3]],
                                      config={"min.insync.replicas": "1",
                                              "unclean.leader.election.enable": allowed})])[name].result(30)
        wait_until(lambda: full_isr(cluster, name, 1), timeout=30, message=f"{name} fully in sync")
    topics = [clean, unclean]
    before = produce_acked(cluster.bootstrap, topics, "before", 50)

    kill_at_once(cluster, [2, 3])
    wait_until(lambda: all(list(view(cluster, 1).partition(t, 0).isr) == [1] for t in topics), timeout=40,
               message="broker 1 alone in both ISRs")
    during = produce_acked(cluster.broker(1).bootstrap, topics, "during", 50)  # held by broker 1 alone
    cluster.kill(1)
    for b in (2, 3):
        cluster.broker(b).start()
    # the unclean topic is led again by a replica that was out of sync
    wait_until(lambda: view(cluster, 2).partition(unclean, 0).leader in (2, 3), timeout=40,
               message=f"{unclean}: an unclean leader elected")
    # ...while the clean one has none, and keeps having none, with both of its other replicas alive
    for _ in range(6):
        assert view(cluster, 2).partition(clean, 0).leader == -1
        time.sleep(0.5)
    unclean_read = read_partitions(f"{cluster.broker(2).bootstrap},{cluster.broker(3).bootstrap}", unclean, 1)
    values = {v for _, v in unclean_read[0]}
    assert {v for _, _, v in before[unclean].acked} <= values
    assert not values & {v for _, _, v in during[unclean].acked}, "the out-of-sync replica had the ISR's writes"
    after = produce_acked(cluster.bootstrap, [unclean], "after", 20)  # the new leader takes writes

    offset = log_offset(cluster, 1)
    cluster.broker(1).start()
    wait_until(lambda: view(cluster).partition(clean, 0).leader == 1, timeout=40,
               message=f"{clean}: led again by its last in-sync replica")
    wait_until(lambda: full_isr(cluster, clean, 1) and full_isr(cluster, unclean, 1), timeout=60,
               message="both topics fully in sync again")
    history = report(before[clean].acked + during[clean].acked, read_partitions(cluster.bootstrap, clean, 1))
    print(history)
    assert history.ok, str(history)
    # the unclean topic: what broker 1 alone held is gone everywhere, broker 1 included
    assert f"{unclean}-0: truncating from" in log_since(cluster, 1, offset)
    history = report(before[unclean].acked + during[unclean].acked + after[unclean].acked,
                     read_partitions(cluster.bootstrap, unclean, 1))
    assert sorted(v for _, _, v in history.lost) == sorted(v for _, _, v in during[unclean].acked)
    assert not history.duplicated and not history.reordered
