"""Prometheus metrics of the broker, and the HTTP endpoint that serves them (`metrics.listen`).

Names follow Kafka's JMX metrics as the Prometheus JMX exporter's usual Kafka rules render them (lowercase,
`kafka_<domain>_<type>_<name>`, counters ending in `_total`), so that dashboards made for Kafka mostly work;
consumer lag takes kafka_exporter's names, and what Kafka has no metric for is named `odradek_...`. The list,
with labels and meaning: docs/metrics.md.

Cost. Almost everything is read at scrape time from where it already lives (partition logs, the replica
manager, the coordinators, the connections) by `BrokerCollector`. The request path does a few dict
increments per request and per partition (Broker.dispatch, Produce, Fetch), never anything per record:
Produce's record count is the offset span of its appended batches. With `metrics.listen` unset
`Broker.metrics` is None and the request path checks only that.

Threads. The counters are owned by the event loop, and the HTTP endpoint runs on the same loop, so the
collectors read loop-owned state on the loop's thread. The one exception is the log flusher's job timings,
recorded on the flusher thread under a lock of their own (storage/flusher.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from bisect import bisect_left
from typing import TYPE_CHECKING, Iterable, Protocol

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from odradek.cluster.metadata import MetadataCache
from odradek.cluster.replica_manager import ReplicaManager
from odradek.coordinator import Coordinator
from odradek.coordinator.transactions import TransactionCoordinator
from odradek.net.listeners import ListenerSetup
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import error_name
from odradek.storage import LogManager

if TYPE_CHECKING:
    from odradek.broker.context import RequestContext

log = logging.getLogger(__name__)


class MeteredBroker(Protocol):
    """What the metrics read of the broker (core.py's Broker)."""

    fenced: bool
    knows_cluster: bool
    listeners: ListenerSetup
    logs: LogManager
    metadata: MetadataCache
    replicas: ReplicaManager
    coordinator: Coordinator | None
    txn_coordinator: TransactionCoordinator | None

# Upper bounds (milliseconds) of the request time buckets; +Inf is implied.
REQUEST_MS_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0,
                      5000.0, 10000.0, 30000.0)
FETCH_FOLLOWER = -1  # the request key of a replica's Fetch, which Kafka names FetchFollower
# The request keys of the Kafka 0.7 requests (legacy07/), which have none of their own: KAFKA07_KEY_BASE minus
# the 0.7 request type, named Kafka07<Type> in the request metrics.
KAFKA07_KEY_BASE = -100
KAFKA07_REQUEST_NAMES = {KAFKA07_KEY_BASE - t: "Kafka07" + name
                         for t, name in enumerate(("Produce", "Fetch", "MultiFetch", "MultiProduce", "Offsets"))}
IDLE_SAMPLE_S = 2.0  # the window of the network processor idle ratio


class Histogram:
    """Bucket counts and sum of observed values; not thread-safe (callers that share one across threads lock)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def cumulative(self) -> tuple[list[tuple[str, int]], float]:
        out, running = [], 0
        for bound, count in zip(self.bounds, self.counts):
            running += count
            out.append((_float_text(bound), running))
        out.append(("+Inf", running + self.counts[-1]))
        return out, self.sum


def _float_text(value: float) -> str:
    return repr(float(value))


def request_name(key: int) -> str:
    """Kafka's name of an API in its request metrics: ApiVersions, OffsetCommit, FetchConsumer, ..."""
    if key == FETCH_FOLLOWER:
        return "FetchFollower"
    if key in KAFKA07_REQUEST_NAMES:
        return KAFKA07_REQUEST_NAMES[key]
    if key == ApiKey.FETCH:
        return "FetchConsumer"
    try:
        name = ApiKey(key).name
    except ValueError:
        return str(key)
    return "".join(part.capitalize() for part in name.split("_"))


def count_errors(body: dict, errors: dict, key: tuple[int, int]) -> None:
    """Count every non-zero `error_code` of a response body (top level and per topic, partition, group...)
    into ``errors`` under ``key + (code,)``. Walks dicts and lists of dicts only: record data is never looked at."""
    for name, value in body.items():
        if name == "error_code":
            if value:
                k = key + (value,)
                errors[k] = errors.get(k, 0) + 1
        elif type(value) is list and value and type(value[0]) is dict:
            for item in value:
                count_errors(item, errors, key)


class BrokerMetrics:
    """The counters the request path keeps (owned by the event loop), and whether the broker is ready."""

    def __init__(self, broker: MeteredBroker) -> None:
        self.broker = broker
        self.requests: dict[tuple[int, int], int] = {}  # (request key, version) → count
        self.errors: dict[tuple[int, int, int], int] = {}  # (request key, version, error code) → count
        self.total_time: dict[int, Histogram] = {}  # request key → milliseconds from dispatch to response
        self.queue_time: dict[int, Histogram] = {}  # request key → milliseconds from socket read to dispatch
        self.messages_in: dict[str, int] = {}
        self.bytes_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.produce_requests: dict[str, int] = {}  # per topic: partitions produced to, as Kafka counts them
        self.fetch_requests: dict[str, int] = {}
        self.connections: Iterable = ()  # the open connections (odradek/server.py hands its set over)
        self.ready = False  # set once the listeners accept connections (and the broker joined its cluster)
        self.idle_ratio = 1.0
        self._busy_s = 0.0

    # request path -------------------------------------------------------------------------------------

    def started(self, ctx: "RequestContext", request: dict, now: float) -> None:
        """A request was dispatched at ``now`` (perf_counter, before its decoding): count it and its queue time."""
        ctx.started = now
        key = ctx.api_key
        if key == ApiKey.FETCH and (request.get("replica_id", -1) >= 0 or
                                    (request.get("replica_state") or {}).get("replica_id", -1) >= 0):
            key = FETCH_FOLLOWER
        ctx.metrics_key = key
        counted = (key, ctx.api_version)
        self.requests[counted] = self.requests.get(counted, 0) + 1
        read_at = ctx.connection.read_at
        if read_at:
            queue = self.queue_time.get(key)
            if queue is None:
                queue = self.queue_time[key] = Histogram(REQUEST_MS_BUCKETS)
            queue.observe(max(now - read_at, 0.0) * 1000.0)

    def finished(self, ctx: "RequestContext", body: dict | None) -> None:
        """Its response is ready (``body`` None: none is sent): its errors and total time."""
        key = ctx.metrics_key
        if body is not None:
            count_errors(body, self.errors, (key, ctx.api_version))
        total = self.total_time.get(key)
        if total is None:
            total = self.total_time[key] = Histogram(REQUEST_MS_BUCKETS)
        total.observe((time.perf_counter() - ctx.started) * 1000.0)

    def refused(self, key: int, version: int, code: int) -> None:
        """A refusal answered outside a response body (a Kafka 0.7 request): counted with the errors, as
        ``finished`` counts the codes of a body."""
        counted = (key, version, code)
        self.errors[counted] = self.errors.get(counted, 0) + 1

    def produced(self, topic: str, records: int, size: int) -> None:
        self.messages_in[topic] = self.messages_in.get(topic, 0) + records
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + size
        self.produce_requests[topic] = self.produce_requests.get(topic, 0) + 1

    def fetched(self, topic: str, size: int) -> None:
        self.bytes_out[topic] = self.bytes_out.get(topic, 0) + size
        self.fetch_requests[topic] = self.fetch_requests.get(topic, 0) + 1

    # the event loop's idle ratio -----------------------------------------------------------------------

    async def sample_idle(self) -> None:
        """The loop thread's CPU time against the wall clock, over windows of IDLE_SAMPLE_S: the share of
        the time the loop waited for events (Kafka's network processor idle ratio). Runs on the loop, so
        time.thread_time() is the loop thread's."""
        wall, cpu = time.monotonic(), time.thread_time()
        while True:
            await asyncio.sleep(IDLE_SAMPLE_S)
            now_wall, now_cpu = time.monotonic(), time.thread_time()
            busy = now_cpu - cpu
            self._busy_s += busy
            if now_wall > wall:
                self.idle_ratio = min(max(1.0 - busy / (now_wall - wall), 0.0), 1.0)
            wall, cpu = now_wall, now_cpu

    # readiness ---------------------------------------------------------------------------------------

    def is_ready(self) -> bool:
        broker = self.broker
        # cluster mode: registered, and the controller's metadata naming this broker arrived
        return self.ready and not broker.fenced and broker.knows_cluster


class BrokerCollector:
    """Reads the broker's state at scrape time (on the loop thread) into metric families."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics

    def collect(self):
        m = self.metrics
        broker = m.broker
        yield from self._topic_counters(m)
        yield from self._requests(m)
        idle = GaugeMetricFamily("kafka_network_socketserver_networkprocessoravgidlepercent",
                                 "Share of the time the event loop waited for events (0-1), over the last "
                                 f"{IDLE_SAMPLE_S:g} s", value=m.idle_ratio)
        yield idle
        yield CounterMetricFamily("odradek_event_loop_busy_seconds", "CPU time of the event loop's thread",
                                  value=m._busy_s)
        connections = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                        "Open client and broker connections per listener", labels=["listener"])
        per_listener: dict[str, int] = {name: 0 for name in (b.name for b in broker.listeners.bind)}
        for conn in m.connections:
            if conn.is_open:
                per_listener[conn.listener] = per_listener.get(conn.listener, 0) + 1
        for name, count in sorted(per_listener.items()):
            connections.add_metric([name], count)
        yield connections
        yield from self._logs(broker)
        yield from self._replicas(broker)
        yield from self._groups(broker)
        yield from self._transactions(broker)
        yield from self._flusher(broker)

    @staticmethod
    def _topic_counters(m: BrokerMetrics):
        for name, values, text in (
                ("messagesin", m.messages_in, "Records appended by producers, per topic"),
                ("bytesin", m.bytes_in, "Record set bytes received from producers, per topic"),
                ("bytesout", m.bytes_out, "Record bytes sent to consumers in Fetch responses, per topic"),
                ("totalproducerequests", m.produce_requests, "Produce requests per topic (one per partition)"),
                ("totalfetchrequests", m.fetch_requests, "Consumer fetches answered with records, per topic "
                                                         "(one per partition)")):
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", text, labels=["topic"])
            for topic, value in sorted(values.items()):
                family.add_metric([topic], value)
            yield family
        for name, values, text in (("messagesin", m.messages_in, "Records appended by producers"),
                                   ("bytesin", m.bytes_in, "Record set bytes received from producers"),
                                   ("bytesout", m.bytes_out, "Record bytes sent to consumers")):
            yield CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}_all", text + ", all topics",
                                      value=sum(values.values()))

    @staticmethod
    def _requests(m: BrokerMetrics):
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests received",
                                       labels=["request", "version"])
        for (key, version), count in sorted(m.requests.items()):
            requests.add_metric([request_name(key), str(version)], count)
        yield requests
        errors = CounterMetricFamily("kafka_network_requestmetrics_errors",
                                     "Error codes other than NONE in responses (one per partition, group or "
                                     "resource that carries one)", labels=["request", "version", "error"])
        for (key, version, code), count in sorted(m.errors.items()):
            errors.add_metric([request_name(key), str(version), error_name(code)], count)
        yield errors
        for name, table, text in (
                ("totaltimems", m.total_time, "Milliseconds from dispatch to the response being ready"),
                ("requestqueuetimems", m.queue_time, "Milliseconds from the socket read that completed a "
                                                     "request to its dispatch")):
            family = HistogramMetricFamily(f"kafka_network_requestmetrics_{name}", text, labels=["request"])
            for key, histogram in sorted(table.items()):
                buckets, total = histogram.cumulative()
                family.add_metric([request_name(key)], buckets, total)
            yield family

    @staticmethod
    def _logs(broker: MeteredBroker):
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log on disk", labels=labels)
        segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of the partition's log",
                                     labels=labels)
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset", labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset", labels=labels)
        producers = 0
        for (topic, index), plog in sorted(broker.logs.logs().items()):
            if plog.closed:
                continue
            key = [topic, str(index)]
            size.add_metric(key, plog.size_in_bytes)
            segments.add_metric(key, plog.segment_count)
            end.add_metric(key, plog.log_end_offset)
            start.add_metric(key, plog.log_start_offset)
            producers += len(plog.producer_state.producers)
        yield from (size, segments, end, start)
        yield GaugeMetricFamily("kafka_server_replicamanager_produceridcount",
                                "Producer ids with state in this broker's partition logs", value=producers)

    @staticmethod
    def _replicas(broker: MeteredBroker):
        replicas = broker.replicas
        leaders = under = 0
        for partition in replicas.partitions.values():
            if not partition.is_leader:
                continue
            leaders += 1
            if len(partition.isr) < len(partition.replicas):
                under += 1
        offline = sum(1 for topic in broker.metadata.all_topics() for index in range(topic.partitions)
                      if _leaderless(broker, topic.name, index))
        yield GaugeMetricFamily("kafka_server_replicamanager_partitioncount", "Partitions with a replica here",
                                value=len(replicas.partitions))
        yield GaugeMetricFamily("kafka_server_replicamanager_leadercount", "Partitions this broker leads",
                                value=leaders)
        yield GaugeMetricFamily("kafka_server_replicamanager_underreplicatedpartitions",
                                "Partitions led here whose ISR is smaller than their replica set", value=under)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_offlinepartitionscount",
                                "Partitions without a leader, in this broker's metadata", value=offline)
        yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks", "ISR shrinks written by this broker",
                                  value=replicas.isr_shrinks)
        yield CounterMetricFamily("kafka_server_replicamanager_isrexpands", "ISR expansions written by this broker",
                                  value=replicas.isr_expands)

    @staticmethod
    def _groups(broker: MeteredBroker):
        coordinator = broker.coordinator
        by_state: dict[tuple[str, str], int] = {}
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark minus the committed offset, per group "
                                "this broker coordinates and partition this broker leads",
                                labels=["consumergroup", "topic", "partition"])
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "Committed offset of the group",
                                    labels=["consumergroup", "topic", "partition"])
        if coordinator is not None:
            for group in coordinator.groups.groups.values():
                kind = "classic" if type(group).__name__ == "Group" else "consumer"
                key = (group.state.value, kind)
                by_state[key] = by_state.get(key, 0) + 1
            store = coordinator.store
            for group_id in sorted(store.group_ids()):
                for (topic, index), value in sorted(store.partitions(group_id).items()):
                    labels = [group_id, topic, str(index)]
                    current.add_metric(labels, value.offset)
                    partition = broker.replicas.partition(topic, index)
                    if partition is not None and partition.is_leader and value.offset >= 0:
                        lag.add_metric(labels, max(partition.log.high_watermark - value.offset, 0))
        total = sum(by_state.values())
        yield GaugeMetricFamily("kafka_coordinator_group_groupmetadatamanager_numgroups",
                                "Groups this broker coordinates", value=total)
        for state in ("Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead"):
            yield GaugeMetricFamily(f"kafka_coordinator_group_groupmetadatamanager_numgroups{state.lower()}",
                                    f"Classic groups in state {state}",
                                    value=by_state.get((state, "classic"), 0))
        family = GaugeMetricFamily("odradek_groups", "Groups this broker coordinates, by state and protocol",
                                   labels=["state", "type"])
        for (state, kind), count in sorted(by_state.items()):
            family.add_metric([state, kind], count)
        yield family
        yield current
        yield lag

    @staticmethod
    def _transactions(broker: MeteredBroker):
        family = GaugeMetricFamily("odradek_transactions", "Transactional ids this broker coordinates, by state",
                                   labels=["state"])
        open_txns = 0
        coordinator = broker.txn_coordinator
        if coordinator is not None:
            by_state: dict[str, int] = {}
            for txn in coordinator.txns.values():
                name = txn.state.kafka_name
                by_state[name] = by_state.get(name, 0) + 1
                if name in ("Ongoing", "PrepareCommit", "PrepareAbort"):
                    open_txns += 1
            for name, count in sorted(by_state.items()):
                family.add_metric([name], count)
        yield family
        yield GaugeMetricFamily("odradek_transactions_open", "Transactions this broker coordinates that are "
                                "open (Ongoing, PrepareCommit, PrepareAbort)", value=open_txns)

    @staticmethod
    def _flusher(broker: MeteredBroker):
        timings = broker.logs.flusher.timings
        histogram = Histogram(timings.BOUNDS_MS)
        with timings.lock:
            histogram.counts = list(timings.counts)
            histogram.sum = timings.sum_ms
        buckets, total = histogram.cumulative()
        family = HistogramMetricFamily("kafka_log_logflushstats_logflushrateandtimems",
                                       "Milliseconds per log flusher job (segment and index fsyncs, checkpoints)",
                                       labels=[])
        family.add_metric([], buckets, total)
        yield family


def _leaderless(broker: MeteredBroker, topic: str, index: int) -> bool:
    info = broker.metadata.partition(topic, index)
    return info is not None and info.leader < 0


# the HTTP endpoint --------------------------------------------------------------------------------------

MAX_REQUEST_HEAD = 8192
READ_TIMEOUT_S = 10.0


class MetricsServer:
    """A small HTTP/1.1 server for GET /metrics, /healthz and /readyz, on the broker's event loop."""

    def __init__(self, metrics: BrokerMetrics, host: str, port: int) -> None:
        self.metrics = metrics
        self.host = host
        self.port = port
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(metrics))
        self.registry.register(ProcessCollector(registry=None))
        self._server: asyncio.AbstractServer | None = None
        self._sampler: asyncio.Task | None = None

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(self._serve, self.host or None, self.port, reuse_address=True)
        except OSError as exc:
            raise OSError(exc.errno, f"metrics.listen {self.host}:{self.port}: {exc.strerror}") from None
        self.port = self._server.sockets[0].getsockname()[1]
        self._sampler = asyncio.ensure_future(self.metrics.sample_idle())
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    async def close(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ConnectionError):
            writer.close()
            return
        try:
            if len(head) > MAX_REQUEST_HEAD:
                status, body, ctype = 431, b"request header too large\n", "text/plain"
            else:
                status, body, ctype = self._answer(head.split(b"\r\n", 1)[0])
            writer.write(b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                         % (status, _REASONS.get(status, b"Error"), ctype.encode(), len(body)) + body)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    def _answer(self, request_line: bytes) -> tuple[int, bytes, str]:
        parts = request_line.split()
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            return 400, b"bad request\n", "text/plain"
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if method != b"GET":
            return 405, b"only GET\n", "text/plain"
        if target == b"/metrics":
            return 200, generate_latest(self.registry), CONTENT_TYPE_LATEST
        if target == b"/healthz":
            return 200, b"ok\n", "text/plain"
        if target == b"/readyz":
            if self.metrics.is_ready():
                return 200, b"ready\n", "text/plain"
            return 503, b"not ready\n", "text/plain"
        return 404, b"not found\n", "text/plain"


_REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 405: b"Method Not Allowed",
            431: b"Request Header Fields Too Large", 503: b"Service Unavailable"}


def parse_listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return host.strip("[]"), int(port)
