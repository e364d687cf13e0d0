"""PartitionStateStore: the controller's reads and writes of ZooKeeper, fenced by its epoch.

Every write of a partition's state is one ZooKeeper multi-op: a check that `/controller_epoch` is still at
the version this controller wrote (no newer controller exists), and the write itself, conditional on the
state znode's version (no newer decision, such as the leader's own ISR change, exists). If the first check
fails this controller is stale and must resign (`ControllerMoved`); if the second fails, the state is read
again and the decision remade by the caller.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from odradek.cluster import zk_layout as L
from odradek.cluster.controller.context import ControllerContext
from odradek.cluster.zk import BadVersionError, NodeExistsError, NoNodeError, TransactionFailed, ZkClient
from odradek.cluster.zk_layout import ClusterSnapshot, PartitionState

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class ControllerMoved(Exception):
    """A newer controller exists: this one stops."""


class PartitionStateStore:
    def __init__(self, zk: ZkClient, ctx: ControllerContext) -> None:
        self.zk = zk
        self.ctx = ctx

    async def claim_epoch(self) -> None:
        """Bump /controller_epoch (conditionally): from now on writes of older controllers fail."""
        found = await self.zk.get_or_none(L.CONTROLLER_EPOCH)
        if found is None:
            try:
                await self.zk.create(L.CONTROLLER_EPOCH, L.encode_controller_epoch(1))
            except NodeExistsError:
                raise ControllerMoved("another controller created the epoch first") from None
            self.ctx.epoch, self.ctx.epoch_zk_version = 1, 0
            return
        data, stat = found
        epoch = L.decode_controller_epoch(data) + 1
        try:
            stat = await self.zk.set(L.CONTROLLER_EPOCH, L.encode_controller_epoch(epoch), stat.version)
        except BadVersionError:
            raise ControllerMoved("another controller bumped the epoch first") from None
        self.ctx.epoch, self.ctx.epoch_zk_version = epoch, stat.version

    async def read_cluster(self) -> ClusterSnapshot:
        snapshot = ClusterSnapshot()
        ids = await self.zk.children(L.BROKER_IDS)
        for broker_id, found in zip(ids, await asyncio.gather(*(self.zk.get_or_none(L.broker_path(int(i)))
                                                                 for i in ids))):
            if found is not None:
                snapshot.brokers[int(broker_id)] = L.decode_broker(int(broker_id), found[0], found[1].czxid)
        topics = await self.zk.children(L.TOPICS)
        for topic, assignment in zip(topics, await asyncio.gather(*(self.read_assignment(t) for t in topics))):
            if assignment is not None:
                snapshot.topics[topic] = assignment
        keys = [(t, p) for t, a in snapshot.topics.items() for p in a.partitions]
        for key, state in zip(keys, await asyncio.gather(*(self.read_state(k) for k in keys))):
            if state is not None:
                snapshot.states[key] = state
        snapshot.deleting = set(await self.zk.children(L.DELETE_TOPICS))
        return snapshot

    async def read_assignment(self, topic: str) -> L.TopicAssignment | None:
        found = await self.zk.get_or_none(L.topic_path(topic))
        return L.decode_topic(found[0]) if found is not None else None

    async def read_state(self, tp: TopicPartition) -> PartitionState | None:
        found = await self.zk.get_or_none(L.partition_state_path(*tp))
        return L.decode_partition_state(found[0], found[1].version) if found is not None else None

    async def write(self, tp: TopicPartition, state: PartitionState) -> PartitionState | None:
        """Write ``state`` (a new znode when ``state.zk_version`` is -1, else conditional on that version);
        returns it with its new version, or None when the znode moved on (the caller re-reads and
        decides again). Raises ControllerMoved."""
        state = state.copy(controller_epoch=self.ctx.epoch)
        data = L.encode_partition_state(state)
        path = L.partition_state_path(*tp)
        if state.zk_version < 0:
            for parent in (L.partitions_path(tp[0]), L.partition_path(*tp)):
                if not await self._create_fenced(parent):
                    return None  # the topic is gone

        def op(txn) -> None:
            if state.zk_version < 0:
                txn.create(path, data)
            else:
                txn.set_data(path, data, state.zk_version)

        if await self._fenced(op) is not None:
            log.info("controller: state of %s-%d changed under us; reading it again", *tp)
            return None
        return state.copy(zk_version=state.zk_version + 1)

    async def write_assignment(self, topic: str, assignment: L.TopicAssignment) -> None:
        """Write a topic's replica assignment (a reassignment's steps) under the epoch fence; raises
        ControllerMoved, or NoNodeError when the topic is gone."""
        path = L.topic_path(topic)
        data = L.encode_topic(assignment)
        failed = await self._fenced(lambda txn: txn.set_data(path, data))
        if failed is not None:
            raise NoNodeError(path)

    async def _create_fenced(self, path: str) -> bool:
        """Create an empty znode under the epoch fence (a stale controller must not recreate the parents of
        a deleted topic); True when it exists afterwards, False when its parent does not."""
        if await self.zk.exists(path) is not None:
            return True
        failed = await self._fenced(lambda txn: txn.create(path, b""))
        return failed is None or any(isinstance(e, NodeExistsError) for e in failed.errors)

    async def _fenced(self, op: Callable[[Any], None]) -> TransactionFailed | None:
        """Run ``op`` (it adds one operation to a multi-op) after a check that /controller_epoch is still
        ours; raises ControllerMoved when that check fails, returns the failure of ``op`` (None: done)."""
        epoch_version = self.ctx.epoch_zk_version

        def ops(txn) -> None:
            txn.check(L.CONTROLLER_EPOCH, epoch_version)
            op(txn)

        try:
            await self.zk.transaction(ops)
        except TransactionFailed as exc:
            first = exc.errors[0] if exc.errors else None
            if isinstance(first, (BadVersionError, NoNodeError)):
                raise ControllerMoved(f"/controller_epoch moved past {self.ctx.epoch}") from None
            return exc
        return None

    async def write_all(self, changes: dict[TopicPartition, PartitionState]) -> dict[TopicPartition, PartitionState | None]:
        keys = list(changes)
        results = await asyncio.gather(*(self.write(k, changes[k]) for k in keys), return_exceptions=True)
        out = {}
        for key, result in zip(keys, results):
            if isinstance(result, ControllerMoved):
                raise result
            if isinstance(result, BaseException):
                log.error("controller: writing the state of %s-%d failed: %s", key[0], key[1], result)
                out[key] = None
            else:
                out[key] = result
        return out
