"""Broker configuration under Kafka's own property names.

Broker properties come from an optional `server.properties` file and `--set key=value` overrides. Topic
configs (topic_config.py) use the topic-level names, and each falls back to the broker property that supplies
its default, as in Kafka (`retention.ms` ← `log.retention.ms`): `BrokerConfig.topic_defaults`.

Each broker property (`Property.doc`) carries a sentence or two of our own on what it does and its unit;
DescribeConfigs returns it as the config's `documentation` when asked.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from odradek.records.compression import COMPRESSION_TYPES
from odradek.topic_config import KAFKA_TOPIC_DEFAULTS, LONG_MAX

log = logging.getLogger(__name__)

HOUR_MS = 3600 * 1000


def default_request_memory() -> int:
    """queued.max.request.bytes when it is not set: 1/16 of the machine's physical memory, at most 256 MiB
    (docs/security.md, "Memory and connection limits"). Kafka's -1 (no bound) lets connections that announce
    large requests take what the machine has; 256 MiB still holds two full default-size requests
    (socket.request.max.bytes, 100 MiB) and, as one frame alone is always read, never refuses a request."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows): the cap alone
        physical = 0
    cap = 256 << 20
    return min(cap, physical // 16) if physical > 0 else cap


class ConfigError(ValueError):
    """A property with a value of the wrong type or out of range."""


def _parse_bool(value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise ConfigError(f"expected true or false, got {value!r}")


def _parse_int(value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ConfigError(f"expected an integer, got {value!r}") from None


@dataclass(frozen=True)
class Property:
    name: str
    parse: Callable[[str], object]
    default: object
    check: Callable[[object], bool] = lambda v: True
    doc: str = ""  # what it does and its unit, in a sentence or two: DescribeConfigs' `documentation`


def _at_least(n: int) -> Callable[[object], bool]:
    return lambda v: isinstance(v, int) and v >= n


def _positive_or_unlimited(v: object) -> bool:
    return isinstance(v, int) and (v > 0 or v == -1)


def _host_port_or_empty(v: object) -> bool:
    if v == "":
        return True
    host, sep, port = str(v).rpartition(":")
    return bool(sep) and port.isdigit() and 0 <= int(port) <= 65535


def _is_principal(v: object) -> bool:
    kind, sep, name = str(v).partition(":")
    return bool(kind.strip() and sep and name.strip())


# Broker properties odradek understands. Others are accepted with a warning, as Kafka does.
BROKER_PROPERTIES: dict[str, Property] = {
    p.name: p
    for p in [
        Property("node.id", _parse_int, 0, _at_least(0),
                 doc="This broker's id when broker.id is not set; a cluster member needs one or the other (an "
                     "integer)."),
        Property("broker.id", _parse_int, -1,
                 doc="This broker's id in a cluster; -1 leaves the id to node.id (an integer)."),
        Property("num.partitions", _parse_int, 1, _at_least(1),
                 doc="Partition count of a topic created without one, auto-created topics included (a count)."),
        Property("default.replication.factor", _parse_int, 1, _at_least(1),
                 doc="Replica count of a topic created without one, auto-created topics included (a count)."),
        Property("auto.create.topics.enable", _parse_bool, True,
                 doc="Whether a Metadata request naming a topic that does not exist creates it with the broker's "
                     "defaults (true or false)."),
        Property("delete.topic.enable", _parse_bool, True,
                 doc="Whether DeleteTopics may remove topics; when false every deletion is refused (true or false)."),
        Property("message.max.bytes", _parse_int, 1048588, _at_least(0),
                 doc="Largest record batch the broker takes in one write; the default of the topic config "
                     "max.message.bytes (bytes)."),
        Property("socket.request.max.bytes", _parse_int, 104857600, _at_least(1),
                 doc="Largest request frame a client may send; a bigger one closes the connection (bytes)."),
        # Upper bound on one Fetch response, whatever the client asks for (Kafka's default is 55 MiB). Large
        # responses cost more to join and to push through asyncio's transport buffer than extra round trips
        # do; see README's performance section. The first batch is returned whatever its size.
        Property("fetch.max.bytes", _parse_int, 4 << 20, _at_least(1024),
                 doc="Cap on one Fetch response whatever size the client asks for; the first batch goes out whole "
                     "even when larger (bytes)."),
        # incremental fetch sessions (KIP-227, broker/fetch_sessions.py)
        Property("max.incremental.fetch.session.cache.slots", _parse_int, 1000, _at_least(0),
                 doc="How many incremental fetch sessions (KIP-227) the broker holds at once (a count)."),
        Property("min.incremental.fetch.session.eviction.ms", _parse_int, 120000, _at_least(0),
                 doc="How long a fetch session must sit idle before a new session may take its slot in a full cache "
                     "(milliseconds)."),
        Property("log.segment.bytes", _parse_int, 1 << 30, _at_least(14),
                 doc="Size at which a partition's active segment file is closed and a new one begun; the default of "
                     "segment.bytes (bytes)."),
        Property("log.roll.ms", _parse_int, None,
                 doc="Age at which the active segment is closed even when not full; unset defers to log.roll.hours. "
                     "The default of segment.ms (milliseconds)."),
        Property("log.roll.hours", _parse_int, 168, _at_least(1),
                 doc="Segment roll age used when log.roll.ms is unset (hours)."),
        Property("log.retention.ms", _parse_int, None,
                 doc="How long records are kept before their segment may be deleted, -1 for ever; wins over the "
                     "minutes and hours forms. The default of retention.ms (milliseconds)."),
        Property("log.retention.minutes", _parse_int, None,
                 doc="Retention time used when log.retention.ms is unset (minutes)."),
        Property("log.retention.hours", _parse_int, 168,
                 doc="Retention time used when neither log.retention.ms nor log.retention.minutes is set (hours)."),
        Property("log.retention.bytes", _parse_int, -1,
                 doc="Size a partition may reach before its oldest segments are deleted, -1 for no limit; the "
                     "default of retention.bytes (bytes)."),
        Property("log.retention.check.interval.ms", _parse_int, 300000, _at_least(1),
                 doc="How often the broker looks for segments past their retention time or size (milliseconds)."),
        Property("log.index.interval.bytes", _parse_int, 4096, _at_least(0),
                 doc="Log bytes between two entries of a segment's offset index; the default of "
                     "index.interval.bytes (bytes)."),
        Property("log.page.cache.drop.behind.bytes", _parse_int, 0, _at_least(0),
                 doc="odradek's own: bytes at the end of each partition's active segment kept in the page cache; "
                     "older bytes are written back and dropped from it, so writes reuse the same memory. 0 leaves "
                     "the page cache to the operating system (bytes)."),
        Property("log.flush.interval.messages", _parse_int, LONG_MAX, _at_least(1),
                 doc="Records appended to a partition after which it is forced to disk; the largest long leaves "
                     "flushing to the operating system (a count)."),
        Property("log.flush.interval.ms", _parse_int, None,
                 doc="Longest appended records wait before their partition is forced to disk; unset leaves flushing "
                     "to the operating system (milliseconds)."),
        Property("log.message.timestamp.type", str, "CreateTime", lambda v: v in ("CreateTime", "LogAppendTime"),
                 doc="Default timestamp of stored records: CreateTime keeps the producer's, LogAppendTime puts the "
                     "broker's clock on each batch as it is appended."),
        Property("log.cleanup.policy", str, "delete",
                 lambda v: set(v.replace(" ", "").split(",")) <= {"delete", "compact"} and v != "",
                 doc="Default cleanup.policy of topics: delete drops segments past retention, compact keeps the "
                     "newest record of each key; a comma-separated list, both allowed."),
        # the log cleaner (storage/cleaner.py, docs/compaction.md); Kafka's names and defaults
        Property("log.cleaner.enable", _parse_bool, True,
                 doc="Whether the log cleaner runs, compacting topics whose cleanup policy includes compact (true "
                     "or false)."),
        Property("log.cleaner.threads", _parse_int, 1, _at_least(1),
                 doc="Threads the log cleaner compacts partitions with (a count)."),
        Property("log.cleaner.dedupe.buffer.size", _parse_int, 134217728, _at_least(1024),
                 doc="Memory the log cleaner's threads share for their maps from key to newest offset (bytes)."),
        Property("log.cleaner.io.max.bytes.per.second", float, 1.7976931348623157e308, lambda v: v > 0,
                 doc="Cap on the bytes the log cleaner's threads read and write together (bytes per second)."),
        Property("log.cleaner.backoff.ms", _parse_int, 15000, _at_least(0),
                 doc="How long the log cleaner sleeps when no partition needs compacting (milliseconds)."),
        Property("log.cleaner.min.cleanable.ratio", float, 0.5, lambda v: 0.0 <= v <= 1.0,
                 doc="Default of min.cleanable.dirty.ratio: the uncompacted share of a log above which it is "
                     "compacted (a fraction, 0 to 1)."),
        Property("log.cleaner.delete.retention.ms", _parse_int, 86400000, _at_least(0),
                 doc="Default of delete.retention.ms: how long a tombstone outlives the compaction that reached it "
                     "(milliseconds)."),
        Property("log.cleaner.min.compaction.lag.ms", _parse_int, 0, _at_least(0),
                 doc="Default of min.compaction.lag.ms: the age a record must reach before compaction may drop it "
                     "(milliseconds)."),
        Property("log.cleaner.max.compaction.lag.ms", _parse_int, LONG_MAX, _at_least(1),
                 doc="Default of max.compaction.lag.ms: the longest a compactable record waits for its log to be "
                     "compacted (milliseconds)."),
        Property("min.insync.replicas", _parse_int, 1, _at_least(1),
                 doc="Default of the topic config of that name: in-sync replicas a partition needs to take a write "
                     "with acks=all (a count)."),
        Property("compression.type", str, "producer", lambda v: v == "producer" or v in COMPRESSION_TYPES,
                 doc="Default codec topics store batches in: producer keeps each batch as sent; uncompressed, gzip, "
                     "snappy, lz4 or zstd recompresses batches in any other."),
        Property("group.min.session.timeout.ms", _parse_int, 6000, _at_least(1),
                 doc="Shortest session timeout a consumer group member may ask for (milliseconds)."),
        Property("group.max.session.timeout.ms", _parse_int, 1800000, _at_least(1),
                 doc="Longest session timeout a consumer group member may ask for (milliseconds)."),
        # Kafka's default (3000); a lone member does not wait it out: see group.initial.rebalance.quiet.ms
        Property("group.initial.rebalance.delay.ms", _parse_int, 3000, _at_least(0),
                 doc="How long a new, empty group waits for more members to join before its first rebalance ends "
                     "(milliseconds)."),
        # odradek: the initial delay ends once no new member has joined for this long
        Property("group.initial.rebalance.quiet.ms", _parse_int, 250, _at_least(0),
                 doc="odradek's own: the initial rebalance delay ends early once no new member has joined for this "
                     "long (milliseconds)."),
        Property("group.max.size", _parse_int, 2147483647, _at_least(1),
                 doc="Most members one consumer group may hold (a count)."),
        # the consumer group protocol (KIP-848); Kafka's names and defaults
        Property("group.consumer.session.timeout.ms", _parse_int, 45000, _at_least(1),
                 doc="A member of a consumer-protocol group (KIP-848) that sends no heartbeat for this long is "
                     "removed and its partitions move on (milliseconds)."),
        Property("group.consumer.min.session.timeout.ms", _parse_int, 45000, _at_least(1),
                 doc="Lower bound checked at start-up for group.consumer.session.timeout.ms (milliseconds)."),
        Property("group.consumer.max.session.timeout.ms", _parse_int, 60000, _at_least(1),
                 doc="Upper bound checked at start-up for group.consumer.session.timeout.ms (milliseconds)."),
        Property("group.consumer.heartbeat.interval.ms", _parse_int, 5000, _at_least(1),
                 doc="How often members of consumer-protocol groups are told to heartbeat (milliseconds)."),
        Property("group.consumer.min.heartbeat.interval.ms", _parse_int, 5000, _at_least(1),
                 doc="Lower bound checked at start-up for group.consumer.heartbeat.interval.ms (milliseconds)."),
        Property("group.consumer.max.heartbeat.interval.ms", _parse_int, 15000, _at_least(1),
                 doc="Upper bound checked at start-up for group.consumer.heartbeat.interval.ms (milliseconds)."),
        # share groups (KIP-932); Kafka's names and defaults
        Property("group.share.session.timeout.ms", _parse_int, 45000, _at_least(1),
                 doc="A member of a share group that sends no heartbeat for this long is removed and the records "
                     "it holds are released (milliseconds)."),
        Property("group.share.heartbeat.interval.ms", _parse_int, 5000, _at_least(1),
                 doc="How often members of share groups are told to heartbeat (milliseconds)."),
        Property("group.share.record.lock.duration.ms", _parse_int, 30000, _at_least(1),
                 doc="How long a share-group member holds a record it was given before it goes back to the "
                     "others, unless the group's share.record.lock.duration.ms says otherwise (milliseconds)."),
        Property("group.share.delivery.count.limit", _parse_int, 5, _at_least(2),
                 doc="How many times a record is delivered to share-group members before it is archived "
                     "(a count)."),
        Property("group.share.partition.max.record.locks", _parse_int, 2000, _at_least(100),
                 doc="Most records of one partition in flight (handed out, not yet finished) for one share "
                     "group (a count)."),
        Property("group.share.min.partition.max.record.locks", _parse_int, 100, _at_least(100),
                 doc="The smallest share.partition.max.record.locks a share group may be given (a count)."),
        Property("group.share.max.partition.max.record.locks", _parse_int, 4000, _at_least(100),
                 doc="The largest share.partition.max.record.locks a share group may be given (a count)."),
        Property("group.consumer.assignors", str, "uniform,range",
                 lambda v: bool(v.strip()) and all(a.strip() in ("uniform", "range") for a in v.split(",")),
                 doc="The server-side assignors consumer-protocol groups may use, the first being the default "
                     "(a comma-separated list of uniform and range)."),
        Property("group.consumer.max.size", _parse_int, 2147483647, _at_least(1),
                 doc="Most members one consumer-protocol group may hold (a count)."),
        # the streams rebalance protocol (KIP-1071); Kafka's names and defaults
        Property("group.streams.session.timeout.ms", _parse_int, 45000, _at_least(1),
                 doc="A member of a streams group that sends no heartbeat for this long is removed and its tasks "
                     "move on (milliseconds)."),
        Property("group.streams.heartbeat.interval.ms", _parse_int, 5000, _at_least(1),
                 doc="How often members of streams groups are told to heartbeat (milliseconds)."),
        Property("group.streams.num.standby.replicas", _parse_int, 0, _at_least(0),
                 doc="Standby copies of each task a streams group gets, unless the group's "
                     "streams.num.standby.replicas says otherwise (a count)."),
        Property("group.streams.max.standby.replicas", _parse_int, 2, _at_least(0),
                 doc="Most standby replicas a streams group's streams.num.standby.replicas may ask for (a count)."),
        Property("group.streams.initial.rebalance.delay.ms", _parse_int, 3000, _at_least(0),
                 doc="How long a new streams group waits before its first task assignment, so that the instances "
                     "starting together are assigned at once (milliseconds)."),
        # warm-up tasks: Kafka 4.4 has the configs but its assignment refiner assigns none (streams_assignor.py);
        # accepted and reported, without effect on the assignment
        Property("group.streams.num.warmup.replicas", _parse_int, 2, _at_least(0),
                 doc="Most warm-up tasks a streams group may run at a time, unless the group's "
                     "streams.num.warmup.replicas says otherwise (a count; no effect: as in Kafka 4.4, no "
                     "warm-up task is assigned)."),
        Property("group.streams.max.warmup.replicas", _parse_int, 20, _at_least(0),
                 doc="Most warm-up replicas a streams group's streams.num.warmup.replicas may ask for (a count)."),
        Property("group.streams.acceptable.recovery.lag", _parse_int, 10000, _at_least(0),
                 doc="The lag (records behind the changelog's end) within which a streams instance counts as "
                     "caught up on a task's state; sent to members in the heartbeat (a count)."),
        Property("group.streams.max.size", _parse_int, 2147483647, _at_least(1),
                 doc="Most members one streams group may hold (a count)."),
        Property("telemetry.max.bytes", _parse_int, 1048576, _at_least(1),
                 doc="Largest client metrics payload a PushTelemetry may carry; odradek has no telemetry plugin and "
                     "drops what clients push (bytes)."),
        Property("offsets.topic.num.partitions", _parse_int, 50, _at_least(1),
                 doc="Partitions of the internal __consumer_offsets topic; fixed once the topic exists (a count)."),
        Property("offsets.retention.minutes", _parse_int, 10080, _at_least(1),
                 doc="How long a group's committed offsets are kept after the group has become empty or after their "
                     "commit, whichever is later (minutes)."),
        Property("offsets.retention.check.interval.ms", _parse_int, 600000, _at_least(1),
                 doc="How often expired committed offsets are looked for and removed (milliseconds)."),
        Property("offset.metadata.max.bytes", _parse_int, 4096, _at_least(0),
                 doc="Longest metadata string an offset commit may carry; a longer one is refused (bytes, UTF-8)."),
        Property("producer.id.expiration.ms", _parse_int, 86400000, _at_least(1),
                 doc="How long a partition remembers an idle producer id's sequence numbers for deduplication "
                     "(milliseconds)."),
        # Kafka's default is 50; one node gains nothing from sharding the log over 50 partitions, which cost
        # ~0.4 s of directory/segment creation (fsyncs) on a first start and 150 file descriptors.
        # as for __transaction_state: Kafka's default is 50, of no use to one node
        Property("share.coordinator.state.topic.num.partitions", _parse_int, 1, _at_least(1),
                 doc="Partitions of the internal __share_group_state topic, created when a share group first "
                     "stores its state; odradek's default is 1 (a count)."),
        Property("transaction.state.log.num.partitions", _parse_int, 1, _at_least(1),
                 doc="Partitions of the internal __transaction_state topic; odradek's default is 1 (a count)."),
        Property("transaction.max.timeout.ms", _parse_int, 900000, _at_least(1),
                 doc="Longest transaction timeout a producer may ask for; InitProducerId with a longer one is "
                     "refused (milliseconds)."),
        Property("transaction.abort.timed.out.transaction.cleanup.interval.ms", _parse_int, 10000, _at_least(1),
                 doc="How often the transaction coordinator looks for transactions open past their timeout and "
                     "aborts them (milliseconds)."),
        Property("transactional.id.expiration.ms", _parse_int, 604800000, _at_least(1),
                 doc="How long an idle transactional id is remembered before the coordinator forgets it "
                     "(milliseconds)."),
        # KIP-890: a partition asks the coordinator before a producer's first write of a transaction there
        Property("transaction.partition.verification.enable", _parse_bool, True,
                 doc="Whether a partition asks the transaction coordinator before a producer's first transactional "
                     "write to it, as KIP-890 has it (true or false)."),
        # -- cluster mode (set zookeeper.connect); Kafka's names and defaults --
        Property("zookeeper.connect", str, "",
                 doc="ZooKeeper to join a cluster through (host:port,...[/chroot]); empty runs a single node on its "
                     "own."),
        Property("zookeeper.session.timeout.ms", _parse_int, 18000, _at_least(1000),
                 doc="ZooKeeper session timeout: a broker silent for longer loses its registration (milliseconds)."),
        Property("zookeeper.connection.timeout.ms", _parse_int, None,
                 doc="How long the broker waits to first reach ZooKeeper; unset uses zookeeper.session.timeout.ms "
                     "(milliseconds)."),
        # -- the Kafka 0.7 listener (legacy07/, docs/kafka07.md) --
        Property("legacy.zookeeper.chroot", str, "/kafka07", lambda v: isinstance(v, str) and v.startswith("/"),
                 doc="ZooKeeper path under which a broker with a KAFKA07 listener registers itself and its topics "
                     "for ZooKeeper-based Kafka 0.7 clients, apart from the cluster's own tree."),
        Property("legacy.message.magic", _parse_int, 1, lambda v: v in (0, 1),
                 doc="Magic of the messages a KAFKA07 listener serves (set it per listener with "
                     "listener.name.<name>.legacy.message.magic): 1, the 0.7 format, or 0, the 0.6 format without "
                     "compression, for clients that read only that; each has byte offsets of its own."),
        Property("legacy.principal", str, "User:ANONYMOUS", _is_principal,
                 doc="Principal (Type:name) the authorizer sees for every connection to a KAFKA07 listener, "
                     "which cannot authenticate (set it per listener with listener.name.<name>.legacy.principal)."),
        Property("broker.rack", str, None,
                 doc="Rack this broker stands in, used to spread each partition's replicas over racks; unset for "
                     "none."),
        Property("replica.lag.time.max.ms", _parse_int, 30000, _at_least(1),
                 doc="A follower that has not caught up with its leader for this long leaves the in-sync replicas "
                     "(milliseconds)."),
        Property("replica.fetch.max.bytes", _parse_int, 1048576, _at_least(1),
                 doc="Bytes a follower asks for per partition in one replication fetch (bytes)."),
        Property("replica.fetch.min.bytes", _parse_int, 1, _at_least(1),
                 doc="Bytes a follower's fetch waits for before the leader answers (bytes)."),
        Property("replica.fetch.wait.max.ms", _parse_int, 500, _at_least(0),
                 doc="Longest a leader holds a follower's fetch open waiting for data (milliseconds)."),
        Property("replica.fetch.response.max.bytes", _parse_int, 10485760, _at_least(1),
                 doc="Cap on one whole replication fetch response (bytes)."),
        Property("replica.fetch.backoff.ms", _parse_int, 1000, _at_least(0),
                 doc="Pause before a follower fetches again after a failed fetch (milliseconds)."),
        Property("replica.high.watermark.checkpoint.interval.ms", _parse_int, 5000, _at_least(1),
                 doc="How often the partitions' high watermarks are saved to disk (milliseconds)."),
        Property("unclean.leader.election.enable", _parse_bool, False,
                 doc="Whether a replica outside the in-sync set may lead when no in-sync one is left, losing the "
                     "records it lacks (true or false)."),
        Property("controlled.shutdown.enable", _parse_bool, True,
                 doc="Whether a stopping broker first asks the controller to move its partition leaderships "
                     "elsewhere (true or false)."),
        Property("controlled.shutdown.max.retries", _parse_int, 3, _at_least(0),
                 doc="Retries of a controlled shutdown before the broker stops anyway (a count)."),
        Property("controlled.shutdown.retry.backoff.ms", _parse_int, 5000, _at_least(0),
                 doc="Pause between two controlled shutdown attempts (milliseconds)."),
        Property("controller.socket.timeout.ms", _parse_int, 30000, _at_least(1),
                 doc="How long the controller waits for a broker to answer one of its requests (milliseconds)."),
        # replication throttles (bytes/s) of the partitions the topic configs below name; also dynamic
        # (/config/brokers, set by `odradek cluster reassign --throttle`)
        Property("leader.replication.throttled.rate", _parse_int, LONG_MAX, _at_least(1),
                 doc="Cap on replication traffic this broker serves as leader for the replicas topics name in "
                     "leader.replication.throttled.replicas, sent to followers outside the ISR (bytes per "
                     "second, measured over Kafka's 11 one-second windows)."),
        Property("follower.replication.throttled.rate", _parse_int, LONG_MAX, _at_least(1),
                 doc="Cap on replication traffic this broker fetches as follower for the replicas topics name in "
                     "follower.replication.throttled.replicas (bytes per second)."),
        Property("auto.leader.rebalance.enable", _parse_bool, True,
                 doc="Whether the controller hands leadership back to each partition's preferred replica when "
                     "brokers' shares drift apart (true or false)."),
        Property("leader.imbalance.check.interval.seconds", _parse_int, 300, _at_least(1),
                 doc="How often the controller checks leader balance (seconds)."),
        Property("leader.imbalance.per.broker.percentage", _parse_int, 10, _at_least(0),
                 doc="Share of a broker's preferred partitions led elsewhere above which the controller moves "
                     "leadership back (percent)."),
        Property("offsets.topic.replication.factor", _parse_int, 3, _at_least(1),
                 doc="Replicas of the internal __consumer_offsets topic in a cluster (a count)."),
        Property("share.coordinator.state.topic.replication.factor", _parse_int, 3, _at_least(1),
                 doc="Replicas of the internal __share_group_state topic in a cluster (a count)."),
        Property("transaction.state.log.replication.factor", _parse_int, 3, _at_least(1),
                 doc="Replicas of the internal __transaction_state topic in a cluster (a count)."),
        Property("transaction.state.log.min.isr", _parse_int, 2, _at_least(1),
                 doc="min.insync.replicas of the internal __transaction_state topic (a count)."),
        Property("metrics.listen", str, "", _host_port_or_empty,
                 doc="host:port of the HTTP endpoint serving Prometheus metrics at /metrics and the health checks "
                     "/healthz and /readyz; empty (the default) serves none."),
        # -- listeners (net/listeners.py) and TLS (net/tls.py); `listener.name.<name>.<ssl.*>` overrides a
        # TLS property for one listener --
        Property("listeners", str, "",
                 doc="Where the broker listens: NAME://host:port entries, comma-separated."),
        Property("advertised.listeners", str, "",
                 doc="Addresses handed to clients and other brokers, NAME://host:port entries; empty hands out the "
                     "listeners."),
        Property("listener.security.protocol.map", str, "",
                 doc="Security protocol of each listener name, as NAME:PROTOCOL pairs (PLAINTEXT, SSL, "
                     "SASL_PLAINTEXT, SASL_SSL)."),
        Property("inter.broker.listener.name", str, "",
                 doc="Listener brokers reach each other on; empty picks the one named after "
                     "security.inter.broker.protocol."),
        Property("security.inter.broker.protocol", str, "PLAINTEXT",
                 doc="Picks the inter-broker listener by its name when inter.broker.listener.name is unset."),
        Property("ssl.keystore.type", str, "PEM",
                 doc="Format of the file with the broker's certificate and key; odradek reads PEM only."),
        Property("ssl.keystore.location", str, "",
                 doc="Path of the PEM file with the broker's certificate chain and private key."),
        Property("ssl.key.password", str, "",
                 doc="Password of the private key, when it is encrypted; never shown."),
        Property("ssl.truststore.type", str, "PEM",
                 doc="Format of the file of trusted CA certificates; odradek reads PEM only."),
        Property("ssl.truststore.location", str, "",
                 doc="Path of the PEM file of CA certificates that peers' certificates are checked against."),
        Property("ssl.client.auth", str, "none", lambda v: v in ("none", "requested", "required"),
                 doc="Whether TLS clients must show a certificate: none, requested or required."),
        Property("ssl.enabled.protocols", str, "TLSv1.2,TLSv1.3",
                 doc="TLS versions accepted, comma-separated (TLSv1.2, TLSv1.3)."),
        Property("ssl.cipher.suites", str, "",
                 doc="Cipher suites allowed, comma-separated; empty keeps the TLS library's choice."),
        Property("ssl.principal.mapping.rules", str, "DEFAULT",
                 doc="How a client certificate's subject becomes a principal name: RULE:pattern/replacement/ "
                     "entries, then DEFAULT."),
        Property("ssl.endpoint.identification.algorithm", str, "https",
                 doc="https makes a broker check that another broker's certificate matches its host name; empty "
                     "skips the check."),
        # SASL (net/sasl.py), also per listener: listener.name.<name>.sasl.enabled.mechanisms, ...
        Property("sasl.enabled.mechanisms", str, "GSSAPI",
                 doc="SASL mechanisms a SASL listener offers, comma-separated: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
                     "OAUTHBEARER (the GSSAPI default is not offered: set it)."),
        Property("plain.sasl.jaas.config", str, "",
                 doc="JAAS-style text whose user_NAME=\"PASSWORD\" entries are the PLAIN users; never shown."),
        # brokers logging in to each other on a SASL inter-broker listener (net/sasl_client.py): the mechanism,
        # and the broker's own username="..." password="..." in listener.name.<name>.<mechanism>.sasl.jaas.config
        Property("sasl.mechanism.inter.broker.protocol", str, "GSSAPI",
                 doc="SASL mechanism brokers log in to each other with on a SASL inter-broker listener."),
        Property("scram-sha-256.sasl.jaas.config", str, "",
                 doc="JAAS-style text with the username and password this broker logs in to other brokers with over "
                     "SCRAM-SHA-256; never shown."),
        Property("scram-sha-512.sasl.jaas.config", str, "",
                 doc="JAAS-style text with the username and password this broker logs in to other brokers with over "
                     "SCRAM-SHA-512; never shown."),
        Property("connections.max.reauth.ms", _parse_int, 0, _at_least(0),
                 doc="Longest a SASL login lasts before the client must authenticate again; 0 for no limit "
                     "(milliseconds)."),
        Property("sasl.server.max.receive.size", _parse_int, 524288, _at_least(1),
                 doc="Largest frame a SASL listener reads before the login completes (and while re-authenticating); "
                     "a larger one closes the connection before anything is buffered (bytes)."),
        Property("connection.failed.authentication.delay.ms", _parse_int, 100, _at_least(0),
                 doc="Pause before the broker answers a failed login and closes the connection (milliseconds)."),
        Property("sasl.oauthbearer.jwks.endpoint.url", str, "",
                 doc="Where the JSON Web Key Set checking OAUTHBEARER tokens' signatures is read from (file://, "
                     "http:// or https:// URL)."),
        Property("sasl.oauthbearer.jwks.endpoint.refresh.ms", _parse_int, 3600000, _at_least(1000),
                 doc="How often the JSON Web Key Set is read again (milliseconds)."),
        Property("sasl.oauthbearer.expected.audience", str, "",
                 doc="Audiences, comma-separated, one of which an OAUTHBEARER token must name; empty accepts any."),
        Property("sasl.oauthbearer.expected.issuer", str, "",
                 doc="Issuer an OAUTHBEARER token must name; empty accepts any."),
        Property("sasl.oauthbearer.sub.claim.name", str, "sub",
                 doc="Token claim taken as the principal's name."),
        Property("sasl.oauthbearer.clock.skew.seconds", _parse_int, 30, _at_least(0),
                 doc="Slack allowed between clocks when a token's times are checked (seconds)."),
        # connection limits (net/limits.py) and the bytes of requests being read (net/framing.py)
        Property("queued.max.request.bytes", _parse_int, default_request_memory(),
                 lambda v: isinstance(v, int) and (v == -1 or v > 0),
                 doc="Bound on bytes of large requests being read, over all connections: a request that does not "
                     "fit waits, its connection unread; by default 1/16 of physical memory, at most 256 MiB; -1 "
                     "for no bound (bytes)."),
        Property("connections.max.idle.ms", _parse_int, 600000, lambda v: isinstance(v, int) and (v == -1 or v > 0),
                 doc="A connection that has sent nothing for this long and has no request in flight is closed, "
                     "one whose TLS handshake or SASL login never finished included; -1 never (milliseconds)."),
        Property("max.connections", _parse_int, 2147483647, _at_least(0),
                 doc="Most client connections the broker keeps open at once (a count)."),
        Property("max.connections.per.ip", _parse_int, 2147483647, _at_least(0),
                 doc="Most connections kept open from one address at once (a count)."),
        Property("max.connections.per.ip.overrides", str, "",
                 doc="Exceptions to max.connections.per.ip for given addresses, as host:count pairs, "
                     "comma-separated."),
        # client quotas (security/quotas.py): the rate is measured over quota.window.num samples of this size
        Property("quota.window.num", _parse_int, 11, _at_least(2),
                 doc="Samples a client's rate is averaged over for quotas (a count)."),
        Property("quota.window.size.seconds", _parse_int, 1, _at_least(1),
                 doc="Length of one quota rate sample (seconds)."),
        # DescribeTopicPartitions (handlers/k75_describe_topic_partitions.py): partitions in one response at most
        Property("max.request.partition.size.limit", _parse_int, 2000, _at_least(1),
                 doc="Most partitions one DescribeTopicPartitions response lists (a count)."),
        # the authorizer (security/authorizer.py)
        Property("authorizer.class.name", str, "",
                 doc="Kafka authorizer class whose ACL checks odradek applies (StandardAuthorizer or "
                     "AclAuthorizer); empty allows every request."),
        Property("super.users", str, "",
                 doc="Principals allowed everything whatever the ACLs say, as User:NAME separated by semicolons."),
        Property("allow.everyone.if.no.acl.found", _parse_bool, False,
                 doc="Whether a resource no ACL applies to is open to everyone (true or false)."),
    ]
}


def _listener_override(key: str) -> tuple[str, str] | None:
    """(LISTENER, property) of a `listener.name.<listener>.<property>` key, else None."""
    if not key.startswith("listener.name."):
        return None
    listener, _, rest = key[len("listener.name."):].partition(".")
    return (listener.upper(), rest) if listener and rest else None


class BrokerConfig:
    """Resolved broker properties; `get` returns the parsed value or the default."""

    def __init__(self, values: dict[str, str] | None = None) -> None:
        self.raw: dict[str, str] = {}
        self._parsed: dict[str, object] = {}
        self._listener_overrides: dict[tuple[str, str], object] = {}  # (LISTENER, key): value
        for key, value in (values or {}).items():
            self.set(key, value)

    def set(self, key: str, value: str) -> None:
        key = key.strip()
        listener_key = _listener_override(key)
        prop = BROKER_PROPERTIES.get(listener_key[1] if listener_key else key)
        self.raw[key] = value
        if listener_key is not None and prop is not None:
            parsed = prop.parse(value)
            if not prop.check(parsed):
                raise ConfigError(f"invalid value {value!r} for {key}")
            self._listener_overrides[listener_key] = parsed
            return
        if prop is None:
            log.warning("ignoring unknown broker property %s", key)
            return
        parsed = prop.parse(value)
        if not prop.check(parsed):
            raise ConfigError(f"invalid value {value!r} for {key}")
        self._parsed[key] = parsed

    def with_dynamic(self, dynamic: dict[str, str], accepted: Callable[[str], bool]) -> "BrokerConfig":
        """These properties as changed at run time by ``dynamic`` (Kafka's dynamic broker configs, per-broker over
        cluster-wide already merged): a copy in which each name ``accepted`` takes that value over the static one.
        ``raw`` stays the static properties (DescribeConfigs' STATIC_BROKER_CONFIG). A value this broker cannot
        take (within Kafka's range but not odradek's) is logged and the static one kept."""
        merged = BrokerConfig()
        merged.raw = self.raw
        merged._parsed = dict(self._parsed)
        merged._listener_overrides = dict(self._listener_overrides)
        for key, value in dynamic.items():
            listener_key = _listener_override(key)
            if not accepted(listener_key[1] if listener_key else key):
                continue
            prop = BROKER_PROPERTIES.get(listener_key[1] if listener_key else key)
            if prop is None:
                continue
            try:
                parsed = prop.parse(value.strip())
            except (ConfigError, ValueError):
                parsed = None
            if parsed is None or not prop.check(parsed):
                log.warning("dynamic broker config %s=%r not applied: out of odradek's range", key, value)
                continue
            if listener_key is not None:
                merged._listener_overrides[listener_key] = parsed
            else:
                merged._parsed[key] = parsed
        return merged

    def get(self, key: str) -> object:
        if key in self._parsed:
            return self._parsed[key]
        return BROKER_PROPERTIES[key].default

    def int(self, key: str) -> int:
        return int(self.get(key))  # type: ignore[arg-type]

    def for_listener(self, listener: str, key: str) -> object:
        """``key`` as `listener.name.<listener>.<key>` sets it for that listener, else as set for all."""
        return self._listener_overrides.get((listener.upper(), key), self.get(key))

    @property
    def node_id(self) -> int:
        broker_id = self.int("broker.id")
        return broker_id if broker_id >= 0 else self.int("node.id")

    def retention_ms(self) -> int:
        for key, scale in (("log.retention.ms", 1), ("log.retention.minutes", 60000), ("log.retention.hours", HOUR_MS)):
            value = self.get(key)
            if value is not None:
                return value if value < 0 else value * scale  # type: ignore[operator,return-value]
        return 168 * HOUR_MS

    def roll_ms(self) -> int:
        value = self.get("log.roll.ms")
        return value if value is not None else self.int("log.roll.hours") * HOUR_MS  # type: ignore[return-value]

    def topic_defaults(self) -> dict[str, str]:
        """The default of every topic config, as strings, derived from broker properties."""
        flush_ms = self.get("log.flush.interval.ms")
        return {
            "cleanup.policy": str(self.get("log.cleanup.policy")),
            "compression.type": str(self.get("compression.type")),
            "retention.ms": str(self.retention_ms()),
            "retention.bytes": str(self.int("log.retention.bytes")),
            "segment.bytes": str(self.int("log.segment.bytes")),
            "segment.ms": str(self.roll_ms()),
            "segment.index.bytes": "10485760",
            "index.interval.bytes": str(self.int("log.index.interval.bytes")),
            "max.message.bytes": str(self.int("message.max.bytes")),
            "message.timestamp.type": str(self.get("log.message.timestamp.type")),
            "flush.messages": str(self.int("log.flush.interval.messages")),
            "flush.ms": str(flush_ms if flush_ms is not None else LONG_MAX),
            "min.insync.replicas": str(self.int("min.insync.replicas")),
            "unclean.leader.election.enable": str(self.get("unclean.leader.election.enable")).lower(),
            "delete.retention.ms": str(self.int("log.cleaner.delete.retention.ms")),
            "min.compaction.lag.ms": str(self.int("log.cleaner.min.compaction.lag.ms")),
            "max.compaction.lag.ms": str(self.int("log.cleaner.max.compaction.lag.ms")),
            "min.cleanable.dirty.ratio": str(self.get("log.cleaner.min.cleanable.ratio")),
            # Kafka 3.9's other topic configs, at its defaults: DescribeConfigs lists them and CreateTopics and
            # AlterConfigs take them, as clients and tools expect; STORED_ONLY_TOPIC_CONFIGS says which of them
            # odradek keeps without acting on
            **KAFKA_TOPIC_DEFAULTS,
        }


def read_properties(path: Path) -> dict[str, str]:
    """Parse a Java-style .properties file (key=value or key: value, # and ! comments)."""
    out: dict[str, str] = {}
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ConfigError(f"{path}:{lineno}: expected key=value")
        out[line[:sep].strip()] = line[sep + 1:].strip()
    return out


def broker_property_doc(name: str) -> str:
    """DescribeConfigs' `documentation` of a broker property: its `doc`, else a stand-in (never empty; the
    unit tests require a `doc` of every property)."""
    prop = BROKER_PROPERTIES.get(name)
    return (prop.doc if prop is not None else "") or f"Broker property {name}; no description is written yet."
