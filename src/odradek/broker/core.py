"""The broker: what handlers see of topics, replicas, logs and configuration, and request dispatch.

`Broker` ties what the broker knows of the cluster and the replicas it holds (cluster/) to the partition
logs (storage/) and the coordinators, and owns the wake-ups that long-polling fetches wait on. `Broker.dispatch` turns one request frame into a response slot for the
connection: decode header and body with the generated codec, call the registered handler, encode.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable, Iterable

from odradek.broker.client_telemetry import ClientTelemetry
from odradek.broker.fetch_sessions import FetchSessionCache
from odradek.broker.metrics import BrokerMetrics
from odradek.broker.registry import HANDLERS
from odradek.broker.txn_markers import TxnMarkerChannel
from odradek.cluster.local import LocalController
from odradek.cluster.metadata import BrokerInfo, MetadataCache
from odradek.cluster.partition import ReplicationError
from odradek.cluster.replica_manager import ReplicaManager
from odradek.cluster.topics import Topic
from odradek.config import BrokerConfig
from odradek.topic_config import log_config_for
from odradek.broker import dynamic_configs
from odradek.broker.dynamic_configs import cleaner_config_of
from odradek.coordinator import OFFSETS_TOPIC, Coordinator, internal_topics, on_demand_topics
from odradek.coordinator.persistence import OffsetsTopicLog
from odradek.coordinator.placement import partition_for
from odradek.coordinator.share_state import SHARE_STATE_TOPIC, ShareStateLog
from odradek.coordinator.transactions import TXN_TOPIC, TransactionCoordinator
from odradek.security.authorizer import Authorizer
from odradek.security.quotas import PRODUCE, REQUEST, ClientQuotas
from odradek.security.scram_store import ScramStore
from odradek.broker.context import RequestContext
from odradek.net.connection import CloseConnection, Slot
from odradek.net.listeners import ListenerSetup
from odradek.protocol import codec
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.storage.config import LogConfig
from odradek.storage.manager import LogManager

if TYPE_CHECKING:
    from odradek.net.connection import KafkaConnection

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
# a group-config change sent on to a coordinator that is not there yet is tried again this long
GROUP_CONFIGS_FORWARD_S, GROUP_CONFIGS_FORWARD_BACKOFF_S = 10.0, 0.2
GROUP_RESOURCE, GROUP_CONFIG_SOURCE = 32, 8  # DescribeConfigs: the GROUP resource type, a value set for a group
# the client id purpose of the inter-broker requests that carry group configs: their receiver never sends
# them on again (broker-N-group-configs)
GROUP_CONFIGS_CLIENT = "group-configs"
# Not counted against client quotas, as in Kafka: the SASL exchange and what brokers send each other
QUOTA_EXEMPT = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
                          ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
                          ApiKey.CONTROLLED_SHUTDOWN, ApiKey.WRITE_TXN_MARKERS,
                          ApiKey.INITIALIZE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE,
                          ApiKey.WRITE_SHARE_GROUP_STATE, ApiKey.DELETE_SHARE_GROUP_STATE,
                          ApiKey.READ_SHARE_GROUP_STATE_SUMMARY})
# Answered before the broker knows its cluster: the version and login exchange, and the controller's requests,
# through which it comes to know the cluster. Every other request waits (Broker.knows_cluster).
SERVED_BEFORE_JOINING = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
                                   ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA})


class Broker:
    """One broker: its partition logs, the replicas it holds (`replicas`), what it knows of the cluster
    (`metadata`), the coordinators, and `cluster`, which decides leadership and topics: the
    LocalController of a single node, or the ZooKeeper cluster member when `zookeeper.connect` is set.
    `admin` is how that cluster carries out topic administration (cluster/admin.py)."""

    def __init__(self, config: BrokerConfig, data_dir: Path, listeners: ListenerSetup) -> None:
        self.config = config
        self.data_dir = data_dir
        self.node_id = config.node_id
        self.listeners = listeners  # ports of 0 are filled in by listening_on
        # Cut off from the cluster (cluster/member.py): client connections are closed and refused, so that
        # clients ask the other brokers, which know who leads now. The listener sets drop_connections.
        self.fenced = False
        self.drop_connections: Callable[[], None] = lambda: None
        # Whether the broker knows its cluster: a single node once its logs are loaded; a cluster member once
        # registered and told by the controller (an UpdateMetadata naming it), and again after every lost
        # ZooKeeper session. Until then requests are read and held, not answered from an empty cache: the
        # listeners must be open, since the controller's own requests come through them. librdkafka takes a
        # Metadata answer with no brokers at its word and forgets every broker it knew.
        self.knows_cluster = False
        self._cluster_known = asyncio.Event()
        data_dir.mkdir(parents=True, exist_ok=True)
        # The topic defaults derived from the broker properties are computed once, and again when a dynamic
        # broker config changes them; each topic's merged configs are cached until its overrides or the
        # defaults change (the produce path reads them for every partition of every request).
        self.topic_defaults = config.topic_defaults()
        self._effective_configs: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
        self.metadata = MetadataCache()
        self.logs = LogManager(data_dir, log_config_for(self.topic_defaults), cleaner_config=cleaner_config_of(config))
        # Kafka's dynamic broker configs (broker/dynamic_configs.py): the stored ones as (cluster-wide defaults,
        # this broker's own), the properties with them applied, and what else takes them (the listeners)
        self.dynamic_broker_configs: tuple[dict[str, str], dict[str, str]] = ({}, {})
        self.live_config = config
        self.reconfigure_hooks: list[Callable[[BrokerConfig], None]] = []
        self.logs.producer_id_expiration_ms = config.int("producer.id.expiration.ms")
        self.logs.drop_behind_bytes = config.int("log.page.cache.drop.behind.bytes")
        self.replicas = ReplicaManager(self.node_id, data_dir, self.logs, self.metadata, self.log_config,
                                       self.notify_append, config.int("replica.lag.time.max.ms"),
                                       config.int("replica.high.watermark.checkpoint.interval.ms"))
        self._waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}
        self.fetch_sessions = FetchSessionCache(config.int("max.incremental.fetch.session.cache.slots"),
                                                config.int("min.incremental.fetch.session.eviction.ms"))
        self.coordinator: Coordinator | None = None  # built by load(), once the logs are open
        self.txn_coordinator: TransactionCoordinator | None = None  # likewise, after the group coordinator
        self._last_retention_ms = 0
        # the coordinators' topics, which the cluster creates (config is fixed for the life of the process)
        self.internal_topics = internal_topics(config)
        self.on_demand_topics = on_demand_topics(config)
        if config.get("zookeeper.connect"):
            from odradek.cluster.member import ClusterMember

            self.cluster: LocalController | ClusterMember = ClusterMember(self)
        else:
            self.cluster = LocalController(self)
        self.admin = self.cluster.admin
        # SCRAM credentials; the cluster loads them and stores changes (a file, or ZooKeeper)
        self.scram = ScramStore()
        self.authorizer = Authorizer(config)  # its ACLs are loaded and stored by the cluster, as the credentials
        self.quotas = ClientQuotas(config.int("quota.window.size.seconds") * 1000, config.int("quota.window.num"))
        self.client_telemetry = ClientTelemetry(config.int("telemetry.max.bytes"))
        self.producer_ids = self.cluster.producer_id_manager()
        # Prometheus metrics (broker/metrics.py), with metrics.listen set; None costs the request path one check
        self.metrics: BrokerMetrics | None = BrokerMetrics(self) if config.get("metrics.listen") else None

    # lifecycle ---------------------------------------------------------------------------------------

    def load(self) -> None:
        """Open (and recover) every partition log and build the coordinators; a single node then leads every
        partition of its registered topics (creating the internal ones on a first start)."""
        self.logs.load_all(self._log_config_for_dir)
        self.coordinator = self._build_coordinator()
        self.txn_coordinator = self._build_txn_coordinator()
        self.replicas.on_leadership.append(self._coordinator_partition_moved)
        self.cluster.load()

    def cluster_known(self) -> None:
        """The cluster told this broker what it is (cluster/): held requests go on, new ones are served."""
        self.knows_cluster = True
        self._cluster_known.set()

    def cluster_unknown(self) -> None:
        """What this broker knows of the cluster may be stale (a lost session): hold requests again."""
        self.knows_cluster = False
        self._cluster_known.clear()

    async def until_cluster_known(self) -> None:
        while not self.knows_cluster:
            await self._cluster_known.wait()

    async def start(self) -> None:
        """Join the cluster (cluster mode: ZooKeeper registration); a single node has nothing more to do."""
        await self.cluster.start()

    async def shutdown(self) -> None:
        """Leave the cluster before closing (cluster mode: controlled shutdown, deregistration)."""
        await self.cluster.shutdown()

    def listening_on(self, ports: dict[str, int]) -> None:
        """The listeners are bound, on these ports (a port 0 listener learns its port here)."""
        self.listeners = self.listeners.with_bound_ports(ports)
        self.cluster.advertise(self.listeners)

    def _build_coordinator(self) -> Coordinator:
        partitions = self.cluster.partition_count(OFFSETS_TOPIC, self.config.int("offsets.topic.num.partitions"))
        share_state = ShareStateLog(
            self.cluster.partition_count(SHARE_STATE_TOPIC, self.config.int("share.coordinator.state.topic.num.partitions")),
            lambda p: self.replicas.partition(SHARE_STATE_TOPIC, p), now_ms,
            lambda: self.cluster.create_internal_topic(SHARE_STATE_TOPIC))
        coordinator = Coordinator(self.config, partitions, lambda p: self.replicas.partition(OFFSETS_TOPIC, p),
                                  self.metadata.has_partition, metadata=self.metadata, share_state=share_state)
        coordinator.log.local_log = lambda p: self.logs.get(OFFSETS_TOPIC, p)
        share_state.log.local_log = lambda p: self.logs.get(SHARE_STATE_TOPIC, p)
        coordinator.share_groups.wake = self.notify_append  # records released: parked ShareFetches look again
        if self.config.get("zookeeper.connect"):
            from odradek.broker.share_persister import RemotePersister

            # share-partition leaders reach each key's share coordinator wherever it is
            coordinator.share_groups.persister = RemotePersister(self, coordinator.share_groups.persister)
            coordinator.share_groups.fetch_configs = self._fetch_group_configs
        return coordinator

    def _build_txn_coordinator(self) -> TransactionCoordinator:
        partitions = self.cluster.partition_count(TXN_TOPIC, self.config.int("transaction.state.log.num.partitions"))
        offsets_partitions = self.coordinator.log.partitions
        get_partition = lambda p: self.replicas.partition(TXN_TOPIC, p)  # noqa: E731
        txn_log = OffsetsTopicLog(partitions, get_partition, now_ms)
        txn_log.local_log = lambda p: self.logs.get(TXN_TOPIC, p)
        return TransactionCoordinator(
            self.config, txn_log, self.producer_ids.allocate,
            TxnMarkerChannel(self), lambda group: partition_for(group, offsets_partitions), now_ms, get_partition)

    def _coordinator_partition_moved(self, topic: str, partition: int, leader: bool) -> None:
        """Coordinators live where their internal partition's leader lives."""
        if topic == SHARE_STATE_TOPIC:
            if leader:
                self.coordinator.load_share_state(partition)
            else:
                self.coordinator.unload_share_state(partition)
            return
        if topic == OFFSETS_TOPIC:
            target = self.coordinator
        elif topic == TXN_TOPIC:
            target = self.txn_coordinator
        else:
            # a partition's share-group windows live with its leader: a leader that was away reads them
            # again from the share coordinator
            known = self.metadata.topic(topic)
            if known is not None:
                self.coordinator.share_groups.forget_partition(known.topic_id, partition)
            return
        if leader:
            target.load_partition(partition)
        else:
            target.unload_partition(partition)

    def close(self) -> None:
        if self.coordinator is not None:
            self.coordinator.close()
        if self.txn_coordinator is not None:
            self.txn_coordinator.close()
        self.replicas.checkpoint_high_watermarks(wait=True)
        self.replicas.close()
        self.cluster.close()
        self.logs.close()

    def tick(self) -> None:
        now = now_ms()
        retention_due = now - self._last_retention_ms >= self.config.int("log.retention.check.interval.ms")
        if retention_due:
            self._last_retention_ms = now
        self.logs.tick(now, retention=retention_due)
        self.replicas.tick()
        if self.coordinator is not None:
            self.coordinator.tick(now)
        if self.txn_coordinator is not None:
            self.txn_coordinator.tick(now)
        if retention_due:
            self.quotas.forget_idle(now)

    # topics ------------------------------------------------------------------------------------------

    def effective_configs(self, topic: Topic) -> dict[str, str]:
        """Defaults merged with the topic's overrides; shared and cached, so callers must not modify it."""
        cached = self._effective_configs.get(topic.name)
        if cached is None or cached[0] is not topic.configs:
            cached = self._effective_configs[topic.name] = (topic.configs, {**self.topic_defaults, **topic.configs})
        return cached[1]

    def forget_effective_configs(self) -> None:
        """The topic defaults changed (a dynamic broker config): every topic's merged configs are made again."""
        self._effective_configs.clear()

    def apply_dynamic_configs(self, defaults: dict[str, str], own: dict[str, str]) -> None:
        """The dynamic broker configs stored now (cluster-wide and this broker's): applied at once."""
        dynamic_configs.apply(self, defaults, own)

    def log_config(self, topic_name: str) -> LogConfig:
        topic = self.metadata.topic(topic_name)
        return log_config_for(self.effective_configs(topic) if topic is not None else self.topic_defaults)

    def _log_config_for_dir(self, topic_name: str) -> LogConfig:
        """Settings of a log found on disk at start-up, before the cluster has published its topic."""
        topic = self.cluster.known_topic(topic_name)
        return log_config_for(self.effective_configs(topic) if topic is not None else self.topic_defaults)

    def topic_configs_changed(self, name: str) -> None:
        """A topic's overrides changed: its local logs take the new settings from the next append."""
        config = self.log_config(name)
        for (topic, _), plog in self.logs.logs().items():
            if topic == name:
                plog.update_config(config)

    def internal_topic_partitions(self, name: str, partitions: int) -> None:
        """The cluster's internal topic has this many partitions (a cluster learns it from the metadata):
        the coordinators hash keys over that count."""
        owner = self.txn_coordinator if name == TXN_TOPIC else self.coordinator
        if owner is None:
            return
        target = owner.share_state.log if name == SHARE_STATE_TOPIC else owner.log
        if target.partitions != partitions:
            log.info("%s has %d partitions", name, partitions)
            target.partitions = partitions

    def partition_exists(self, topic: str, partition: int) -> bool:
        return self.metadata.has_partition(topic, partition)

    def coordinator_node(self, transactional: bool, key: str) -> BrokerInfo | None:
        """The broker coordinating a group (or a transactional id): the leader of its internal partition.
        None while there is none; in a cluster the internal topic is created on the first ask."""
        name = TXN_TOPIC if transactional else OFFSETS_TOPIC
        topic = self.metadata.topic(name)
        if topic is None:
            self.cluster.create_internal_topic(name)
            return None
        return self.metadata.leader_of(name, partition_for(key, topic.partitions))

    def _fetch_group_configs(self, group_id: str) -> Future:
        """A future of the configs set for a group, asked of its coordinator (DescribeConfigs on the GROUP
        resource; None when it cannot say): a share-partition leader elsewhere needs them."""
        result: Future = Future()
        task = asyncio.ensure_future(self.group_configs_at_coordinator(group_id))
        task.add_done_callback(lambda t: result.set_result(
            None if t.cancelled() or t.exception() is not None else t.result()))
        return result

    async def group_configs_at_coordinator(self, group_id: str) -> dict[str, str] | None:
        """The configs set for a group, as its coordinator (another broker) answers; None when it cannot say."""
        node = self.coordinator_node(False, group_id)
        client = self.cluster.client_for(node.node_id, GROUP_CONFIGS_CLIENT) if node is not None else None
        if client is None:
            return None
        try:
            response = await client.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
                {"resource_type": GROUP_RESOURCE, "resource_name": group_id, "configuration_keys": None}],
                "include_synonyms": False, "include_documentation": False}, timeout_s=10.0)
        except ConnectionError:
            return None
        (result,) = response["results"]
        if result["error_code"]:
            return None
        return {c["name"]: c["value"] for c in result["configs"] if c["config_source"] == GROUP_CONFIG_SOURCE}

    async def alter_group_configs_at_coordinator(self, resource: dict, validate_only: bool) -> tuple[int, str | None]:
        """IncrementalAlterConfigs of one GROUP resource sent on to the group's coordinator (another broker):
        group configs are the cluster's, changeable through any broker, and kept where the group lives. While
        the group has no coordinator yet (``__consumer_offsets`` being created, a leader being elected) it is
        asked again for up to GROUP_CONFIGS_FORWARD_S, as Kafka's brokers take the change at once: a client
        (franz-go's admin, say) does not retry a resource's COORDINATOR_NOT_AVAILABLE."""
        deadline = time.monotonic() + GROUP_CONFIGS_FORWARD_S
        while True:
            error, message = await self._forward_group_configs(resource, validate_only)
            if error != ErrorCode.COORDINATOR_NOT_AVAILABLE or time.monotonic() >= deadline:
                return error, message
            await asyncio.sleep(GROUP_CONFIGS_FORWARD_BACKOFF_S)

    async def _forward_group_configs(self, resource: dict, validate_only: bool) -> tuple[int, str | None]:
        node = self.coordinator_node(False, resource["resource_name"])
        client = self.cluster.client_for(node.node_id, GROUP_CONFIGS_CLIENT) \
            if node is not None and node.node_id != self.node_id else None
        if client is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The group's coordinator is not available."
        try:
            response = await client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
                "resources": [resource], "validate_only": validate_only}, timeout_s=10.0)
        except (ConnectionError, asyncio.TimeoutError):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The group's coordinator did not answer."
        (answer,) = response["responses"]
        if answer["error_code"] in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The group's coordinator moved."
        return answer["error_code"], answer["error_message"]

    def share_coordinator_node(self, key: str) -> BrokerInfo | None:
        """The share coordinator of a share-partition key `group:topic-id:partition`: the leader of its
        `__share_group_state` partition (created on the first ask, as the other internal topics)."""
        topic = self.metadata.topic(SHARE_STATE_TOPIC)
        if topic is None:
            self.cluster.create_internal_topic(SHARE_STATE_TOPIC)
            return None
        return self.metadata.leader_of(SHARE_STATE_TOPIC, partition_for(key, topic.partitions))

    async def in_transaction(self, txn_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[TopicPartition], add: bool) -> dict[TopicPartition, int]:
        """Ask the transaction's coordinator (here, or on its broker with AddPartitionsToTxn v5) whether each of
        ``partitions`` is in the producer's open transaction, or with ``add`` (transactions v2: a first write
        to the partition) to add them to it; an error code per partition (NONE: it is, or now is)."""
        node = self.coordinator_node(True, txn_id)
        if node is None:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        fenced = ErrorCode.INVALID_PRODUCER_EPOCH
        if node.node_id == self.node_id:
            coordinator = self.txn_coordinator
            if not coordinator.owns(txn_id):
                return dict.fromkeys(partitions, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            if add:
                return dict.fromkeys(partitions, await coordinator.add_partitions(
                    txn_id, producer_id, producer_epoch, partitions, fenced, wait=True))
            return coordinator.verify(txn_id, producer_id, producer_epoch, partitions, fenced)
        client = self.cluster.client_for(node.node_id, "txn-verify")
        if client is None:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        topics: dict[str, list[int]] = {}
        for topic, index in partitions:
            topics.setdefault(topic, []).append(index)
        try:
            response = await client.request(ApiKey.ADD_PARTITIONS_TO_TXN, 5, {"transactions": [{
                "transactional_id": txn_id, "producer_id": producer_id, "producer_epoch": producer_epoch,
                "verify_only": not add, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}]},
                timeout_s=10.0)
        except ConnectionError:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if response["error_code"]:
            return dict.fromkeys(partitions, response["error_code"])
        out = {}
        for topic in response["results_by_transaction"][0]["topic_results"]:
            for p in topic["results_by_partition"]:
                error = p["partition_error_code"]
                out[(topic["name"], p["partition_index"])] = fenced if error == ErrorCode.PRODUCER_FENCED else error
        return out

    # fetch wake-ups ----------------------------------------------------------------------------------

    def notify_append(self, topic: str, partition: int) -> None:
        self._wake((topic, partition))

    def _wake(self, key: TopicPartition) -> None:
        waiters = self._waiters.pop(key, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    async def wait_for_append(self, keys: Iterable[TopicPartition], timeout_s: float) -> None:
        """Return when any of the partitions gets new data, or after the timeout."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._waiters.setdefault(key, set()).add(fut)
        try:
            await asyncio.wait_for(fut, timeout_s)
        except asyncio.TimeoutError:
            pass
        finally:
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        del self._waiters[key]

    # dispatch ----------------------------------------------------------------------------------------

    def dispatch(self, frame: bytes, conn: "KafkaConnection") -> Slot:
        metrics = self.metrics
        started = time.perf_counter() if metrics is not None else 0.0
        try:
            header, offset = codec.decode_request_header(frame)
        except codec.ProtocolError as exc:
            raise CloseConnection(f"unreadable request header: {exc}") from None
        api_key = header["request_api_key"]
        version = header["request_api_version"]
        correlation_id = header["correlation_id"]
        spec = HANDLERS.get(api_key)
        if spec is None or not spec.supports(version):
            if api_key == ApiKey.API_VERSIONS:
                return unsupported_api_versions_response(correlation_id)
            raise CloseConnection(f"unsupported api key {api_key} version {version}")
        if not self.knows_cluster and api_key not in SERVED_BEFORE_JOINING:
            return asyncio.ensure_future(self._dispatch_once_known(frame, conn))
        try:
            request = codec.decode_request(api_key, version, frame, offset)
        except codec.ProtocolError as exc:
            raise CloseConnection(f"malformed {ApiKey(api_key).name} v{version} request: {exc}") from None
        ctx = RequestContext(self, api_key, version, correlation_id, header.get("client_id"), conn)
        if metrics is not None:
            metrics.started(ctx, request, started)
        if self.quotas.enabled and api_key not in QUOTA_EXEMPT and request.get("replica_id", -1) < 0:
            body = self._call_metered(spec, ctx, request, len(frame))
        else:
            body = spec.fn(ctx, request)
        if body is None:
            if ctx.throttle_ms:
                self._throttle(ctx, None)
            if metrics is not None:
                metrics.finished(ctx, None)
            return None
        if type(body) is not dict:  # a coroutine: this request waits (registry.py)
            task = asyncio.ensure_future(self._finish(ctx, body))
            # cancelled before its first step (the broker shutting down), _finish never awaits `body`; closing
            # it says it is dropped on purpose, instead of Python's "never awaited" warning
            if asyncio.iscoroutine(body):
                task.add_done_callback(lambda _, waiting=body: waiting.close())
            return task
        if ctx.throttle_ms:
            self._throttle(ctx, body)
        if metrics is None:
            return codec.encode_response(api_key, version, correlation_id, body)
        response = codec.encode_response(api_key, version, correlation_id, body)
        metrics.finished(ctx, body)
        return response

    async def _dispatch_once_known(self, frame: bytes, conn: "KafkaConnection") -> bytes | list | None:
        """Dispatch ``frame`` once the broker knows its cluster (the connection reads nothing meanwhile)."""
        await self.until_cluster_known()
        slot = self.dispatch(frame, conn)
        return await slot if isinstance(slot, asyncio.Future) else slot

    @staticmethod
    def _throttle(ctx: RequestContext, body: dict | None) -> None:
        """The response tells the client its throttle time; the connection reads nothing more meanwhile."""
        if body is not None:
            body["throttle_time_ms"] = max(body.get("throttle_time_ms", 0), ctx.throttle_ms)
        ctx.connection.throttle(ctx.throttle_ms)

    def _call_metered(self, spec, ctx: RequestContext, request: dict, size: int):
        """Call the handler, counting the request against the client's quotas (security/quotas.py): Produce
        bytes before, the time the handler takes after. Fetch counts its response bytes itself."""
        user, client_id = ctx.quota_client
        quotas = self.quotas
        if ctx.api_key == ApiKey.PRODUCE:
            ctx.throttle_ms = quotas.record(PRODUCE, user, client_id, size, now_ms())
        start = time.perf_counter()
        body = spec.fn(ctx, request)
        used = (time.perf_counter() - start) * 100.0  # percent of one thread, over the rate's seconds
        ctx.throttle_ms = max(ctx.throttle_ms, quotas.record(REQUEST, user, client_id, used, now_ms()))
        return body

    async def _finish(self, ctx: RequestContext, waiting: Awaitable[dict | None]) -> list | None:
        body = await waiting
        if ctx.throttle_ms:  # from the time the response is ready, as Kafka mutes once it is sent
            self._throttle(ctx, body)
        metrics = self.metrics
        if body is None:
            if metrics is not None:
                metrics.finished(ctx, None)
            return None
        # parts, not one joined frame: a Fetch response may carry file regions for the connection to sendfile
        parts = codec.encode_response_parts(ctx.api_key, ctx.api_version, ctx.correlation_id, body)
        if metrics is not None:
            metrics.finished(ctx, body)
        return parts


def unsupported_api_versions_response(correlation_id: int) -> bytes:
    """ApiVersions at a version we do not speak: error 35 with a v0 body listing the versions of ApiVersions
    itself (KIP-511), all a client needs to step down and all that Kafka lists."""
    spec = HANDLERS[ApiKey.API_VERSIONS]
    body = {
        "error_code": ErrorCode.UNSUPPORTED_VERSION,
        "api_keys": [{"api_key": spec.api_key, "min_version": spec.min_version, "max_version": spec.max_version}],
    }
    return codec.encode_response(ApiKey.API_VERSIONS, 0, correlation_id, body)


def when_durable(body: dict, pending: list[tuple[dict, Future]], failed: Callable[[dict, BaseException], None],
                 timeout_s: float | None = None):
    """``body`` to answer once each ``pending`` future is done, paired with the part of ``body`` it covers:
    a flusher future (storage/flusher.py: the write is on disk) or a replication future (cluster/partition.py
    `when_committed`: the ISR has it). A future that failed has ``failed(part, error)`` applied to that part;
    one still running after ``timeout_s`` gets ``failed(part, TimeoutError())``.

    Returns ``body`` itself when every future is done already, so the common case costs no task; otherwise
    a coroutine giving it (a handler may return either: registry.py)."""
    running = []
    for part, future in pending:
        if not future.done():
            running.append((part, future))
        elif future.exception() is not None:
            failed(part, future.exception())
    return _after(body, running, failed, timeout_s) if running else body


async def _after(body: dict, running: list[tuple[dict, Future]], failed: Callable[[dict, BaseException], None],
                 timeout_s: float | None) -> dict:
    # One loop future and one timer for all of them: the replication futures complete on the loop's own
    # thread, so they settle it directly; only a flusher future (its own thread) needs call_soon_threadsafe.
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()
    all_done = loop.create_future()
    remaining = len(running)

    def count() -> None:
        nonlocal remaining
        remaining -= 1
        if remaining == 0 and not all_done.done():
            all_done.set_result(None)

    def settled(_: Future) -> None:
        if threading.get_ident() == loop_thread:
            count()
        else:
            loop.call_soon_threadsafe(count)

    for _, future in running:
        future.add_done_callback(settled)
    # The futures are never cancelled here: a flusher future may be shared with other requests, whose fsync a
    # cancellation would skip; a replication future nobody waits for any more is dropped once the HW passes.
    try:
        if timeout_s is None:
            await all_done
        else:
            await asyncio.wait_for(all_done, max(timeout_s, 0))
    except asyncio.TimeoutError:
        pass
    for part, future in running:
        if not future.done() or future.cancelled():
            failed(part, TimeoutError())
        elif future.exception() is not None:
            exc = future.exception()
            if not isinstance(exc, (OSError, ReplicationError)):
                raise exc
            failed(part, exc)
    return body


def now_ms() -> int:
    return time.time_ns() // 1_000_000
