"""LocalController: the cluster of one, odradek's default (no `zookeeper.connect`).

This broker is the only one, the controller, and the leader of every partition in leader epoch 0 with an
ISR of itself. Topics live in the local registry (cluster/topics.py, `__cluster_metadata/topics.json`).
It drives the same `MetadataCache` and `ReplicaManager` calls the ZooKeeper controller drives through
UpdateMetadata and LeaderAndIsr, so handlers, partitions and coordinators see a single node exactly as
they see a cluster whose every partition is led here. Everything it does is synchronous: a single node
decides alone.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import json
import logging
import os

from odradek.security.authorizer import AclFile
from odradek.security.quotas import QuotaFile
from odradek.security.scram_store import ScramFile
from odradek.cluster.admin import AdminError, check_assignment
from odradek.cluster.host import BrokerHost
from odradek.cluster.metadata import BrokerInfo, PartitionInfo
from odradek.cluster.replica_manager import PartitionStateChange
from odradek.cluster.topics import Topic, TopicRegistry, new_topic_id
from odradek.cluster.producer_ids import ProducerIdManager
from odradek.net.listeners import ListenerSetup
from odradek.protocol.errors import ErrorCode


log = logging.getLogger(__name__)

LEADER_EPOCH = 0  # a single node never changes leader
DEFAULT_ENTITY = "<default>"  # the cluster-wide dynamic broker configs, as ZooKeeper names them


class LocalController:
    def __init__(self, broker: BrokerHost) -> None:
        self.broker = broker
        self.registry = TopicRegistry(broker.data_dir)
        self.admin = self  # it decides topics alone (cluster/admin.py TopicAdmin)
        # dynamic broker configs by entity (this broker's id, or DEFAULT_ENTITY), kept across restarts
        self._broker_configs_path = broker.data_dir / "__cluster_metadata" / "broker_configs.json"
        self._broker_configs: dict[str, dict[str, str]] = (
            json.loads(self._broker_configs_path.read_text()) if self._broker_configs_path.exists() else {})
        broker.metadata.cluster_id = self.registry.cluster_id

    def producer_id_manager(self) -> ProducerIdManager:
        return ProducerIdManager(self.broker.data_dir)

    def partition_count(self, name: str, default: int) -> int:
        topic = self.registry.get(name)
        return topic.partitions if topic is not None else default

    def known_topic(self, name: str) -> Topic | None:
        return self.registry.get(name)

    def load(self) -> None:
        """Drop logs of topics the registry does not have, then publish this broker and every topic, leading
        all of their partitions; create the internal topics on a first start."""
        broker = self.broker
        self._apply_broker_configs()
        for name in sorted({t for t, _ in broker.logs.logs()}):
            if self.registry.get(name) is None:
                log.warning("removing partition directories of unknown topic %s", name)
                broker.logs.delete_topic(name)
        self.advertise(broker.listeners)
        scram_file = ScramFile(broker.data_dir)
        scram_file.load_into(broker.scram)
        broker.scram.persist = lambda updated: scram_file.persist(broker.scram, updated)
        acl_file = AclFile(broker.data_dir)
        acl_file.load_into(broker.authorizer)
        broker.authorizer.persist = acl_file.persist
        quota_file = QuotaFile(broker.data_dir)
        quota_file.load_into(broker.quotas)
        broker.quotas.persist = quota_file.persist
        for topic in self.registry.all():
            self._publish(topic, 0)
        for name, partitions, configs in broker.internal_topics:
            if self.registry.get(name) is None:
                self.create_topic_now(name, partitions, configs)
        broker.cluster_known()  # a single node is its own cluster

    async def start(self) -> None:
        return None

    async def shutdown(self) -> None:
        return None

    def create_internal_topic(self, name: str) -> None:
        for internal, partitions, configs in self.broker.internal_topics + self.broker.on_demand_topics:
            if internal == name and self.registry.get(name) is None:
                self.create_topic_now(name, partitions, configs)

    def advertise(self, listeners: ListenerSetup) -> None:
        own = listeners.advertised_listener(listeners.inter_broker)
        endpoints = tuple((a.name, a.host, a.port) for a in listeners.advertised)
        info = BrokerInfo(self.broker.node_id, own.host, own.port, self.broker.config.get("broker.rack"), endpoints)
        self.broker.metadata.set_brokers([info], self.broker.node_id)

    def _publish(self, topic: Topic, first_new: int) -> None:
        broker = self.broker
        node = broker.node_id
        broker.metadata.put_topic(topic)
        changes = []
        for p in range(first_new, topic.partitions):
            broker.metadata.put_partition(topic.name, p, PartitionInfo(node, LEADER_EPOCH, [node], [node]))
            changes.append(PartitionStateChange(topic.name, p, 0, node, LEADER_EPOCH, [node], 0, [node], True))
        errors = broker.replicas.become_leader_or_follower(0, changes)
        failed = {k: e for k, e in errors.items() if e}
        if failed:
            raise OSError(f"cannot open partitions of {topic.name}: {failed}")

    # -- TopicAdmin -----------------------------------------------------------------------------------

    def check_controller(self) -> None:
        return None

    def _check_replicas(self, replication_factor: int, assignments: list[list[int]]) -> None:
        node = self.broker.node_id
        if replication_factor > 1:
            raise AdminError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Replication factor: {replication_factor} larger than available brokers: 1.")
        for replicas in assignments:
            check_assignment(replicas, {node}, None)

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           assignments: dict[int, list[int]] | None, configs: dict[str, str],
                           validate_only: bool, timeout_ms: int) -> Topic:
        if self.registry.get(name) is not None:
            raise AdminError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        self._check_replicas(replication_factor, list((assignments or {}).values()))
        if validate_only:
            return Topic(name, new_topic_id(), partitions, dict(configs))
        return self.create_topic_now(name, partitions, configs)

    def create_topic_now(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        topic = self.registry.create(name, partitions, configs)
        self._publish(topic, 0)
        log.log(logging.DEBUG if name.startswith("__") else logging.INFO, "created topic %s with %d partitions", name,
                partitions)
        return topic

    async def delete_topic(self, name: str, timeout_ms: int) -> None:
        broker = self.broker
        topic = self.registry.get(name)
        if topic is None:
            raise AdminError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        self.registry.delete(name)
        broker.metadata.remove_topic(name)
        for p in range(topic.partitions):
            broker.replicas.stop_replica(name, p, delete=False)
        broker.logs.delete_topic(name)  # all partitions at once, safe against a crash midway
        for p in range(topic.partitions):
            broker.notify_append(name, p)  # parked fetches answer UNKNOWN_TOPIC_OR_PARTITION now
        log.info("deleted topic %s", name)

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                                validate_only: bool, timeout_ms: int) -> None:
        self._check_replicas(1, assignments or [])
        if validate_only:
            return
        before = self.registry.get(name).partitions
        topic = self.registry.set_partition_count(name, count)
        self._publish(topic, before)
        log.info("topic %s now has %d partitions", name, count)

    async def alter_topic_configs(self, name: str, overrides: dict[str, str]) -> None:
        topic = self.registry.set_configs(name, overrides)
        self.broker.metadata.set_topic_configs(name, topic.configs)
        self.broker.topic_configs_changed(name)

    def auto_create_topic(self, name: str) -> None:
        self.create_topic_now(name, self.broker.config.int("num.partitions"), {})

    async def elect_leaders(self, preferred: bool, partitions: list[tuple[str, int]] | None,
                            timeout_ms: int) -> dict[tuple[str, int], tuple[int, str | None]]:
        # the only replica already leads: Kafka answers ELECTION_NOT_NEEDED
        wanted = partitions if partitions is not None else [
            (t.name, p) for t in self.registry.all() for p in range(t.partitions)]
        return {tp: (ErrorCode.ELECTION_NOT_NEEDED if self.broker.metadata.has_partition(*tp)
                     else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None) for tp in wanted}

    async def alter_reassignments(self, wanted: dict[tuple[str, int], list[int] | None],
                                  timeout_ms: int) -> dict[tuple[str, int], tuple[int, str | None]]:
        # the only possible target is this node, which holds every partition already: nothing to move
        node = self.broker.node_id
        out: dict[tuple[str, int], tuple[int, str | None]] = {}
        for tp, target in wanted.items():
            if not self.broker.metadata.has_partition(*tp):
                out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unknown partition {tp[0]}-{tp[1]}"
            elif target is None:
                out[tp] = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment is in progress"
            elif target != [node]:
                out[tp] = ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The only broker is {node}"
            else:
                out[tp] = ErrorCode.NONE, None
        return out

    async def list_reassignments(self, partitions: list[tuple[str, int]] | None, timeout_ms: int
                                 ) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        return {}

    async def alter_broker_configs(self, broker_id: int | None, changes: dict[str, str | None], replace: bool) -> None:
        entity = DEFAULT_ENTITY if broker_id is None else str(broker_id)
        configs = {} if replace else dict(self._broker_configs.get(entity, {}))
        for name, value in changes.items():
            if value is None:
                configs.pop(name, None)
            else:
                configs[name] = value
        self._broker_configs[entity] = configs
        tmp = self._broker_configs_path.with_suffix(".tmp")
        tmp.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w") as f:
            json.dump({k: v for k, v in self._broker_configs.items() if v}, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._broker_configs_path)
        self._apply_broker_configs()

    def _apply_broker_configs(self) -> None:
        """What the broker takes at run time (broker/dynamic_configs.py); a single node follows no leader, so
        the replication throttles are kept only."""
        self.broker.apply_dynamic_configs(self._broker_configs.get(DEFAULT_ENTITY, {}),
                                          self._broker_configs.get(str(self.broker.node_id), {}))

    async def dynamic_broker_configs(self, broker_id: int | None) -> dict[str, str]:
        return dict(self._broker_configs.get(DEFAULT_ENTITY if broker_id is None else str(broker_id), {}))

    # -- inter-broker requests: a single node has no other controller --------------------------------------

    def check_request(self, controller_epoch: int, broker_epoch: int) -> int:
        return ErrorCode.STALE_CONTROLLER_EPOCH

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, list[tuple[str, int]]]:
        return ErrorCode.NOT_CONTROLLER, []

    def client_for(self, node_id: int, purpose: str) -> None:
        return None  # there is no other broker

    def close(self) -> None:
        pass
