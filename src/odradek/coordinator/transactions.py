"""TransactionCoordinator: transactional ids, their producer ids and epochs, and the two-phase end of a
transaction (Kafka's TransactionCoordinator).

A transactional id belongs to one partition of `__transaction_state` (Kafka's
`Utils.abs(transactionalId.hashCode()) % partitions`, placement.py; records an older odradek stored under
its old rule elsewhere are read and moved by the load) and is coordinated by that partition's leader: `load_partition` replays the partition when
this broker becomes its leader (the partition's leader epoch becomes the coordinator epoch its markers
carry), `unload_partition` forgets its ids when leadership moves. On a single node every partition is led
here.

Every state change is written to `__transaction_state` (one record per transactional id, the last one
wins; see txn_state.py) and is answered once it is on disk and held by the partition's in-sync replicas.
Ending a transaction:

1. the state becomes PrepareCommit / PrepareAbort (written and replicated: from here the outcome is decided
   and survives any failover);
2. a COMMIT / ABORT marker is written to every partition of the transaction by its leader — here, or by
   WriteTxnMarkers to the leader elsewhere (`MarkerWriter`); the marker on a `__consumer_offsets`
   partition makes the transaction's offsets (TxnOffsetCommit) committed or drops them;
3. the state becomes CompleteCommit / CompleteAbort.

EndTxn answers after step 1 and waits up to `END_TXN_WAIT_S` for steps 2-3 (on a healthy cluster they take
milliseconds, so clients see the transaction complete); until step 3 requests for the id get
CONCURRENT_TRANSACTIONS. Step 2 is retried until every marker is written. A new coordinator that loads a
transaction in Prepare* (its predecessor died between steps 1 and 3) does steps 2 and 3 again: markers are
idempotent (a marker for a producer with no open transaction in a partition changes nothing).

Transactions v2 (KIP-890, EndTxn v5): every commit and abort bumps the epoch when it writes Prepare*, and
the markers carry the bumped epoch, so a write of the ended transaction that arrives late is refused by the
partition; the producer goes on with the new epoch (a new producer id at epoch 0 once the epoch would
overflow: `next_producer_id`). A retry of such an EndTxn (its reply lost) comes with the old epoch and is
answered with the new one. A v2 producer may abort a transaction that has no partitions (it cannot know
whether its first write reached one), which only bumps the epoch. Partitions join a v2 transaction
implicitly: the partition's leader adds them when the first transactional write arrives (Produce v12),
and the group coordinator adds the group's partition (TxnOffsetCommit v5), both with AddPartitionsToTxn.

Fencing: InitProducerId bumps the epoch (a fresh producer id once the epoch would overflow), aborting an
open transaction first (its markers carry the bumped epoch, so the partitions then refuse the old one).
A transaction open longer than its timeout is aborted the same way by `tick`, every
`transaction.abort.timed.out.transaction.cleanup.interval.ms`. A request with an older epoch gets the
"fenced" code its handler passes in (PRODUCER_FENCED or INVALID_PRODUCER_EPOCH, by API version). While a
state change of an id is being written, other requests for it get CONCURRENT_TRANSACTIONS.

Transactional ids idle (Empty / Complete*) for `transactional.id.expiration.ms` are forgotten.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Awaitable, Callable, Iterable, Protocol

from odradek.coordinator.persistence import OFFSETS_TOPIC, OffsetsTopicLog
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

if TYPE_CHECKING:
    from odradek.cluster.partition import Partition

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
MAX_EPOCH = 32767
# How long EndTxn (and InitProducerId, when it aborts an open transaction) waits for the markers before
# answering; the outcome is decided by then, and a client that is answered earlier retries its next request
# on CONCURRENT_TRANSACTIONS.
END_TXN_WAIT_S = 5.0
MARKER_RETRY_S = 0.5
# How long a partition leader's add of a partition to a transaction (transactions v2: a producer's first write
# to the partition in the transaction) waits for another change of the same id to finish rather than answer
# CONCURRENT_TRANSACTIONS: a v2 producer's first writes reach several leaders at once, and each of them adds
# its partition. Kafka's brokers retry such an add (`add.partitions.to.txn.retry.backoff.ms`, up to
# `add.partitions.to.txn.retry.backoff.max.ms`, 100 ms) before the produce is refused with
# NOT_ENOUGH_REPLICAS; a state write here, replicated to the ISR, may take longer than that on a loaded host.
ADD_WAIT_S = 5.0
S = TxnState


def txn_topic_configs() -> dict[str, str]:
    """Topic configs `__transaction_state` is created with (never deleted by retention; snapshotted)."""
    return {"cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1",
            "segment.bytes": str(100 * 1024 * 1024)}


class MarkerWriter(Protocol):
    async def write_markers(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                            partitions: set[tuple[str, int]]) -> set[tuple[str, int]]:
        """Write a COMMIT/ABORT marker to each partition through its leader; returns the partitions that
        could not be written yet (to retry). Partitions that no longer exist count as done."""


class StateWriteError(Exception):
    """The new state could not be written (storage error, or this broker stopped leading the partition)."""


class _BusyIds:
    """Transactional ids with a state write in flight, and what waits for an id to be free again: woken when
    its write ends (and by the end of its completion, `wake`), after which the waiter looks again."""

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self._waiters: dict[str, list[asyncio.Future]] = {}

    def __contains__(self, txn_id: object) -> bool:
        return txn_id in self._ids

    def add(self, txn_id: str) -> None:
        self._ids.add(txn_id)

    def discard(self, txn_id: str) -> None:
        self._ids.discard(txn_id)
        self.wake(txn_id)

    def wake(self, txn_id: str) -> None:
        for waiter in self._waiters.pop(txn_id, ()):
            if not waiter.done():
                waiter.set_result(None)

    def waiter(self, txn_id: str) -> asyncio.Future:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(txn_id, []).append(waiter)
        return waiter


class TransactionCoordinator:
    def __init__(self, config, txn_log: OffsetsTopicLog, allocate_producer_id: Callable[[], Awaitable[int]],
                 markers: MarkerWriter, offsets_partition: Callable[[str], int], clock_ms: Callable[[], int],
                 get_partition: Callable[[int], "Partition | None"] | None = None) -> None:
        self.log = txn_log
        txn_log.owner_of = decode_key  # a stored key's transactional id places it (placement.py)
        txn_log.name = TXN_TOPIC
        self._allocate = allocate_producer_id
        self._markers = markers
        self._offsets_partition = offsets_partition
        self._now = clock_ms
        self._get_partition = get_partition
        self.max_timeout_ms = config.int("transaction.max.timeout.ms")
        self.abort_interval_ms = config.int("transaction.abort.timed.out.transaction.cleanup.interval.ms")
        self.id_expiration_ms = config.int("transactional.id.expiration.ms")
        self.txns: dict[str, TxnMetadata] = {}
        self.loaded: dict[int, int] = {}  # partition -> coordinator epoch (its leader epoch when loaded)
        self._writing = _BusyIds()  # ids with a state write in flight
        self._completions: dict[str, asyncio.Task] = {}
        self._background: set[asyncio.Task] = set()
        self._next_abort_check_ms = 0
        self._next_expiry_check_ms = 0

    def owns(self, txn_id: str) -> bool:
        return self.log.partition_for(txn_id) in self.loaded

    def coordinator_epoch(self, txn_id: str) -> int:
        return self.loaded.get(self.log.partition_for(txn_id), -1)

    # ------------------------------------------------------------------------------------ persistence

    async def _persist(self, m: TxnMetadata) -> None:
        """Write ``m`` and adopt it once it is durable and replicated; raises StateWriteError (the old state
        is kept)."""
        records = [(encode_key(m.transactional_id), encode_value(m))]
        try:
            await asyncio.wrap_future(self.log.append(m.transactional_id, records))
        except Exception as exc:
            log.error("transaction %r: cannot write its state: %s", m.transactional_id, exc)
            raise StateWriteError(str(exc)) from exc
        if self.owns(m.transactional_id):
            self.txns[m.transactional_id] = m

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # ------------------------------------------------------------------------------------ leadership

    def load_partition(self, partition: int) -> None:
        """This broker now leads ``partition``: replay it; complete transactions left in Prepare*; open ones
        keep their start time, so their timeout runs on."""
        replica = self._get_partition(partition) if self._get_partition is not None else None
        self.loaded[partition] = replica.leader_epoch if replica is not None else 0
        latest: dict[str, bytes | None] = {}
        for rec in self.log.replay_for_load(partition):
            if rec.key is None:
                continue
            try:
                txn_id = decode_key(rec.key)
            except Exception:
                txn_id = None
            if txn_id is not None:
                latest[txn_id] = rec.value
        for txn_id, raw in latest.items():
            if raw is None:
                continue
            try:
                self.txns[txn_id] = decode_value(txn_id, raw)
            except Exception:
                log.warning("skipping an unreadable %s record for %r", TXN_TOPIC, txn_id, exc_info=True)
        recovering = [m for txn_id, m in self.txns.items()
                      if m.preparing and self.log.partition_for(txn_id) == partition]
        for m in recovering:
            log.info("transaction %r was %s when its coordinator changed: writing its markers again",
                     m.transactional_id, m.state.kafka_name)
            self._start_completion(m)
        log.log(logging.INFO if latest else logging.DEBUG, "%s-%d: loaded %d transactional ids (%d to complete)",
                TXN_TOPIC, partition,
                 sum(1 for t in latest.values() if t is not None), len(recovering))

    def unload_partition(self, partition: int) -> None:
        self.loaded.pop(partition, None)
        for txn_id in [t for t in self.txns if self.log.partition_for(t) == partition]:
            del self.txns[txn_id]
            task = self._completions.pop(txn_id, None)
            if task is not None:
                task.cancel()
        self.log.forget(partition)

    # ------------------------------------------------------------------------------------ InitProducerId

    async def init_producer_id(self, txn_id: str, timeout_ms: int, producer_id: int, epoch: int,
                               fenced: int) -> tuple[int, int, int]:
        """(error, producer id, epoch) for a transactional producer's InitProducerId."""
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        if txn_id in self._writing:
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        now = self._now()
        current = self.txns.get(txn_id)
        try:
            if current is None:
                self._writing.add(txn_id)
                try:
                    m = TxnMetadata(txn_id, await self._allocate(), 0, timeout_ms, S.EMPTY, last_update_timestamp=now)
                    await self._persist(m)
                finally:
                    self._writing.discard(txn_id)
                return 0, m.producer_id, m.producer_epoch
            if producer_id >= 0:
                retry = (producer_id == current.last_producer_id and epoch == current.last_producer_epoch
                         and current.state == S.EMPTY)
                if retry:  # the reply to our last bump was lost: hand out the same again
                    return 0, current.producer_id, current.producer_epoch
                if producer_id != current.producer_id or epoch != current.producer_epoch:
                    return fenced, -1, -1
            if current.state == S.ONGOING:
                if not await self._end(current, commit=False, fence=True):
                    return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
            if not await self._completed(txn_id):
                return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
            current = self.txns.get(txn_id)
            if current is None or txn_id in self._writing:
                return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
            m = current.copy()
            m.last_producer_id, m.last_producer_epoch = current.producer_id, current.producer_epoch
            self._writing.add(txn_id)
            try:
                if m.producer_epoch >= MAX_EPOCH - 1:
                    m.producer_id, m.producer_epoch = await self._allocate(), 0
                else:
                    m.producer_epoch += 1
                m.timeout_ms = timeout_ms
                m.state = S.EMPTY
                m.partitions.clear()
                m.start_timestamp = -1
                m.last_update_timestamp = now
                await self._persist(m)
            finally:
                self._writing.discard(txn_id)
        except (StateWriteError, OSError) as exc:
            log.error("transaction %r: InitProducerId failed: %s", txn_id, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1
        return 0, m.producer_id, m.producer_epoch

    # ------------------------------------------------------------------------------------ in a transaction

    def check(self, txn_id: str, producer_id: int, epoch: int, fenced: int) -> tuple[int, TxnMetadata | None]:
        """The id's state if the producer may act on it now, else the error to answer."""
        m = self.txns.get(txn_id)
        if m is None or m.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if epoch != m.producer_epoch:
            return fenced, None
        if m.preparing or txn_id in self._writing or txn_id in self._completions:
            return ErrorCode.CONCURRENT_TRANSACTIONS, None
        return 0, m

    async def add_partitions(self, txn_id: str, producer_id: int, epoch: int, partitions: Iterable[tuple[str, int]],
                             fenced: int, wait: bool = False) -> int:
        """Add partitions (existence already checked by the handler) to the transaction. With ``wait`` (the
        add of a partition leader, transactions v2), a change of the id in flight (another leader's add, the
        end of the previous transaction) is waited for, up to ADD_WAIT_S, rather than answered with
        CONCURRENT_TRANSACTIONS."""
        partitions = list(partitions)
        error, m = self.check(txn_id, producer_id, epoch, fenced)
        if error == ErrorCode.CONCURRENT_TRANSACTIONS and wait:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + ADD_WAIT_S
            while error == ErrorCode.CONCURRENT_TRANSACTIONS and loop.time() < deadline:
                try:
                    await asyncio.wait_for(self._writing.waiter(txn_id), deadline - loop.time())
                except asyncio.TimeoutError:
                    break
                error, m = self.check(txn_id, producer_id, epoch, fenced)
        if error:
            return error
        assert m is not None
        new = set(partitions) - m.partitions
        if not new and m.state == S.ONGOING:
            return 0
        updated = m.copy()
        now = self._now()
        if updated.state != S.ONGOING:
            updated.state = S.ONGOING
            updated.start_timestamp = now
            updated.partitions.clear()
        updated.partitions |= new
        updated.last_update_timestamp = now
        self._writing.add(txn_id)
        try:
            await self._persist(updated)
        except StateWriteError:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        finally:
            self._writing.discard(txn_id)
        return 0

    async def add_offsets(self, txn_id: str, producer_id: int, epoch: int, group_id: str, fenced: int) -> int:
        """AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction."""
        return await self.add_partitions(txn_id, producer_id, epoch,
                                         [(OFFSETS_TOPIC, self._offsets_partition(group_id))], fenced)

    def verify(self, txn_id: str, producer_id: int, epoch: int, partitions: list[tuple[str, int]],
               fenced: int) -> dict[tuple[str, int], int]:
        """Whether each partition is in the producer's open transaction (AddPartitionsToTxn verify_only,
        asked by a group coordinator before it writes transactional offsets)."""
        m = self.txns.get(txn_id)
        if m is None or m.producer_id != producer_id:
            return {tp: ErrorCode.INVALID_PRODUCER_ID_MAPPING for tp in partitions}
        if m.producer_epoch != epoch:
            return {tp: fenced for tp in partitions}
        ongoing = m.state == S.ONGOING
        return {tp: 0 if ongoing and tp in m.partitions else ErrorCode.INVALID_TXN_STATE for tp in partitions}

    # ------------------------------------------------------------------------------------ EndTxn

    async def end_txn(self, txn_id: str, producer_id: int, epoch: int, commit: bool, fenced: int,
                      bump: bool = False) -> tuple[int, int, int]:
        """(error, producer id, epoch the producer goes on with) for EndTxn; ``bump``: transactions v2 (v5)."""
        m = self.txns.get(txn_id)
        if m is None or producer_id not in (m.producer_id, m.last_producer_id if bump else m.producer_id):
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, -1, -1
        ending = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        ended = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        if bump and (producer_id, epoch) == (m.last_producer_id, m.last_producer_epoch) \
                and m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            # the retry of an EndTxn that bumped the epoch (or of an abort a timeout did meanwhile)
            if m.state not in (ending, ended):
                return ErrorCode.INVALID_TXN_STATE, -1, -1
            await self._completed(txn_id)
            return (0, *self.txns[txn_id].continued_as) if txn_id in self.txns else (ErrorCode.NOT_COORDINATOR, -1, -1)
        if producer_id != m.producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, -1, -1
        if epoch != m.producer_epoch:
            return fenced, -1, -1
        if m.preparing or txn_id in self._writing or txn_id in self._completions:
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        if m.state == S.ONGOING or (bump and not commit):
            if not await self._end(m, commit, fence=False, bump=bump):
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1
            await self._completed(txn_id)
            after = self.txns.get(txn_id)
            return (0, *after.continued_as) if after is not None else (ErrorCode.NOT_COORDINATOR, -1, -1)
        if m.state == ended and not bump:
            return 0, m.producer_id, m.producer_epoch  # a retry of an EndTxn whose reply was lost
        log.info("transaction %r: EndTxn(%s) in state %s: INVALID_TXN_STATE", txn_id,
                 "commit" if commit else "abort", m.state.name)
        return ErrorCode.INVALID_TXN_STATE, -1, -1

    async def _end(self, current: TxnMetadata, commit: bool, fence: bool, bump: bool = False) -> bool:
        """Write Prepare*, then start completing in the background. ``fence`` bumps the epoch first
        (timeout / InitProducerId), so the producer that held the transaction is refused from now on;
        ``bump`` (transactions v2) does the same for the producer's own commit or abort, which may then also
        end a transaction with no partitions (Empty, Complete*). False: the state could not be written."""
        txn_id = current.transactional_id
        startable = (S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) if bump else (S.ONGOING,)
        if (self.txns.get(txn_id) is not current or current.state not in startable or txn_id in self._writing
                or txn_id in self._completions):
            return False  # something else changed the id since ``current`` was read (a timeout abort raced)
        m = current.copy()
        if current.state != S.ONGOING:
            m.partitions.clear()
        self._writing.add(txn_id)
        try:
            if fence or bump:
                if m.producer_epoch >= MAX_EPOCH:
                    log.warning("transaction %r: epoch exhausted, ending without a bump", txn_id)
                else:
                    m.last_producer_id, m.last_producer_epoch = m.producer_id, m.producer_epoch
                    m.producer_epoch += 1
                if bump and m.producer_epoch >= MAX_EPOCH:
                    # the markers take the last epoch; the producer goes on as a new producer id
                    m.next_producer_id = await self._allocate()
            m.state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            m.last_update_timestamp = self._now()
            await self._persist(m)
        except (StateWriteError, OSError):
            return False
        finally:
            self._writing.discard(txn_id)
        self._start_completion(m)
        return True

    async def _completed(self, txn_id: str) -> bool:
        """Wait (up to END_TXN_WAIT_S) for a running completion of ``txn_id``; whether none is left."""
        task = self._completions.get(txn_id)
        if task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(task), END_TXN_WAIT_S)
            except asyncio.TimeoutError:
                return False
            except asyncio.CancelledError:
                return False
        return txn_id not in self._completions

    def _start_completion(self, m: TxnMetadata) -> None:
        txn_id = m.transactional_id
        if txn_id in self._completions:
            return
        task = self._completions[txn_id] = self._spawn(self._complete(m))

        def finished(_: asyncio.Task) -> None:
            if self._completions.get(txn_id) is task:
                del self._completions[txn_id]
            self._writing.wake(txn_id)

        task.add_done_callback(finished)

    async def _complete(self, m: TxnMetadata) -> None:
        """Write the markers (retrying until every partition has one), then the Complete* state."""
        txn_id = m.transactional_id
        commit = m.state == S.PREPARE_COMMIT
        remaining = set(m.partitions)
        while remaining:
            if not self.owns(txn_id):
                return  # the new coordinator finishes it
            try:
                remaining = await self._markers.write_markers(m.producer_id, m.producer_epoch,
                                                              self.coordinator_epoch(txn_id), commit, remaining)
            except Exception:
                log.exception("transaction %r: writing markers failed; retrying", txn_id)
            if remaining:
                await asyncio.sleep(MARKER_RETRY_S)
        done = m.copy()
        done.state = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        done.partitions.clear()
        if m.next_producer_id != -1:
            done.producer_id, done.producer_epoch, done.next_producer_id = m.next_producer_id, 0, -1
        done.last_update_timestamp = self._now()
        try:
            await self._persist(done)
        except StateWriteError:
            # the markers are in place: a new coordinator, or this one after a restart, only writes them again
            if self.owns(txn_id):
                self.txns[txn_id] = done

    # ------------------------------------------------------------------------------------ timers

    def tick(self, now_ms: int) -> None:
        self.log.resume_moves()
        if now_ms >= self._next_abort_check_ms:
            self._next_abort_check_ms = now_ms + self.abort_interval_ms
            self.abort_timed_out(now_ms)
        if now_ms >= self._next_expiry_check_ms:
            self._next_expiry_check_ms = now_ms + min(self.id_expiration_ms, 3_600_000)
            self._spawn(self._expire_and_compact(now_ms))

    def abort_timed_out(self, now_ms: int) -> int:
        """Abort (with an epoch bump) transactions open past their timeout; returns how many it started."""
        n = 0
        for m in list(self.txns.values()):
            txn_id = m.transactional_id
            if m.preparing and txn_id not in self._completions:
                self._start_completion(m)
            elif (m.state == S.ONGOING and now_ms - m.start_timestamp > m.timeout_ms
                  and txn_id not in self._writing):
                log.info("transaction %r (producer %d epoch %d) timed out after %d ms: aborting",
                         txn_id, m.producer_id, m.producer_epoch, m.timeout_ms)
                self._spawn(self._end(m, commit=False, fence=True))
                n += 1
        return n

    async def _expire_and_compact(self, now_ms: int) -> None:
        try:
            await self.expire_ids(now_ms)
            await self.log.maybe_compact()
        except Exception:
            log.warning("transaction state maintenance did not finish", exc_info=True)

    async def expire_ids(self, now_ms: int) -> int:
        doomed = [m for m in self.txns.values()
                  if m.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                  and now_ms - m.last_update_timestamp >= self.id_expiration_ms
                  and m.transactional_id not in self._writing]
        expired = 0
        for m in doomed:
            txn_id = m.transactional_id
            try:
                await asyncio.wrap_future(self.log.append(txn_id, [(encode_key(txn_id), None)]))
            except Exception:
                continue
            if self.txns.get(txn_id) is m:
                del self.txns[txn_id]
                expired += 1
                log.info("transactional id %r expired", txn_id)
        return expired

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

    def close(self) -> None:
        for task in list(self._background):
            task.cancel()
