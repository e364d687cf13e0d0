"""The share coordinator (KIP-932): keeper of the stored delivery states of share partitions.

Two roles meet in share groups. The *share-partition leader* (the broker leading topic-partition T-p) serves
ShareFetch and ShareAcknowledge for T-p and keeps each group's in-flight window in memory
(share_groups.py, share_partition.py). The *share coordinator* of a key `group:topic-id:partition` is the
leader of the `__share_group_state` partition the key hashes to (share_state.py); it keeps the last stored
state of each of its keys in memory and in that compacted, replicated topic. The leader reads the state from
the coordinator when it starts serving T-p for a group, and writes it back whenever it changes.

Between the two runs a `StatePersister`, one interface with two implementations:

* `LocalPersister` calls this broker's `ShareCoordinator` directly (a single node, or a cluster broker that
  happens to be the key's coordinator): no network hop;
* `broker.share_persister.RemotePersister` finds the key's coordinator in the cluster metadata and sends it
  the inter-broker requests InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState
  (85), DeleteShareGroupState (86) and ReadShareGroupStateSummary (87), whose handlers call the
  `ShareCoordinator` there.

Every call returns a `concurrent.futures.Future` (asyncio.wrap_future-able) of an error code, or of
(error code, `StoredState` or None) for reads; it never raises.

Stored state: a state epoch (raised by InitializeShareGroupState, e.g. AlterShareGroupOffsets: a write with
an older one is refused FENCED_STATE_EPOCH), the leader epoch of the last leader that read or wrote it (a
write from an older leader is refused FENCED_LEADER_EPOCH), the start offset and runs of (first, last,
state, delivery count). A write is merged into the stored state as Kafka's coordinator merges it: the start
offset moves (-1 keeps it), offsets below it go, and the written runs replace what they cover. A read of a
key with no state answers start offset -1 (uninitialized): the leader then starts at the group's
`share.auto.offset.reset`.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Iterable, Protocol

from odradek.cluster.partition import ReplicationError
from odradek.coordinator.persistence import encode_share_state_value
from odradek.coordinator.share_partition import ACKNOWLEDGED, ARCHIVED
from odradek.coordinator.share_state import SHARE_STATE_TOPIC, ShareStateLog, StateKey, StateValue
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

UNINITIALIZED = -1  # a start offset: no state stored
Run = tuple[int, int, int, int]  # (first offset, last offset, state, delivery count)
# what a leader retries after a pause: the coordinator moved, is loading, or could not be reached
RETRIABLE = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT})


@dataclass
class StoredState:
    state_epoch: int = 0
    leader_epoch: int = -1
    start: int = UNINITIALIZED
    runs: list[Run] = field(default_factory=list)
    complete_count: int | None = None  # a summary's (ReadShareGroupStateSummary): it has no runs

    @property
    def end(self) -> int:
        """The end of the stored window (the offset after the last run)."""
        return max(self.runs[-1][1] + 1, self.start) if self.runs else self.start

    def delivery_complete(self) -> int:
        """Offsets at or past the start whose delivery is finished (acknowledged or archived)."""
        if self.complete_count is not None:
            return self.complete_count
        return sum(last - first + 1 for first, last, state, _ in self.runs if state in (ACKNOWLEDGED, ARCHIVED))


def merge_runs(old: list[Run], start: int, new: Iterable[Run]) -> list[Run]:
    """``old`` runs from ``start`` on, with the offsets ``new`` covers replaced by ``new``'s; runs of equal
    (state, count) that touch are joined. Windows are bounded (`group.share.partition.max.record.locks`), so
    offset by offset is cheap enough."""
    offsets: dict[int, tuple[int, int]] = {}
    for runs in (old, new):
        for first, last, state, count in runs:
            for offset in range(max(first, start), last + 1):
                offsets[offset] = (state, count)
    out: list[Run] = []
    for offset in sorted(offsets):
        state, count = offsets[offset]
        if out and out[-1][1] == offset - 1 and out[-1][2:] == (state, count):
            out[-1] = (out[-1][0], offset, state, count)
        else:
            out.append((offset, offset, state, count))
    return out


def _done(value: object) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


class ShareCoordinator:
    """The coordinator side: the states of the keys whose `__share_group_state` partition is led here."""

    def __init__(self, log_: ShareStateLog) -> None:
        self.log = log_
        self.states: dict[StateKey, StoredState] = {}

    # -- leadership of __share_group_state partitions ----------------------------------------------------

    def load(self, partition: int) -> int:
        """This broker now leads ``partition``: replay its states (the last of each key wins); how many keys
        have one."""
        states: dict[StateKey, StateValue | None] = dict(self.log.replay(partition))
        for key, value in states.items():
            if value is None:
                self.states.pop(key, None)
            else:
                start, _, runs, state_epoch, leader_epoch = value
                self.states[key] = StoredState(state_epoch, leader_epoch, start, list(runs))
        self.log.loaded.add(partition)
        return sum(1 for s in states.values() if s is not None)

    def unload(self, partition: int) -> None:
        self.log.loaded.discard(partition)
        for key in [k for k in self.states if self.log.partition_of(k) == partition]:
            del self.states[key]
        self.log.log.forget(partition)

    def keys_of(self, group_id: str) -> list[StateKey]:
        return sorted(k for k in self.states if k[0] == group_id)

    def _check(self, key: StateKey) -> int:
        """NONE when ``key``'s partition is led and loaded here; else why not. The topic is created on
        first use (a single node then leads and loads it at once)."""
        partition = self.log.partition_of(key)
        if partition in self.log.loaded:
            return ErrorCode.NONE
        self.log.create_topic()
        if partition in self.log.loaded:
            return ErrorCode.NONE
        replica = self.log.log.leader_or_none(partition)
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if replica is not None else ErrorCode.NOT_COORDINATOR

    def _store(self, key: StateKey, state: StoredState | None) -> Future:
        """Append the state (None: delete it); a future of NONE once durable and replicated, else an error."""
        result: Future = Future()
        try:
            durable = self.log.append(key, None if state is None else encode_share_state_value(
                state.start, state.end, state.runs, state.state_epoch, state.leader_epoch))
        except ReplicationError as exc:
            result.set_result(exc.error_code)
            return result
        except OSError as exc:
            log.error("%s: cannot store a share-partition state: %s", SHARE_STATE_TOPIC, exc)
            result.set_result(ErrorCode.KAFKA_STORAGE_ERROR)
            return result

        def settled(f: Future) -> None:
            exc = f.exception()
            result.set_result(ErrorCode.NONE if exc is None else getattr(exc, "error_code",
                                                                          ErrorCode.KAFKA_STORAGE_ERROR))

        durable.add_done_callback(settled)
        return result

    # -- the five operations ----------------------------------------------------------------------------

    def initialize(self, key: StateKey, state_epoch: int, start: int) -> Future:
        """A new state epoch and start offset with nothing in flight (AlterShareGroupOffsets); the epoch must
        be above the stored one."""
        code = self._check(key)
        if code:
            return _done(code)
        old = self.states.get(key)
        if old is not None and state_epoch <= old.state_epoch:
            return _done(ErrorCode.FENCED_STATE_EPOCH)
        # the leader epoch starts again at 0, as Kafka's share coordinator initializes it (shown by
        # DescribeShareGroupOffsets); the state epoch is what fences the leaders of the old state
        state = self.states[key] = StoredState(state_epoch, 0, start)
        return self._store(key, state)

    def read(self, key: StateKey, leader_epoch: int) -> Future:
        """(code, state or None); a leader reading with a newer leader epoch fences older leaders' writes."""
        code = self._check(key)
        if code:
            return _done((code, None))
        state = self.states.get(key)
        if state is not None:
            if leader_epoch < state.leader_epoch:
                return _done((ErrorCode.FENCED_LEADER_EPOCH, None))
            if leader_epoch > state.leader_epoch:
                state.leader_epoch = leader_epoch
                self._store(key, state)  # so the fence outlives a failover of this coordinator
        return _done((ErrorCode.NONE, state))

    def summary(self, key: StateKey) -> Future:
        code = self._check(key)
        return _done((code, None if code else self.states.get(key)))

    def write(self, key: StateKey, state_epoch: int, leader_epoch: int, start: int, runs: list[Run]) -> Future:
        code = self._check(key)
        if code:
            return _done(code)
        old = self.states.get(key) or StoredState(state_epoch, leader_epoch)
        if state_epoch < old.state_epoch:
            return _done(ErrorCode.FENCED_STATE_EPOCH)
        if leader_epoch < old.leader_epoch:
            return _done(ErrorCode.FENCED_LEADER_EPOCH)
        start = start if start >= 0 else old.start
        state = self.states[key] = StoredState(state_epoch, leader_epoch, start, merge_runs(old.runs, start, runs))
        return self._store(key, state)

    def delete(self, key: StateKey) -> Future:
        code = self._check(key)
        if code:
            return _done(code)
        if self.states.pop(key, None) is None:
            return _done(ErrorCode.NONE)
        return self._store(key, None)


class StatePersister(Protocol):
    """How a share-partition leader (or the group coordinator) reaches the share coordinator of a key."""

    def initialize(self, key: StateKey, state_epoch: int, start: int) -> Future: ...

    def read(self, key: StateKey, leader_epoch: int) -> Future: ...

    def summary(self, key: StateKey) -> Future: ...

    def write(self, key: StateKey, state_epoch: int, leader_epoch: int, start: int, runs: list[Run]) -> Future: ...

    def delete(self, key: StateKey) -> Future: ...


class LocalPersister:
    """The share coordinator is in this process: calls go straight to it."""

    def __init__(self, coordinator: ShareCoordinator) -> None:
        self.coordinator = coordinator

    def initialize(self, key: StateKey, state_epoch: int, start: int) -> Future:
        return self.coordinator.initialize(key, state_epoch, start)

    def read(self, key: StateKey, leader_epoch: int) -> Future:
        return self.coordinator.read(key, leader_epoch)

    def summary(self, key: StateKey) -> Future:
        return self.coordinator.summary(key)

    def write(self, key: StateKey, state_epoch: int, leader_epoch: int, start: int, runs: list[Run]) -> Future:
        return self.coordinator.write(key, state_epoch, leader_epoch, start, runs)

    def delete(self, key: StateKey) -> Future:
        return self.coordinator.delete(key)
