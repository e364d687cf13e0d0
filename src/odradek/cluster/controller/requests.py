"""What the controller tells the brokers: LeaderAndIsr, UpdateMetadata and StopReplica, batched per event
and delivered in order per broker (Kafka's ControllerBrokerRequestBatch and ControllerChannelManager).

While it handles one event the controller adds to a `RequestBatch` (which partitions each broker must lead
or follow, which metadata every broker must learn, which replicas must stop); `RequestBatch.send` then
queues one request of each kind per broker on the `ControllerChannel`, LeaderAndIsr before UpdateMetadata,
as Kafka does. The channel keeps one queue and one sender per live broker, so requests reach each broker
in the order they were decided, and retries a request until its broker answers or leaves the cluster.
Every request carries the controller epoch (brokers refuse older ones: STALE_CONTROLLER_EPOCH) and the
receiving broker's epoch (the czxid of its registration), so a restarted broker ignores what was meant for
its previous incarnation.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass, field
from typing import Any

from odradek.cluster.broker_client import BrokerClient, BrokerUnavailable
from odradek.cluster.controller.context import ControllerContext
from odradek.cluster.zk_layout import BrokerRegistration
from odradek.net.listeners import SECURITY_PROTOCOL_IDS
from odradek.net.sasl_client import SaslClientSettings
from odradek.protocol.api_keys import ApiKey

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
LEADER_AND_ISR_VERSION = 5
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3
RETRY_BACKOFF_S = 0.2


@dataclass
class _Request:
    api_key: int
    version: int
    body: dict[str, Any]
    future: asyncio.Future


class ControllerChannel:
    def __init__(self, controller_id: int, timeout_s: float, listener: str = "PLAINTEXT",
                 tls: ssl.SSLContext | None = None, sasl: SaslClientSettings | None = None) -> None:
        self.controller_id = controller_id
        self.timeout_s = timeout_s
        self.listener = listener  # inter.broker.listener.name: the brokers are reached on this one
        self.tls = tls
        self.sasl = sasl  # the listener uses SASL: the controller logs in as this broker's inter-broker user
        self._clients: dict[int, BrokerClient] = {}
        self._queues: dict[int, asyncio.Queue[_Request]] = {}
        self._senders: dict[int, asyncio.Task] = {}

    def add_broker(self, reg: BrokerRegistration) -> None:
        try:
            endpoint = reg.endpoint(self.listener)
        except KeyError:
            log.error("broker %d registered no %s listener (inter.broker.listener.name): it gets no requests",
                      reg.broker_id, self.listener)
            return
        client = self._clients.get(reg.broker_id)
        if client is not None:
            client.retarget(endpoint.host, endpoint.port)
            return
        self._clients[reg.broker_id] = BrokerClient(reg.broker_id, endpoint.host, endpoint.port,
                                                    f"controller-{self.controller_id}", tls=self.tls,
                                                    sasl=self.sasl)
        queue: asyncio.Queue[_Request] = asyncio.Queue()
        self._queues[reg.broker_id] = queue
        self._senders[reg.broker_id] = asyncio.ensure_future(self._send_loop(reg.broker_id, queue))

    @property
    def broker_ids(self) -> set[int]:
        return set(self._clients)

    def remove_broker(self, broker_id: int) -> None:
        client = self._clients.pop(broker_id, None)
        if client is not None:
            client.close()
        task = self._senders.pop(broker_id, None)
        if task is not None:
            task.cancel()
        queue = self._queues.pop(broker_id, None)
        while queue is not None and not queue.empty():
            request = queue.get_nowait()
            if not request.future.done():
                request.future.set_result(None)

    def send(self, broker_id: int, api_key: int, version: int, body: dict[str, Any]) -> asyncio.Future:
        """Queue a request; the future gives the response body, or None if the broker left first."""
        future = asyncio.get_running_loop().create_future()
        queue = self._queues.get(broker_id)
        if queue is None:
            future.set_result(None)
        else:
            queue.put_nowait(_Request(api_key, version, body, future))
        return future

    async def _send_loop(self, broker_id: int, queue: asyncio.Queue[_Request]) -> None:
        client = self._clients[broker_id]
        while True:
            request = await queue.get()
            while not request.future.done():
                try:
                    response = await client.request(request.api_key, request.version, request.body, self.timeout_s)
                except BrokerUnavailable as exc:
                    log.debug("controller: broker %d unavailable (%s); retrying", broker_id, exc)
                    await asyncio.sleep(RETRY_BACKOFF_S)
                    continue
                request.future.set_result(response)

    def close(self) -> None:
        for broker_id in list(self._clients):
            self.remove_broker(broker_id)


@dataclass
class RequestBatch:
    ctx: ControllerContext
    controller_id: int
    listener: str  # the inter-broker listener: LeaderAndIsr names the leaders' endpoints on it
    leader_and_isr: dict[int, dict[TopicPartition, bool]] = field(default_factory=dict)  # broker -> tp -> is_new
    update_metadata_brokers: set[int] = field(default_factory=set)
    update_metadata_partitions: set[TopicPartition] = field(default_factory=set)
    deleted_partitions: set[TopicPartition] = field(default_factory=set)
    stop_replica: dict[int, dict[TopicPartition, bool]] = field(default_factory=dict)  # broker -> tp -> delete

    def add_leader_and_isr(self, brokers: list[int] | set[int], tp: TopicPartition, is_new: bool = False) -> None:
        for broker in brokers:
            if broker in self.ctx.brokers:
                self.leader_and_isr.setdefault(broker, {})[tp] = is_new
        self.add_update_metadata(self.ctx.live, [tp])

    def add_update_metadata(self, brokers: set[int] | list[int], partitions: list[TopicPartition]) -> None:
        self.update_metadata_brokers.update(b for b in brokers if b in self.ctx.brokers)
        self.update_metadata_partitions.update(partitions)

    def add_deleted(self, brokers: set[int], partitions: list[TopicPartition]) -> None:
        """Tell ``brokers`` these partitions are being deleted (leader -2, Kafka's LeaderDuringDelete)."""
        self.update_metadata_brokers.update(b for b in brokers if b in self.ctx.brokers)
        self.deleted_partitions.update(partitions)

    def add_stop_replica(self, broker: int, tp: TopicPartition, delete: bool) -> None:
        if broker in self.ctx.brokers:
            self.stop_replica.setdefault(broker, {})[tp] = delete

    def send(self, channel: ControllerChannel) -> dict[int, asyncio.Future]:
        """Queue everything gathered; returns the StopReplica response futures by broker."""
        ctx = self.ctx
        for broker, partitions in self.leader_and_isr.items():
            channel.send(broker, ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION,
                         self._leader_and_isr(broker, partitions))
        if self.update_metadata_brokers:
            body = self._update_metadata()
            for broker in sorted(self.update_metadata_brokers):
                channel.send(broker, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION,
                             {**body, "broker_epoch": ctx.brokers[broker].epoch})
        stops = {}
        for broker, partitions in self.stop_replica.items():
            by_topic: dict[str, list] = {}
            for (topic, index), delete in sorted(partitions.items()):
                state = ctx.states.get((topic, index))
                by_topic.setdefault(topic, []).append({"partition_index": index, "delete_partition": delete,
                                                       "leader_epoch": state.leader_epoch if state else -1})
            stops[broker] = channel.send(broker, ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, {
                "controller_id": self.controller_id, "controller_epoch": ctx.epoch,
                "broker_epoch": ctx.brokers[broker].epoch,
                "topic_states": [{"topic_name": t, "partition_states": p} for t, p in by_topic.items()]})
        return stops

    def _leader_and_isr(self, broker: int, partitions: dict[TopicPartition, bool]) -> dict[str, Any]:
        ctx = self.ctx
        by_topic: dict[str, list] = {}
        leaders: set[int] = set()
        for (topic, index), is_new in sorted(partitions.items()):
            state = ctx.states[(topic, index)]
            leaders.add(state.leader)
            by_topic.setdefault(topic, []).append({
                "partition_index": index, "controller_epoch": state.controller_epoch, "leader": state.leader,
                "leader_epoch": state.leader_epoch, "isr": state.isr, "partition_epoch": state.zk_version,
                "replicas": ctx.replicas((topic, index)), "is_new": is_new,
                "leader_recovery_state": state.leader_recovery_state})
        live_leaders = []
        for leader in sorted(leaders):
            reg = ctx.brokers.get(leader)
            if reg is not None and reg.has_listener(self.listener):
                endpoint = reg.endpoint(self.listener)
                live_leaders.append({"broker_id": leader, "host_name": endpoint.host, "port": endpoint.port})
        return {
            "controller_id": self.controller_id, "controller_epoch": ctx.epoch,
            "broker_epoch": ctx.brokers[broker].epoch, "type": 0,
            "topic_states": [{"topic_name": t, "topic_id": ctx.topics[t].topic_id, "partition_states": p}
                             for t, p in by_topic.items()],
            "live_leaders": live_leaders,
        }

    def _update_metadata(self) -> dict[str, Any]:
        ctx = self.ctx
        by_topic: dict[str, list] = {}
        for topic, index in sorted(self.update_metadata_partitions | self.deleted_partitions):
            state = ctx.states.get((topic, index))
            if state is None and (topic, index) not in self.deleted_partitions:
                continue
            deleted = (topic, index) in self.deleted_partitions
            by_topic.setdefault(topic, []).append({
                "partition_index": index,
                "controller_epoch": state.controller_epoch if state else ctx.epoch,
                "leader": -2 if deleted else state.leader,
                "leader_epoch": state.leader_epoch if state else 0,
                "isr": state.isr if state else [],
                "zk_version": state.zk_version if state else 0,
                "replicas": ctx.replicas((topic, index)),
                "offline_replicas": ctx.offline_replicas((topic, index)),
            })
        return {
            "controller_id": self.controller_id, "controller_epoch": ctx.epoch,
            "topic_states": [{"topic_name": t, "topic_id": ctx.topics[t].topic_id if t in ctx.topics else bytes(16),
                              "partition_states": p} for t, p in by_topic.items()],
            "live_brokers": [_live_broker(reg) for _, reg in sorted(ctx.brokers.items())],
        }


def _live_broker(reg: BrokerRegistration) -> dict[str, Any]:
    return {"id": reg.broker_id, "rack": reg.rack, "endpoints": [
        {"port": e.port, "host": e.host, "listener": e.listener,
         "security_protocol": SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0)} for e in reg.endpoints]}
