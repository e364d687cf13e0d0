"""Replica fetchers: how a follower copies its leaders' logs (Kafka's ReplicaFetcherThread).

One `ReplicaFetcher` per leader broker, never one per partition: each Fetch carries every partition this
broker follows on that leader, with `replica_id` = our broker id, so the leader learns every follower's
position from it (and moves its high watermark). A partition that has just started following — a new
leader or a new leader epoch — first finds where its log diverges from the leader's (KIP-101/KIP-279):

    OffsetForLeaderEpoch(our latest epoch E) → the leader's end offset for E (or for the largest epoch it
    has below E, E'); we truncate to min(that end offset, our own end offset for E'), then fetch.

A leader that does not know the epoch at all (-1) means we truncate to our high watermark, which never
holds data the leader lacks. Records are appended as the leader wrote them (`append_replicated`: offsets,
epochs and producer state come from the batches); the follower's high watermark and log start follow the
leader's from each response.

Errors: a leader that is not (or no longer) the leader, or has fenced our epoch, takes the partition out of
the fetcher until the controller tells us more (LeaderAndIsr adds it again); a leader that does not know
our epoch yet (UNKNOWN_LEADER_EPOCH: its LeaderAndIsr is still on the way) is retried after
`replica.fetch.backoff.ms`, as is a leader that cannot be reached. Our position below the leader's log
start (OFFSET_OUT_OF_RANGE) restarts our log at the leader's start.

Sessions (KIP-227): each fetcher keeps an incremental fetch session with its leader (`FollowerSession`):
after the first, full fetch, a Fetch names only the partitions whose position (fetch offset, log start,
max bytes, leader epoch) changed since the last one and forgets those no longer fetched (delayed,
truncating, gone), and the leader answers only the partitions with news. The dozens of idle
`__consumer_offsets` partitions a follower follows cost a replica fetch almost nothing. A session error,
or a fetch whose answer never came, starts a new session with the next fetch.

Throttles (Kafka's replication quotas, follower side): partitions that the topic config
`follower.replication.throttled.replicas` names for this broker ("PARTITION:BROKER,..." or "*") are fetched
at no more than `follower.replication.throttled.rate` bytes per second, summed over every fetcher of this
broker (`ReplicationThrottle`, a token bucket). A throttled partition asks for at most a second's worth of
bytes per fetch and waits while the bucket is empty; the others are fetched as usual meanwhile. As in Kafka,
a partition whose log end reached the leader's high watermark in the last answer is not throttled (Kafka's
follower exempts replicas in sync; the leader side is cluster/leader_throttle.py).

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from odradek.cluster.broker_client import BrokerClient, BrokerUnavailable
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.records.batch import InvalidRecordError, validate_v2

if TYPE_CHECKING:
    from odradek.cluster.partition import Partition

log = logging.getLogger(__name__)

FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 5
EARLIEST = -2

TopicPartition = tuple[str, int]


@dataclass
class FetchState:
    partition: "Partition"
    leader_epoch: int
    truncating: bool = True  # find the divergence point before fetching
    delayed_until: float = 0.0  # monotonic time before which it is not fetched (backoff)
    # our log end reached the leader's high watermark in the last answer (Kafka's "replica in sync" of a
    # fetch state): the follower throttle leaves such a partition alone
    caught_up: bool = False


@dataclass(frozen=True)
class FetcherSettings:
    broker_id: int
    max_wait_ms: int  # replica.fetch.wait.max.ms
    min_bytes: int  # replica.fetch.min.bytes
    partition_max_bytes: int  # replica.fetch.max.bytes
    response_max_bytes: int  # replica.fetch.response.max.bytes
    backoff_s: float  # replica.fetch.backoff.ms / 1000


UNLIMITED = (1 << 63) - 1  # Kafka's default throttle rate (Long.MAX_VALUE): no throttle


def throttled_replicas_include(value: str | None, partition: int, broker_id: int) -> bool:
    """Whether a `*.replication.throttled.replicas` value ("*" or "PARTITION:BROKER,...") names this
    replica."""
    if not value:
        return False
    value = value.replace(" ", "")
    return value == "*" or f"{partition}:{broker_id}" in value.split(",")


class ReplicationThrottle:
    """The follower replication quota of this broker: a token bucket of `rate` bytes per second (at most
    one second's worth saved up) shared by the throttled partitions of every fetcher."""

    def __init__(self, broker_id: int, rate: int, topic_configs: Callable[[str], dict[str, str]]) -> None:
        self.broker_id = broker_id
        self.rate = rate
        self._topic_configs = topic_configs
        self._tokens = float(min(rate, UNLIMITED))
        self._updated = time.monotonic()

    def set_rate(self, rate: int) -> None:
        if rate != self.rate:
            log.info("follower replication throttle: %s", "none" if rate >= UNLIMITED else f"{rate} bytes/s")
        self.rate = rate
        self._tokens = min(self._tokens, float(rate))

    @property
    def active(self) -> bool:
        return self.rate < UNLIMITED

    def applies(self, topic: str, partition: int) -> bool:
        return self.active and throttled_replicas_include(
            self._topic_configs(topic).get("follower.replication.throttled.replicas"), partition, self.broker_id)

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(float(self.rate), self._tokens + (now - self._updated) * self.rate)
        self._updated = now

    def wait_s(self) -> float:
        """How long throttled partitions must wait before they may be fetched (0: now)."""
        self._refill()
        return 0.0 if self._tokens > 0 else -self._tokens / self.rate + 0.001

    def record(self, size: int) -> None:
        """``size`` bytes of throttled partitions were fetched (the bucket may go below zero: a whole
        batch always comes, and the debt is waited off)."""
        self._refill()
        self._tokens -= size

    def fetch_bytes(self, wanted: int) -> int:
        """What a throttled partition asks for per fetch: at most a second's worth."""
        return max(1, min(wanted, self.rate))


Position = tuple[int, int, int, int]  # (fetch offset, log start offset, max bytes, leader epoch)
SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH)


class FollowerSession:
    """The follower's side of a fetch session with one leader (Kafka's FetchSessionHandler)."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = 0  # 0: the next fetch is full and asks for a new session (closing session_id, if any)
        self._sent: dict[TopicPartition, Position] = {}  # what the session holds, as the leader knows it
        self._pending: dict[TopicPartition, Position] = {}
        self._pending_full = True

    def request(self, wanted: dict[TopicPartition, Position]) -> tuple[dict[TopicPartition, Position],
                                                                       list[TopicPartition]]:
        """What the next Fetch names: (partitions with their positions, partitions to forget)."""
        self._pending = dict(wanted)
        self._pending_full = self.epoch == 0
        if self._pending_full:
            return self._pending, []
        changed = {key: position for key, position in wanted.items() if self._sent.get(key) != position}
        return changed, [key for key in self._sent if key not in wanted]

    def answered(self, error_code: int, session_id: int) -> None:
        """The leader answered the fetch built last (with a top-level error or not)."""
        if error_code in SESSION_ERRORS:
            self.reset()
        elif error_code != ErrorCode.NONE:
            self.reset()
        elif self._pending_full:
            self.session_id = session_id
            self.epoch = 1 if session_id else 0
            self._sent = self._pending
        else:
            self.epoch = self.epoch + 1 if self.epoch < 0x7FFFFFFF else 1
            self._sent = self._pending

    def reset(self) -> None:
        """The next fetch is full: no answer came, or the session is gone or out of step."""
        self.epoch = 0
        self._sent = {}


class ReplicaFetcher:
    """Fetches every partition this broker follows on one leader broker."""

    def __init__(self, leader_id: int, client: BrokerClient, settings: FetcherSettings,
                 on_appended: Callable[["Partition"], None], throttle: ReplicationThrottle | None = None) -> None:
        self.leader_id = leader_id
        self.client = client
        self.settings = settings
        self._on_appended = on_appended
        self.throttle = throttle
        self.partitions: dict[TopicPartition, FetchState] = {}
        self.last_answer_s = 0.0  # time.monotonic() of the leader's last answer: proof it reaches us
        self.session = FollowerSession()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def add(self, partition: "Partition") -> None:
        self.partitions[(partition.topic, partition.index)] = FetchState(partition, partition.leader_epoch)
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    def remove(self, key: TopicPartition) -> None:
        self.partitions.pop(key, None)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self.client.close()

    async def _run(self) -> None:
        while True:
            try:
                if not self.partitions:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                now = asyncio.get_running_loop().time()
                ready = {k: s for k, s in self.partitions.items() if s.delayed_until <= now}
                if not ready:
                    delay = min(s.delayed_until for s in self.partitions.values()) - now
                    self._wake.clear()
                    try:
                        await asyncio.wait_for(self._wake.wait(), max(delay, 0.001))
                    except asyncio.TimeoutError:
                        pass
                    continue
                truncating = {k: s for k, s in ready.items() if s.truncating}
                if truncating:
                    await self._truncate(truncating)
                    continue
                ready = self._within_quota(ready, now)
                if ready:
                    await self._fetch(ready)
            except asyncio.CancelledError:
                raise
            except BrokerUnavailable as exc:
                log.info("fetcher from broker %d: %s; retrying in %.1f s", self.leader_id, exc, self.settings.backoff_s)
                self.session.reset()
                self._delay(self.partitions.values())
            except Exception:
                log.exception("fetcher from broker %d failed; retrying", self.leader_id)
                self.session.reset()
                self._delay(self.partitions.values())

    def _within_quota(self, ready: dict[TopicPartition, FetchState], now: float) -> dict[TopicPartition, FetchState]:
        """``ready`` without the throttled partitions while the throttle's bucket is empty (they wait)."""
        throttle = self.throttle
        if throttle is None or not throttle.active:
            return ready
        wait = throttle.wait_s()
        if wait <= 0:
            return ready
        out = {}
        for key, state in ready.items():
            if throttle.applies(*key) and not state.caught_up:
                state.delayed_until = now + wait
            else:
                out[key] = state
        return out

    def _delay(self, states) -> None:
        until = asyncio.get_running_loop().time() + self.settings.backoff_s
        for state in states:
            state.delayed_until = until

    def _still_current(self, key: TopicPartition, state: FetchState) -> bool:
        return self.partitions.get(key) is state and state.partition.leader_epoch == state.leader_epoch

    # -- truncation -----------------------------------------------------------------------------------

    async def _truncate(self, states: dict[TopicPartition, FetchState]) -> None:
        by_topic: dict[str, list] = {}
        for (topic, index), state in states.items():
            by_topic.setdefault(topic, []).append({
                "partition": index, "current_leader_epoch": state.leader_epoch,
                "leader_epoch": state.partition.log.leader_epoch_cache.latest_epoch})
        response = await self.client.request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION,
            {"replica_id": self.settings.broker_id,
             "topics": [{"topic": t, "partitions": p} for t, p in by_topic.items()]},
            timeout_s=30.0)
        for topic in response["topics"]:
            for part in topic["partitions"]:
                key = (topic["topic"], part["partition"])
                state = states.get(key)
                if state is None or not self._still_current(key, state):
                    continue
                error = part["error_code"]
                if error == ErrorCode.NONE:
                    self._truncate_one(state, part["leader_epoch"], part["end_offset"])
                else:
                    self._on_error(key, state, error)

    def _truncate_one(self, state: FetchState, leader_epoch: int, leader_end: int) -> None:
        plog = state.partition.log
        if leader_epoch < 0 or leader_end < 0:
            target = plog.high_watermark
        else:
            # our own end of the leader's epoch (or of the largest one we have below it)
            _, our_end = plog.leader_epoch_cache.end_offset_for(leader_epoch, plog.log_end_offset)
            target = min(leader_end, our_end if our_end >= 0 else leader_end, plog.log_end_offset)
        if target < plog.log_end_offset:
            log.info("%s-%d: truncating from %d to %d (leader %d epoch %d ends at %d)", state.partition.topic,
                     state.partition.index, plog.log_end_offset, target, self.leader_id, leader_epoch, leader_end)
            plog.truncate_to(target)
        state.truncating = False

    # -- fetching -------------------------------------------------------------------------------------

    async def _fetch(self, states: dict[TopicPartition, FetchState]) -> None:
        throttle = self.throttle if self.throttle is not None and self.throttle.active else None
        throttled = {k for k, state in states.items() if not state.caught_up and throttle.applies(*k)} \
            if throttle is not None else set()
        wanted: dict[TopicPartition, Position] = {}
        for key, state in states.items():
            plog = state.partition.log
            max_bytes = self.settings.partition_max_bytes
            wanted[key] = (plog.log_end_offset, plog.log_start_offset,
                           throttle.fetch_bytes(max_bytes) if key in throttled else max_bytes, state.leader_epoch)
        named, forgotten = self.session.request(wanted)
        by_topic: dict[str, list] = {}
        for (topic, index), (fetch_offset, log_start, max_bytes, leader_epoch) in named.items():
            by_topic.setdefault(topic, []).append({
                "partition": index, "current_leader_epoch": leader_epoch, "fetch_offset": fetch_offset,
                "last_fetched_epoch": -1, "log_start_offset": log_start, "partition_max_bytes": max_bytes})
        gone: dict[str, list[int]] = {}
        for topic, index in forgotten:
            gone.setdefault(topic, []).append(index)
        s = self.settings
        session = self.session
        response = await self.client.request(ApiKey.FETCH, FETCH_VERSION, {
            "replica_id": s.broker_id, "max_wait_ms": s.max_wait_ms, "min_bytes": s.min_bytes,
            "max_bytes": s.response_max_bytes, "isolation_level": 0, "session_id": session.session_id,
            "session_epoch": session.epoch, "topics": [{"topic": t, "partitions": p} for t, p in by_topic.items()],
            "forgotten_topics_data": [{"topic": t, "partitions": p} for t, p in gone.items()],
        }, timeout_s=s.max_wait_ms / 1000.0 + 30.0)
        self.last_answer_s = time.monotonic()
        session.answered(response["error_code"], response["session_id"])
        if response["error_code"] in SESSION_ERRORS:
            log.info("fetch session with broker %d: error %d; starting a new one", self.leader_id,
                     response["error_code"])
            return
        if response["error_code"]:
            log.warning("fetch from broker %d failed: error %d", self.leader_id, response["error_code"])
            self._delay(states.values())
            return
        for topic in response["responses"]:
            for part in topic["partitions"]:
                key = (topic["topic"], part["partition_index"])
                state = states.get(key)
                if state is None or not self._still_current(key, state):
                    continue
                error = part["error_code"]
                if error == ErrorCode.NONE:
                    if key in throttled and part["records"]:
                        throttle.record(len(part["records"]))
                    self._append(state, part)
                elif error == ErrorCode.OFFSET_OUT_OF_RANGE:
                    await self._out_of_range(key, state)
                else:
                    self._on_error(key, state, error)

    def _append(self, state: FetchState, part: dict) -> None:
        partition = state.partition
        plog = partition.log
        records = part["records"]
        if records:
            buf = records if isinstance(records, memoryview) else memoryview(records)
            try:
                batches = validate_v2(buf, compacted=True)  # a compacted leader's log has gaps
            except InvalidRecordError as exc:
                log.error("%s-%d: invalid records from leader %d: %s", partition.topic, partition.index,
                          self.leader_id, exc)
                self._delay([state])
                return
            if batches:
                first = batches[0][1]
                if first.base_offset < plog.log_end_offset:
                    if plog.log_start_offset != plog.log_end_offset or first.last_offset < plog.log_end_offset:
                        return  # an answer to an older position (we truncated meanwhile): fetch again
                    # our empty log starts inside the leader's first batch (its log start is there): start at
                    # the batch instead, so it can be appended whole
                    plog.truncate_fully_and_start_at(first.base_offset)
                plog.append_replicated(buf, batches)
        if part["log_start_offset"] > plog.log_start_offset:
            if part["log_start_offset"] > plog.log_end_offset:
                plog.truncate_fully_and_start_at(part["log_start_offset"])
            else:
                plog.maybe_increment_log_start(part["log_start_offset"])
        plog.update_high_watermark(min(part["high_watermark"], plog.log_end_offset))
        state.caught_up = plog.log_end_offset >= part["high_watermark"]
        self._on_appended(partition)

    async def _out_of_range(self, key: TopicPartition, state: FetchState) -> None:
        """Our fetch offset is outside the leader's log: below its start (it deleted records we never
        copied), so we start over there. (Past its end cannot happen after truncation by epochs.)"""
        index = key[1]
        response = await self.client.request(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, {
            "replica_id": self.settings.broker_id, "isolation_level": 0,
            "topics": [{"name": key[0], "partitions": [{"partition_index": index, "current_leader_epoch": state.leader_epoch,
                                                        "timestamp": EARLIEST}]}]}, timeout_s=30.0)
        part = response["topics"][0]["partitions"][0]
        if not self._still_current(key, state):
            return
        if part["error_code"]:
            self._on_error(key, state, part["error_code"])
            return
        plog = state.partition.log
        leader_start = part["offset"]
        if leader_start > plog.log_end_offset:
            log.warning("%s-%d: our log end %d is below the leader's log start %d; starting over there",
                        key[0], index, plog.log_end_offset, leader_start)
            plog.truncate_fully_and_start_at(leader_start)
        else:
            state.truncating = True

    def _on_error(self, key: TopicPartition, state: FetchState, error: int) -> None:
        if error in (ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                     ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.KAFKA_STORAGE_ERROR,
                     ErrorCode.REPLICA_NOT_AVAILABLE):
            # the leader has not heard of its new role yet, or cannot serve now: try again later
            self._delay([state])
        else:  # FENCED_LEADER_EPOCH and the rest: wait for the controller to tell us more
            log.info("%s-%d: fetch from broker %d answered error %d; waiting for new leadership information",
                     key[0], key[1], self.leader_id, error)
            self.partitions.pop(key, None)


class ReplicaFetcherManager:
    """The fetchers of this broker, one per leader broker it follows partitions on."""

    def __init__(self, settings: FetcherSettings, client_for: Callable[[int], BrokerClient | None],
                 on_appended: Callable[["Partition"], None], throttle: ReplicationThrottle | None = None) -> None:
        self.settings = settings
        self._client_for = client_for
        self._on_appended = on_appended
        self.throttle = throttle
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._following: dict[TopicPartition, int] = {}

    def follow(self, partition: "Partition") -> bool:
        """Fetch ``partition`` from its leader (starting with truncation); False if the leader's address is
        not known yet."""
        key = (partition.topic, partition.index)
        self.unfollow(key)
        fetcher = self.fetchers.get(partition.leader_id)
        if fetcher is None:
            client = self._client_for(partition.leader_id)
            if client is None:
                return False
            fetcher = self.fetchers[partition.leader_id] = ReplicaFetcher(partition.leader_id, client, self.settings,
                                                                          self._on_appended, self.throttle)
        fetcher.add(partition)
        self._following[key] = partition.leader_id
        return True

    @property
    def last_answer_s(self) -> float:
        """When a leader last answered one of our fetches (time.monotonic(); 0.0 if never)."""
        return max((f.last_answer_s for f in self.fetchers.values()), default=0.0)

    def is_following(self, key: TopicPartition) -> bool:
        return key in self._following

    def unfollow(self, key: TopicPartition) -> None:
        leader = self._following.pop(key, None)
        if leader is not None and leader in self.fetchers:
            self.fetchers[leader].remove(key)

    def leader_moved(self, leader_id: int, host: str, port: int) -> None:
        fetcher = self.fetchers.get(leader_id)
        if fetcher is not None:
            fetcher.client.retarget(host, port)

    def close(self) -> None:
        for fetcher in self.fetchers.values():
            fetcher.close()
        self.fetchers.clear()
        self._following.clear()
