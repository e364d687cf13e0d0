"""Transaction markers: a COMMIT or ABORT control batch, written to each partition of a transaction by the
partition's leader.

`write_markers_here` is the leader's side, shared by the WriteTxnMarkers handler (a transaction coordinator
elsewhere asks) and by the coordinator of this broker for partitions led here. The marker is appended with
acks=all semantics: its partition answers once the in-sync replicas hold it. A marker on a
`__consumer_offsets` partition also makes the producer's transactional offsets there committed (or drops
them), once it is replicated.

`TxnMarkerChannel` is the coordinator's side (coordinator/transactions.py `MarkerWriter`): it groups the
partitions by their leader in the metadata cache, writes here what is led here and sends WriteTxnMarkers
to the other leaders, and reports the partitions that still need a marker (leaderless, unreachable, or led
elsewhere than the cache said) for the coordinator to retry.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Protocol
from concurrent.futures import Future

from odradek.cluster.broker_client import BrokerUnavailable
from odradek.cluster.metadata import MetadataCache
from odradek.cluster.partition import ReplicationError
from odradek.cluster.replica_manager import ReplicaManager
from odradek.coordinator import OFFSETS_TOPIC, Coordinator
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.records.batch import validate_v2
from odradek.records.codec import ABORT, COMMIT, build_control_batch
from odradek.storage.producer_state import InvalidProducerEpochError


if TYPE_CHECKING:  # the cluster member imports kazoo, which a single node never loads
    from odradek.cluster.local import LocalController
    from odradek.cluster.member import ClusterMember

log = logging.getLogger(__name__)


class MarkerBroker(Protocol):
    """What the markers need of the broker (core.py's Broker)."""

    node_id: int
    metadata: MetadataCache
    replicas: ReplicaManager
    cluster: "LocalController | ClusterMember"
    coordinator: Coordinator | None

TopicPartition = tuple[str, int]
WRITE_TXN_MARKERS_VERSION = 1
MARKER_TIMEOUT_S = 30.0
# Errors after which a partition needs no marker: it is gone, or its producer moved past this epoch.
_DONE = (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_PRODUCER_EPOCH)


async def write_markers_here(broker: MarkerBroker, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                             commit: bool, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
    """Append the marker to each partition this broker leads; an error code per partition."""
    errors: dict[TopicPartition, int] = {}
    waiting: list[tuple[TopicPartition, Future]] = []
    now = time.time_ns() // 1_000_000
    for tp in partitions:
        try:
            partition = broker.replicas.leader_partition(*tp)
            buf = bytearray(build_control_batch(COMMIT if commit else ABORT, producer_id, producer_epoch,
                                                coordinator_epoch, now))
            offset = partition.append_marker(buf, validate_v2(buf)[0][1], not commit, coordinator_epoch)
            committed = partition.when_committed(offset + 1)
        except ReplicationError as exc:
            errors[tp] = exc.error_code
            continue
        except InvalidProducerEpochError as exc:
            log.warning("marker for producer %d refused by %s-%d: %s", producer_id, tp[0], tp[1], exc)
            errors[tp] = ErrorCode.INVALID_PRODUCER_EPOCH
            continue
        except OSError as exc:
            log.error("marker for producer %d: %s-%d cannot be written: %s", producer_id, tp[0], tp[1], exc)
            errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
            continue
        errors[tp] = ErrorCode.NONE
        if committed is not None:
            waiting.append((tp, committed))
    for tp, committed in waiting:
        try:
            await asyncio.wait_for(asyncio.wrap_future(committed), MARKER_TIMEOUT_S)
        except asyncio.TimeoutError:
            errors[tp] = ErrorCode.REQUEST_TIMED_OUT
        except ReplicationError as exc:
            errors[tp] = exc.error_code
    for (topic, index), error in errors.items():
        if topic == OFFSETS_TOPIC and error == ErrorCode.NONE and broker.coordinator is not None:
            broker.coordinator.complete_transaction(producer_id, index, commit)
    return errors


class TxnMarkerChannel:
    def __init__(self, broker: MarkerBroker) -> None:
        self.broker = broker

    async def write_markers(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                            partitions: set[TopicPartition]) -> set[TopicPartition]:
        broker = self.broker
        by_leader: dict[int, list[TopicPartition]] = {}
        remaining: set[TopicPartition] = set()
        for tp in sorted(partitions):
            info = broker.metadata.partition(*tp)
            if info is None:
                log.warning("partition %s-%d is gone; no marker for producer %d", tp[0], tp[1], producer_id)
                continue
            if info.leader < 0:
                remaining.add(tp)
            else:
                by_leader.setdefault(info.leader, []).append(tp)
        sends = []
        for leader, tps in by_leader.items():
            if leader == broker.node_id:
                sends.append(write_markers_here(broker, producer_id, producer_epoch, coordinator_epoch, commit, tps))
            else:
                sends.append(self._send(leader, producer_id, producer_epoch, coordinator_epoch, commit, tps))
        for result in await asyncio.gather(*sends):
            remaining.update(tp for tp, error in result.items() if error not in _DONE)
        return remaining

    async def _send(self, leader: int, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                    partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        client = self.broker.cluster.client_for(leader, "txn-markers")
        if client is None:
            return {tp: ErrorCode.BROKER_NOT_AVAILABLE for tp in partitions}
        topics: dict[str, list[int]] = {}
        for topic, index in partitions:
            topics.setdefault(topic, []).append(index)
        try:
            response = await client.request(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, {"markers": [{
                "producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": commit,
                "coordinator_epoch": coordinator_epoch,
                "topics": [{"name": t, "partition_indexes": p} for t, p in topics.items()]}]},
                timeout_s=MARKER_TIMEOUT_S + 5)
        except BrokerUnavailable as exc:
            log.info("markers for producer %d: broker %d: %s", producer_id, leader, exc)
            return {tp: ErrorCode.BROKER_NOT_AVAILABLE for tp in partitions}
        errors = {tp: ErrorCode.UNKNOWN_SERVER_ERROR for tp in partitions}
        for marker in response["markers"]:
            for topic in marker["topics"]:
                for part in topic["partitions"]:
                    errors[(topic["name"], part["partition_index"])] = part["error_code"]
        return errors
