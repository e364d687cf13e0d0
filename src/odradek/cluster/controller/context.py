"""ControllerContext: the controller's view of the cluster, rebuilt from ZooKeeper when a broker becomes the
controller and kept in step with every decision it writes there.

Not thread-safe; owned by the event loop (and by the controller's one event queue).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.cluster.zk_layout import BrokerRegistration, PartitionState, TopicAssignment

TopicPartition = tuple[str, int]


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = -1  # of /controller_epoch, checked by every state write (fencing)
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)  # live ones
    topics: dict[str, TopicAssignment] = field(default_factory=dict)
    states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    deleting: set[str] = field(default_factory=set)
    shutting_down: set[int] = field(default_factory=set)

    @property
    def live(self) -> set[int]:
        return set(self.brokers)

    def replicas(self, tp: TopicPartition) -> list[int]:
        assignment = self.topics.get(tp[0])
        return assignment.partitions.get(tp[1], []) if assignment is not None else []

    def partitions(self, topic: str | None = None) -> list[TopicPartition]:
        names = [topic] if topic is not None else list(self.topics)
        return [(t, p) for t in names if t in self.topics for p in sorted(self.topics[t].partitions)]

    def partitions_on(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.partitions() if broker_id in self.replicas(tp)]

    def offline_replicas(self, tp: TopicPartition) -> list[int]:
        return [r for r in self.replicas(tp) if r not in self.brokers]
