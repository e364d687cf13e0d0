"""ClusterMember: this broker as a member of a cluster coordinated by ZooKeeper (`zookeeper.connect`).

What it does, in Kafka's ZooKeeper layout (zk_layout.py):

- Start: connects (`zookeeper.session.timeout.ms`), creates the persistent paths, adopts the cluster id
  (`/cluster/id`, created by the first broker; checked against the data directory's `meta.properties`, so
  a data directory never joins another cluster) and registers `/brokers/ids/ID` (ephemeral; its czxid is
  the broker epoch). A registration left by this broker's previous, crashed process is waited out until
  its session expires. Then it joins the controller election: whoever creates the ephemeral `/controller`
  first runs the `Controller`; the others watch it and try again when it vanishes.
- Applies what the controller sends (handlers k04-k06): LeaderAndIsr (the topic's config overrides are read
  from `/config/topics` first, so its logs get their settings), StopReplica, UpdateMetadata (the metadata
  cache; on the first one, logs of topics the cluster no longer has are removed).
- Writes the ISR changes of partitions it leads (conditionally on the state znode's version) and leaves a
  notification for the controller in `/isr_change_notification`.
- Follows config changes (`/config/changes`) and allocates producer ids in blocks from
  `/latest_producer_id_block` (ZkProducerIdManager), unique across the cluster.
- Session loss: when ZooKeeper reports the session expired, every partition this broker leads stops being
  led here (writes get NOT_LEADER_OR_FOLLOWER) and fetching stops: another broker may be leading it by
  now. On the new session it registers again and waits for the controller's word. A broker that has
  reached neither ZooKeeper nor any other broker for a whole session timeout takes its session as expired
  then (the server has expired it) rather than when it reconnects, which in a network partition may be much
  later: it stops leading and closes its client connections until ZooKeeper is back (_presume_expired);
  should the session turn out alive it registers anew, so the controller re-decides its partitions. While
  the other brokers still reach it, ZooKeeper is away for all of them and it serves on, as Kafka does.
- Shutdown (SIGTERM): ControlledShutdown to the controller, which moves leadership away first, so clients
  see only retriable errors; then the session is closed, which removes the registration.

Not thread-safe; owned by the event loop. kazoo's threads only reach it through ZkClient.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from typing import Iterable

from odradek.security.quotas import QUOTA_KEYS, QuotaEntity
from odradek.cluster import ClusterError
from odradek.cluster import zk_acls
from odradek.cluster import zk_layout as L
from odradek.cluster.broker_client import BrokerClient, BrokerUnavailable
from odradek.cluster.controller import Controller, ShutdownRefused
from odradek.cluster.controller import broker_changes
from odradek.cluster.fetcher import FetcherSettings, ReplicaFetcherManager, ReplicationThrottle
from odradek.cluster.host import BrokerHost
from odradek.cluster.metadata import LEADER_DURING_DELETE, BrokerInfo, PartitionInfo
from odradek.cluster.partition import Partition
from odradek.cluster.producer_ids import ZkProducerIdManager
from odradek.cluster.replica_manager import IsrWritten, PartitionStateChange
from odradek.cluster.topics import INTERNAL_TOPICS, Topic
from odradek.cluster.zk import (BadVersionError, ConnectionLoss, NodeExistsError, NoNodeError, SessionExpiredError,
                                ZkClient, report_background_failure)
from odradek.cluster.zk_admin import ZkAdmin
from odradek.net.listeners import ListenerSetup
from odradek.net.sasl import SCRAM_MECHANISMS, ScramCredential
from odradek.net.sasl_client import inter_broker_sasl
from odradek.net.tls import client_context
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.storage.files import write_file_atomically


log = logging.getLogger(__name__)
PEER_RECHECK_S = 1.0  # while ZooKeeper is away but the brokers reach us: how often to look again

CONTROLLED_SHUTDOWN_VERSION = 3
META_PROPERTIES = "meta.properties"
HANDOVER_GRACE_S = 0.25


class ClusterMember:
    def __init__(self, broker: BrokerHost) -> None:
        self.broker = broker
        config = broker.config
        self.broker_id = config.node_id
        if config.int("broker.id") < 0 and "node.id" not in config.raw:
            raise ClusterError("cluster mode needs broker.id (or node.id)")
        self.connect = str(config.get("zookeeper.connect"))
        self.session_timeout_ms = config.int("zookeeper.session.timeout.ms")
        self.zk: ZkClient | None = None
        self.broker_epoch = -1
        # registered in the current session; the broker knows its cluster once the controller, after that,
        # sends metadata naming it (update_metadata)
        self._registered = False
        self._named = 0  # UpdateMetadata requests that named this broker
        self.controller: Controller | None = None
        self.admin = ZkAdmin(self)
        self._endpoints: tuple[L.Endpoint, ...] = ()  # every advertised listener, registered in ZooKeeper
        # other brokers are reached on the inter-broker listener, with TLS if it uses it, logged in to with
        # SASL if it uses that (sasl.mechanism.inter.broker.protocol and the listener's JAAS username/password)
        inter_broker = broker.listeners.advertised_listener(broker.listeners.inter_broker)
        self.inter_broker_listener = inter_broker.name
        self.inter_broker_tls = client_context(config, inter_broker.name) if inter_broker.uses_tls else None
        self.inter_broker_sasl = inter_broker_sasl(config, inter_broker)
        self._clients: dict[tuple[int, str], BrokerClient] = {}
        # addresses of leaders LeaderAndIsr named before UpdateMetadata listed them
        self._leader_addresses: dict[int, tuple[str, int]] = {}
        self._topic_configs: dict[str, dict[str, str]] = {}
        self._config_changes_seen: int | None = None  # the last change notification handled (-1: none yet)
        self._first_metadata = True
        self._tasks: set[asyncio.Task] = set()
        self._closing = False
        self._session_lost = False
        self._suspended = False
        # disconnected for a whole session timeout: the session is taken as expired (_presume_expired)
        self._presumed_lost = False
        self._expiry_timer: asyncio.TimerHandle | None = None
        replicas = broker.replicas
        replicas.isr_writer = self._write_isr
        self.throttle = ReplicationThrottle(self.broker_id, config.int("follower.replication.throttled.rate"),
                                            lambda topic: self._topic_configs.get(topic, {}))
        replicas.fetchers = ReplicaFetcherManager(FetcherSettings(
            self.broker_id, config.int("replica.fetch.wait.max.ms"), config.int("replica.fetch.min.bytes"),
            config.int("replica.fetch.max.bytes"), config.int("replica.fetch.response.max.bytes"),
            config.int("replica.fetch.backoff.ms") / 1000.0),
            lambda node: self._new_client(node, "replica-fetcher"), self._follower_appended, self.throttle)

    # -- what the broker asks of its cluster ---------------------------------------------------------------

    def producer_id_manager(self) -> ZkProducerIdManager:
        return ZkProducerIdManager(self)

    def partition_count(self, name: str, default: int) -> int:
        return default  # corrected from the metadata once the topic is known (internal topics)

    def known_topic(self, name: str) -> Topic | None:
        return None  # nothing is known before ZooKeeper: logs open with the defaults until LeaderAndIsr

    def load(self) -> None:
        return None  # partitions are led or followed when the controller says so

    @property
    def is_controller(self) -> bool:
        return self.controller is not None and self.controller.active

    def advertise(self, listeners: ListenerSetup) -> None:
        self._endpoints = tuple(L.Endpoint(a.name, a.host, a.port, a.security_protocol) for a in listeners.advertised)

    def create_internal_topic(self, name: str) -> None:
        self.admin.create_internal_topic(name)

    # -- start ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.zk = ZkClient(self.connect, self.session_timeout_ms, loop)
        timeout_ms = self.broker.config.get("zookeeper.connection.timeout.ms") or self.session_timeout_ms
        try:
            await self.zk.start(int(timeout_ms) / 1000.0)
        except Exception as exc:
            raise ClusterError(f"cannot connect to ZooKeeper at {self.connect}: {exc}") from None
        self.zk.on_state(self._on_session_state)
        for path in L.PERSISTENT_PATHS:
            await self.zk.ensure_path(path)
        cluster_id = await self._cluster_id()
        self.broker.metadata.cluster_id = cluster_id
        self._check_meta_properties(cluster_id)
        # SCRAM users before the registration: once registered, the controller and the other brokers may log
        # in to the inter-broker listener with them
        await self._load_scram_users()
        self.broker.scram.persist = self._store_scram_users
        await self._register()
        await self._load_quotas()
        self.broker.quotas.persist = self._store_quotas
        for path in zk_acls.PATHS:
            await self.zk.ensure_path(path)
        self.broker.authorizer.persist = self._store_acls
        await self._watch_acl_changes()
        await self._watch_config_changes()
        await self.broker_configs_changed()
        await self._elect()
        log.info("broker %d joined cluster %s (ZooKeeper %s)", self.broker_id, cluster_id, self.connect)

    async def _cluster_id(self) -> str:
        found = await self.zk.get_or_none(L.CLUSTER_ID)
        if found is not None:
            return L.decode_cluster_id(found[0])
        proposed = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        try:
            await self.zk.create(L.CLUSTER_ID, L.encode_cluster_id(proposed), makepath=True)
            return proposed
        except NodeExistsError:
            return L.decode_cluster_id((await self.zk.get(L.CLUSTER_ID))[0])

    def _check_meta_properties(self, cluster_id: str) -> None:
        """Kafka's `meta.properties`: which broker and which cluster this data directory belongs to."""
        path = self.broker.data_dir / META_PROPERTIES
        values = {}
        if path.exists():
            for line in path.read_text().splitlines():
                key, sep, value = line.partition("=")
                if sep and not key.startswith("#"):
                    values[key.strip()] = value.strip()
            if values.get("cluster.id") not in (None, cluster_id):
                raise ClusterError(f"{path} belongs to cluster {values['cluster.id']}, not {cluster_id}")
            if values.get("broker.id") not in (None, str(self.broker_id)):
                raise ClusterError(f"{path} belongs to broker {values['broker.id']}, not {self.broker_id}")
            return
        write_file_atomically(path, f"version=0\nbroker.id={self.broker_id}\ncluster.id={cluster_id}\n".encode())

    async def _register(self) -> None:
        """Create /brokers/ids/ID; wait out a registration of an earlier session of ours (a crashed process)."""
        reg = L.BrokerRegistration(self.broker_id, self._endpoints, self.broker.config.get("broker.rack"))
        named_before = self._named  # the controller may answer the registration before create() returns here
        path = L.broker_path(self.broker_id)
        deadline = time.monotonic() + self.session_timeout_ms / 1000.0 + 10.0
        while True:
            try:
                await self.zk.create(path, L.encode_broker(reg), ephemeral=True)
                break
            except NodeExistsError:
                found = await self.zk.get_or_none(path)
                if found is not None and found[1].ephemeralOwner == self.zk.session_id:
                    break
                if time.monotonic() > deadline:
                    raise ClusterError(f"broker id {self.broker_id} is registered by another live broker") from None
                log.info("broker id %d is still registered by an earlier session; waiting for it to expire",
                         self.broker_id)
                await asyncio.sleep(0.5)
        self.broker_epoch = (await self.zk.get(path))[1].czxid
        self._registered = True
        if self._named > named_before:
            self.broker.cluster_known()
        log.info("broker %d registered at %s (epoch %d)", self.broker_id,
                 ", ".join(e.connection_string() for e in self._endpoints), self.broker_epoch)

    # -- the controller election --------------------------------------------------------------------------

    async def _elect(self) -> None:
        if self._closing:
            return
        try:
            await self.zk.create(L.CONTROLLER, L.encode_controller(self.broker_id), ephemeral=True)
        except NodeExistsError:
            if await self.zk.exists(L.CONTROLLER, self._controller_watch) is None:
                self._spawn(self._elect())  # it vanished meanwhile
            return
        await self.zk.exists(L.CONTROLLER, self._controller_watch)
        self._start_controller()

    def _start_controller(self) -> None:
        controller = Controller(self.broker_id, self.zk, self.broker.config, self._controller_stopped,
                                self.inter_broker_listener, self.inter_broker_tls, self.inter_broker_sasl)
        self.controller = controller
        controller.start()

    def _controller_watch(self, event) -> None:
        if event.type == "DELETED":
            self._drop_controller()
            self._spawn(self._elect())
        else:
            self._spawn(self._rewatch_controller())

    async def _rewatch_controller(self) -> None:
        found = await self.zk.get_or_none(L.CONTROLLER, self._controller_watch)
        if found is None:
            self._spawn(self._elect())
        elif L.decode_controller(found[0]) != self.broker_id:
            self._drop_controller()

    def _drop_controller(self) -> None:
        """Stop this broker's controller, if it runs, without giving up `/controller` (it is gone, another
        broker's, or kept for a restart)."""
        controller, self.controller = self.controller, None
        if controller is not None:
            controller.stop()

    def _controller_stopped(self, controller: Controller) -> None:
        if self.controller is controller:
            # it resigned by itself (an error, or a newer epoch): give the election back, or no broker would
            # be controller while this one's registration lives
            self.controller = None
            if not self._closing:
                self._spawn(self._release_controller())

    async def _release_controller(self) -> None:
        try:
            found = await self.zk.get_or_none(L.CONTROLLER)
            if found is not None and found[1].ephemeralOwner == self.zk.session_id and self.controller is None:
                await self.zk.delete(L.CONTROLLER, found[1].version)
        except Exception:  # noqa: BLE001 - a reconnect or an expiry re-runs the election anyway
            log.info("broker %d could not give up /controller", self.broker_id, exc_info=True)

    # -- session --------------------------------------------------------------------------------------

    def _on_session_state(self, state: str) -> None:
        if self._closing:
            return
        log.info("broker %d: ZooKeeper session %s", self.broker_id, state.lower())
        if state != "SUSPENDED":
            self._cancel_expiry_timer()
        if state == "LOST":
            self._session_lost = True
            self._presumed_lost = False
            self._registered = False
            self.broker.cluster_unknown()
            log.warning("ZooKeeper session of broker %d expired: leading nothing until the controller says so",
                        self.broker_id)
            self._drop_controller()
            self.broker.replicas.relinquish_all()
        elif state == "SUSPENDED":
            # kazoo forgets every watch when the connection drops, even if the session lives on; they are
            # armed again once reconnected (_resume). The controller stays: its session, and so its
            # election, may well outlive the drop, as in a restart of ZooKeeper. Unless the connection is
            # back within a session timeout (_presume_expired).
            self._suspended = True
            if self._expiry_timer is None:
                self._expiry_timer = asyncio.get_running_loop().call_later(self.session_timeout_ms / 1000.0,
                                                                           self._presume_expired)
        elif state == "CONNECTED":
            if self.broker.fenced:
                log.info("broker %d: ZooKeeper reached again, serving clients", self.broker_id)
                self.broker.fenced = False
            if self._session_lost:
                self._session_lost = False
                self._spawn(self._rejoin())
            elif self._presumed_lost:
                self._presumed_lost = False
                self._spawn(self._reregister())
            elif self._suspended:
                self._spawn(self._resume())
            self._suspended = False

    def _cancel_expiry_timer(self) -> None:
        timer, self._expiry_timer = self._expiry_timer, None
        if timer is not None:
            timer.cancel()

    def _presume_expired(self) -> None:
        """No ZooKeeper for a whole session timeout. If no other broker has reached us in that time either
        (no follower fetched from us, no leader answered our fetches), we are the one cut off: the server
        has expired our session by now and the controller has moved what we led elsewhere. Stop leading
        now, not when a reconnect tells us so, which in a network partition may be much later: writes
        waiting here for followers we cannot reach are answered NOT_LEADER_OR_FOLLOWER, and the broker is
        fenced (client connections closed and refused) so that clients ask the other brokers, which know
        the new leaders; our own Metadata would only repeat our stale view. (Giving up leadership never
        risks data; only the controller hands it out again.)

        If the brokers still reach us, ZooKeeper is away for them too and nobody can be elected in our
        place: we serve on, as Kafka does, and look again every second."""
        self._expiry_timer = None
        if self._closing or not self._suspended or self._session_lost:
            return
        replicas = self.broker.replicas
        heard = max(replicas.last_follower_fetch_s, replicas.fetchers.last_answer_s if replicas.fetchers else 0.0)
        if time.monotonic() - heard < self.session_timeout_ms / 1000.0:
            self._expiry_timer = asyncio.get_running_loop().call_later(PEER_RECHECK_S, self._presume_expired)
            return
        self._presumed_lost = True
        self._registered = False
        self.broker.cluster_unknown()
        log.warning("broker %d: neither ZooKeeper nor any broker for %d ms: its session has expired; leading "
                    "nothing and refusing clients until ZooKeeper is back", self.broker_id, self.session_timeout_ms)
        self.broker.fenced = True
        self.broker.drop_connections()
        self._drop_controller()
        cache = self.broker.metadata
        for topic, index in list(self.broker.replicas.partitions):
            info = cache.partition(topic, index)
            if info is not None and info.leader == self.broker_id:
                cache.put_partition(topic, index, PartitionInfo(-1, info.leader_epoch, list(info.replicas),
                                                                list(info.isr), list(info.offline), info.zk_version))
        self.broker.replicas.relinquish_all()

    async def _reregister(self) -> None:
        """Reconnected within the session after all (ZooKeeper itself was away: a server keeps its sessions
        over its own outage), after giving up every leadership (_presume_expired), which the controller does
        not know. A fresh registration, a new broker epoch, makes it see us as a restarted broker: it elects
        leaders for what we led and tells us what to lead and follow, as after an expiry."""
        try:
            path = L.broker_path(self.broker_id)
            found = await self.zk.get_or_none(path)
            if found is not None and found[1].ephemeralOwner == self.zk.session_id:
                await self.zk.delete(path, found[1].version)
            await self._register()
        except Exception:
            log.exception("broker %d could not register again after reconnecting to ZooKeeper", self.broker_id)
        await self._resume()

    async def _resume(self) -> None:
        """Arm the watches again after a reconnect within the session; the controller, if this broker still
        holds `/controller`, rebuilds its view (or starts, if it had resigned meanwhile)."""
        try:
            await self._watch_config_changes()
            await self._watch_acl_changes()
            found = await self.zk.get_or_none(L.CONTROLLER, self._controller_watch)
            if found is None:
                await self._elect()
            elif found[1].ephemeralOwner != self.zk.session_id:
                self._drop_controller()
            elif self.controller is not None:
                self.controller.resync()
            else:
                self._start_controller()
        except Exception:
            log.exception("broker %d could not resume after reconnecting to ZooKeeper", self.broker_id)

    async def _rejoin(self) -> None:
        try:
            await self._register()
            await self._watch_config_changes()
            await self._watch_acl_changes()
            await self._elect()
        except Exception:
            log.exception("broker %d could not rejoin the cluster", self.broker_id)

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._settled)

    def _settled(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        report_background_failure(task, f"broker {self.broker_id}")  # the session's state change retries

    # -- requests from the controller ---------------------------------------------------------------------

    def check_request(self, controller_epoch: int, broker_epoch: int) -> int:
        """STALE_CONTROLLER_EPOCH for a controller older than one already heard from, STALE_BROKER_EPOCH for
        a request meant for an earlier registration of this broker."""
        if controller_epoch < self.broker.replicas.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        # a newer epoch than ours is our own registration, which the controller saw before create() returned
        # here (as Kafka's isBrokerEpochStale, only an older one is stale)
        if broker_epoch >= 0 and self.broker_epoch >= 0 and broker_epoch < self.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        return ErrorCode.NONE

    async def leader_and_isr(self, controller_epoch: int, topics: list[tuple[str, bytes, list[dict]]],
                             live_leaders: list[tuple[int, str, int]]) -> dict[tuple[str, int], int]:
        """Apply LeaderAndIsr: (topic, topic id, partition states) per topic, and the addresses of the
        leaders named; an error code per partition."""
        for node_id, host, port in live_leaders:
            self._leader_addresses[node_id] = (host, port)
        cache = self.broker.metadata
        for name, topic_id, states in topics:
            configs = await self._configs_of(name)
            known = cache.topic(name)
            count = max([s["partition_index"] + 1 for s in states] + [known.partitions if known else 0])
            if known is None or known.topic_id != topic_id or known.partitions < count:
                cache.put_topic(Topic(name, topic_id, count, configs))
        changes = [PartitionStateChange(name, s["partition_index"], s["controller_epoch"], s["leader"],
                                        s["leader_epoch"], list(s["isr"]), s["partition_epoch"], list(s["replicas"]),
                                        s["is_new"])
                   for name, _, states in topics for s in states]
        return self.broker.replicas.become_leader_or_follower(controller_epoch, changes)

    def stop_replicas(self, controller_epoch: int, partitions: list[tuple[str, int, bool]]) -> dict[tuple[str, int], int]:
        replicas = self.broker.replicas
        replicas.controller_epoch = max(replicas.controller_epoch, controller_epoch)
        return {(t, p): replicas.stop_replica(t, p, delete) for t, p, delete in partitions}

    def update_metadata(self, controller_id: int, controller_epoch: int, brokers: list[BrokerInfo],
                        topics: list[tuple[str, bytes, list[dict]]]) -> None:
        broker = self.broker
        cache = broker.metadata
        replicas = broker.replicas
        replicas.controller_epoch = max(replicas.controller_epoch, controller_epoch)
        moved = [b for b in brokers if (old := cache.brokers.get(b.node_id)) is not None
                 and (old.host, old.port) != (b.host, b.port)]
        cache.set_brokers(brokers, controller_id)
        named = any(b.node_id == self.broker_id for b in brokers)
        self._named += named
        for name, topic_id, states in topics:
            if any(s["leader"] == LEADER_DURING_DELETE for s in states):
                cache.remove_topic(name)
                continue
            known = cache.topic(name)
            count = max([s["partition_index"] + 1 for s in states] + [known.partitions if known else 0])
            if known is None or known.topic_id != topic_id or known.partitions < count:
                cache.put_topic(Topic(name, topic_id, count, self._topic_configs.get(name, {})))
                if name not in self._topic_configs:
                    self._spawn(self._configs_of(name))
            for s in states:
                cache.put_partition(name, s["partition_index"], PartitionInfo(
                    s["leader"], s["leader_epoch"], list(s["replicas"]), list(s["isr"]),
                    list(s["offline_replicas"]), s["zk_version"]))
        for b in moved:
            replicas.fetchers.leader_moved(b.node_id, b.host, b.port)
            for (node, _), client in self._clients.items():
                if node == b.node_id:
                    client.retarget(b.host, b.port)
        replicas.refollow_unfetched()
        for name in INTERNAL_TOPICS:
            topic = cache.topic(name)
            if topic is not None:
                broker.internal_topic_partitions(name, topic.partitions)
        if self._first_metadata:
            self._first_metadata = False
            self._remove_stray_logs()
        if named and self._registered and not broker.knows_cluster:
            log.info("broker %d: the controller's metadata names it: serving clients", self.broker_id)
            broker.cluster_known()

    def _remove_stray_logs(self) -> None:
        """Logs of topics the cluster no longer has (deleted while this broker was down)."""
        broker = self.broker
        for name in sorted({t for t, _ in broker.logs.logs()}):
            if broker.metadata.topic(name) is None and not any(t == name for t, _ in broker.replicas.partitions):
                log.warning("removing the logs of topic %s, which the cluster no longer has", name)
                broker.logs.delete_topic(name)

    # -- topic configs ------------------------------------------------------------------------------------

    async def _configs_of(self, topic: str) -> dict[str, str]:
        configs = self._topic_configs.get(topic)
        if configs is None:
            found = await self.zk.get_or_none(L.topic_config_path(topic))
            configs = self._topic_configs[topic] = L.decode_topic_config(found[0] if found else None)
            self.broker.metadata.set_topic_configs(topic, configs)
        return configs

    def topic_configs_changed(self, topic: str, configs: dict[str, str]) -> None:
        self._topic_configs[topic] = dict(configs)
        self.broker.metadata.set_topic_configs(topic, configs)
        self.broker.topic_configs_changed(topic)

    async def _watch_config_changes(self) -> None:
        names = await self.zk.children(L.CONFIG_CHANGES, self._config_changes_watch)
        seqs = sorted(int(n[len(L.CONFIG_CHANGE_PREFIX):]) for n in names if n.startswith(L.CONFIG_CHANGE_PREFIX))
        if self._config_changes_seen is None:
            # configs are read afresh when needed; the first notification ever made is number 0
            self._config_changes_seen = seqs[-1] if seqs else -1
            return
        for seq in seqs:
            if seq <= self._config_changes_seen:
                continue
            self._config_changes_seen = seq
            found = await self.zk.get_or_none(f"{L.CONFIG_CHANGES}/{L.CONFIG_CHANGE_PREFIX}{seq:010d}")
            change = L.decode_config_change(found[0]) if found else None
            if change is not None and change[0] == "topics":
                self._topic_configs.pop(change[1], None)
                configs = await self._configs_of(change[1])
                self.topic_configs_changed(change[1], configs)
            elif change is not None and change[0] in ("users", "clients"):
                if change[0] == "users" and L.user_from_entity(change[1]) is not None:
                    await self._load_scram_user(L.user_from_entity(change[1]))
                entity = L.quota_entity_of(f"{change[0]}/{change[1]}")
                if entity is not None:
                    self.broker.quotas.set_entity(entity, await self._quotas_of(entity))
            elif change is not None and change[0] == "brokers" and change[1] in (str(self.broker_id),
                                                                                 L.BROKER_DEFAULT_ENTITY):
                await self.broker_configs_changed()

    async def broker_configs_changed(self) -> None:
        """Apply the dynamic broker configs (the cluster-wide defaults, then this broker's own) that odradek
        takes at run time (broker/dynamic_configs.py), and the follower replication throttle. Kafka's ZooKeeper
        mode told brokers of a change the same way: a `brokers` notification under /config/changes."""
        stored: list[dict[str, str]] = []
        for entity in (L.BROKER_DEFAULT_ENTITY, str(self.broker_id)):
            found = await self.zk.get_or_none(L.broker_config_path(entity))
            stored.append(L.decode_topic_config(found[0] if found else None))
        self.broker.apply_dynamic_configs(*stored)
        configs = {**stored[0], **stored[1]}
        rate = configs.get("follower.replication.throttled.rate")
        self.throttle.set_rate(int(rate) if rate else self.broker.config.int("follower.replication.throttled.rate"))

    async def _load_scram_users(self) -> None:
        for name in await self.zk.children(L.USER_CONFIGS):
            user = L.user_from_entity(name)
            if user is not None:
                await self._load_scram_user(user)

    async def _load_scram_user(self, user: str) -> None:
        found = await self.zk.get_or_none(L.user_config_path(user))
        configs = L.decode_topic_config(found[0] if found else None)
        self.broker.scram.set_user(user, {m: ScramCredential.from_text(v) for m, v in configs.items()
                                          if m in SCRAM_MECHANISMS})

    async def _store_scram_users(self, updated: dict[str, dict[str, ScramCredential]]) -> None:
        """Write users' SCRAM credentials to /config/users (keeping their other configs, quotas) and tell
        every broker."""
        for user, credentials in updated.items():
            await self._write_entity_configs(L.user_config_path(user).removeprefix("/config/"), SCRAM_MECHANISMS,
                                             {m: c.to_text() for m, c in credentials.items()})

    async def _write_entity_configs(self, entity_path: str, owned: Iterable[str], values: dict[str, str]) -> None:
        """Replace the ``owned`` keys of /config/<entity_path> with ``values``, keeping the others (a user's
        SCRAM credentials and quotas share its znode), and tell every broker with a change notification."""
        path = f"/config/{entity_path}"
        found = await self.zk.get_or_none(path)
        owned = set(owned)
        configs = {k: v for k, v in L.decode_topic_config(found[0] if found else None).items() if k not in owned}
        configs.update(values)
        await self.zk.set_or_create(path, L.encode_topic_config(configs))
        kind, _, name = entity_path.partition("/")
        await self.zk.create(f"{L.CONFIG_CHANGES}/{L.CONFIG_CHANGE_PREFIX}", L.encode_config_change(name, kind),
                             sequence=True, makepath=True)

    async def _quotas_of(self, entity: QuotaEntity) -> dict[str, float]:
        found = await self.zk.get_or_none(f"/config/{L.quota_entity_path(entity)}")
        configs = L.decode_topic_config(found[0] if found else None)
        return {key: float(value) for key, value in configs.items() if key in QUOTA_KEYS}

    async def _load_quotas(self) -> None:
        """Every client quota under /config/users and /config/clients (Kafka's layout: zk_layout.py)."""
        paths = [f"clients/{c}" for c in await self.zk.children(L.CLIENT_CONFIGS)]
        for user in await self.zk.children(L.USER_CONFIGS):
            paths.append(f"users/{user}")
            try:
                paths += [f"users/{user}/clients/{c}" for c in await self.zk.children(f"{L.USER_CONFIGS}/{user}/clients")]
            except NoNodeError:
                pass
        configs = {}
        for path in paths:
            entity = L.quota_entity_of(path)
            if entity is not None:
                configs[entity] = await self._quotas_of(entity)
        self.broker.quotas.replace(configs)

    async def _store_quotas(self, configs: dict[QuotaEntity, dict[str, float]]) -> None:
        """Write the entities whose quotas changed (keeping a user's other configs, its SCRAM credentials)
        and tell every broker."""
        current = self.broker.quotas.configs()
        for entity in set(current) | set(configs):
            if current.get(entity, {}) == configs.get(entity, {}):
                continue
            # Kafka writes whole numbers for the byte rates, which its tools parse as longs
            await self._write_entity_configs(L.quota_entity_path(entity), QUOTA_KEYS, {
                k: str(int(v)) if v == int(v) else str(v) for k, v in configs.get(entity, {}).items()})

    async def _watch_acl_changes(self) -> None:
        """(Re)arm the watches on both ACL change paths and read every ACL again (cluster/zk_acls.py)."""
        for path in (zk_acls.LITERAL_CHANGES, zk_acls.EXTENDED_CHANGES):
            await self.zk.children(path, self._acl_changes_watch)
        self.broker.authorizer.replace_all(await zk_acls.read_all(self.zk))

    def _acl_changes_watch(self, event) -> None:
        self._spawn(self._watch_acl_changes())

    async def _store_acls(self, acls: set) -> None:
        await zk_acls.write_changes(self.zk, self.broker.authorizer.acls(), acls)

    def _config_changes_watch(self, event) -> None:
        self._spawn(self._watch_config_changes())

    # -- ISR changes of partitions led here ---------------------------------------------------------------

    async def _write_isr(self, partition: Partition, isr: list[int]) -> IsrWritten | None:
        """Write the leader's new ISR to the partition's state znode (conditionally on the version it holds).
        Written: its new version and ``isr``. The znode moved on but still names this broker leader at the
        same leader epoch (its ISR written by another hand, or this broker holding a version older than the
        znode's, e.g. from a LeaderAndIsr the controller built before a write of ours landed): the znode's
        version and ISR, which the leader takes, so its next change is conditional on the right version
        (without this it would fail forever: Kafka's KAFKA-2729). None: the controller decided something
        newer; its LeaderAndIsr will say what."""
        path = L.partition_state_path(partition.topic, partition.index)
        state = L.PartitionState(self.broker_id, partition.leader_epoch, isr, partition.controller_epoch,
                                 partition.zk_version)
        try:
            stat = await self.zk.set(path, L.encode_partition_state(state), partition.zk_version)
        except (BadVersionError, NoNodeError):
            found = await self._partition_state_or_none(path)
            if found is not None and found.leader == self.broker_id and found.leader_epoch == partition.leader_epoch:
                log.info("%s-%d: the state in ZooKeeper is at version %d (ours was %d), ISR %s; taking it",
                         partition.topic, partition.index, found.zk_version, partition.zk_version, found.isr)
                return IsrWritten(found.zk_version, found.isr)
            log.info("%s-%d: the state changed in ZooKeeper; not changing the ISR", partition.topic, partition.index)
            return None
        except (ConnectionLoss, SessionExpiredError) as exc:
            # cut off from ZooKeeper: the ISR stays as it is (the HW keeps counting the lagging members, so
            # no acks=all write completes without them) and the change is tried again on a later tick
            log.info("%s-%d: ZooKeeper unreachable (%s); the ISR stays %s", partition.topic, partition.index,
                     type(exc).__name__, partition.isr)
            return None
        await self.zk.create(f"{L.ISR_CHANGES}/{L.ISR_CHANGE_PREFIX}",
                             L.encode_isr_change([(partition.topic, partition.index)]), sequence=True)
        return IsrWritten(stat.version, isr)

    async def _partition_state_or_none(self, path: str) -> L.PartitionState | None:
        try:
            found = await self.zk.get_or_none(path)
        except (ConnectionLoss, SessionExpiredError):
            return None
        return L.decode_partition_state(found[0], found[1].version) if found is not None else None

    def _follower_appended(self, partition: Partition) -> None:
        self.broker.notify_append(partition.topic, partition.index)

    # -- other brokers ------------------------------------------------------------------------------------

    def _new_client(self, node_id: int, purpose: str) -> BrokerClient | None:
        info = self.broker.metadata.brokers.get(node_id)
        address = (info.host, info.port) if info is not None else self._leader_addresses.get(node_id)
        if address is None:
            return None
        return BrokerClient(node_id, address[0], address[1], f"broker-{self.broker_id}-{purpose}",
                            tls=self.inter_broker_tls, sasl=self.inter_broker_sasl)

    def client_for(self, node_id: int, purpose: str) -> BrokerClient | None:
        """A connection to ``node_id`` kept for one purpose (markers, verifications, ...)."""
        client = self._clients.get((node_id, purpose))
        if client is None:
            client = self._new_client(node_id, purpose)
            if client is not None:
                self._clients[(node_id, purpose)] = client
        return client

    # -- controlled shutdown --------------------------------------------------------------------------------

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, list[tuple[str, int]]]:
        """The controller's side of ControlledShutdown: (error, partitions the broker still leads)."""
        if not self.is_controller:
            return ErrorCode.NOT_CONTROLLER, []
        try:
            remaining = await self.controller.call(
                lambda: broker_changes.controlled_shutdown(self.controller, broker_id, broker_epoch), 30.0)
        except ShutdownRefused as exc:
            return exc.error_code, []
        except (asyncio.TimeoutError, ConnectionError):
            return ErrorCode.REQUEST_TIMED_OUT, []
        return ErrorCode.NONE, remaining

    async def shutdown(self) -> None:
        """Controlled shutdown (when enabled), then leave: close the ZooKeeper session."""
        self._closing = True
        config = self.broker.config
        if self.zk is not None and config.get("controlled.shutdown.enable") and self.broker_epoch >= 0:
            # the ISRs this broker leaves must not take it back: made the follower of a partition it led, it
            # would fetch at the log end and rejoin, and nothing takes it out of an idle partition's ISR
            self.broker.replicas.stop_fetching()
            await self._ask_controller_to_move_leaders(config.int("controlled.shutdown.max.retries"),
                                                       config.int("controlled.shutdown.retry.backoff.ms") / 1000.0)
        if self.controller is not None:
            self.controller.stop()
        if self.zk is not None:
            await self.zk.close()

    async def _ask_controller_to_move_leaders(self, retries: int, backoff_s: float) -> None:
        started = time.monotonic()
        for attempt in range(retries + 1):
            error, remaining = await self._controlled_shutdown_request()
            if error == ErrorCode.NONE and not remaining:
                # wait (briefly) for the LeaderAndIsr that makes us a follower everywhere
                deadline = time.monotonic() + 5.0
                while time.monotonic() < deadline and any(p.is_leader for p in self.broker.replicas.partitions.values()
                                                          if len(p.replicas) > 1):
                    await asyncio.sleep(0.02)
                log.info("controlled shutdown of broker %d done in %.0f ms", self.broker_id,
                         (time.monotonic() - started) * 1000)
                # serve on a moment: what clients send here now is answered NOT_LEADER_OR_FOLLOWER with the
                # new leader's address (KIP-951), which moves them faster than a closed connection would
                await asyncio.sleep(HANDOVER_GRACE_S)
                return
            log.info("controlled shutdown of broker %d: error %d, %d partitions remaining (attempt %d)",
                     self.broker_id, error, len(remaining), attempt + 1)
            if error == ErrorCode.NONE:
                return  # what remains only this broker can lead
            await asyncio.sleep(backoff_s)
        log.warning("controlled shutdown of broker %d did not complete; shutting down anyway", self.broker_id)

    async def _controlled_shutdown_request(self) -> tuple[int, list[tuple[str, int]]]:
        controller_id = self.broker.metadata.controller_id
        if controller_id == self.broker_id:
            return await self.controlled_shutdown(self.broker_id, self.broker_epoch)
        client = self.client_for(controller_id, "controlled-shutdown") if controller_id >= 0 else None
        if client is None:
            return ErrorCode.NOT_CONTROLLER, []
        try:
            response = await client.request(ApiKey.CONTROLLED_SHUTDOWN, CONTROLLED_SHUTDOWN_VERSION,
                                            {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch},
                                            timeout_s=30.0)
        except BrokerUnavailable:
            return ErrorCode.NOT_CONTROLLER, []
        return response["error_code"], [(p["topic_name"], p["partition_index"])
                                        for p in response["remaining_partitions"]]

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for client in self._clients.values():
            client.close()
        self.admin.close()
