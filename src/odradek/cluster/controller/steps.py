"""ControllerSteps: what the controller's event handlers (broker_changes.py, topic_changes.py,
reassignment.py) use of the controller, so that they take it as a parameter without importing controller.py,
which imports them to dispatch its events.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from odradek.cluster.controller.context import ControllerContext
from odradek.cluster.controller.requests import ControllerChannel, RequestBatch
from odradek.cluster.controller.state_store import PartitionStateStore
from odradek.cluster.zk import ZkClient
from odradek.cluster.zk_layout import PartitionState

TopicPartition = tuple[str, int]


class ControllerSteps(Protocol):
    broker_id: int
    zk: ZkClient
    ctx: ControllerContext
    store: PartitionStateStore
    channel: ControllerChannel

    # the watches to re-arm as a handler reads (each posts the handler's event again)
    def brokers_watch(self, event: Any) -> None: ...

    def topics_watch(self, event: Any) -> None: ...

    def topic_watch(self, event: Any) -> None: ...

    def deletions_watch(self, event: Any) -> None: ...

    def batch(self) -> RequestBatch: ...

    async def decide_and_write(self, batch: RequestBatch, partitions: list[TopicPartition],
                               decide: Callable[[TopicPartition, PartitionState], PartitionState | None]
                               ) -> set[TopicPartition]: ...

    async def elect_offline(self, batch: RequestBatch, partitions: list[TopicPartition],
                            force_unclean: bool = False) -> None: ...

    async def start_new_partitions(self, batch: RequestBatch, partitions: list[TopicPartition]) -> None: ...
