"""The leader side of Kafka's replication quotas: what this broker, as a partition's leader, sends to followers
catching up on partitions the topic config `leader.replication.throttled.replicas` names for it.

Kafka's rule (ReplicaManager / ReplicationQuotaManager, asked of its source): a partition is throttled on a
leader when its topic's `leader.replication.throttled.replicas` is "*" or lists "PARTITION:BROKER" with this
broker's id; a follower's Fetch gets no records of such a partition (its offsets, as usual) while the follower
is not in the partition's ISR and the bytes of throttled partitions this leader sent, measured as a rate over
the quota window (`replication.quota.window.num` = 11 samples of `replication.quota.window.size.seconds` = 1 s),
exceed `leader.replication.throttled.rate`. Every throttled partition's bytes sent to any follower (in the ISR
or not) count toward the rate. As in Kafka's sampled rate, the measure is taken over at least 10 s (the full
windows but one), so a move starts with a burst of up to about ten seconds' worth before the throttle bites.

The follower side (`follower.replication.throttled.*`) is cluster/fetcher.py's ReplicationThrottle.
Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable

from odradek.cluster.fetcher import UNLIMITED, throttled_replicas_include

SAMPLES = 11  # Kafka's replication.quota.window.num default
WINDOW_S = 1.0  # Kafka's replication.quota.window.size.seconds default


class SampledRate:
    """Bytes per second over the last ``samples`` windows of ``window_s`` (Kafka's Rate of a SampledStat: the
    elapsed time counted is at least ``samples - 1`` whole windows)."""

    def __init__(self, samples: int = SAMPLES, window_s: float = WINDOW_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.samples = samples
        self.window_s = window_s
        self._clock = clock
        self._windows: deque[list[float]] = deque()  # [window start, bytes]

    def _purge(self, now: float) -> None:
        horizon = now - self.samples * self.window_s  # Kafka drops a sample begun that long ago
        while self._windows and self._windows[0][0] <= horizon:
            self._windows.popleft()

    def record(self, size: int) -> None:
        now = self._clock()
        self._purge(now)
        if not self._windows or now >= self._windows[-1][0] + self.window_s:
            self._windows.append([now, 0.0])
        self._windows[-1][1] += size

    def measure(self) -> float:
        now = self._clock()
        self._purge(now)
        if not self._windows:
            return 0.0
        elapsed = max(now - self._windows[0][0], (self.samples - 1) * self.window_s)
        return sum(size for _, size in self._windows) / elapsed


class LeaderReplicationQuota:
    """This broker's leader replication quota: which partitions it throttles and whether it must now."""

    def __init__(self, broker_id: int, topic_configs: Callable[[str], dict[str, str]]) -> None:
        self.broker_id = broker_id
        self._topic_configs = topic_configs
        self.rate = SampledRate()

    def is_throttled(self, topic: str, partition: int) -> bool:
        """Whether the topic config names this partition's replica on this broker as a throttled leader."""
        return throttled_replicas_include(self._topic_configs(topic).get("leader.replication.throttled.replicas"),
                                          partition, self.broker_id)

    def holds_back(self, topic: str, partition: int, follower_in_isr: bool, bound: int) -> bool:
        """Whether a follower's fetch of this partition gets no records now (``bound``: the rate in force)."""
        return (bound < UNLIMITED and not follower_in_isr and self.is_throttled(topic, partition)
                and self.rate.measure() > bound)

    def sent(self, size: int) -> None:
        """``size`` bytes of throttled partitions went to followers."""
        if size:
            self.rate.record(size)
