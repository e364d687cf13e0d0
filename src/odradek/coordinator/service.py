"""Coordinator: the group coordinator, the offset manager and their `__consumer_offsets` log, wired together.

The broker builds one at start-up (after the partition logs are open), calls `load()` to replay
`__consumer_offsets`, `tick()` from its periodic maintenance, and `close()` on shutdown.

Replay: every record of every partition is read in log order; the last value per key wins and a null value
deletes the key. Groups come back with their generation, protocol, leader and members (Stable when they had
members, whose sessions restart at load), so consumers that were running keep heartbeating through a
broker restart; offsets come back as committed. Groups that only have offsets (simple commits) come back
Empty. After the replay, and then every `offsets.retention.check.interval.ms`, partitions whose log has
grown well past their live keys are rewritten as a snapshot (see `OffsetsTopicLog`), and expired offsets
are removed.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import logging
from typing import Callable

from odradek.coordinator.group_coordinator import GroupConfig, GroupCoordinator
from odradek.coordinator.offset_manager import OffsetManager
from odradek.coordinator.offsets import OffsetStore
from odradek.coordinator.persistence import (
    OFFSETS_TOPIC,
    OffsetsTopicLog,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from odradek.coordinator.timers import AsyncioScheduler, Scheduler
from odradek.storage.log import PartitionLog

log = logging.getLogger(__name__)

__all__ = ["Coordinator", "OFFSETS_TOPIC", "offsets_topic_configs"]


def offsets_topic_configs(config) -> dict[str, str]:
    """Topic configs `__consumer_offsets` is created with: never deleted by retention (we snapshot instead)."""
    return {"cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1",
            "segment.bytes": str(100 * 1024 * 1024)}


class Coordinator:
    def __init__(self, config, partitions: int, get_log: Callable[[int], PartitionLog | None],
                 partition_exists: Callable[[str, int], bool], scheduler: Scheduler | None = None) -> None:
        self.scheduler = scheduler or AsyncioScheduler()
        self.log = OffsetsTopicLog(partitions, get_log, self.scheduler.now_ms)
        self.store = OffsetStore()
        group_config = GroupConfig(
            min_session_timeout_ms=config.int("group.min.session.timeout.ms"),
            max_session_timeout_ms=config.int("group.max.session.timeout.ms"),
            initial_rebalance_delay_ms=config.int("group.initial.rebalance.delay.ms"),
            initial_rebalance_quiet_ms=config.int("group.initial.rebalance.quiet.ms"),
            max_size=config.int("group.max.size"),
        )
        self.groups = GroupCoordinator(group_config, self.scheduler, self.log.append)
        self.offsets = OffsetManager(self.groups, self.store, self.log.append, partition_exists,
                                     config.int("offset.metadata.max.bytes"),
                                     config.int("offsets.retention.minutes") * 60_000)
        self.check_interval_ms = config.int("offsets.retention.check.interval.ms")
        self._next_check_ms = 0
        self._started = False

    def load(self) -> None:
        groups = {}
        offsets = {}
        count = 0
        for raw_key, raw_value in self.log.replay():
            count += 1
            try:
                key = decode_key(raw_key)
                if key is None:
                    continue
                if key[0] == "offset":
                    k = (key[1], key[2], key[3])
                    offsets[k] = None if raw_value is None else decode_offset_value(raw_value)
                else:
                    groups[key[1]] = None if raw_value is None else decode_group_value(raw_value)
            except Exception:
                log.warning("skipping an unreadable %s record", OFFSETS_TOPIC, exc_info=True)
        for group_id, value in groups.items():
            if value is not None:
                self.groups.restore(group_id, value)
        for (group_id, topic, partition), value in offsets.items():
            if value is None:
                continue
            if group_id not in self.groups.groups:
                self.groups.get_or_create(group_id).state_timestamp_ms = -1
            self.store.put(group_id, (topic, partition), value)
        log.info("loaded %d groups and %d committed offsets from %d records of %s", len(self.groups.groups),
                 sum(1 for v in offsets.values() if v is not None), count, OFFSETS_TOPIC)
        self.log.maybe_compact()
        self._next_check_ms = self.scheduler.now_ms() + self.check_interval_ms

    def tick(self, now_ms: int) -> None:
        if not self._started:
            self._started = True
            self.scheduler.start()  # type: ignore[attr-defined]
        if now_ms >= self._next_check_ms:
            self._next_check_ms = now_ms + self.check_interval_ms
            self.offsets.expire()
            self.log.maybe_compact()

    def close(self) -> None:
        self.groups.close()
