"""MetadataCache: what this broker knows of the cluster, and answers Metadata, FindCoordinator and
DescribeCluster from.

It holds the live brokers and their endpoints, the controller, the topics (name, id, partition count,
config overrides) and, per partition, its leader, leader epoch, replicas, ISR and offline replicas. In
cluster mode the controller fills it with UpdateMetadata (cluster/replica_manager.py applies them); on a
single node the LocalController fills it with the one broker, itself, leading every partition. Handlers
read it the same way in both modes.

Changes bump ``version`` and wake `wait_for` callers (CreateTopics waits for its partitions' leaders).

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from odradek.cluster.topics import Topic

NO_LEADER = -1
# The leader UpdateMetadata gives the partitions of a topic being deleted (Kafka's LeaderDuringDelete).
LEADER_DURING_DELETE = -2


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker. ``host`` and ``port`` are its inter-broker listener's (other brokers reach it there);
    ``endpoints`` every listener's (listener, host, port), which clients are told according to the listener
    they came in on."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[tuple[str, str, int], ...] = ()

    def address(self, listener: str) -> tuple[str, int] | None:
        """Where a client of ``listener`` reaches this broker (None: the broker has no such listener)."""
        if not self.endpoints:
            return self.host, self.port
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return None


@dataclass
class PartitionInfo:
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int] = field(default_factory=list)
    zk_version: int = 0


class MetadataCache:
    def __init__(self, cluster_id: str = "") -> None:
        self.cluster_id = cluster_id
        self.controller_id = NO_LEADER
        self.brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[bytes, Topic] = {}
        self._partitions: dict[tuple[str, int], PartitionInfo] = {}
        self.version = 0
        self._changed: asyncio.Future | None = None

    # -- topics ---------------------------------------------------------------------------------------

    def topic(self, name: str | None) -> Topic | None:
        return self._topics.get(name) if name is not None else None

    def topic_by_id(self, topic_id: bytes) -> Topic | None:
        return self._by_id.get(topic_id)

    def all_topics(self) -> list[Topic]:
        return list(self._topics.values())

    def partition(self, topic: str, index: int) -> PartitionInfo | None:
        return self._partitions.get((topic, index))

    def has_partition(self, topic: str, index: int) -> bool:
        return (topic, index) in self._partitions

    def endpoints(self, listener: str) -> list[tuple[BrokerInfo, str, int]]:
        """The live brokers that have ``listener``, by node id, with their (host, port) on it."""
        out = []
        for node_id in sorted(self.brokers):
            info = self.brokers[node_id]
            address = info.address(listener)
            if address is not None:
                out.append((info, address[0], address[1]))
        return out

    def leader_of(self, topic: str, index: int) -> BrokerInfo | None:
        info = self._partitions.get((topic, index))
        if info is None or info.leader < 0:
            return None
        return self.brokers.get(info.leader)

    # -- updates --------------------------------------------------------------------------------------

    def put_topic(self, topic: Topic) -> None:
        """Add or replace a topic (its partitions' states are set with `put_partition`)."""
        old = self._topics.get(topic.name)
        if old is not None and old.topic_id != topic.topic_id:
            self._by_id.pop(old.topic_id, None)
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        self._bump()

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        topic = self._topics.get(name)
        if topic is not None:
            topic.configs = dict(configs)
            self._bump()

    def put_partition(self, topic: str, index: int, info: PartitionInfo) -> None:
        self._partitions[(topic, index)] = info
        self._bump()

    def remove_topic(self, name: str) -> None:
        topic = self._topics.pop(name, None)
        if topic is not None:
            self._by_id.pop(topic.topic_id, None)
        for key in [k for k in self._partitions if k[0] == name]:
            del self._partitions[key]
        self._bump()

    def set_brokers(self, brokers: Iterable[BrokerInfo], controller_id: int) -> None:
        self.brokers = {b.node_id: b for b in brokers}
        self.controller_id = controller_id
        self._bump()

    def _bump(self) -> None:
        self.version += 1
        changed, self._changed = self._changed, None
        if changed is not None and not changed.done():
            changed.set_result(None)

    async def wait_for(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``predicate()`` holds after some change (True), or the timeout passes (False)."""
        deadline = time.monotonic() + timeout_s
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if self._changed is None:
                self._changed = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait_for(asyncio.shield(self._changed), remaining)
            except asyncio.TimeoutError:
                return predicate()
        return True
