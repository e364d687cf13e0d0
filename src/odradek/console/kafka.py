"""The console's access to a Kafka-compatible cluster, through confluent-kafka (and, for partition sizes,
which its AdminClient cannot ask for, a DescribeLogDirs request with odradek's codec: `Kafka.sizes`).

Every method here blocks (it waits on librdkafka futures or polls a consumer); the web application calls
them from a thread pool, never on the event loop. One AdminClient and one Producer are shared (both are
thread-safe); a message browse gets a Consumer of its own, which it closes before returning. The console
never subscribes and never commits: its consumers `assign()` partitions, so it joins no group.

`Sampler` keeps a short history of the partitions' end offsets (throughput) and of the groups' lag, sampled
every few seconds by the web application.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from odradek.cluster.topics import INTERNAL_TOPICS

log = logging.getLogger(__name__)

TIMEOUT_S = 10.0
BROWSE_DEADLINE_S = 8.0  # one browse request polls for at most this long
MAX_BROWSE_LIMIT = 500
MAX_SCANNED = 20_000  # with a filter, records read per request at most


class ConsoleError(Exception):
    """An error to show the user, with the HTTP status the API answers it with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _enum_name(value: Any) -> str:
    return str(value).rsplit(".", 1)[-1] if value is not None else "-"


def _config_source(value: Any) -> str:
    from confluent_kafka.admin import ConfigSource

    try:
        return ConfigSource(value).name.lower().replace("_config", "").replace("_", " ")
    except ValueError:
        return _enum_name(value)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _text(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", errors="replace")


@contextmanager
def _tool_errors() -> Iterator[None]:
    """The shared admin helpers' ToolError as the console's error (the cluster failed: 502)."""
    from odradek.tools.common import ToolError

    try:
        yield
    except ToolError as exc:
        raise ConsoleError(str(exc), 502) from None


def _check(future: Any, what: str) -> Any:
    try:
        return future.result(TIMEOUT_S)
    except Exception as exc:  # KafkaException carries the broker's error
        raise ConsoleError(f"{what}: {exc}", 502) from None


class Kafka:
    def __init__(self, bootstrap: str, client_config: dict[str, str] | None = None) -> None:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.base = {"bootstrap.servers": bootstrap, **(client_config or {})}
        self.admin = AdminClient(dict(self.base))
        self.producer = Producer({**self.base, "linger.ms": 0})
        self._producer_lock = threading.Lock()

    def close(self) -> None:
        self.producer.flush(2.0)

    # -- cluster and topics --------------------------------------------------------------------------

    def metadata(self):
        try:
            return self.admin.list_topics(timeout=TIMEOUT_S)
        except Exception as exc:
            raise ConsoleError(f"metadata: {exc}", 502) from None

    def overview(self) -> dict:
        md = self.metadata()
        controller = None
        cluster_id = md.cluster_id
        try:
            desc = self.admin.describe_cluster(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
            controller = desc.controller.id if desc.controller is not None else None
            cluster_id = desc.cluster_id or cluster_id
        except Exception:  # a broker without DescribeCluster: Metadata's controller id instead
            controller = md.controller_id if md.controller_id >= 0 else None
        brokers = [{"id": b.id, "host": b.host, "port": b.port, "controller": b.id == controller}
                   for b in sorted(md.brokers.values(), key=lambda b: b.id)]
        topics = [t for name, t in md.topics.items() if name not in INTERNAL_TOPICS]
        partitions = [p for t in topics for p in t.partitions.values()]
        return {
            "cluster_id": cluster_id, "controller": controller, "bootstrap": self.bootstrap,
            "brokers": brokers, "topics": len(topics), "partitions": len(partitions),
            "under_replicated": sum(1 for p in partitions if len(p.isrs) < len(p.replicas)),
            "offline": sum(1 for p in partitions if p.leader < 0),
        }

    def offsets(self, partitions: list[tuple[str, int]], latest: bool = True) -> dict[tuple[str, int], int]:
        """Earliest or latest offsets of many partitions, in one ListOffsets round (-1 where it failed)."""
        from odradek.tools.common import list_offsets

        return list_offsets(self.admin, partitions, TIMEOUT_S, latest)

    def topics(self, include_internal: bool = False) -> list[dict]:
        md = self.metadata()
        rows = []
        for name, t in sorted(md.topics.items()):
            if name in INTERNAL_TOPICS and not include_internal:
                continue
            parts = t.partitions.values()
            rows.append({
                "name": name, "internal": name in INTERNAL_TOPICS, "partitions": len(t.partitions),
                "replication": max((len(p.replicas) for p in parts), default=0),
                "under_replicated": sum(1 for p in parts if len(p.isrs) < len(p.replicas)),
                "error": str(t.error) if t.error is not None else None,
            })
        return rows

    def topic(self, name: str) -> dict:
        md = self.metadata()
        t = md.topics.get(name)
        if t is None or (t.error is not None and not t.partitions):
            raise ConsoleError(f"unknown topic {name}", 404)
        tps = [(name, p) for p in sorted(t.partitions)]
        low = self.offsets(tps, latest=False)
        high = self.offsets(tps, latest=True)
        sizes = self.sizes(md, {t.partitions[p].leader for _, p in tps})
        partitions = []
        for _, p in tps:
            pm = t.partitions[p]
            partitions.append({
                "partition": p, "leader": pm.leader, "replicas": list(pm.replicas), "isr": list(pm.isrs),
                "low": low.get((name, p), -1), "high": high.get((name, p), -1),
                "size": sizes.get((pm.leader, name, p), -1),
                "under_replicated": len(pm.isrs) < len(pm.replicas),
            })
        return {"name": name, "internal": name in INTERNAL_TOPICS, "partitions": partitions,
                "messages": sum(max(p["high"] - p["low"], 0) for p in partitions if p["low"] >= 0)}

    def sizes(self, md, brokers: set[int]) -> dict[tuple[int, str, int], int]:
        """(broker, topic, partition) -> bytes on that broker, from DescribeLogDirs (a standard API, sent with
        odradek's codec, which speaks PLAINTEXT only: over TLS or SASL sizes are unknown, -1)."""
        if str(self.base.get("security.protocol", "PLAINTEXT")).upper() != "PLAINTEXT":
            return {}
        from odradek.tools.cluster import describe_log_dirs

        out: dict[tuple[int, str, int], int] = {}
        for broker_id in brokers:
            broker = md.brokers.get(broker_id)
            if broker is None:
                continue
            try:
                dirs = describe_log_dirs(broker.host, broker.port, TIMEOUT_S)
            except Exception:  # a broker that does not answer DescribeLogDirs: sizes unknown
                continue
            for d in dirs:
                for (topic, p), size in d.sizes.items():
                    out[(broker_id, topic, p)] = out.get((broker_id, topic, p), 0) + size
        return out

    def topic_configs(self, name: str) -> list[dict]:
        from confluent_kafka.admin import ConfigResource, ResourceType

        res = ConfigResource(ResourceType.TOPIC, name)
        entries = _check(self.admin.describe_configs([res], request_timeout=TIMEOUT_S)[res], f"configs of {name}")
        return [{"name": e.name, "value": None if e.is_sensitive else e.value, "source": _config_source(e.source),
                 "default": bool(e.is_default), "sensitive": bool(e.is_sensitive), "read_only": bool(e.is_read_only)}
                for e in sorted(entries.values(), key=lambda e: e.name)]

    def create_topic(self, name: str, partitions: int, replication: int, configs: dict[str, str]) -> None:
        from confluent_kafka.admin import NewTopic

        if not name:
            raise ConsoleError("a topic needs a name")
        new = NewTopic(name, num_partitions=partitions, replication_factor=replication, config=configs)
        _check(self.admin.create_topics([new], request_timeout=TIMEOUT_S)[name], f"create {name}")

    def delete_topic(self, name: str) -> None:
        _check(self.admin.delete_topics([name], request_timeout=TIMEOUT_S)[name], f"delete {name}")

    # -- messages --------------------------------------------------------------------------------------

    def _consumer(self):
        from confluent_kafka import Consumer

        # assign() only, never commits: the group id is never used for membership
        return Consumer({**self.base, "group.id": "odradek-console-browser", "enable.auto.commit": False,
                         "enable.partition.eof": False, "fetch.wait.max.ms": 100})

    def browse(self, topic: str, partition: int | None = None, start: str = "end", offset: int | None = None,
               timestamp_ms: int | None = None, limit: int = 50, key_filter: str = "", value_filter: str = "",
               positions: dict[int, int] | None = None) -> dict:
        """Up to `limit` records of a topic (one partition or all), from the beginning, the end (the last
        `limit` of each partition), an offset, a timestamp, or `positions` (partition -> next offset, what a
        previous answer returned: the live tail). Records whose key (value) does not contain `key_filter`
        (`value_filter`) are skipped. Returns the records in (timestamp, partition, offset) order and the next
        position of every partition read."""
        from confluent_kafka import TopicPartition

        limit = max(1, min(limit, MAX_BROWSE_LIMIT))
        info = self.topic(topic)
        parts = [p for p in info["partitions"] if partition is None or p["partition"] == partition]
        if not parts:
            raise ConsoleError(f"{topic} has no partition {partition}", 404)
        bounds = {p["partition"]: (p["low"], p["high"]) for p in parts}
        starts: dict[int, int] = {}
        if positions is not None:
            starts = {p: max(positions.get(p, bounds[p][1]), bounds[p][0]) for p in bounds}
        elif start == "beginning":
            starts = {p: lo for p, (lo, _) in bounds.items()}
        elif start == "end":
            starts = {p: max(lo, hi - limit) for p, (lo, hi) in bounds.items()}
        elif start == "offset":
            if offset is None:
                raise ConsoleError("start=offset needs an offset")
            starts = {p: min(max(offset, lo), hi) for p, (lo, hi) in bounds.items()}
        elif start == "timestamp":
            if timestamp_ms is None:
                raise ConsoleError("start=timestamp needs a timestamp")
            consumer = self._consumer()
            try:
                found = consumer.offsets_for_times([TopicPartition(topic, p, timestamp_ms) for p in bounds],
                                                   timeout=TIMEOUT_S)
            finally:
                consumer.close()
            # no record at or after the timestamp: -1, i.e. the end of the partition
            starts = {tp.partition: bounds[tp.partition][1] if tp.offset < 0 else tp.offset for tp in found}
        else:
            raise ConsoleError(f"unknown start {start!r}: beginning, end, offset or timestamp")
        todo = {p: s for p, s in starts.items() if s < bounds[p][1]}
        nexts = dict(starts)
        records: list[dict] = []
        scanned = 0
        if todo:
            consumer = self._consumer()
            try:
                consumer.assign([TopicPartition(topic, p, s) for p, s in todo.items()])
                deadline = time.monotonic() + BROWSE_DEADLINE_S
                per_partition: dict[int, int] = {p: 0 for p in todo}
                while todo and time.monotonic() < deadline and scanned < MAX_SCANNED:
                    batch = consumer.consume(500, timeout=0.2)
                    for msg in batch:
                        if msg.error() is not None:
                            continue
                        p = msg.partition()
                        if p not in todo:
                            continue
                        scanned += 1
                        nexts[p] = msg.offset() + 1
                        if (key_filter and key_filter not in _text(msg.key())) or \
                                (value_filter and value_filter not in _text(msg.value())):
                            pass
                        else:
                            records.append(_record(msg))
                            per_partition[p] += 1
                        if nexts[p] >= bounds[p][1] or per_partition[p] >= limit:
                            del todo[p]
                            consumer.incremental_unassign([TopicPartition(topic, p)])
            finally:
                consumer.close()
        records.sort(key=lambda r: (r["timestamp"], r["partition"], r["offset"]))
        if len(records) > limit:
            records = records[-limit:] if start == "end" and positions is None else records[:limit]
        return {"topic": topic, "records": records, "next": nexts, "scanned": scanned,
                "complete": not todo}

    def produce(self, topic: str, key: str | None, value: str | None, headers: list[tuple[str, str]],
                partition: int | None) -> dict:
        result: dict = {}
        done = threading.Event()

        def report(err, msg):
            if err is not None:
                result["error"] = str(err)
            else:
                result.update(topic=msg.topic(), partition=msg.partition(), offset=msg.offset())
            done.set()

        kwargs: dict[str, Any] = {"key": None if key is None else key.encode(),
                                  "value": None if value is None else value.encode(),
                                  "headers": [(k, v.encode()) for k, v in headers], "on_delivery": report}
        if partition is not None:
            kwargs["partition"] = partition
        with self._producer_lock:
            try:
                self.producer.produce(topic, **kwargs)
            except Exception as exc:
                raise ConsoleError(f"produce to {topic}: {exc}") from None
            deadline = time.monotonic() + TIMEOUT_S
            while not done.is_set() and time.monotonic() < deadline:
                self.producer.poll(0.1)
        if not done.is_set():
            raise ConsoleError(f"produce to {topic}: no acknowledgement within {TIMEOUT_S:g} s", 504)
        if "error" in result:
            raise ConsoleError(f"produce to {topic}: {result['error']}", 502)
        return result

    # -- consumer groups -------------------------------------------------------------------------------

    def groups(self) -> list[dict]:
        """Every group with its state and type: `consumer`, `simple` (offsets only) or `share` (KIP-932)."""
        listed = _check(self.admin.list_consumer_groups(request_timeout=TIMEOUT_S), "list groups")
        found = {g.group_id: {"group": g.group_id, "state": _enum_name(g.state),
                              "simple": bool(g.is_simple_consumer_group),
                              "type": "simple" if g.is_simple_consumer_group else "consumer"}
                 for g in listed.valid}
        found.update({group: {"group": group, "state": state, "simple": False, "type": "share"}
                      for group, state in self.share_groups().items()})
        return [found[group] for group in sorted(found)]

    def share_groups(self) -> dict[str, str]:
        """Share group -> state, through the tools' own client (confluent-kafka lists no share groups); none
        when that client cannot connect with the console's settings (a SASL mechanism it lacks)."""
        from odradek.tools.common import ToolError
        from odradek.tools.share_groups import list_share_groups

        brokers = sorted((b.host, b.port) for b in self.metadata().brokers.values())
        try:
            return list_share_groups(brokers, self.base, TIMEOUT_S)
        except ToolError as exc:
            log.debug("share groups not listed: %s", exc)
            return {}

    def share_group(self, group: str) -> dict | None:
        """A share group's page: members, and per partition the start offset and lag; None for another group."""
        from odradek.tools.common import ToolError
        from odradek.tools.share_groups import describe_share_group

        try:
            share = describe_share_group(self.base["bootstrap.servers"], self.base, group, TIMEOUT_S)
        except ToolError as exc:
            log.debug("share group %s not described: %s", group, exc)
            return None
        if share is None:
            return None
        partitions = [{"topic": t, "partition": p, "start_offset": part.start_offset, "lag": part.lag,
                       "member": ", ".join(share.owners((t, p))) or None}
                      for (t, p), part in share.partitions.items()]
        return {"group": group, "type": "share", "state": share.state, "assignor": share.assignor,
                "coordinator": share.coordinator,
                "members": [{"member_id": m.member_id, "instance_id": None, "client_id": m.client_id,
                             "host": m.host, "assignment": [{"topic": t, "partition": p} for t, p in m.assignment]}
                            for m in share.members],
                "partitions": partitions, "lag": sum(p["lag"] or 0 for p in partitions)}

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        from odradek.tools.groups import committed_offsets

        with _tool_errors():
            return committed_offsets(self.admin, group, TIMEOUT_S)

    def committed_of(self, groups: list[str]) -> dict[str, dict[tuple[str, int], int]]:
        """The committed offsets of many groups, asked all at once."""
        from odradek.tools.groups import committed_offsets_of

        with _tool_errors():
            return committed_offsets_of(self.admin, groups, TIMEOUT_S)

    def group(self, group: str) -> dict:
        from odradek.tools.groups import group_state

        share = self.share_group(group)
        if share is not None:
            return share

        with _tool_errors():
            state = group_state(self.admin, group, TIMEOUT_S)
        desc, owner = state.description, state.owner
        members = [{"member_id": m.member_id, "instance_id": m.group_instance_id, "client_id": m.client_id,
                    "host": m.host,
                    "assignment": [{"topic": t, "partition": p} for t, p in state.assignments[m.member_id]]}
                   for m in desc.members]
        partitions = [{"topic": t, "partition": p, "committed": state.committed.get((t, p)),
                       "end": state.ends.get((t, p), -1), "lag": state.lag((t, p)), "member": owner.get((t, p))}
                      for t, p in state.partitions]
        coordinator = desc.coordinator
        return {"group": desc.group_id, "state": _enum_name(desc.state),
                "assignor": desc.partition_assignor or None,
                "coordinator": f"{coordinator.id} ({coordinator.host}:{coordinator.port})" if coordinator else None,
                "members": members, "partitions": partitions, "type": "consumer",
                "lag": sum(p["lag"] or 0 for p in partitions)}

    def reset_offsets(self, group: str, topic: str | None, to: str, offset: int | None = None) -> list[dict]:
        """Move the group's committed offsets of `topic` (every topic it has offsets for when None) to the
        earliest or latest offset, or `offset` (clamped to each partition's range). Refused while the group
        has members, as Kafka requires."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        if to not in ("earliest", "latest", "offset"):
            raise ConsoleError(f"unknown reset target {to!r}: earliest, latest or offset")
        if to == "offset" and offset is None:
            raise ConsoleError("to=offset needs an offset")
        desc = _check(self.admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group],
                      f"describe {group}")
        if desc.members:
            raise ConsoleError(f"group {group} has {len(desc.members)} active member(s): stop its consumers "
                               "before resetting its offsets", 409)
        committed = self.committed(group)
        if topic:
            md = self.metadata().topics.get(topic)
            if md is None or not md.partitions:
                raise ConsoleError(f"unknown topic {topic}", 404)
            tps = [(topic, p) for p in sorted(md.partitions)]
        else:
            tps = sorted(committed)
        if not tps:
            raise ConsoleError(f"group {group} has no committed offsets; name a topic")
        low = self.offsets(tps, latest=False)
        high = self.offsets(tps, latest=True)
        plan = []
        for tp in tps:
            target = {"earliest": low[tp], "latest": high[tp]}.get(to)
            if target is None:
                target = min(max(offset, low[tp]), high[tp])
            plan.append({"topic": tp[0], "partition": tp[1], "before": committed.get(tp), "after": target})
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(p["topic"], p["partition"], p["after"])
                                                       for p in plan])
        result = _check(self.admin.alter_consumer_group_offsets([request], request_timeout=TIMEOUT_S)[group],
                        f"reset offsets of {group}")
        failed = [tp for tp in result.topic_partitions if tp.error is not None]
        if failed:
            raise ConsoleError("; ".join(f"{tp.topic}:{tp.partition}: {tp.error}" for tp in failed), 502)
        return plan


def _record(msg: Any) -> dict:
    ts_type, ts = msg.timestamp()
    return {"partition": msg.partition(), "offset": msg.offset(), "timestamp": ts,
            "timestamp_type": {0: None, 1: "create", 2: "log-append"}.get(ts_type),
            "key": _b64(msg.key()), "value": _b64(msg.value()),
            "headers": [{"key": k, "value": _b64(v)} for k, v in (msg.headers() or [])]}


@dataclass
class Sampler:
    """Samples end offsets of every topic's partitions and the lag of every group, keeping `keep` samples."""

    kafka: Kafka
    keep: int = 90
    throughput: deque = field(default_factory=deque)  # (time, {topic: sum of end offsets})
    lag: dict = field(default_factory=dict)  # group -> deque of (time, {"topic:partition": lag})
    error: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)  # the histories are read by other threads

    def sample(self) -> None:
        now = time.time()
        try:
            md = self.kafka.metadata()
            tps = [(name, p) for name, t in md.topics.items() if name not in INTERNAL_TOPICS
                   for p in t.partitions]
            high = self.kafka.offsets(tps, latest=True)
            ends: dict[str, int] = {}
            for (topic, _), off in high.items():
                if off >= 0:
                    ends[topic] = ends.get(topic, 0) + off
            self._push(self.throughput, (now, ends))
            # share groups commit no offsets: their lag is not sampled
            seen = {g["group"] for g in self.kafka.groups() if g["type"] != "share"}
            for name, committed in self.kafka.committed_of(sorted(seen)).items():
                missing = [tp for tp in committed if tp not in high]
                if missing:
                    high.update(self.kafka.offsets(missing, latest=True))
                lags = {f"{t}:{p}": max(high[(t, p)] - off, 0) for (t, p), off in committed.items()
                        if high.get((t, p), -1) >= 0}
                with self.lock:
                    history = self.lag.setdefault(name, deque())
                self._push(history, (now, lags))
            with self.lock:
                for gone in set(self.lag) - seen:
                    del self.lag[gone]
            self.error = None
        except Exception as exc:  # the cluster is unreachable: keep the history, report the error
            self.error = str(exc)

    def _push(self, history: deque, item: tuple) -> None:
        with self.lock:
            history.append(item)
            while len(history) > self.keep:
                history.popleft()

    def throughput_series(self) -> dict:
        """Messages a second between consecutive samples: the total and per topic."""
        with self.lock:
            samples = list(self.throughput)
        total: list[dict] = []
        topics: dict[str, list[dict]] = {}
        for (t0, a), (t1, b) in zip(samples, samples[1:]):
            dt = max(t1 - t0, 1e-3)
            rates = {name: max(b[name] - a.get(name, b[name]), 0) / dt for name in b}
            total.append({"t": t1, "v": sum(rates.values())})
            for name, r in rates.items():
                topics.setdefault(name, []).append({"t": t1, "v": r})
        return {"total": total, "topics": topics, "error": self.error}

    def lag_series(self, group: str) -> dict:
        with self.lock:
            history = list(self.lag.get(group, ()))
        return {"total": [{"t": t, "v": sum(lags.values())} for t, lags in history],
                "partitions": {key: [{"t": t, "v": lags[key]} for t, lags in history if key in lags]
                               for key in sorted({k for _, lags in history for k in lags})},
                "error": self.error}
