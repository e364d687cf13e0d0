"""PartitionStateStore (cluster/controller/state_store.py) and ZkClient (cluster/zk.py) against a real
ZooKeeper server.

Each test runs one asyncio event loop with ZkClients on it (all in a chroot of the test's own on the
module's server, as a cluster's brokers are); znodes are written with zk_layout's encoders, as the brokers write
them. "Two controllers" are two stores with contexts of their own, each on its own ZooKeeper session.
Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from typing import Awaitable, Callable

import pytest

from odradek.cluster import zk_layout as L
from odradek.cluster.controller.context import ControllerContext
from odradek.cluster.controller.state_store import ControllerMoved, PartitionStateStore
from odradek.cluster.zk import BadVersionError, ZkClient
from odradek.cluster.zk_layout import (BrokerRegistration, Endpoint, PartitionState, ProducerIdBlock,
                                       TopicAssignment)
from odradek.tools.zookeeper import ZooKeeperServer, zookeeper_unavailable
from tests.cluster.conftest import _unavailable

pytest.importorskip("kazoo.client")
# kazoo warns once per client that the chroot is missing; the first ensure_path creates it (zk.py).
pytestmark = pytest.mark.filterwarnings("ignore:No chroot path exists")

SESSION_TIMEOUT_MS = 6000
WAIT_S = 10.0


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> ZooKeeperServer:
    """One real ZooKeeper server for this module (the conftest's starts one per test): every test works in
    a chroot of its own, so they do not see each other. Skips (fails under CI) as the conftest's does."""
    reason = zookeeper_unavailable()
    if reason is not None:
        _unavailable(reason)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    yield server
    server.stop()


class Env:
    """ZkClients on one loop, all in the same fresh chroot."""

    def __init__(self, zookeeper: ZooKeeperServer) -> None:
        self.connect = f"{zookeeper.connect_string}/store-{uuid.uuid4().hex[:10]}"
        self.loop = asyncio.get_running_loop()
        self.clients: list[ZkClient] = []

    async def client(self) -> ZkClient:
        zk = ZkClient(self.connect, SESSION_TIMEOUT_MS, self.loop)
        await zk.start(WAIT_S)
        self.clients.append(zk)
        for path in L.PERSISTENT_PATHS:  # as a broker does on joining
            await zk.ensure_path(path)
        return zk

    async def store(self, zk: ZkClient | None = None, topics: tuple[str, ...] = ("t", "orders")) -> PartitionStateStore:
        """A store whose ZooKeeper has ``topics`` (state writes never create a topic's znode)."""
        zk = zk or await self.client()
        for topic in topics:
            if await zk.exists(L.topic_path(topic)) is None:
                await zk.create(L.topic_path(topic), L.encode_topic(TopicAssignment(bytes(16), {0: [1]})))
        return PartitionStateStore(zk, ControllerContext())

    async def close(self) -> None:
        for zk in self.clients:
            await zk.close()


def run(zookeeper: ZooKeeperServer, scenario: Callable[[Env], Awaitable[None]]) -> None:
    async def main() -> None:
        env = Env(zookeeper)
        try:
            await asyncio.wait_for(scenario(env), timeout=60)
        finally:
            await env.close()

    asyncio.run(main())


def state(leader: int, epoch: int, isr: list[int], zk_version: int = -1) -> PartitionState:
    return PartitionState(leader, epoch, list(isr), controller_epoch=-1, zk_version=zk_version)


async def read_state(zk: ZkClient, topic: str, partition: int) -> PartitionState:
    data, stat = await zk.get(L.partition_state_path(topic, partition))
    return L.decode_partition_state(data, stat.version)


# -- the controller epoch ---------------------------------------------------------------------------------


def test_claim_epoch_creates_then_bumps_the_controller_epoch(zookeeper: ZooKeeperServer) -> None:
    async def scenario(env: Env) -> None:
        store = await env.store()
        zk = store.zk
        assert await zk.exists(L.CONTROLLER_EPOCH) is None
        await store.claim_epoch()
        assert (store.ctx.epoch, store.ctx.epoch_zk_version) == (1, 0)
        data, stat = await zk.get(L.CONTROLLER_EPOCH)
        assert data == b"1" and stat.version == 0
        # the next controller (or this one elected again) bumps it
        other = await env.store()
        await other.claim_epoch()
        assert (other.ctx.epoch, other.ctx.epoch_zk_version) == (2, 1)
        await store.claim_epoch()
        assert (store.ctx.epoch, store.ctx.epoch_zk_version) == (3, 2)
        data, stat = await zk.get(L.CONTROLLER_EPOCH)
        assert L.decode_controller_epoch(data) == 3 and stat.version == 2

    run(zookeeper, scenario)


def test_claim_epoch_continues_from_an_epoch_kafka_left(zookeeper: ZooKeeperServer) -> None:
    async def scenario(env: Env) -> None:
        store = await env.store()
        await store.zk.create(L.CONTROLLER_EPOCH, b"41")  # written by a Kafka controller before us
        await store.claim_epoch()
        assert store.ctx.epoch == 42 and store.ctx.epoch_zk_version == 1
        assert (await store.zk.get(L.CONTROLLER_EPOCH))[0] == b"42"

    run(zookeeper, scenario)


# -- fencing ----------------------------------------------------------------------------------------------


def test_an_old_controllers_writes_are_fenced_by_the_epoch(zookeeper: ZooKeeperServer) -> None:
    async def scenario(env: Env) -> None:
        first = await env.store()
        second = await env.store()  # another broker, on its own session
        await first.claim_epoch()
        written = await first.write(("t", 0), state(1, 0, [1, 2, 3]))
        assert written == PartitionState(1, 0, [1, 2, 3], controller_epoch=1, zk_version=0)
        assert await read_state(first.zk, "t", 0) == written

        await second.claim_epoch()  # the second controller takes over
        current = await second.read_state(("t", 0))
        moved = await second.write(("t", 0), current.copy(leader=2, leader_epoch=1, isr=[2, 3]))
        assert moved == PartitionState(2, 1, [2, 3], controller_epoch=2, zk_version=1)

        # The first controller does not know yet: even a write on the znode's current version is refused.
        with pytest.raises(ControllerMoved):
            await first.write(("t", 0), moved.copy(leader=3, leader_epoch=2, isr=[3]))
        with pytest.raises(ControllerMoved):  # and so is creating a partition's state
            await first.write(("t", 1), state(1, 0, [1]))
        assert await read_state(first.zk, "t", 0) == moved
        assert await first.zk.exists(L.partition_state_path("t", 1)) is None
        assert first.ctx.epoch == 1

    run(zookeeper, scenario)


def test_a_fenced_controller_leaves_no_trace_in_zookeeper(zookeeper: ZooKeeperServer) -> None:
    """The parents of a new state znode are created under the epoch fence too, and never the topic znode
    itself: a replaced controller cannot bring back a deleted topic (whose empty znode would then stop every
    later controller's failover, as Kafka's createTopicPartitionStatesRaw avoids)."""
    async def scenario(env: Env) -> None:
        first = await env.store(topics=())
        second = await env.store(topics=())
        await first.claim_epoch()
        await second.claim_epoch()
        with pytest.raises(ControllerMoved):
            await first.write(("gone", 0), state(1, 0, [1]))
        leftovers = await first.zk.children(L.TOPICS)
        # what a new controller would read now
        try:
            await second.read_cluster()
            readable = "readable"
        except Exception as exc:  # noqa: BLE001 - reported below
            readable = f"read_cluster fails: {exc!r}"
        assert leftovers == [], f"a fenced write left {L.TOPICS}/{leftovers}; {readable}"

    run(zookeeper, scenario)


def test_write_all_raises_controller_moved_when_fenced(zookeeper: ZooKeeperServer) -> None:
    async def scenario(env: Env) -> None:
        first = await env.store()
        second = await env.store()
        await first.claim_epoch()
        await second.claim_epoch()
        with pytest.raises(ControllerMoved):
            await first.write_all({("t", p): state(1, 0, [1]) for p in range(3)})
        for p in range(3):
            assert await first.zk.exists(L.partition_state_path("t", p)) is None

    run(zookeeper, scenario)


# -- conditional writes -----------------------------------------------------------------------------------


def test_a_write_on_an_old_znode_version_returns_none_and_keeps_the_newer_state(zookeeper: ZooKeeperServer) -> None:
    async def scenario(env: Env) -> None:
        store = await env.store()
        await store.claim_epoch()
        written = await store.write(("t", 0), state(1, 3, [1, 2, 3]))
        assert written.zk_version == 0
        # The leader shrinks the ISR itself (a conditional write of the state znode, as member.py does).
        leaders_view = written.copy(isr=[1, 2])
        stat = await store.zk.set(L.partition_state_path("t", 0), L.encode_partition_state(leaders_view),
                                  written.zk_version)
        assert stat.version == 1
        # The controller, deciding on what it read before, loses: None, and the znode keeps the leader's ISR.
        assert await store.write(("t", 0), written.copy(leader=2, leader_epoch=4, isr=[2, 3])) is None
        assert await read_state(store.zk, "t", 0) == leaders_view.copy(zk_version=1)
        # Re-read and decide again: now it goes through.
        fresh = await store.read_state(("t", 0))
        assert fresh.zk_version == 1 and fresh.isr == [1, 2]
        again = await store.write(("t", 0), fresh.copy(leader=2, leader_epoch=4, isr=[2]))
        assert again == PartitionState(2, 4, [2], controller_epoch=1, zk_version=2)
        assert await read_state(store.zk, "t", 0) == again

    run(zookeeper, scenario)


def test_creating_a_state_that_exists_returns_none(zookeeper: ZooKeeperServer) -> None:
    async def scenario(env: Env) -> None:
        store = await env.store()
        await store.claim_epoch()
        first = await store.write(("t", 0), state(1, 0, [1, 2]))
        assert await store.write(("t", 0), state(2, 0, [2])) is None
        assert await read_state(store.zk, "t", 0) == first

    run(zookeeper, scenario)


def test_write_all_returns_each_partitions_outcome(zookeeper: ZooKeeperServer) -> None:
    async def scenario(env: Env) -> None:
        store = await env.store()
        await store.claim_epoch()
        made = await store.write_all({("t", p): state(p + 1, 0, [p + 1]) for p in range(3)})
        assert [made[("t", p)].zk_version for p in range(3)] == [0, 0, 0]
        await store.zk.set(L.partition_state_path("t", 1), L.encode_partition_state(made[("t", 1)]), 0)
        out = await store.write_all({tp: s.copy(leader_epoch=1) for tp, s in made.items()})
        assert out[("t", 1)] is None
        assert out[("t", 0)].zk_version == 1 and out[("t", 2)].zk_version == 1
        assert (await read_state(store.zk, "t", 1)).leader_epoch == 0

    run(zookeeper, scenario)


def test_a_state_znode_is_kafkas_json(zookeeper: ZooKeeperServer) -> None:
    async def scenario(env: Env) -> None:
        store = await env.store()
        await store.claim_epoch()
        await store.write(("orders", 3), state(2, 5, [2, 1]))
        data, stat = await store.zk.get("/brokers/topics/orders/partitions/3/state")
        assert json.loads(data) == {"version": 1, "leader": 2, "leader_epoch": 5, "isr": [2, 1],
                                    "controller_epoch": 1}
        assert stat.version == 0

    run(zookeeper, scenario)


# -- reading the cluster ----------------------------------------------------------------------------------


def test_read_cluster_reads_what_brokers_and_admins_wrote(zookeeper: ZooKeeperServer) -> None:
    async def scenario(env: Env) -> None:
        zk = await env.client()
        regs = {1: BrokerRegistration(1, (Endpoint("PLAINTEXT", "10.0.0.1", 9092),), rack="a"),
                2: BrokerRegistration(2, (Endpoint("INTERNAL", "10.0.0.2", 9093, "SSL"),
                                          Endpoint("PLAINTEXT", "b.example", 9092)))}
        for bid, reg in regs.items():
            await zk.create(L.broker_path(bid), L.encode_broker(reg), ephemeral=True)
        ids = [uuid.uuid4().bytes, uuid.uuid4().bytes]
        await zk.create(L.topic_path("clicks"), L.encode_topic(TopicAssignment(ids[0], {0: [1, 2], 1: [2, 1]})))
        await zk.create(L.topic_path("fresh"), L.encode_topic(TopicAssignment(ids[1], {0: [2]})))  # no state yet
        # a topic Kafka created before topic ids
        await zk.create(L.topic_path("legacy"), b'{"version":1,"partitions":{"0":[1]}}')
        states = {("clicks", 0): PartitionState(1, 4, [1, 2], 7), ("clicks", 1): PartitionState(2, 0, [2], 7),
                  ("legacy", 0): PartitionState(-1, 2, [1], 6)}
        for (topic, p), s in states.items():
            await zk.create(L.partition_state_path(topic, p), L.encode_partition_state(s), makepath=True)
        await zk.set(L.partition_state_path("clicks", 1), L.encode_partition_state(states[("clicks", 1)]))
        await zk.create(L.delete_topic_path("legacy"))

        store = PartitionStateStore(zk, ControllerContext())
        snapshot = await store.read_cluster()
        czxids = {bid: (await zk.get(L.broker_path(bid)))[1].czxid for bid in regs}
        assert snapshot.brokers == {bid: BrokerRegistration(bid, reg.endpoints, reg.rack, czxids[bid])
                                    for bid, reg in regs.items()}
        assert all(reg.epoch > 0 for reg in snapshot.brokers.values())
        assert snapshot.topics == {"clicks": TopicAssignment(ids[0], {0: [1, 2], 1: [2, 1]}),
                                   "fresh": TopicAssignment(ids[1], {0: [2]}),
                                   "legacy": TopicAssignment(bytes(16), {0: [1]})}
        assert snapshot.states == {("clicks", 0): states[("clicks", 0)].copy(zk_version=0),
                                   ("clicks", 1): states[("clicks", 1)].copy(zk_version=1),
                                   ("legacy", 0): states[("legacy", 0)].copy(zk_version=0)}
        assert snapshot.deleting == {"legacy"}

    run(zookeeper, scenario)


def test_read_cluster_of_an_empty_cluster(zookeeper: ZooKeeperServer) -> None:
    async def scenario(env: Env) -> None:
        store = await env.store(topics=())
        snapshot = await store.read_cluster()
        assert (snapshot.brokers, snapshot.topics, snapshot.states, snapshot.deleting) == ({}, {}, {}, set())

    run(zookeeper, scenario)


def test_a_broker_epoch_is_its_registrations_czxid_and_changes_on_reregistration(zookeeper: ZooKeeperServer
                                                                                  ) -> None:
    async def scenario(env: Env) -> None:
        zk = await env.client()
        store = PartitionStateStore(zk, ControllerContext())
        reg = BrokerRegistration(3, (Endpoint("PLAINTEXT", "h", 1),))
        await zk.create(L.broker_path(3), L.encode_broker(reg), ephemeral=True)
        first = (await store.read_cluster()).brokers[3].epoch
        await zk.delete(L.broker_path(3))
        await zk.create(L.broker_path(3), L.encode_broker(reg), ephemeral=True)
        second = (await store.read_cluster()).brokers[3].epoch
        assert second > first

    run(zookeeper, scenario)


def test_an_ephemeral_registration_goes_with_its_session(zookeeper: ZooKeeperServer) -> None:
    async def scenario(env: Env) -> None:
        broker = await env.client()
        controller = await env.store()
        await broker.create(L.broker_path(5), L.encode_broker(BrokerRegistration(5, (Endpoint("PLAINTEXT", "h", 1),))),
                            ephemeral=True)
        assert set((await controller.read_cluster()).brokers) == {5}
        await broker.close()
        env.clients.remove(broker)
        assert (await controller.read_cluster()).brokers == {}

    run(zookeeper, scenario)


# -- ZkClient: calls and watches on the event loop --------------------------------------------------------


def test_calls_complete_on_the_event_loop(zookeeper: ZooKeeperServer) -> None:
    async def scenario(env: Env) -> None:
        zk = await env.client()
        loop_thread = threading.get_ident()
        path = await zk.create(f"{L.ISR_CHANGES}/{L.ISR_CHANGE_PREFIX}", L.encode_isr_change([("t", 0)]), sequence=True)
        assert threading.get_ident() == loop_thread
        assert path.startswith(f"{L.ISR_CHANGES}/{L.ISR_CHANGE_PREFIX}") and path[-10:].isdigit()
        assert L.decode_isr_change((await zk.get(path))[0]) == [("t", 0)]
        block = ProducerIdBlock(1, 0, 999)
        await zk.set_or_create(L.PRODUCER_ID_BLOCK, L.encode_producer_id_block(block))
        await zk.set_or_create(L.PRODUCER_ID_BLOCK, L.encode_producer_id_block(ProducerIdBlock(2, 1000, 1999)))
        data, stat = await zk.get(L.PRODUCER_ID_BLOCK)
        assert L.decode_producer_id_block(data) == ProducerIdBlock(2, 1000, 1999) and stat.version == 1
        with pytest.raises(BadVersionError):
            await zk.set(L.PRODUCER_ID_BLOCK, b"{}", 0)
        assert await zk.get_or_none("/no/such/node") is None
        await zk.create("/tree/a/b", b"x", makepath=True)
        await zk.delete_recursive("/tree")
        assert await zk.exists("/tree") is None
        await zk.delete_recursive("/tree")  # missing: nothing to do

    run(zookeeper, scenario)


def test_a_children_watch_fires_once_on_the_loop_and_is_rearmed_by_reading_again(zookeeper: ZooKeeperServer
                                                                                  ) -> None:
    async def scenario(env: Env) -> None:
        watcher = await env.client()
        other = await env.client()  # the changes come from another session, as another broker's would
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()
        events: list[tuple[str, str]] = []
        threads: list[int] = []
        fired = asyncio.Event()

        def on_children(event) -> None:
            threads.append(threading.get_ident())
            assert asyncio.get_running_loop() is loop
            events.append((event.type, event.path))
            fired.set()

        assert await watcher.children(L.BROKER_IDS, on_children) == []
        await other.create(L.broker_path(1), b"{}", ephemeral=True)
        await asyncio.wait_for(fired.wait(), WAIT_S)
        assert events == [("CHILD", L.BROKER_IDS)]
        assert threads == [loop_thread]

        # Not re-armed: a second change is not reported. (ZooKeeper would deliver an armed watch's event
        # before our next reply on the same session: this read, which also re-arms the watch.)
        fired.clear()
        await other.create(L.broker_path(2), b"{}", ephemeral=True)
        await other.exists(L.broker_path(2))
        await asyncio.sleep(0.2)
        assert len(events) == 1
        # Reading again (twice even: one registration) re-arms it; the next change fires it once more.
        assert sorted(await watcher.children(L.BROKER_IDS, on_children)) == ["1", "2"]
        assert sorted(await watcher.children(L.BROKER_IDS, on_children)) == ["1", "2"]
        await other.delete(L.broker_path(1))
        await asyncio.wait_for(fired.wait(), WAIT_S)
        await asyncio.sleep(0.2)
        assert events == [("CHILD", L.BROKER_IDS), ("CHILD", L.BROKER_IDS)]

    run(zookeeper, scenario)


def test_a_data_watch_reports_changes_and_deletion(zookeeper: ZooKeeperServer) -> None:
    async def scenario(env: Env) -> None:
        watcher = await env.client()
        other = await env.client()
        queue: asyncio.Queue = asyncio.Queue()

        def on_data(event) -> None:
            queue.put_nowait((event.type, event.path))

        # exists() arms a watch on a znode that is not there yet (the controller's /controller watch)
        assert await watcher.exists(L.CONTROLLER, on_data) is None
        await other.create(L.CONTROLLER, L.encode_controller(2), ephemeral=True)
        assert await asyncio.wait_for(queue.get(), WAIT_S) == ("CREATED", L.CONTROLLER)
        data, _ = await watcher.get(L.CONTROLLER, on_data)
        assert L.decode_controller(data) == 2
        await other.set(L.CONTROLLER, L.encode_controller(3))
        assert await asyncio.wait_for(queue.get(), WAIT_S) == ("CHANGED", L.CONTROLLER)
        await watcher.get(L.CONTROLLER, on_data)
        await other.delete(L.CONTROLLER)
        assert await asyncio.wait_for(queue.get(), WAIT_S) == ("DELETED", L.CONTROLLER)

    run(zookeeper, scenario)
