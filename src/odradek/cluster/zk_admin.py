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

Replicas are spread over the live brokers by `assign_replicas` (Kafka's rack-unaware assignment).

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from odradek.cluster import zk_layout as L
from odradek.cluster.admin import AdminError, assign_replicas, check_assignment
from odradek.cluster.topics import Topic, new_topic_id
from odradek.cluster.zk import BadVersionError, NodeExistsError
from odradek.coordinator import internal_topics
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.cluster.member import ClusterMember

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class ZkAdmin:
    def __init__(self, member: "ClusterMember") -> None:
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
            placement = assign_replicas(brokers, partitions, replication_factor)
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
        factor_key = "offsets.topic.replication.factor" if name == "__consumer_offsets" else \
            "transaction.state.log.replication.factor"
        for internal, partitions, configs in internal_topics(config):
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
                placement = assign_replicas(self._live_brokers(), partitions, replication_factor)
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
        current = len(assignment.partitions)
        factor = len(next(iter(assignment.partitions.values()), []))
        brokers = self._live_brokers()
        if assignments is not None:
            for replicas in assignments:
                check_assignment(replicas, set(brokers), factor)
            added = {current + i: list(r) for i, r in enumerate(assignments)}
        else:
            added = assign_replicas(brokers, count - current, factor, first_partition=current)
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

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
