"""The broker: what handlers see of topics, logs and configuration, and request dispatch.

`Broker` ties the topic registry (cluster/) to the partition logs (storage/) and owns the wake-ups that
long-polling fetches wait on. `Broker.dispatch` turns one request frame into a response slot for the
connection: decode header and body with the generated codec, call the registered handler, encode.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable, Iterable

from odradek.broker.registry import HANDLERS
from odradek.cluster.topics import Topic, TopicRegistry
from odradek.config import BrokerConfig, log_config_for
from odradek.coordinator import OFFSETS_TOPIC, Coordinator, offsets_topic_configs
from odradek.coordinator.persistence import OffsetsTopicLog, partition_for
from odradek.coordinator.producer_ids import ProducerIdManager
from odradek.coordinator.transactions import TXN_TOPIC, GroupOffsets, TransactionCoordinator, txn_topic_configs
from odradek.net.connection import CloseConnection, Slot
from odradek.protocol import codec
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.storage.log import PartitionLog
from odradek.storage.manager import LogManager

if TYPE_CHECKING:
    from odradek.net.connection import KafkaConnection

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

# A single node never changes leader, so every partition stays in leader epoch 0: Metadata reports it,
# produced batches are stamped with it, and OffsetForLeaderEpoch answers for it.
LEADER_EPOCH = 0


@dataclass
class RequestContext:
    broker: "Broker"
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    connection: "KafkaConnection"


class Broker:
    def __init__(self, config: BrokerConfig, data_dir: Path, advertised_host: str, advertised_port: int) -> None:
        self.config = config
        self.data_dir = data_dir
        self.node_id = config.node_id
        self.advertised_host = advertised_host
        self.advertised_port = advertised_port
        data_dir.mkdir(parents=True, exist_ok=True)
        self.topics = TopicRegistry(data_dir)
        # Broker properties are fixed for the life of the process, so the topic defaults derived from them are
        # computed once; each topic's merged configs are cached until its overrides change (the produce path
        # reads them for every partition of every request).
        self.topic_defaults = config.topic_defaults()
        self._effective_configs: dict[str, dict[str, str]] = {}
        self.logs = LogManager(data_dir, log_config_for(self.topic_defaults))
        self.logs.producer_id_expiration_ms = config.int("producer.id.expiration.ms")
        self.producer_ids = ProducerIdManager(data_dir)
        self._waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}
        self.coordinator: Coordinator | None = None  # built by load(), once the logs are open
        self.txn_coordinator: TransactionCoordinator | None = None  # likewise, after the group coordinator
        self._last_retention_ms = 0

    # lifecycle ---------------------------------------------------------------------------------------

    def load(self) -> None:
        """Open (and recover) every partition log; drop directories of topics the registry no longer has."""
        loaded = self.logs.load_all()
        for name in {name for name, _ in loaded}:
            if self.topics.get(name) is None:
                log.warning("removing partition directories of unknown topic %s", name)
                self.logs.delete_topic(name)
        for topic in self.topics.all():
            self._configure_logs(topic)
        self.coordinator = self._load_coordinator()
        self.txn_coordinator = self._load_txn_coordinator()

    def _load_coordinator(self) -> Coordinator:
        """Create `__consumer_offsets` if missing, then replay it into a new group coordinator."""
        topic = self.topics.get(OFFSETS_TOPIC)
        if topic is None:
            topic = self.create_topic(OFFSETS_TOPIC, self.config.int("offsets.topic.num.partitions"),
                                      offsets_topic_configs(self.config))
        coordinator = Coordinator(self.config, topic.partitions, lambda p: self.partition_log(OFFSETS_TOPIC, p),
                                  lambda t, p: self.partition_log(t, p) is not None)
        coordinator.load()
        return coordinator

    def _load_txn_coordinator(self) -> TransactionCoordinator:
        """Create `__transaction_state` if missing, then replay it (completing interrupted commits/aborts)."""
        topic = self.topics.get(TXN_TOPIC)
        if topic is None:
            topic = self.create_topic(TXN_TOPIC, self.config.int("transaction.state.log.num.partitions"),
                                      txn_topic_configs())
        offsets_partitions = self.topics.get(OFFSETS_TOPIC).partitions
        txn_log = OffsetsTopicLog(topic.partitions, lambda p: self.partition_log(TXN_TOPIC, p), now_ms)
        coordinator = TransactionCoordinator(
            self.config, txn_log, self.producer_ids.allocate, self.partition_log, self.notify_append,
            lambda group: partition_for(group, offsets_partitions), GroupOffsets(self.coordinator), now_ms)
        coordinator.load()
        return coordinator

    def close(self) -> None:
        if self.coordinator is not None:
            self.coordinator.close()
        self.logs.close()

    def tick(self) -> None:
        now = now_ms()
        retention_due = now - self._last_retention_ms >= self.config.int("log.retention.check.interval.ms")
        if retention_due:
            self._last_retention_ms = now
        self.logs.tick(now, retention=retention_due)
        if self.coordinator is not None:
            self.coordinator.tick(now)
        if self.txn_coordinator is not None:
            self.txn_coordinator.tick(now)

    # topics ------------------------------------------------------------------------------------------

    def effective_configs(self, topic: Topic) -> dict[str, str]:
        """Defaults merged with the topic's overrides; shared and cached, so callers must not modify it."""
        configs = self._effective_configs.get(topic.name)
        if configs is None:
            configs = self._effective_configs[topic.name] = {**self.topic_defaults, **topic.configs}
        return configs

    def _configure_logs(self, topic: Topic) -> None:
        log_config = log_config_for(self.effective_configs(topic))
        for p in range(topic.partitions):
            existing = self.logs.get(topic.name, p)
            if existing is None:
                self.logs.create(topic.name, p, log_config)
            else:
                existing.update_config(log_config)

    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        topic = self.topics.create(name, partitions, configs)
        self._configure_logs(topic)
        log.info("created topic %s with %d partitions", name, partitions)
        return topic

    def alter_topic_configs(self, name: str, overrides: dict[str, str]) -> Topic:
        topic = self.topics.set_configs(name, overrides)
        self._effective_configs.pop(name, None)
        self._configure_logs(topic)
        return topic

    def add_partitions(self, name: str, count: int) -> Topic:
        topic = self.topics.set_partition_count(name, count)
        self._configure_logs(topic)
        log.info("topic %s now has %d partitions", name, count)
        return topic

    def delete_topic(self, name: str) -> None:
        self.topics.delete(name)
        self._effective_configs.pop(name, None)
        self.logs.delete_topic(name)
        # Wake fetchers parked on the deleted partitions so they answer UNKNOWN_TOPIC_OR_PARTITION now.
        for key in [k for k in self._waiters if k[0] == name]:
            self._wake(key)
        log.info("deleted topic %s", name)

    def partition_log(self, topic: str, partition: int) -> PartitionLog | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= partition < t.partitions:
            return None
        return self.logs.get(topic, partition)

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
        try:
            request = codec.decode_request(api_key, version, frame, offset)
        except codec.ProtocolError as exc:
            raise CloseConnection(f"malformed {ApiKey(api_key).name} v{version} request: {exc}") from None
        ctx = RequestContext(self, api_key, version, correlation_id, header.get("client_id"), conn)
        body = spec.fn(ctx, request)
        if body is None:
            return None
        if type(body) is not dict:  # a coroutine: this request waits (registry.py)
            return asyncio.ensure_future(self._finish(ctx, body))
        return codec.encode_response(api_key, version, correlation_id, body)

    async def _finish(self, ctx: RequestContext, waiting: Awaitable[dict | None]) -> list | None:
        body = await waiting
        if body is None:
            return None
        # parts, not one joined frame: a Fetch response may carry file regions for the connection to sendfile
        return codec.encode_response_parts(ctx.api_key, ctx.api_version, ctx.correlation_id, body)


def unsupported_api_versions_response(correlation_id: int) -> bytes:
    """ApiVersions at a version we do not speak: error 35 with a v0 body listing our ranges (KIP-511)."""
    from odradek.broker.registry import advertised_versions

    body = {
        "error_code": ErrorCode.UNSUPPORTED_VERSION,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in advertised_versions()],
    }
    return codec.encode_response(ApiKey.API_VERSIONS, 0, correlation_id, body)


def when_durable(body: dict, pending: list[tuple[dict, Future]], failed: Callable[[dict, BaseException], None]):
    """``body`` to answer once each ``pending`` flusher future (storage/flusher.py) is done, paired with the
    part of ``body`` it covers; a future that failed has ``failed(part, error)`` applied to that part.

    Returns ``body`` itself when every future is done already, so the common case costs no task; otherwise
    a coroutine giving it (a handler may return either: registry.py)."""
    running = []
    for part, future in pending:
        if not future.done():
            running.append((part, future))
        elif future.exception() is not None:
            failed(part, future.exception())
    return _after(body, running, failed) if running else body


async def _after(body: dict, running: list[tuple[dict, Future]], failed: Callable[[dict, BaseException], None]) -> dict:
    for part, future in running:
        try:
            await asyncio.wrap_future(future)
        except OSError as exc:
            failed(part, exc)
    return body


def now_ms() -> int:
    return time.time_ns() // 1_000_000
