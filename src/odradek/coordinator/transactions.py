"""TransactionCoordinator: transactional ids, their producer ids and epochs, and the two-phase end of a
transaction (Kafka's TransactionCoordinator, for a single node).

Every state change is written to `__transaction_state` (one record per transactional id, the last one
wins; see txn_state.py) and fsynced before the caller answers, except the last step of ending one. Ending a
transaction:

1. the state becomes PrepareCommit / PrepareAbort (written, fsynced);
2. a COMMIT / ABORT marker is appended to every data partition of the transaction, and on commit the
   transaction's pending offsets (TxnOffsetCommit) are appended to `__consumer_offsets`;
3. the state becomes CompleteCommit / CompleteAbort (appended).

Steps 2 and 3 are not waited for: their fsyncs are queued on the log flusher, which runs jobs in order, so
the Complete* record is never on disk before the offsets of step 2. Until it is, a restart finds the
transaction in Prepare* and does steps 2 and 3 again, which is why step 1 alone has to be durable.

Step 2 runs inline, so the reply to EndTxn comes after the markers. If it fails (a storage error) the
transaction stays in Prepare* and is retried by `tick`; meanwhile requests for the id get
CONCURRENT_TRANSACTIONS. At `load`, a transaction found in Prepare* is completed again: markers are
idempotent (a marker for a producer with no open transaction in a partition changes nothing).

Fencing: InitProducerId bumps the epoch (a fresh producer id once the epoch would overflow), aborting an
open transaction first (its markers carry the bumped epoch, so the partitions then refuse the old one).
A transaction open longer than its timeout is aborted the same way by `tick`, every
`transaction.abort.timed.out.transaction.cleanup.interval.ms`. A request with an older epoch gets the
"fenced" code its handler passes in (PRODUCER_FENCED or INVALID_PRODUCER_EPOCH, by API version).

Transactional ids idle (Empty / Complete*) for `transactional.id.expiration.ms` are forgotten.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable

from odradek.coordinator.persistence import OFFSETS_TOPIC, OffsetsTopicLog, OffsetValue
from odradek.coordinator.txn_state import (
    STATE_BY_NAME,
    TxnMetadata,
    TxnState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from odradek.protocol.errors import ErrorCode
from odradek.records.batch import validate_v2
from odradek.records.codec import ABORT, COMMIT, build_control_batch
from odradek.storage.log import PartitionLog
from odradek.storage.producer_state import InvalidProducerEpochError

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
COORDINATOR_EPOCH = 0  # a single node never moves the coordinator
MAX_EPOCH = 32767
S = TxnState


def txn_topic_configs() -> dict[str, str]:
    """Topic configs `__transaction_state` is created with (never deleted by retention; snapshotted)."""
    return {"cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1",
            "segment.bytes": str(100 * 1024 * 1024)}


class GroupOffsets:
    """What the transaction coordinator needs of the group coordinator: check a TxnOffsetCommit's member,
    and make committed offsets visible. ``groups`` is `coordinator.service.Coordinator` (duck-typed)."""

    def __init__(self, groups) -> None:
        self._c = groups

    def check_member(self, group_id: str, generation: int, member_id: str, instance: str | None) -> int:
        """Kafka's rule for transactional offset commits (it is laxer than OffsetCommit's)."""
        group = self._c.groups.groups.get(group_id)
        if group is None:
            return 0
        if group.state.name == "DEAD":
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if instance is not None and group.static_members.get(instance, member_id) != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id and member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation >= 0 and generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return 0

    def commit(self, group_id: str, offsets: list[tuple[tuple[str, int], OffsetValue]]) -> None:
        """Append committed offsets to `__consumer_offsets` (their fsync queued) and make them visible."""
        from odradek.coordinator.persistence import encode_offset_value, offset_key

        self._c.log.append(group_id, [(offset_key(group_id, t, p), encode_offset_value(v)) for (t, p), v in offsets])
        self._c.groups.get_or_create(group_id)
        for tp, v in offsets:
            self._c.store.put(group_id, tp, v)


class TransactionCoordinator:
    def __init__(self, config, txn_log: OffsetsTopicLog, allocate_producer_id: Callable[[], int],
                 partition_log: Callable[[str, int], PartitionLog | None],
                 notify_append: Callable[[str, int], None], offsets_partition: Callable[[str], int],
                 group_offsets: GroupOffsets | None, clock_ms: Callable[[], int]) -> None:
        self.log = txn_log
        self._allocate = allocate_producer_id
        self._partition_log = partition_log
        self._notify = notify_append
        self._offsets_partition = offsets_partition
        self.group_offsets = group_offsets
        self._now = clock_ms
        self.max_timeout_ms = config.int("transaction.max.timeout.ms")
        self.abort_interval_ms = config.int("transaction.abort.timed.out.transaction.cleanup.interval.ms")
        self.id_expiration_ms = config.int("transactional.id.expiration.ms")
        self.metadata_max_bytes = config.int("offset.metadata.max.bytes")
        self.txns: dict[str, TxnMetadata] = {}
        self._next_abort_check_ms = 0
        self._next_expiry_check_ms = 0

    # ------------------------------------------------------------------------------------ persistence

    def _persist(self, m: TxnMetadata, *, wait: bool = True) -> None:
        """Write ``m`` and adopt it; raises on a storage error (the old state is kept). ``wait=False`` only
        queues the fsync, for a state that a restart can rebuild (Complete*: see the module docstring)."""
        records = [(encode_key(m.transactional_id), encode_value(m))]
        if wait:
            self.log.write(m.transactional_id, records)
        else:
            self.log.append(m.transactional_id, records)
        self.txns[m.transactional_id] = m

    def load(self) -> None:
        """Replay `__transaction_state`; complete transactions left in Prepare*; open ones keep their start
        time, so their timeout runs on."""
        latest: dict[str, bytes | None] = {}
        for raw_key, raw_value in self.log.replay():
            try:
                txn_id = decode_key(raw_key)
            except Exception:
                txn_id = None
            if txn_id is not None:
                latest[txn_id] = raw_value
        for txn_id, raw in latest.items():
            if raw is None:
                continue
            try:
                self.txns[txn_id] = decode_value(txn_id, raw)
            except Exception:
                log.warning("skipping an unreadable %s record for %r", TXN_TOPIC, txn_id, exc_info=True)
        recovering = [m for m in self.txns.values() if m.preparing]
        for m in recovering:
            log.info("transaction %r was %s at shutdown: writing its markers again", m.transactional_id,
                     m.state.kafka_name)
            self._complete(m)
        log.info("loaded %d transactional ids from %s (%d completed at load, %d open)", len(self.txns), TXN_TOPIC,
                 len(recovering), sum(1 for m in self.txns.values() if m.state == S.ONGOING))
        self.log.maybe_compact()

    # ------------------------------------------------------------------------------------ InitProducerId

    def init_producer_id(self, txn_id: str, timeout_ms: int, producer_id: int, epoch: int,
                         fenced: int) -> tuple[int, int, int]:
        """(error, producer id, epoch) for a transactional producer's InitProducerId."""
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        now = self._now()
        current = self.txns.get(txn_id)
        try:
            if current is None:
                m = TxnMetadata(txn_id, self._allocate(), 0, timeout_ms, S.EMPTY, last_update_timestamp=now)
                self._persist(m)
                return 0, m.producer_id, m.producer_epoch
            if producer_id >= 0:
                retry = (producer_id == current.last_producer_id and epoch == current.last_producer_epoch
                         and current.state == S.EMPTY)
                if retry:  # the reply to our last bump was lost: hand out the same again
                    return 0, current.producer_id, current.producer_epoch
                if producer_id != current.producer_id or epoch != current.producer_epoch:
                    return fenced, -1, -1
            if current.preparing and not self._complete(current):
                return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
            current = self.txns[txn_id]
            if current.state == S.ONGOING:
                if not self._end(current, commit=False, fence=True):
                    return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
                current = self.txns[txn_id]
            m = current.copy()
            m.last_producer_id, m.last_producer_epoch = current.producer_id, current.producer_epoch
            if m.producer_epoch >= MAX_EPOCH - 1:
                m.producer_id, m.producer_epoch = self._allocate(), 0
            else:
                m.producer_epoch += 1
            m.timeout_ms = timeout_ms
            m.state = S.EMPTY
            m.partitions.clear()
            m.pending_offsets.clear()
            m.start_timestamp = -1
            m.last_update_timestamp = now
            self._persist(m)
        except OSError as exc:
            log.error("transaction %r: cannot write its state: %s", txn_id, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1
        return 0, m.producer_id, m.producer_epoch

    # ------------------------------------------------------------------------------------ in a transaction

    def _check(self, txn_id: str, producer_id: int, epoch: int, fenced: int) -> tuple[int, TxnMetadata | None]:
        m = self.txns.get(txn_id)
        if m is None or m.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if epoch != m.producer_epoch:
            return fenced, None
        if m.preparing and not self._complete(m):
            return ErrorCode.CONCURRENT_TRANSACTIONS, None
        return 0, self.txns[txn_id]

    def add_partitions(self, txn_id: str, producer_id: int, epoch: int, partitions: Iterable[tuple[str, int]],
                       fenced: int) -> int:
        """Add data partitions (existence already checked by the handler) to the transaction."""
        error, m = self._check(txn_id, producer_id, epoch, fenced)
        if error:
            return error
        assert m is not None
        new = set(partitions) - m.partitions
        if not new and m.state == S.ONGOING:
            return 0
        return self._begin_or_extend(m, new)

    def add_offsets(self, txn_id: str, producer_id: int, epoch: int, group_id: str, fenced: int) -> int:
        """AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction."""
        return self.add_partitions(txn_id, producer_id, epoch, [(OFFSETS_TOPIC, self._offsets_partition(group_id))],
                                   fenced)

    def _begin_or_extend(self, current: TxnMetadata, new: set[tuple[str, int]]) -> int:
        m = current.copy()
        now = self._now()
        if m.state != S.ONGOING:
            m.state = S.ONGOING
            m.start_timestamp = now
            m.partitions.clear()
            m.pending_offsets.clear()
        m.partitions |= new
        m.last_update_timestamp = now
        try:
            self._persist(m)
        except OSError as exc:
            log.error("transaction %r: cannot write its state: %s", m.transactional_id, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return 0

    def txn_offset_commit(self, txn_id: str, group_id: str, producer_id: int, epoch: int, generation: int,
                          member_id: str, instance: str | None, offsets: list[tuple[str, int, OffsetValue]],
                          partition_exists: Callable[[str, int], bool]) -> dict[tuple[str, int], int]:
        """Stage offsets in the transaction; they become visible when it commits. Error per partition."""
        keys = [(t, p) for t, p, _ in offsets]
        m = self.txns.get(txn_id)
        error = 0
        if not group_id:
            error = ErrorCode.INVALID_GROUP_ID
        elif m is None or m.producer_id != producer_id:
            error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        elif epoch != m.producer_epoch:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        elif m.preparing:
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        elif m.state != S.ONGOING or (OFFSETS_TOPIC, self._offsets_partition(group_id)) not in m.partitions:
            error = ErrorCode.INVALID_TXN_STATE
        elif self.group_offsets is not None:
            error = self.group_offsets.check_member(group_id, generation, member_id, instance)
        if error:
            return {k: error for k in keys}
        assert m is not None
        result: dict[tuple[str, int], int] = {}
        staged = m.copy()
        now = self._now()
        for topic, partition, value in offsets:
            if not partition_exists(topic, partition):
                result[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif len(value.metadata.encode()) > self.metadata_max_bytes:
                result[(topic, partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                if value.commit_timestamp < 0:
                    value.commit_timestamp = now
                staged.pending_offsets[(group_id, topic, partition)] = value
                result[(topic, partition)] = 0
        if staged.pending_offsets != m.pending_offsets:
            staged.last_update_timestamp = now
            try:
                self._persist(staged)
            except OSError as exc:
                log.error("transaction %r: cannot write its offsets: %s", txn_id, exc)
                return {k: ErrorCode.COORDINATOR_NOT_AVAILABLE for k in keys}
        return result

    def has_pending_offset(self, group_id: str, topic: str, partition: int) -> bool:
        """A transaction holds an uncommitted offset for this group partition (OffsetFetch require_stable)."""
        key = (group_id, topic, partition)
        return any(key in m.pending_offsets for m in self.txns.values()
                   if m.state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT))

    # ------------------------------------------------------------------------------------ EndTxn

    def end_txn(self, txn_id: str, producer_id: int, epoch: int, commit: bool, fenced: int) -> int:
        m = self.txns.get(txn_id)
        if m is None or m.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if epoch != m.producer_epoch:
            return fenced
        if m.preparing and not self._complete(m):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        m = self.txns[txn_id]
        if m.state == S.ONGOING:
            return 0 if self._end(m, commit, fence=False) else ErrorCode.COORDINATOR_NOT_AVAILABLE
        if m.state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
            return 0  # a retry of an EndTxn whose reply was lost
        return ErrorCode.INVALID_TXN_STATE

    def _end(self, current: TxnMetadata, commit: bool, fence: bool) -> bool:
        """Prepare (written), then complete. ``fence`` bumps the epoch first (timeout / InitProducerId), so
        the producer that held the transaction is refused from now on. False: the state could not be
        written, or the markers could not (then it stays in Prepare* and ``tick`` retries)."""
        m = current.copy()
        if fence:
            if m.producer_epoch >= MAX_EPOCH:
                log.warning("transaction %r: epoch exhausted, aborting without a bump", m.transactional_id)
            else:
                m.last_producer_id, m.last_producer_epoch = m.producer_id, m.producer_epoch
                m.producer_epoch += 1
        m.state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        m.last_update_timestamp = self._now()
        try:
            self._persist(m)
        except OSError as exc:
            log.error("transaction %r: cannot write its state: %s", m.transactional_id, exc)
            return False
        return self._complete(m)

    def _complete(self, m: TxnMetadata) -> bool:
        """Write the markers (and, on commit, the pending offsets), then the Complete* state."""
        commit = m.state == S.PREPARE_COMMIT
        now = self._now()
        try:
            self._write_markers(m, commit, now)
            if commit and self.group_offsets is not None:
                by_group: dict[str, list[tuple[tuple[str, int], OffsetValue]]] = {}
                for (group, topic, partition), value in m.pending_offsets.items():
                    by_group.setdefault(group, []).append(((topic, partition), value))
                for group, offsets in by_group.items():
                    self.group_offsets.commit(group, offsets)
        except Exception:
            log.exception("transaction %r: could not complete its %s; will retry", m.transactional_id,
                          "commit" if commit else "abort")
            return False
        done = m.copy()
        done.state = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        done.partitions.clear()
        done.pending_offsets.clear()
        done.last_update_timestamp = now
        try:
            self._persist(done, wait=False)
        except OSError as exc:
            # markers are in place; a restart would only write them again
            log.error("transaction %r: cannot write its completion: %s", m.transactional_id, exc)
            self.txns[m.transactional_id] = done
        return True

    def _write_markers(self, m: TxnMetadata, commit: bool, now: int) -> None:
        marker = COMMIT if commit else ABORT
        for topic, partition in sorted(m.partitions):
            if topic == OFFSETS_TOPIC:
                continue  # offsets are pending in the transaction record, not in the log
            plog = self._partition_log(topic, partition)
            if plog is None:
                log.warning("transaction %r: partition %s-%d is gone; no marker", m.transactional_id, topic,
                            partition)
                continue
            buf = bytearray(build_control_batch(marker, m.producer_id, m.producer_epoch, COORDINATOR_EPOCH, now))
            header = validate_v2(buf)[0][1]
            try:
                plog.append_marker(buf, header, not commit, COORDINATOR_EPOCH)
            except InvalidProducerEpochError as exc:
                log.warning("transaction %r: marker refused by %s-%d: %s", m.transactional_id, topic, partition, exc)
                continue
            self._notify(topic, partition)

    # ------------------------------------------------------------------------------------ timers

    def tick(self, now_ms: int) -> None:
        if now_ms >= self._next_abort_check_ms:
            self._next_abort_check_ms = now_ms + self.abort_interval_ms
            self.abort_timed_out(now_ms)
        if now_ms >= self._next_expiry_check_ms:
            self._next_expiry_check_ms = now_ms + min(self.id_expiration_ms, 3_600_000)
            self.expire_ids(now_ms)
            self.log.maybe_compact()

    def abort_timed_out(self, now_ms: int) -> int:
        """Abort (with an epoch bump) transactions open past their timeout; retry stuck completions."""
        n = 0
        for m in list(self.txns.values()):
            if m.preparing:
                self._complete(m)
            elif m.state == S.ONGOING and now_ms - m.start_timestamp > m.timeout_ms:
                log.info("transaction %r (producer %d epoch %d) timed out after %d ms: aborting",
                         m.transactional_id, m.producer_id, m.producer_epoch, m.timeout_ms)
                if self._end(m, commit=False, fence=True):
                    n += 1
        return n

    def expire_ids(self, now_ms: int) -> int:
        doomed = [m for m in self.txns.values()
                  if m.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                  and now_ms - m.last_update_timestamp >= self.id_expiration_ms]
        for m in doomed:
            try:
                self.log.write(m.transactional_id, [(encode_key(m.transactional_id), None)])
            except OSError:
                continue
            del self.txns[m.transactional_id]
            log.info("transactional id %r expired", m.transactional_id)
        return len(doomed)

    # ------------------------------------------------------------------------------------ describe / list

    def describe(self, txn_id: str) -> TxnMetadata | None:
        return self.txns.get(txn_id)

    def list(self, states: list[str], producer_ids: list[int], min_duration_ms: int = -1
             ) -> tuple[list[TxnMetadata], list[str]]:
        """Transactions matching every filter given, and the state names that are unknown."""
        unknown = [s for s in states if s not in STATE_BY_NAME]
        wanted = {STATE_BY_NAME[s] for s in states if s in STATE_BY_NAME}
        if states and not wanted:
            return [], unknown
        pids = set(producer_ids)
        now = self._now()
        out = []
        for m in self.txns.values():
            if wanted and m.state not in wanted:
                continue
            if pids and m.producer_id not in pids:
                continue
            if min_duration_ms >= 0 and (m.state != S.ONGOING or now - m.start_timestamp < min_duration_ms):
                continue
            out.append(m)
        return out, unknown
