"""Coordinator: the group coordinator, the offset manager and their `__consumer_offsets` log, wired together.

The broker builds one at start-up. A group belongs to one partition of `__consumer_offsets` (Kafka's
`Utils.abs(groupId.hashCode()) % partitions`, placement.py) and is coordinated by that partition's leader: when this broker
becomes the leader of a partition, `load_partition` replays it; when it stops leading, `unload_partition`
drops its groups (their pending long polls answer NOT_COORDINATOR). On a single node every partition is
led here from the start. `owns(group)` tells handlers whether to answer or send the client elsewhere.

Replay: every record of the partition is read in log order; the last value per key wins and a null value
deletes the key. Groups come back with their generation, protocol, leader and members (Stable when they had
members, whose sessions restart at load), so consumers that were running keep heartbeating through a
failover or restart; offsets come back as committed. A partition's load also reads, once, the records an
older odradek stored for its groups in other partitions (placement.py, `OffsetsTopicLog.replay_for_load`)
and moves them to it. Groups that only have offsets (simple commits) come
back Empty. Transactional offset commits (TxnOffsetCommit: batches of a producer's transaction) stay
pending until that producer's COMMIT marker makes them committed offsets or its ABORT marker drops them,
in the log as at run time (`complete_transaction`). Every `offsets.retention.check.interval.ms`, expired
offsets are removed and partitions whose log has grown well past their live keys are rewritten as a
snapshot (see `OffsetsTopicLog`), in a background task.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable

from odradek.config import ConfigError
from odradek.coordinator.consumer_groups import ConsumerGroupConfig, ConsumerGroupCoordinator
from odradek.coordinator.streams_groups import StreamsGroupConfig, StreamsGroupCoordinator
from odradek.coordinator.streams_persistence import decode_streams_group_value
from odradek.coordinator.group_coordinator import GroupConfig, GroupCoordinator
from odradek.coordinator.offset_manager import OffsetManager
from odradek.coordinator.offsets import OffsetStore
from odradek.coordinator.persistence import (
    OFFSETS_TOPIC,
    OffsetsTopicLog,
    OffsetValue,
    decode_consumer_group_value,
    decode_group_config_value,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_offset_value,
    offset_key,
)
from odradek.coordinator.share_coordinator import LocalPersister, ShareCoordinator
from odradek.coordinator.share_groups import GROUP_CONFIGS, ShareGroupConfig, ShareGroupCoordinator, ShareGroup
from odradek.coordinator.share_state import SHARE_STATE_TOPIC, ShareStateLog
from odradek.coordinator.timers import AsyncioScheduler, Scheduler
from odradek.cluster.partition import ReplicationError
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.cluster.metadata import MetadataCache
    from odradek.cluster.partition import Partition

log = logging.getLogger(__name__)

__all__ = ["Coordinator", "OFFSETS_TOPIC", "offsets_topic_configs"]

TxnOffsetKey = tuple[str, str, int]  # (group, topic, partition)


def group_of_key(raw: bytes) -> str | None:
    """The group a `__consumer_offsets` key belongs to, which places it (None: a key we do not know)."""
    key = decode_key(raw)
    return None if key is None else key[1]


def offsets_topic_configs(config) -> dict[str, str]:
    """Topic configs `__consumer_offsets` is created with: never deleted by retention (we snapshot instead)."""
    return {"cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1",
            "segment.bytes": str(100 * 1024 * 1024)}


class Coordinator:
    def __init__(self, config, partitions: int, get_partition: Callable[[int], "Partition | None"],
                 partition_exists: Callable[[str, int], bool], scheduler: Scheduler | None = None,
                 metadata: "MetadataCache | None" = None, share_state: ShareStateLog | None = None) -> None:
        self.scheduler = scheduler or AsyncioScheduler()
        self.log = OffsetsTopicLog(partitions, get_partition, self.scheduler.now_ms, owner_of=group_of_key)
        self.log.name = OFFSETS_TOPIC
        # without a broker's topic (unit tests) share-group state has nowhere to go: writes fail, are logged
        self.share_state = share_state or ShareStateLog(1, lambda p: None, self.scheduler.now_ms, lambda: None)
        # the share coordinator of the __share_group_state partitions led here; the share-partition leader
        # reaches it through a persister (a cluster swaps in broker/share_persister.py's RemotePersister)
        self.share_coordinator = ShareCoordinator(self.share_state)
        self.store = OffsetStore()
        group_config = GroupConfig(
            min_session_timeout_ms=config.int("group.min.session.timeout.ms"),
            max_session_timeout_ms=config.int("group.max.session.timeout.ms"),
            initial_rebalance_delay_ms=config.int("group.initial.rebalance.delay.ms"),
            initial_rebalance_quiet_ms=config.int("group.initial.rebalance.quiet.ms"),
            max_size=config.int("group.max.size"),
        )
        self.groups = GroupCoordinator(group_config, self.scheduler, self.log.append)
        for name in ("session.timeout.ms", "heartbeat.interval.ms"):
            low, value, high = (config.int(f"group.consumer.{p}{name}") for p in ("min.", "", "max."))
            if not low <= value <= high:
                raise ConfigError(f"group.consumer.{name}={value} must be within group.consumer.min.{name}={low} "
                                  f"and group.consumer.max.{name}={high}")
        self.consumer_groups = ConsumerGroupCoordinator(ConsumerGroupConfig(
            session_timeout_ms=config.int("group.consumer.session.timeout.ms"),
            heartbeat_interval_ms=config.int("group.consumer.heartbeat.interval.ms"),
            assignors=tuple(a.strip() for a in config.get("group.consumer.assignors").split(",") if a.strip()),
            max_size=config.int("group.consumer.max.size"),
        ), self.groups, metadata)
        self.share_groups = ShareGroupCoordinator(ShareGroupConfig(
            session_timeout_ms=config.int("group.share.session.timeout.ms"),
            heartbeat_interval_ms=config.int("group.share.heartbeat.interval.ms"),
            lock_duration_ms=config.int("group.share.record.lock.duration.ms"),
            delivery_limit=config.int("group.share.delivery.count.limit"),
            max_in_flight=config.int("group.share.partition.max.record.locks"),
            max_in_flight_bounds=(config.int("group.share.min.partition.max.record.locks"),
                                  config.int("group.share.max.partition.max.record.locks")),
            # a default naming a broker property ("group.…") takes that property's value
            defaults={name: str(config.get(default)) if default.startswith("group.") else default
                      for name, (_, default, _) in GROUP_CONFIGS.items()},
        ), self.scheduler, self.log.append, LocalPersister(self.share_coordinator), metadata)
        self.share_groups.owns = self.owns
        self.consumer_groups.group_config = self.share_groups.group_config
        self.streams_groups = StreamsGroupCoordinator(StreamsGroupConfig(
            session_timeout_ms=config.int("group.streams.session.timeout.ms"),
            heartbeat_interval_ms=config.int("group.streams.heartbeat.interval.ms"),
            num_standby_replicas=config.int("group.streams.num.standby.replicas"),
            max_size=config.int("group.streams.max.size"),
            initial_rebalance_delay_ms=config.int("group.streams.initial.rebalance.delay.ms"),
            acceptable_recovery_lag=config.int("group.streams.acceptable.recovery.lag"),
        ), self.groups, metadata)
        self.streams_groups.group_config = self.share_groups.group_config
        self.offsets = OffsetManager(self.groups, self.store, self.log.append, partition_exists,
                                     config.int("offset.metadata.max.bytes"),
                                     config.int("offsets.retention.minutes") * 60_000,
                                     without_offsets=self.share_groups.groups.__contains__)
        self.check_interval_ms = config.int("offsets.retention.check.interval.ms")
        self.loaded: set[int] = set()
        # producer id -> offsets its open transaction committed (TxnOffsetCommit), with their partition
        self.pending_txn: dict[int, dict[TxnOffsetKey, OffsetValue]] = {}
        self._next_check_ms = 0
        self._started = False
        self._maintenance: asyncio.Task | None = None

    def partition_of(self, group_id: str) -> int:
        return self.log.partition_for(group_id)

    def owns(self, group_id: str) -> bool:
        return self.log.partition_for(group_id) in self.loaded

    # -- partition leadership ----------------------------------------------------------------------------

    def load_partition(self, partition: int) -> None:
        """This broker now leads ``partition``: rebuild its groups and offsets from the log."""
        groups = {}
        consumer_groups: dict[str, bytes | None] = {}
        streams_groups: dict[str, bytes | None] = {}
        offsets: dict[TxnOffsetKey, OffsetValue | None] = {}
        pending: dict[int, dict[TxnOffsetKey, OffsetValue | None]] = {}
        group_configs: dict[str, dict[str, str] | None] = {}
        count = 0
        for rec in self.log.replay_for_load(partition):
            count += 1
            if rec.key is None:  # a transaction marker
                done = pending.pop(rec.producer_id, {})
                if rec.marker == 1:
                    offsets.update(done)
                continue
            try:
                key = decode_key(rec.key)
                if key is None:
                    continue
                if key[0] == "offset":
                    k = (key[1], key[2], key[3])
                    value = None if rec.value is None else decode_offset_value(rec.value)
                    (pending.setdefault(rec.producer_id, {}) if rec.producer_id >= 0 else offsets)[k] = value
                elif key[0] == "consumer_group":
                    consumer_groups[key[1]] = None if rec.value is None else rec.value
                elif key[0] == "streams_group":
                    streams_groups[key[1]] = None if rec.value is None else rec.value
                elif key[0] == "group_config":
                    group_configs[key[1]] = None if rec.value is None else decode_group_config_value(rec.value)
                else:
                    groups[key[1]] = None if rec.value is None else decode_group_value(rec.value)
            except Exception:
                log.warning("skipping an unreadable %s record", OFFSETS_TOPIC, exc_info=True)
        for group_id, value in groups.items():
            if value is not None and consumer_groups.get(group_id) is None and streams_groups.get(group_id) is None:
                self.groups.restore(group_id, value)
        for group_id, raw in consumer_groups.items():
            if raw is not None:
                try:
                    self.consumer_groups.restore(decode_consumer_group_value(group_id, raw))
                except Exception:
                    log.warning("group %s: its stored state is unreadable; members will rejoin", group_id,
                                exc_info=True)
        for group_id, raw in streams_groups.items():
            if raw is not None:
                try:
                    self.streams_groups.restore(decode_streams_group_value(group_id, raw))
                except Exception:
                    log.warning("streams group %s: its stored state is unreadable; members will rejoin", group_id,
                                exc_info=True)
        for (group_id, topic, p), value in offsets.items():
            if value is None:
                continue
            if group_id not in self.groups.groups:
                self.groups.get_or_create(group_id).state_timestamp_ms = -1
            self.store.put(group_id, (topic, p), value)
        for group_id, configs in group_configs.items():
            self.share_groups.restore_configs(group_id, configs)
        for group_id, _, _ in self.share_coordinator.states:  # groups with stored state, coordinated here
            if self.log.partition_for(group_id) == partition:
                self.share_groups.groups.setdefault(group_id, ShareGroup(group_id))
        for producer_id, txn_offsets in pending.items():
            self.pending_txn.setdefault(producer_id, {}).update(
                {k: v for k, v in txn_offsets.items() if v is not None})
        self.loaded.add(partition)
        log.log(logging.INFO if count else logging.DEBUG,
                "%s-%d: loaded %d groups and %d committed offsets from %d records", OFFSETS_TOPIC, partition,
                 sum(1 for g in groups.values() if g is not None) + sum(1 for g in consumer_groups.values() if g)
                 + sum(1 for g in streams_groups.values() if g),
                 sum(1 for v in offsets.values() if v is not None),
                 count)

    def unload_partition(self, partition: int) -> None:
        """This broker no longer leads ``partition``: forget its groups (clients find the new coordinator)."""
        self.loaded.discard(partition)
        doomed = [g for g in set(self.groups.groups) | set(self.store.group_ids())
                  if self.log.partition_for(g) == partition]
        self.groups.unload(doomed)
        self.share_groups.unload(self.owns)
        for group_id in doomed:
            self.store.delete_group(group_id)
        for offsets in self.pending_txn.values():
            for key in [k for k in offsets if self.log.partition_for(k[0]) == partition]:
                del offsets[key]
        self.log.forget(partition)
        log.log(logging.INFO if doomed else logging.DEBUG, "%s-%d: unloaded %d groups", OFFSETS_TOPIC, partition,
                len(doomed))

    def load_share_state(self, partition: int) -> None:
        """This broker now leads ``partition`` of `__share_group_state`: as share coordinator it replays the
        states there (requests for them answer COORDINATOR_LOAD_IN_PROGRESS until then)."""
        count = self.share_coordinator.load(partition)
        for group_id, _, _ in self.share_coordinator.states:  # groups with stored state, coordinated here
            if self.owns(group_id):
                self.share_groups.groups.setdefault(group_id, ShareGroup(group_id))
        log.log(logging.INFO if count else logging.DEBUG, "%s-%d: loaded %d share-partition states",
                SHARE_STATE_TOPIC, partition, count)

    def unload_share_state(self, partition: int) -> None:
        """This broker no longer leads ``partition`` of `__share_group_state`: forget its states."""
        self.share_coordinator.unload(partition)

    # -- transactional offsets -----------------------------------------------------------------------------

    async def commit_transactional(self, group_id: str, producer_id: int, producer_epoch: int,
                                   offsets: list[tuple[str, int, OffsetValue]]) -> int:
        """TxnOffsetCommit: write the offsets as records of the producer's transaction (they stay pending
        until its marker) and answer once they are durable and replicated; an error code."""
        partition = self.log.partition_for(group_id)
        replica = self.log.leader(partition)
        entry = replica.log.producer_state.entry(producer_id)
        if entry is not None and producer_epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        now = self.scheduler.now_ms()
        for _, _, value in offsets:
            if value.commit_timestamp < 0:
                value.commit_timestamp = now
        records = [(offset_key(group_id, t, p), encode_offset_value(v)) for t, p, v in offsets]
        try:
            await asyncio.wrap_future(self.log.append_transactional(partition, producer_id, producer_epoch, records))
        except ReplicationError as exc:
            return exc.error_code
        except OSError as exc:
            log.error("group %s: cannot write transactional offsets: %s", group_id, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        staged = self.pending_txn.setdefault(producer_id, {})
        for topic, p, value in offsets:
            staged[(group_id, topic, p)] = value
        return ErrorCode.NONE

    def has_pending_offset(self, group_id: str, topic: str, partition: int) -> bool:
        key = (group_id, topic, partition)
        return any(key in offsets for offsets in self.pending_txn.values())

    def complete_transaction(self, producer_id: int, partition: int, commit: bool) -> None:
        """A marker for ``producer_id`` was written to ``partition`` of `__consumer_offsets`: its pending
        offsets there become committed (COMMIT) or are dropped (ABORT)."""
        offsets = self.pending_txn.get(producer_id)
        if not offsets:
            return
        done = {k: v for k, v in offsets.items() if self.log.partition_for(k[0]) == partition}
        for key in done:
            del offsets[key]
        if not offsets:
            del self.pending_txn[producer_id]
        if commit:
            self.log.commit_live(partition, [(offset_key(g, t, p), encode_offset_value(v))
                                             for (g, t, p), v in done.items()])
            for (group_id, topic, p), value in done.items():
                self.groups.get_or_create(group_id)
                self.store.put(group_id, (topic, p), value)

    # -- maintenance ---------------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        self.log.resume_moves()
        self.share_state.log.resume_moves()
        if not self._started:
            self._started = True
            self.scheduler.start()  # type: ignore[attr-defined]
        busy = self._maintenance is not None and not self._maintenance.done()
        if now_ms >= self._next_check_ms and not busy:
            self._next_check_ms = now_ms + self.check_interval_ms
            self._maintenance = asyncio.ensure_future(self._maintain())

    async def _maintain(self) -> None:
        try:
            await self.offsets.expire()
            await self.log.maybe_compact()
            await self.share_state.log.maybe_compact()
        except Exception:
            log.warning("offsets maintenance did not finish; retrying at the next check", exc_info=True)

    def close(self) -> None:
        if self._maintenance is not None:
            self._maintenance.cancel()
        self.groups.close()
