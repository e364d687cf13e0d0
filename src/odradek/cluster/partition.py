"""Partition: the replication state of one local replica (Kafka's `Partition`).

A replica here is the leader of its partition or a follower; which one, in which leader epoch, with which
replicas and in-sync replicas (ISR), is what the controller last said (LeaderAndIsr; on a single node, the
LocalController: this broker leads every partition, ISR = itself). As leader it:

- stamps its leader epoch on every batch it appends, and records the epoch's start in the log's leader
  epoch cache on becoming leader, so followers can find where their logs diverge (KIP-101);
- tracks each follower's log end offset from its fetches (`update_follower`) and the last time it was
  caught up, from which the replica manager decides ISR shrinks and expansions;
- keeps the high watermark (HW) = the minimum log end offset over the ISR (`maybe_increment_hw`, the one
  rule that moves it). The HW never goes backwards while leading. Consumers read below it; an acks=all
  produce (and every coordinator write) is answered once it passes the write (`when_committed`).

Invariant while leading: log.high_watermark == min(log end offset of every ISR member, as last reported)
or more (it never decreases), and every `when_committed` future for an offset at or below it is done.
Losing leadership fails the waiting futures with NotLeaderError: their writes may be truncated away by the
next leader, so their producers must retry.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import Callable

from odradek.protocol.errors import ErrorCode
from odradek.records.batch import BatchHeader, patch_base_offset, patch_leader_epoch
from odradek.storage.log import AppendResult, PartitionLog

log = logging.getLogger(__name__)


class ReplicationError(Exception):
    """A request this replica cannot serve; ``error_code`` is the Kafka code to answer with."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str, error_code: int | None = None) -> None:
        super().__init__(message)
        if error_code is not None:
            self.error_code = error_code


class NotLeaderError(ReplicationError):
    error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER


@dataclass(slots=True)
class FollowerProgress:
    """A follower as its leader sees it, from its fetches."""

    log_end_offset: int = -1  # unknown until its first fetch in this leader epoch
    last_fetch_ms: int = 0
    last_caught_up_ms: int = 0
    last_fetch_leader_end: int = -1  # the leader's log end offset at that fetch


class Partition:
    def __init__(self, topic: str, index: int, local_id: int, log: PartitionLog,
                 notify: Callable[[str, int], None]) -> None:
        self.topic = topic
        self.index = index
        self.local_id = local_id
        self.log = log
        self._notify = notify
        self.leader_id = -1
        self.leader_epoch = -1
        self.zk_version = -1  # the partition epoch: version of its state znode
        self.controller_epoch = -1  # of the controller whose LeaderAndIsr set the state
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.followers: dict[int, FollowerProgress] = {}
        self.leader_epoch_start = 0  # log end offset when this replica became leader in this epoch
        # while an ISR change is being written: the ISR it writes; the HW counts the union of both (Kafka's
        # "maximal ISR", KIP-497), so it never passes a replica that is joining
        self.pending_isr: list[int] | None = None
        self._waiters: list[tuple[int, int, Future, int]] = []  # heap of (offset, seq, future, min ISR)
        self._seq = itertools.count()

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.index} leader={self.leader_id} epoch={self.leader_epoch} "
                f"isr={self.isr})")

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_id

    # -- role changes (LeaderAndIsr) --------------------------------------------------------------------

    def make_leader(self, leader_epoch: int, isr: list[int], replicas: list[int], zk_version: int,
                    now_ms: int) -> bool:
        """Lead the partition in ``leader_epoch``; returns whether this is a new leadership (an epoch
        change), as opposed to an update of the ISR or replicas in the same epoch."""
        new_term = not self.is_leader or leader_epoch != self.leader_epoch
        self.leader_id = self.local_id
        self.leader_epoch = leader_epoch
        self.zk_version = zk_version
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.pending_isr = None
        if new_term:
            self.leader_epoch_start = self.log.log_end_offset
            self.log.leader_epoch_cache.assign(leader_epoch, self.leader_epoch_start)
            # Followers in the ISR count as caught up now: they get replica.lag.time.max.ms to fetch.
            self.followers = {r: FollowerProgress(last_caught_up_ms=now_ms if r in isr else 0)
                              for r in replicas if r != self.local_id}
        else:
            for r in replicas:
                if r != self.local_id and r not in self.followers:
                    self.followers[r] = FollowerProgress()
            for r in [r for r in self.followers if r not in replicas]:
                del self.followers[r]
        if self.maybe_increment_hw():
            self._notify(self.topic, self.index)
        return new_term

    def make_follower(self, leader_id: int, leader_epoch: int, isr: list[int], replicas: list[int],
                      zk_version: int) -> bool:
        """Follow ``leader_id``; returns whether the leader or its epoch changed (the fetcher then has
        to find the divergence point again)."""
        changed = (leader_id, leader_epoch) != (self.leader_id, self.leader_epoch)
        was_leader = self.is_leader
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.zk_version = zk_version
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.followers = {}
        self.pending_isr = None
        if was_leader:
            self.fail_waiters(NotLeaderError(f"{self.topic}-{self.index}: leadership moved to {leader_id}"))
        return changed

    def stop(self) -> None:
        """No longer a replica here (StopReplica, or the topic is gone)."""
        self.leader_id = -1
        self.followers = {}
        self.fail_waiters(NotLeaderError(f"{self.topic}-{self.index}: replica stopped"))

    # -- leader: appends --------------------------------------------------------------------------------

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        """Raise unless this replica leads and the caller's epoch (if known, >= 0) is ours."""
        if not self.is_leader:
            raise NotLeaderError(f"broker {self.local_id} does not lead {self.topic}-{self.index}")
        if current_leader_epoch >= 0 and current_leader_epoch != self.leader_epoch:
            code = ErrorCode.FENCED_LEADER_EPOCH if current_leader_epoch < self.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH
            raise ReplicationError(f"leader epoch {current_leader_epoch} is not ours ({self.leader_epoch})", code)

    def append_as_leader(self, records: bytearray | memoryview, batches: list[tuple[int, BatchHeader]]
                         ) -> AppendResult:
        """Append a produced record set (validated, offsets assigned by the log) in our leader epoch."""
        if not self.is_leader:
            raise NotLeaderError(f"broker {self.local_id} does not lead {self.topic}-{self.index}")
        epoch = self.leader_epoch
        stamped = []
        for pos, header in batches:
            patch_leader_epoch(records, pos, epoch)
            stamped.append((pos, header._replace(partition_leader_epoch=epoch)))
        result = self.log.append(records, stamped)
        if not result.duplicate:
            self._appended()
        return result

    def append_records_unchecked(self, records: bytearray, batches: list[tuple[int, BatchHeader]]) -> AppendResult:
        """Append batches the broker wrote itself (a coordinator's), as the leader: offsets and epoch are
        assigned here and producer state is updated without sequence checks, as Kafka does for writes
        whose origin is a coordinator."""
        if not self.is_leader:
            raise NotLeaderError(f"broker {self.local_id} does not lead {self.topic}-{self.index}")
        offset = self.log.log_end_offset
        assigned = []
        for pos, header in batches:
            patch_base_offset(records, pos, offset)
            patch_leader_epoch(records, pos, self.leader_epoch)
            header = header._replace(base_offset=offset, partition_leader_epoch=self.leader_epoch)
            assigned.append((pos, header))
            offset = header.last_offset + 1
        result = self.log.append_replicated(records, assigned)
        self._appended()
        return result

    def append_marker(self, records: bytearray, header: BatchHeader, aborted: bool, coordinator_epoch: int) -> int:
        """Append one transaction marker as the leader; returns its offset."""
        if not self.is_leader:
            raise NotLeaderError(f"broker {self.local_id} does not lead {self.topic}-{self.index}")
        patch_leader_epoch(records, 0, self.leader_epoch)
        offset = self.log.append_marker(records, header._replace(partition_leader_epoch=self.leader_epoch),
                                        aborted, coordinator_epoch)
        self._appended()
        return offset

    def _appended(self) -> None:
        self.maybe_increment_hw()
        self._notify(self.topic, self.index)

    # -- leader: the high watermark ---------------------------------------------------------------------

    def maybe_increment_hw(self) -> bool:
        """Move the HW to the minimum log end offset over the ISR, if that is higher (returns whether it
        moved); completes the writes it commits."""
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        members = self.isr if self.pending_isr is None else set(self.isr) | set(self.pending_isr)
        for replica in members:
            if replica == self.local_id:
                continue
            progress = self.followers.get(replica)
            end = progress.log_end_offset if progress is not None else -1
            if end < new_hw:
                new_hw = end
        if new_hw <= self.log.high_watermark or not self.log.update_high_watermark(new_hw):
            return False
        self._complete_waiters()
        return True

    def when_committed(self, end_offset: int, min_isr: int = 0) -> Future | None:
        """A future done once the HW reaches ``end_offset`` (failed with NotLeaderError if leadership is
        lost first, or NOT_ENOUGH_REPLICAS_AFTER_APPEND if by then the ISR is smaller than ``min_isr``), or
        None when the HW is there already."""
        if self.log.high_watermark >= end_offset:
            return None
        if not self.is_leader:
            raise NotLeaderError(f"broker {self.local_id} does not lead {self.topic}-{self.index}")
        future: Future = Future()
        heapq.heappush(self._waiters, (end_offset, next(self._seq), future, min_isr))
        return future

    def _complete_waiters(self) -> None:
        hw = self.log.high_watermark
        waiters = self._waiters
        isr_size = len(self.isr)
        while waiters and waiters[0][0] <= hw:
            _, _, future, min_isr = heapq.heappop(waiters)
            if future.done():
                continue
            if isr_size < min_isr:
                future.set_exception(ReplicationError(
                    f"{self.topic}-{self.index}: the ISR shrank to {isr_size} below min.insync.replicas {min_isr}",
                    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND))
            else:
                future.set_result(None)

    def fail_waiters(self, error: BaseException) -> None:
        waiters, self._waiters = self._waiters, []
        for _, _, future, _ in waiters:
            if not future.done():
                future.set_exception(error)

    def prune_waiters(self) -> None:
        """Forget waiters whose callers gave up (timed out): the heap only shrinks from its top."""
        if any(w[2].done() for w in self._waiters):
            self._waiters = [w for w in self._waiters if not w[2].done()]
            heapq.heapify(self._waiters)

    # -- leader: followers and the ISR ------------------------------------------------------------------

    def update_follower(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """A follower fetched from ``fetch_offset``: it holds everything below. Returns whether the HW
        moved. A replica the leader does not know (not assigned) is ignored."""
        progress = self.followers.get(replica_id)
        if progress is None or not self.is_leader:
            return False
        end = self.log.log_end_offset
        if fetch_offset >= end:
            progress.last_caught_up_ms = now_ms
        elif fetch_offset >= progress.last_fetch_leader_end >= 0:
            # it has caught up with where the leader was at its previous fetch
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.last_fetch_leader_end = end
        progress.last_fetch_ms = now_ms
        progress.log_end_offset = fetch_offset
        return self.maybe_increment_hw()

    def lagging_isr(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """ISR members that have not caught up for more than ``max_lag_ms`` (replica.lag.time.max.ms). A
        follower that holds the whole log is in sync however long ago it last fetched (Kafka's rule: an idle
        partition, or a follower whose next fetch is late on a busy host, keeps its ISR)."""
        out = []
        end = self.log.log_end_offset
        for replica in self.isr:
            if replica == self.local_id:
                continue
            progress = self.followers.get(replica)
            if progress is None:
                out.append(replica)
            elif progress.log_end_offset != end and now_ms - progress.last_caught_up_ms > max_lag_ms:
                out.append(replica)
        return out

    def caught_up_outside_isr(self) -> list[int]:
        """Replicas outside the ISR that hold everything up to the HW and to the start of our epoch: they
        may join it (Kafka's condition for ISR expansion)."""
        hw = self.log.high_watermark
        return [r for r, p in self.followers.items()
                if r not in self.isr and p.log_end_offset >= hw and p.log_end_offset >= self.leader_epoch_start]

    def begin_isr_change(self, isr: list[int]) -> None:
        """The leader starts writing a new ISR (to ZooKeeper); until `set_isr` or `abort_isr_change` the HW
        counts both the old and the new members."""
        self.pending_isr = list(isr)

    def abort_isr_change(self) -> None:
        self.pending_isr = None

    @property
    def isr_change_pending(self) -> bool:
        return self.pending_isr is not None

    def set_isr(self, isr: list[int], zk_version: int) -> None:
        """The ISR as written to ZooKeeper (the leader's own shrink or expansion)."""
        self.isr = list(isr)
        self.pending_isr = None
        self.zk_version = zk_version
        if self.maybe_increment_hw():
            self._notify(self.topic, self.index)


def durable_and_committed(durable: Future | None, committed: Future | None) -> Future | None:
    """One future for a write's two conditions: on disk (a flusher future, completed on the flusher's
    thread) and held by the ISR (`when_committed`, completed on the loop). Done when both are (failed with
    the first error); either may be None (nothing to wait for)."""
    if durable is None or durable.done() and durable.exception() is None:
        return committed
    if committed is None or committed.done() and committed.exception() is None:
        return durable
    combined: Future = Future()

    def settle(_: Future) -> None:  # on the flusher's thread or the loop
        try:
            for f in (durable, committed):
                if f.done() and f.exception() is not None:
                    combined.set_exception(f.exception())
                    return
            if durable.done() and committed.done():
                combined.set_result(None)
        except InvalidStateError:
            pass  # the other callback settled it

    durable.add_done_callback(settle)
    committed.add_done_callback(settle)
    return combined
