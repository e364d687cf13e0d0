"""ZkAdmin: topic administration in a ZooKeeper cluster (cluster/admin.py `TopicAdmin`), as Kafka's
ZooKeeper-mode brokers do it.

CreateTopics, DeleteTopics, CreatePartitions and ElectLeaders are taken by the controller only (elsewhere
NOT_CONTROLLER, after which clients find the controller in Metadata and ask again). Topic creation writes
the config overrides (`/config/topics/TOPIC`) and then the replica assignment (`/brokers/topics/TOPIC`, a
create that fails if the topic exists); the controller's watch on `/brokers/topics` does the rest, and the
request waits until the metadata shows a leader for every new partition. Auto-creation (Metadata) and the
internal topics (FindCoordinator) go the same way from any broker, without waiting. Config changes are
taken by any broker: the overrides are written, then a change notification (`/config/changes`) every
broker follows.

Replicas are spread over the live brokers by `place_replicas`: Kafka's rack-aware assignment when every
live broker has a `broker.rack` (no two replicas of a partition on one rack while there are racks enough),
else its rack-unaware one.

Partition reassignments (AlterPartitionReassignments, ListPartitionReassignments) are the controller's
(controller/reassignment.py); dynamic broker configs (the replication throttle rates) go to
`/config/brokers/ID` with a change notification, as topic configs do.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from odradek.cluster import zk_layout as L
from odradek.cluster.admin import AdminError, check_assignment, place_replicas
from odradek.cluster.controller import Controller
from odradek.cluster.host import BrokerHost
from odradek.cluster.topics import Topic, new_topic_id
from odradek.cluster.zk import BadVersionError, NodeExistsError, ZkClient
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class AdminMember(Protocol):
    """What ZkAdmin needs of the cluster member it serves (cluster/member.py's ClusterMember)."""

    broker: BrokerHost
    broker_id: int
    controller: Controller | None
    zk: ZkClient | None

    @property
    def is_controller(self) -> bool: ...

    def topic_configs_changed(self, topic: str, configs: dict[str, str]) -> None: ...

    async def broker_configs_changed(self) -> None: ...


class ZkAdmin:
    def __init__(self, member: AdminMember) -> None:
        self.member = member
        self._creating: set[str] = set()
        self._tasks: set[asyncio.Task] = set()

    @property
    def zk(self):
        return self.member.zk

    def check_controller(self) -> None:
        if not self.member.is_controller:
            raise AdminError(ErrorCode.NOT_CONTROLLER, "This is not the correct controller for this cluster.")

    def _live_brokers(self) -> list[int]:
        return sorted(self.member.broker.metadata.brokers)

    def _racks(self) -> dict[int, str | None]:
        return {b.node_id: b.rack for b in self.member.broker.metadata.brokers.values()}

    # -- create -------------------------------------------------------------------------------------------

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           assignments: dict[int, list[int]] | None, configs: dict[str, str],
                           validate_only: bool, timeout_ms: int) -> Topic:
        brokers = self._live_brokers()
        if assignments is not None:
            for replicas in assignments.values():
                check_assignment(replicas, set(brokers), replication_factor)
            placement = dict(assignments)
        else:
            placement = place_replicas(self._racks(), partitions, replication_factor)
        if await self.zk.exists(L.topic_path(name)) is not None:
            raise AdminError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        topic = Topic(name, new_topic_id(), partitions, dict(configs))
        if validate_only:
            return topic
        await self._write_topic(topic, placement)
        cache = self.member.broker.metadata
        ready = await cache.wait_for(lambda: all(
            (info := cache.partition(name, p)) is not None and info.leader >= 0 for p in range(partitions)),
            max(timeout_ms, 0) / 1000.0)
        if not ready:
            raise AdminError(ErrorCode.REQUEST_TIMED_OUT,
                             f"Topic {name} was created, but its partitions have no leader yet")
        return cache.topic(name) or topic

    async def _write_topic(self, topic: Topic, placement: dict[int, list[int]]) -> None:
        await self.zk.ensure_path(L.TOPIC_CONFIGS)
        await self.zk.set_or_create(L.topic_config_path(topic.name), L.encode_topic_config(topic.configs))
        try:
            await self.zk.create(L.topic_path(topic.name), L.encode_topic(L.TopicAssignment(topic.topic_id, placement)))
        except NodeExistsError:
            raise AdminError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.") from None
        log.info("created topic %s: %s", topic.name, placement)

    def auto_create_topic(self, name: str) -> None:
        config = self.member.broker.config
        self._create_in_background(name, config.int("num.partitions"), config.int("default.replication.factor"), {})

    def create_internal_topic(self, name: str) -> None:
        config = self.member.broker.config
        factor_key = {"__consumer_offsets": "offsets.topic.replication.factor",
                      "__share_group_state": "share.coordinator.state.topic.replication.factor"}.get(
            name, "transaction.state.log.replication.factor")
        broker = self.member.broker
        for internal, partitions, configs in broker.internal_topics + broker.on_demand_topics:
            if internal == name:
                if name == "__transaction_state":
                    configs = {**configs, "min.insync.replicas": str(config.int("transaction.state.log.min.isr"))}
                self._create_in_background(name, partitions, config.int(factor_key), configs)

    def _create_in_background(self, name: str, partitions: int, replication_factor: int,
                              configs: dict[str, str]) -> None:
        if name in self._creating:
            return
        self._creating.add(name)

        async def create() -> None:
            try:
                placement = place_replicas(self._racks(), partitions, replication_factor)
                if await self.zk.exists(L.topic_path(name)) is None:
                    await self._write_topic(Topic(name, new_topic_id(), partitions, configs), placement)
            except AdminError as exc:
                log.warning("cannot create topic %s: %s", name, exc.message)
            except Exception:
                log.exception("creating topic %s failed", name)
            finally:
                self._creating.discard(name)

        task = asyncio.ensure_future(create())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- delete -------------------------------------------------------------------------------------------

    async def delete_topic(self, name: str, timeout_ms: int) -> None:
        try:
            await self.zk.create(L.delete_topic_path(name), makepath=True)
        except NodeExistsError:
            pass  # already marked
        cache = self.member.broker.metadata
        if not await cache.wait_for(lambda: cache.topic(name) is None, max(timeout_ms, 0) / 1000.0):
            raise AdminError(ErrorCode.REQUEST_TIMED_OUT, f"Topic {name} is marked for deletion, not deleted yet")

    # -- partitions -----------------------------------------------------------------------------------------

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                                validate_only: bool, timeout_ms: int) -> None:
        found = await self.zk.get_or_none(L.topic_path(name))
        if found is None:
            raise AdminError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        data, stat = found
        assignment = L.decode_topic(data)
        if assignment.adding or assignment.removing:
            raise AdminError(ErrorCode.REASSIGNMENT_IN_PROGRESS, f"A partition of {name} is being reassigned")
        current = len(assignment.partitions)
        factor = len(next(iter(assignment.partitions.values()), []))
        brokers = self._live_brokers()
        if assignments is not None:
            for replicas in assignments:
                check_assignment(replicas, set(brokers), factor)
            added = {current + i: list(r) for i, r in enumerate(assignments)}
        else:
            added = place_replicas(self._racks(), count - current, factor, first_partition=current)
        if validate_only:
            return
        assignment.partitions.update(added)
        try:
            await self.zk.set(L.topic_path(name), L.encode_topic(assignment), stat.version)
        except BadVersionError:
            raise AdminError(ErrorCode.REASSIGNMENT_IN_PROGRESS, f"Topic {name} changed meanwhile; try again") from None
        cache = self.member.broker.metadata
        ready = await cache.wait_for(lambda: all(
            (info := cache.partition(name, p)) is not None and info.leader >= 0 for p in added),
            max(timeout_ms, 0) / 1000.0)
        if not ready:
            raise AdminError(ErrorCode.REQUEST_TIMED_OUT, f"The new partitions of {name} have no leader yet")

    # -- configs ------------------------------------------------------------------------------------------

    async def alter_topic_configs(self, name: str, overrides: dict[str, str]) -> None:
        await self.zk.set_or_create(L.topic_config_path(name), L.encode_topic_config(overrides))
        await self.zk.create(f"{L.CONFIG_CHANGES}/{L.CONFIG_CHANGE_PREFIX}", L.encode_config_change(name),
                             sequence=True, makepath=True)
        self.member.topic_configs_changed(name, overrides)

    # -- elections ----------------------------------------------------------------------------------------

    async def elect_leaders(self, preferred: bool, partitions: list[TopicPartition] | None,
                            timeout_ms: int) -> dict[TopicPartition, tuple[int, str | None]]:
        controller = self.member.controller
        if controller is None or not controller.active:
            raise AdminError(ErrorCode.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
        wanted = partitions if partitions is not None else controller.ctx.partitions()
        elect = controller.elect_preferred if preferred else controller.elect_unclean
        errors = await controller.call(lambda: elect(list(wanted)), max(timeout_ms, 1) / 1000.0)
        return {tp: (code, None) for tp, code in errors.items()}

    # -- reassignments ------------------------------------------------------------------------------------

    def _active_controller(self):
        controller = self.member.controller
        if controller is None or not controller.active:
            raise AdminError(ErrorCode.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
        return controller

    async def alter_reassignments(self, wanted: dict[TopicPartition, list[int] | None],
                                  timeout_ms: int) -> dict[TopicPartition, tuple[int, str | None]]:
        controller = self._active_controller()
        return await controller.call(lambda: controller.alter_reassignments(wanted), max(timeout_ms, 1) / 1000.0)

    async def list_reassignments(self, partitions: list[TopicPartition] | None, timeout_ms: int
                                 ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        controller = self._active_controller()
        return await controller.call(lambda: controller.list_reassignments(partitions), max(timeout_ms, 1) / 1000.0)

    # -- dynamic broker configs -------------------------------------------------------------------------

    async def alter_broker_configs(self, broker_id: int | None, changes: dict[str, str | None], replace: bool) -> None:
        """Kafka's ZooKeeper way: the configs in /config/brokers/ID, then a change notification every
        broker follows (each applies its own id's and the defaults)."""
        entity = L.BROKER_DEFAULT_ENTITY if broker_id is None else str(broker_id)
        await self.zk.ensure_path(L.BROKER_CONFIGS)
        found = None if replace else await self.zk.get_or_none(L.broker_config_path(entity))
        configs = L.decode_topic_config(found[0] if found else None)
        for name, value in changes.items():
            if value is None:
                configs.pop(name, None)
            else:
                configs[name] = value
        await self.zk.set_or_create(L.broker_config_path(entity), L.encode_topic_config(configs))
        await self.zk.create(f"{L.CONFIG_CHANGES}/{L.CONFIG_CHANGE_PREFIX}", L.encode_config_change(entity, "brokers"),
                             sequence=True, makepath=True)
        if broker_id is None or broker_id == self.member.broker_id:
            await self.member.broker_configs_changed()

    async def dynamic_broker_configs(self, broker_id: int | None) -> dict[str, str]:
        entity = L.BROKER_DEFAULT_ENTITY if broker_id is None else str(broker_id)
        found = await self.zk.get_or_none(L.broker_config_path(entity))
        return L.decode_topic_config(found[0] if found else None)

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
