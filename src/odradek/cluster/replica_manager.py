"""ReplicaManager: the partitions this broker holds a replica of, and what the controller says of them.

It applies LeaderAndIsr (become leader or follower of a partition, in a leader epoch), StopReplica (stop
following; delete the log when the topic is deleted) and UpdateMetadata (the `MetadataCache`), and answers
handlers that want a partition to write or read: `leader_partition` gives the local `Partition` when this
broker leads it, else raises the error to answer with (UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH). Handlers never ask which mode the
broker runs in: on a single node the LocalController makes this broker the leader (epoch 0, ISR itself) of
every partition through the same calls.

As leader of a partition it keeps the ISR honest (`maintain_isr`, every tick): a follower that has not
caught up within `replica.lag.time.max.ms` leaves the ISR, one that has caught up joins it. The change is
written to the partition's state znode by `isr_writer` (cluster mode; conditional on the znode version, so
a newer decision of the controller wins) and only then applied here, as Kafka's ZooKeeper-era leaders do.

The high watermark of every partition is checkpointed to `replication-offset-checkpoint` in the data
directory (Kafka's format, below) every `replica.high.watermark.checkpoint.interval.ms` and at close, on
the log flusher's thread, so a restarted broker does not expose more than was committed::

    0                      version
    N                      number of entries
    TOPIC PARTITION HW     one line per partition

Leadership changes of partitions of the internal topics are reported to `on_leadership` listeners (the
coordinators load or drop that partition's state).

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Awaitable, Callable

from odradek.cluster.fetcher import ReplicaFetcherManager
from odradek.cluster.leader_throttle import LeaderReplicationQuota
from odradek.cluster.metadata import MetadataCache
from odradek.cluster.partition import NotLeaderError, Partition, ReplicationError
from odradek.protocol.errors import ErrorCode
from odradek.storage.config import LogConfig
from odradek.storage.files import write_file_atomically
from odradek.storage.manager import LogManager

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
HW_CHECKPOINT_FILE = "replication-offset-checkpoint"


@dataclass
class PartitionStateChange:
    """One partition of a LeaderAndIsr request."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int
    replicas: list[int]
    is_new: bool = False


@dataclass(frozen=True)
class IsrWritten:
    """What the partition's state znode holds after a leader's ISR write: its version and ISR (the leader's
    new ISR, or the one found there when the write met a newer version under the same leadership)."""

    version: int
    isr: list[int]


IsrWriter = Callable[[Partition, list[int]], Awaitable[IsrWritten | None]]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class ReplicaManager:
    def __init__(self, broker_id: int, data_dir: Path, logs: LogManager, metadata: MetadataCache,
                 log_config: Callable[[str], LogConfig], notify: Callable[[str, int], None],
                 replica_lag_ms: int, hw_checkpoint_interval_ms: int) -> None:
        self.broker_id = broker_id
        self.data_dir = data_dir
        self.logs = logs
        self.metadata = metadata
        self._log_config = log_config
        self._notify = notify
        self.replica_lag_ms = replica_lag_ms
        self.partitions: dict[TopicPartition, Partition] = {}
        self.controller_epoch = -1
        self.fetchers: ReplicaFetcherManager | None = None  # cluster mode
        # False once this broker's controlled shutdown began: it still becomes a follower where the controller
        # says so, but starts no fetcher, since a fetch at the log end would put it back into the ISRs it is
        # being taken out of (and an idle partition would keep it there after it is gone)
        self.fetching = True
        self.isr_writer: IsrWriter | None = None  # cluster mode
        self.on_leadership: list[Callable[[str, int, bool], None]] = []
        self._held_notices: list[tuple[Partition, bool]] | None = None  # while a LeaderAndIsr is applied
        self._hw_checkpoint = read_hw_checkpoint(data_dir / HW_CHECKPOINT_FILE)
        self._hw_interval_ms = hw_checkpoint_interval_ms
        self._next_hw_checkpoint_ms = 0
        self._isr_tasks: set[asyncio.Task] = set()
        self.isr_shrinks = 0  # ISR changes this leader wrote (the broker's metrics: broker/metrics.py)
        self.isr_expands = 0
        # time.monotonic() of the last replica fetch another broker sent us: proof the brokers reach us
        self.last_follower_fetch_s = 0.0
        # `leader.replication.throttled.*`: what the Fetch handler holds back from catching-up followers
        self.leader_quota = LeaderReplicationQuota(broker_id, self._topic_configs)

    def _topic_configs(self, topic: str) -> dict[str, str]:
        known = self.metadata.topic(topic)
        return known.configs if known is not None else {}

    # -- what handlers ask ----------------------------------------------------------------------------

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def leader_partition(self, topic: str | None, index: int, current_leader_epoch: int = -1) -> Partition:
        """The local replica of a partition this broker leads; raises ReplicationError otherwise."""
        partition = self.hosted_partition(topic, index)
        partition.check_leader(current_leader_epoch)
        return partition

    def hosted_partition(self, topic: str | None, index: int) -> Partition:
        """The local replica of a partition, led or followed (what DescribeProducers reads: a follower's log
        replays the leader's batches into its own producer state). NotLeaderError when the partition exists
        but this broker holds no replica of it, UNKNOWN_TOPIC_OR_PARTITION when it does not exist."""
        partition = self.partitions.get((topic, index)) if topic is not None else None
        if partition is None:
            if topic is not None and self.metadata.has_partition(topic, index):
                raise NotLeaderError(f"broker {self.broker_id} holds no replica of {topic}-{index}")
            raise ReplicationError(f"unknown partition {topic}-{index}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return partition

    # -- LeaderAndIsr ---------------------------------------------------------------------------------

    def _get_or_create(self, topic: str, index: int) -> Partition:
        key = (topic, index)
        partition = self.partitions.get(key)
        if partition is None:
            plog = self.logs.get(topic, index)
            existed = plog is not None
            if plog is None:
                plog = self.logs.create(topic, index, self._log_config(topic))
            if existed and key in self._hw_checkpoint:
                plog.update_high_watermark(min(self._hw_checkpoint[key], plog.log_end_offset))
            elif existed:
                plog.update_high_watermark(plog.log_start_offset)
            partition = self.partitions[key] = Partition(topic, index, self.broker_id, plog, self._notify)
        return partition

    def become_leader_or_follower(self, controller_epoch: int, changes: list[PartitionStateChange]
                                  ) -> dict[TopicPartition, int]:
        """Apply a LeaderAndIsr request; an error code per partition."""
        if controller_epoch < self.controller_epoch:
            return {(c.topic, c.partition): ErrorCode.STALE_CONTROLLER_EPOCH for c in changes}
        self.controller_epoch = controller_epoch
        # listeners hear of the batch's leadership changes once every partition of it exists here: a
        # coordinator that loads one internal partition may read this broker's replicas of the others
        self._held_notices = []
        try:
            return self._apply(changes)
        finally:
            notices, self._held_notices = self._held_notices, None
            for partition, leader in notices:
                self._leadership_changed(partition, leader)

    def _apply(self, changes: list[PartitionStateChange]) -> dict[TopicPartition, int]:
        controller_epoch = self.controller_epoch
        errors: dict[TopicPartition, int] = {}
        now = now_ms()
        led = followed = 0
        for change in changes:
            key = (change.topic, change.partition)
            if self.broker_id not in change.replicas:
                errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            existing = self.partitions.get(key)
            if existing is not None and change.leader_epoch < existing.leader_epoch:
                log.info("%s-%d: ignoring a LeaderAndIsr of leader epoch %d (ours is %d)", change.topic,
                         change.partition, change.leader_epoch, existing.leader_epoch)
                errors[key] = ErrorCode.STALE_CONTROLLER_EPOCH
                continue
            if existing is not None and change.leader_epoch == existing.leader_epoch and \
                    change.zk_version < existing.zk_version:
                errors[key] = ErrorCode.NONE  # an older view of our own epoch: nothing to change (as Kafka)
                continue
            try:
                partition = self._get_or_create(change.topic, change.partition)
                partition.log.update_config(self._log_config(change.topic))
            except OSError as exc:
                log.error("cannot open the log of %s-%d: %s", change.topic, change.partition, exc)
                errors[key] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            partition.controller_epoch = change.controller_epoch
            if change.leader == self.broker_id:
                self._become_leader(partition, change, now)
                led += 1
            else:
                self._become_follower(partition, change)
                followed += 1
            errors[key] = ErrorCode.NONE
        log.log(logging.INFO if self.fetchers is not None else logging.DEBUG,
                "controller epoch %d: leading %d and following %d partitions of %d", controller_epoch, led, followed,
                len(changes))
        return errors

    def _become_leader(self, partition: Partition, change: PartitionStateChange, now: int) -> None:
        was_leader = partition.is_leader
        if self.fetchers is not None:
            self.fetchers.unfollow((partition.topic, partition.index))
        new_term = partition.make_leader(change.leader_epoch, change.isr, change.replicas, change.zk_version, now)
        if new_term:
            log.debug("%s-%d: leader in epoch %d, ISR %s, log end %d, high watermark %d", partition.topic,
                     partition.index, change.leader_epoch, change.isr, partition.log.log_end_offset,
                     partition.log.high_watermark)
        if not was_leader:
            self._leadership_changed(partition, True)

    def _become_follower(self, partition: Partition, change: PartitionStateChange) -> None:
        was_leader = partition.is_leader
        changed = partition.make_follower(change.leader, change.leader_epoch, change.isr, change.replicas,
                                          change.zk_version)
        if changed or was_leader:
            log.debug("%s-%d: following broker %d in epoch %d", partition.topic, partition.index, change.leader,
                     change.leader_epoch)
            if self.fetchers is not None:
                self.fetchers.unfollow((partition.topic, partition.index))
                if change.leader >= 0 and self.fetching and not self.fetchers.follow(partition):
                    log.warning("%s-%d: leader %d's address is unknown; fetching once it is", partition.topic,
                                partition.index, change.leader)
        if was_leader:
            self._leadership_changed(partition, False)

    def _leadership_changed(self, partition: Partition, leader: bool) -> None:
        if self._held_notices is not None:
            self._held_notices.append((partition, leader))
            return
        for listener in self.on_leadership:
            try:
                listener(partition.topic, partition.index, leader)
            except Exception:
                log.exception("leadership listener failed for %s-%d", partition.topic, partition.index)

    def refollow_unfetched(self) -> None:
        """Start fetching for followed partitions whose leader's address was unknown (after UpdateMetadata)."""
        if self.fetchers is None or not self.fetching:
            return
        for key, partition in self.partitions.items():
            if not partition.is_leader and partition.leader_id >= 0 and not self.fetchers.is_following(key):
                self.fetchers.follow(partition)

    def stop_fetching(self) -> None:
        """The broker is shutting down (controlled): start no fetcher from now on. Those running go on until
        StopReplica ends them (their ISRs wait for them until the controller has taken this broker out)."""
        self.fetching = False

    def relinquish_all(self) -> None:
        """This broker can no longer prove it leads anything (its ZooKeeper session expired): stop leading
        and following every partition until the controller speaks again."""
        for key, partition in self.partitions.items():
            if self.fetchers is not None:
                self.fetchers.unfollow(key)
            was_leader = partition.is_leader
            partition.stop()
            if was_leader:
                self._leadership_changed(partition, False)

    # -- StopReplica ----------------------------------------------------------------------------------

    def stop_replica(self, topic: str, index: int, delete: bool) -> int:
        key = (topic, index)
        if self.fetchers is not None:
            self.fetchers.unfollow(key)
        partition = self.partitions.pop(key, None)
        if partition is not None:
            was_leader = partition.is_leader
            partition.stop()
            if was_leader:
                self._leadership_changed(partition, False)
        if delete:
            try:
                self.logs.delete_partition(topic, index)
            except OSError as exc:
                log.error("cannot delete the log of %s-%d: %s", topic, index, exc)
                return ErrorCode.KAFKA_STORAGE_ERROR
            self._hw_checkpoint.pop(key, None)
            self._notify(topic, index)
        elif partition is not None:
            # not a replica any more, but its log stays (it may be asked to follow again)
            pass
        return ErrorCode.NONE

    # -- followers of partitions led here -------------------------------------------------------------

    def follower_fetched(self, partition: Partition, replica_id: int, fetch_offset: int) -> None:
        self.last_follower_fetch_s = time.monotonic()
        if partition.update_follower(replica_id, fetch_offset, now_ms()):
            self._notify(partition.topic, partition.index)
        if replica_id not in partition.isr and not partition.isr_change_pending:
            # only a live broker joins (Kafka's isReplicaIsrEligible): a fetch of a broker whose registration
            # is gone (stopped, or past its session) must not put it back into the ISR the controller just
            # took it out of; with the rule that keeps a follower at the log end in sync, nothing would take
            # it out again while the partition is idle
            if replica_id in partition.caught_up_outside_isr() and replica_id in self.metadata.brokers:
                self._change_isr(partition, partition.isr + [replica_id])

    def maintain_isr(self) -> None:
        """Shrink the ISR of every led partition by the followers that lag too far behind."""
        now = now_ms()
        for partition in self.partitions.values():
            if not partition.is_leader or partition.isr_change_pending or len(partition.isr) <= 1:
                continue
            lagging = partition.lagging_isr(now, self.replica_lag_ms)
            if lagging:
                log.info("%s-%d: shrinking the ISR %s by %s (not caught up within %d ms)", partition.topic,
                         partition.index, partition.isr, lagging, self.replica_lag_ms)
                self._change_isr(partition, [r for r in partition.isr if r not in lagging])

    def _change_isr(self, partition: Partition, new_isr: list[int]) -> None:
        if self.isr_writer is None:
            return
        partition.begin_isr_change(new_isr)
        epoch, zk_version = partition.leader_epoch, partition.zk_version
        task = asyncio.ensure_future(self._write_isr(partition, new_isr, epoch, zk_version))
        self._isr_tasks.add(task)
        task.add_done_callback(self._isr_tasks.discard)

    async def _write_isr(self, partition: Partition, new_isr: list[int], epoch: int, zk_version: int) -> None:
        try:
            written = await self.isr_writer(partition, new_isr)
        except Exception:
            log.exception("%s-%d: writing the ISR failed", partition.topic, partition.index)
            written = None
        if partition.leader_epoch != epoch or partition.zk_version != zk_version or not partition.is_leader:
            return  # a LeaderAndIsr came meanwhile: it is the newer truth
        if written is None:
            partition.abort_isr_change()
            return  # the znode moved on (the controller decided something): wait for its LeaderAndIsr
        if written.isr != new_isr:  # not our change: the znode's state, taken as it is (tried again next tick)
            partition.set_isr(written.isr, written.version)
            return
        log.info("%s-%d: ISR now %s", partition.topic, partition.index, new_isr)
        if len(new_isr) < len(partition.isr):
            self.isr_shrinks += 1
        elif len(new_isr) > len(partition.isr):
            self.isr_expands += 1
        partition.set_isr(new_isr, written.version)

    # -- periodic -------------------------------------------------------------------------------------

    def tick(self) -> None:
        self.maintain_isr()
        for partition in self.partitions.values():
            partition.prune_waiters()
        now = now_ms()
        if now >= self._next_hw_checkpoint_ms:
            self._next_hw_checkpoint_ms = now + self._hw_interval_ms
            self.checkpoint_high_watermarks()

    def checkpoint_high_watermarks(self, wait: bool = False) -> None:
        entries = {key: p.log.high_watermark for key, p in self.partitions.items()}
        self._hw_checkpoint.update(entries)
        content = encode_hw_checkpoint(self._hw_checkpoint)
        path = self.data_dir / HW_CHECKPOINT_FILE
        future = self.logs.flusher.submit(lambda: write_file_atomically(path, content))
        if wait:
            future.result()

    def close(self) -> None:
        for task in self._isr_tasks:
            task.cancel()
        if self.fetchers is not None:
            self.fetchers.close()
        for partition in self.partitions.values():
            partition.fail_waiters(NotLeaderError("broker shutting down"))


def encode_hw_checkpoint(entries: dict[TopicPartition, int]) -> bytes:
    lines = ["0", str(len(entries))] + [f"{t} {p} {hw}" for (t, p), hw in sorted(entries.items())]
    return ("\n".join(lines) + "\n").encode()


def read_hw_checkpoint(path: Path) -> dict[TopicPartition, int]:
    try:
        lines = path.read_text().split("\n")
    except (FileNotFoundError, UnicodeDecodeError):
        return {}
    out: dict[TopicPartition, int] = {}
    try:
        if int(lines[0]) != 0:
            return {}
        for line in lines[2:2 + int(lines[1])]:
            topic, partition, offset = line.rsplit(" ", 2)
            out[(topic, int(partition))] = int(offset)
    except (ValueError, IndexError):
        log.warning("ignoring an unreadable %s", path)
        return {}
    return out
