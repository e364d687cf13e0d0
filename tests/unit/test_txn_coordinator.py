"""TransactionCoordinator state machine on real partitions led by one broker: commit, abort, fencing, timeouts,
transactional offsets (staged by the group Coordinator, completed by the marker on `__consumer_offsets`),
marker retries, partition load/unload, and recovery from `__transaction_state`."""

from __future__ import annotations

import asyncio
import struct
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Iterable, NamedTuple

import pytest

from coordinator_support import LOCAL_ID, Node, eventually, key_on, offsets_coordinator, run
from odradek.broker.txn_markers import TxnMarkerChannel
from odradek.config import BrokerConfig
from odradek.coordinator import OFFSETS_TOPIC, Coordinator
from odradek.coordinator import transactions
from odradek.coordinator.persistence import OffsetsTopicLog, OffsetValue
from odradek.cluster.producer_ids import ProducerIdManager
from odradek.coordinator.timers import FakeScheduler
from odradek.coordinator.transactions import TXN_TOPIC, TransactionCoordinator
from odradek.coordinator.txn_state import TxnMetadata, TxnState, decode_value, encode_value
from odradek.protocol.errors import ErrorCode
from odradek.records.batch import validate_v2
from odradek.records.codec import build_batch
from odradek.storage import PartitionLog

TS = 1_700_000_000_000
FENCED = ErrorCode.PRODUCER_FENCED
S = TxnState
DATA = ("data", 0)
OFFSETS = (OFFSETS_TOPIC, 0)


class MarkerCall(NamedTuple):
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: frozenset


class Markers:
    """The MarkerWriter of a broker that leads every partition of the test: `TxnMarkerChannel`, which writes
    each marker here (`write_markers_here`: appended to the Node's partition, and on `__consumer_offsets`
    handed to the group Coordinator). Records every call; while `gate` is a cleared Event, calls wait for
    it; `failures` makes the next calls fail: "raise" (an exception) or "unreachable" (every partition comes
    back to retry)."""

    node_id = LOCAL_ID

    def __init__(self, env: "Env") -> None:
        self.env = env
        self.channel = TxnMarkerChannel(self)  # type: ignore[arg-type]
        self.calls: list[MarkerCall] = []
        self.failures: list[str] = []
        self.gate: asyncio.Event | None = None

    # -- what TxnMarkerChannel and write_markers_here read from their broker
    @property
    def metadata(self) -> "Markers":
        return self

    @property
    def replicas(self) -> Node:
        return self.env.node

    @property
    def coordinator(self) -> Coordinator:
        return self.env.groups

    def partition(self, topic: str, index: int) -> SimpleNamespace | None:
        return SimpleNamespace(leader=LOCAL_ID) if (topic, index) in self.env.node.partitions else None

    # -- MarkerWriter
    async def write_markers(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                            partitions: set[tuple[str, int]]) -> set[tuple[str, int]]:
        self.calls.append(MarkerCall(producer_id, producer_epoch, coordinator_epoch, commit, frozenset(partitions)))
        if self.gate is not None:
            await self.gate.wait()
        if self.failures:
            if self.failures.pop(0) == "raise":
                raise OSError("the marker channel broke")
            return set(partitions)
        return await self.channel.write_markers(producer_id, producer_epoch, coordinator_epoch, commit, partitions)


class Env:
    """One broker leading `data-0`, `__consumer_offsets-0` (with its group Coordinator) and the
    `__transaction_state` partitions (the state log's flusher may be the test's)."""

    def __init__(self, tmp: Path, state_flusher=None, txn_partitions: int = 1) -> None:
        self.tmp = tmp
        self.now = TS
        self.node = Node(tmp, clock=self.clock)
        self.node.lead(*DATA)
        self.txn_partitions = txn_partitions
        for index in range(txn_partitions):
            self.node.lead(TXN_TOPIC, index, flusher=state_flusher)
        self.groups = self._group_coordinator()
        self.producer_ids = ProducerIdManager(tmp)
        self.markers = Markers(self)
        self.coordinators: list[TransactionCoordinator] = []

    def clock(self) -> int:
        return self.now

    @property
    def data(self) -> PartitionLog:
        return self.node.log(*DATA)

    def _group_coordinator(self) -> Coordinator:
        return offsets_coordinator(self.node, 1, lambda t, p: (t, p) == DATA, FakeScheduler(TS))

    def coordinator(self, load: Iterable[int] | None = None) -> TransactionCoordinator:
        """A transaction coordinator that loads ``load`` (every partition of `__transaction_state` if None)."""
        config = BrokerConfig({"transaction.max.timeout.ms": "60000",
                               "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
        replicas = self.node.replicas_of(TXN_TOPIC)
        c = TransactionCoordinator(config, OffsetsTopicLog(self.txn_partitions, replicas, self.clock),
                                   self.producer_ids.allocate, self.markers,
                                   lambda group: self.groups.partition_of(group), self.clock, replicas)
        for index in range(self.txn_partitions) if load is None else load:
            c.load_partition(index)
        self.coordinators.append(c)
        return c

    def restart(self) -> TransactionCoordinator:
        """The broker restarts: its coordinators stop, every log is recovered from disk and led in the next
        leader epoch, and new coordinators replay their partitions."""
        for c in self.coordinators:
            c.close()
        self.coordinators.clear()
        self.groups.close()
        self.node.restart()
        self.groups = self._group_coordinator()
        self.producer_ids = ProducerIdManager(self.tmp)
        return self.coordinator()

    async def open_transaction(self, c: TransactionCoordinator, timeout_ms: int, txn_id: str = "t",
                               offset: int | None = None) -> tuple[int, int]:
        """``txn_id`` gets a producer id, adds data-0 and writes one record to it; with ``offset``, the
        transaction also commits that offset of data-0 for group "g" (AddOffsetsToTxn, TxnOffsetCommit)."""
        _, pid, epoch = await c.init_producer_id(txn_id, timeout_ms, -1, -1, FENCED)
        assert await c.add_partitions(txn_id, pid, epoch, [DATA], FENCED) == 0
        self.produce(pid, epoch, 0)
        if offset is not None:
            assert await c.add_offsets(txn_id, pid, epoch, "g", FENCED) == 0
            assert await self.stage_offsets(c, pid, epoch, offset) == 0
        return pid, epoch

    def produce(self, pid: int, epoch: int, seq: int) -> None:
        buf = bytearray(build_batch([(None, b"v", None, TS)], producer_id=pid, producer_epoch=epoch,
                                    base_sequence=seq, transactional=True))
        self.node.partitions[DATA].append_as_leader(buf, validate_v2(buf))

    async def stage_offsets(self, c: TransactionCoordinator, pid: int, epoch: int, offset: int) -> int:
        """TxnOffsetCommit of group "g" for data-0, as its handler does it: the transaction must hold the
        group's partition (verify), then the group coordinator writes the offset."""
        error = c.verify("t", pid, epoch, [OFFSETS], ErrorCode.INVALID_PRODUCER_EPOCH)[OFFSETS]
        return error or await self.groups.commit_transactional("g", pid, epoch, [(*DATA, OffsetValue(offset))])

    def committed(self) -> dict[tuple[str, int], int]:
        """Group "g"'s committed offsets."""
        return {(t, p): v.offset for t, parts in self.groups.offsets.fetch("g", None) for p, v in parts}

    def reload_offsets(self) -> None:
        """Leadership of `__consumer_offsets-0` goes and comes back: the group coordinator replays it."""
        self.groups.unload_partition(0)
        assert not self.groups.has_pending_offset("g", *DATA) and self.committed() == {}
        self.groups.load_partition(0)


async def completed(c: TransactionCoordinator, txn_id: str, state: TxnState) -> None:
    """Wait until the background completion of ``txn_id`` is over: it is in ``state`` and its producer may
    act on it again (no CONCURRENT_TRANSACTIONS)."""

    def done() -> bool:
        m = c.describe(txn_id)
        return m is not None and m.state == state and c.check(txn_id, m.producer_id, m.producer_epoch, FENCED)[0] == 0

    await eventually(done)


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


@pytest.fixture
def short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """EndTxn waits 10 ms for the markers; failed markers are retried after 1 ms."""
    monkeypatch.setattr(transactions, "END_TXN_WAIT_S", 0.01)
    monkeypatch.setattr(transactions, "MARKER_RETRY_S", 0.001)


@run
async def test_commit_writes_markers_and_offsets(env: Env) -> None:
    c = env.coordinator()
    assert (await c.init_producer_id("t", 0, -1, -1, FENCED))[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert (await c.init_producer_id("t", 60001, -1, -1, FENCED))[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    err, pid, epoch = await c.init_producer_id("t", 10000, -1, -1, FENCED)
    assert (err, epoch) == (0, 0)
    assert await c.add_partitions("t", pid, epoch, [DATA], FENCED) == 0
    env.produce(pid, epoch, 0)
    assert env.data.last_stable_offset == 0
    assert await env.stage_offsets(c, pid, epoch, 5) == ErrorCode.INVALID_TXN_STATE  # before AddOffsetsToTxn
    assert await c.add_offsets("t", pid, epoch, "g", FENCED) == 0
    assert c.describe("t").partitions == {DATA, OFFSETS}
    assert await env.stage_offsets(c, pid, epoch, 5) == 0
    assert env.groups.has_pending_offset("g", *DATA) and env.committed() == {}
    env.reload_offsets()  # pending offsets stay pending: their marker has not come
    assert env.groups.has_pending_offset("g", *DATA) and env.committed() == {}
    env.node.notified.clear()
    assert (await c.end_txn("t", pid, epoch, True, FENCED))[0] == 0
    assert env.markers.calls == [MarkerCall(pid, epoch, 0, True, frozenset({DATA, OFFSETS}))]
    assert env.data.last_stable_offset == env.data.high_watermark == 2
    assert DATA in env.node.notified  # the marker wakes the partition's fetches
    assert env.committed() == {DATA: 5} and not env.groups.has_pending_offset("g", *DATA)
    m = c.describe("t")
    assert m.state == S.COMPLETE_COMMIT and not m.partitions
    assert (await c.end_txn("t", pid, epoch, True, FENCED))[0] == 0  # retry
    assert (await c.end_txn("t", pid, epoch, False, FENCED))[0] == ErrorCode.INVALID_TXN_STATE
    assert (await c.end_txn("t", pid + 1, epoch, True, FENCED))[0] == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert len(env.markers.calls) == 1
    env.reload_offsets()  # the log says the same: the COMMIT marker made the offset committed
    assert env.committed() == {DATA: 5} and not env.groups.has_pending_offset("g", *DATA)


@run
async def test_abort_drops_the_staged_offsets(env: Env) -> None:
    c = env.coordinator()
    pid, epoch = await env.open_transaction(c, 10000, offset=5)
    assert (await c.end_txn("t", pid, epoch, False, FENCED))[0] == 0
    assert env.markers.calls == [MarkerCall(pid, epoch, 0, False, frozenset({DATA, OFFSETS}))]
    assert c.describe("t").state == S.COMPLETE_ABORT
    assert env.data.last_stable_offset == env.data.high_watermark == 2
    assert [t.producer_id for t in env.data.aborted_transactions(0, 100)] == [pid]
    assert env.committed() == {} and not env.groups.has_pending_offset("g", *DATA)
    env.reload_offsets()
    assert env.committed() == {} and not env.groups.has_pending_offset("g", *DATA)


@run
async def test_verify_answers_whether_a_partition_is_in_the_open_transaction(env: Env) -> None:
    """AddPartitionsToTxn verify_only, as a group coordinator asks it before it writes transactional offsets."""
    c = env.coordinator()
    _, pid, epoch = await c.init_producer_id("t", 10000, -1, -1, FENCED)
    stale = ErrorCode.INVALID_PRODUCER_EPOCH
    assert c.verify("t", pid, epoch, [OFFSETS], stale) == {OFFSETS: ErrorCode.INVALID_TXN_STATE}
    assert await c.add_offsets("t", pid, epoch, "g", FENCED) == 0
    assert c.verify("t", pid, epoch, [OFFSETS, DATA], stale) == {OFFSETS: 0, DATA: ErrorCode.INVALID_TXN_STATE}
    assert c.verify("t", pid, epoch + 1, [OFFSETS], stale) == {OFFSETS: stale}
    assert c.verify("t", pid + 1, epoch, [OFFSETS], stale) == {OFFSETS: ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert c.verify("other", pid, epoch, [OFFSETS], stale) == {OFFSETS: ErrorCode.INVALID_PRODUCER_ID_MAPPING}


@run
async def test_timeout_aborts_and_fences(env: Env) -> None:
    c = env.coordinator()
    pid, epoch = await env.open_transaction(c, 1000, offset=5)
    env.now += 500
    c.tick(env.now)
    await asyncio.sleep(0)
    assert c.describe("t").state == S.ONGOING and env.markers.calls == []
    env.now += 600
    c.tick(env.now)  # the abort runs in the background
    await completed(c, "t", S.COMPLETE_ABORT)
    assert c.describe("t").producer_epoch == 1
    assert env.markers.calls == [MarkerCall(pid, 1, 0, False, frozenset({DATA, OFFSETS}))]
    assert env.data.last_stable_offset == env.data.high_watermark
    assert [t.producer_id for t in env.data.aborted_transactions(0, 100)] == [pid]
    assert env.committed() == {} and not env.groups.has_pending_offset("g", *DATA)
    assert (await c.end_txn("t", pid, epoch, True, FENCED))[0] == FENCED
    assert await c.add_partitions("t", pid, epoch, [DATA], ErrorCode.INVALID_PRODUCER_EPOCH) == \
        ErrorCode.INVALID_PRODUCER_EPOCH
    # the zombie cannot stage offsets either: the marker fenced its epoch in __consumer_offsets
    assert await env.groups.commit_transactional("g", pid, epoch, [(*DATA, OffsetValue(6))]) == \
        ErrorCode.INVALID_PRODUCER_EPOCH
    assert await c.init_producer_id("t", 1000, -1, -1, FENCED) == (0, pid, 2)


@run
async def test_init_aborts_the_open_transaction_of_the_previous_epoch(env: Env) -> None:
    c = env.coordinator()
    _, pid, _ = await c.init_producer_id("t", 10000, -1, -1, FENCED)
    assert await c.add_partitions("t", pid, 0, [DATA], FENCED) == 0
    env.produce(pid, 0, 0)
    assert await c.init_producer_id("t", 10000, -1, -1, FENCED) == (0, pid, 2)  # abort at epoch 1, then bump
    assert env.markers.calls == [MarkerCall(pid, 1, 0, False, frozenset({DATA}))]
    assert env.data.last_stable_offset == env.data.high_watermark
    assert len(env.data.aborted_transactions(0, 100)) == 1
    m = c.describe("t")
    assert (m.state, m.producer_epoch, m.last_producer_epoch, m.partitions) == (S.EMPTY, 2, 1, set())


@run
async def test_markers_are_retried_until_written(env: Env, short_waits: None) -> None:
    """Marker writes that fail (an error, or partitions that cannot be reached) are retried in the background;
    EndTxn answers once the outcome is durable and it has waited END_TXN_WAIT_S, and until the transaction
    is complete every request for it gets CONCURRENT_TRANSACTIONS."""
    c = env.coordinator()
    pid, epoch = await env.open_transaction(c, 10000, offset=5)
    env.markers.gate = asyncio.Event()
    env.markers.failures = ["raise", "unreachable"]
    assert (await c.end_txn("t", pid, epoch, True, FENCED))[0] == 0  # decided (PrepareCommit is durable)
    assert c.describe("t").state == S.PREPARE_COMMIT and len(env.markers.calls) == 1
    assert [m.transactional_id for m in c.list(["PrepareCommit"], [])[0]] == ["t"]
    assert await c.add_partitions("t", pid, epoch, [DATA], FENCED) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert await c.add_offsets("t", pid, epoch, "g", FENCED) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert (await c.end_txn("t", pid, epoch, True, FENCED))[0] == ErrorCode.CONCURRENT_TRANSACTIONS
    assert await c.init_producer_id("t", 10000, pid, epoch, FENCED) == (ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1)
    assert env.data.last_stable_offset == 0 and env.committed() == {}
    env.markers.gate.set()
    await completed(c, "t", S.COMPLETE_COMMIT)
    assert env.markers.calls == [MarkerCall(pid, epoch, 0, True, frozenset({DATA, OFFSETS}))] * 3
    assert env.data.log_end_offset == 2, "one record and one marker: failed attempts wrote nothing"
    assert env.data.last_stable_offset == env.data.high_watermark == 2
    assert env.committed() == {DATA: 5}
    assert (await c.end_txn("t", pid, epoch, True, FENCED))[0] == 0


@run
async def test_prepared_transaction_is_completed_at_load(env: Env, short_waits: None) -> None:
    c = env.coordinator()
    pid, epoch = await env.open_transaction(c, 10000)
    env.markers.gate = asyncio.Event()  # no marker gets through before the restart
    assert (await c.end_txn("t", pid, epoch, True, FENCED))[0] == 0
    assert c.describe("t").state == S.PREPARE_COMMIT
    assert await c.add_partitions("t", pid, epoch, [DATA], FENCED) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert env.data.last_stable_offset == 0
    env.markers.gate = None
    fresh = env.restart()  # replays __transaction_state and finishes the commit, in leader epoch 1
    await completed(fresh, "t", S.COMPLETE_COMMIT)
    assert env.markers.calls[1:] == [MarkerCall(pid, epoch, 1, True, frozenset({DATA}))]
    assert env.data.last_stable_offset == env.data.high_watermark == 2
    assert env.data.aborted_transactions(0, 100) == []


@run
async def test_unloading_a_partition_forgets_its_ids_and_the_new_leader_completes(tmp_path: Path,
                                                                                  short_waits: None) -> None:
    """Leadership of a `__transaction_state` partition moves: the old coordinator forgets its ids (`owns`
    says no) and stops writing their markers; the new leader, in a new coordinator epoch, finishes the
    transaction it finds in PrepareCommit. Ids of other partitions are not touched."""
    env = Env(tmp_path, txn_partitions=2)
    moved, staying = key_on(0, 2, "moved-"), key_on(1, 2, "staying-")
    c = env.coordinator()
    assert c.owns(moved) and c.owns(staying) and c.coordinator_epoch(moved) == 0
    pid, epoch = await env.open_transaction(c, 10000, moved)
    await c.init_producer_id(staying, 10000, -1, -1, FENCED)
    env.markers.gate = asyncio.Event()
    assert (await c.end_txn(moved, pid, epoch, True, FENCED))[0] == 0
    assert c.describe(moved).state == S.PREPARE_COMMIT and len(env.markers.calls) == 1
    c.unload_partition(0)
    assert not c.owns(moved) and c.describe(moved) is None and c.coordinator_epoch(moved) == -1
    assert c.owns(staying) and c.describe(staying).state == S.EMPTY
    assert (await c.end_txn(moved, pid, epoch, True, FENCED))[0] == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    env.node.partitions[(TXN_TOPIC, 0)].make_leader(leader_epoch=1, isr=[LOCAL_ID], replicas=[LOCAL_ID],
                                                     zk_version=1, now_ms=0)
    env.markers.gate.set()
    successor = env.coordinator(load=[0])
    assert successor.coordinator_epoch(moved) == 1 and not successor.owns(staying)
    await completed(successor, moved, S.COMPLETE_COMMIT)
    assert [call.coordinator_epoch for call in env.markers.calls] == [0, 1]
    assert env.data.last_stable_offset == env.data.high_watermark == 2
    assert c.describe(moved) is None


class HeldFuture(Future):
    def result(self, timeout=None):
        if not self.done():  # a caller that waits for a held job would otherwise hang the test
            raise AssertionError("the caller waited for an fsync that was held")
        return super().result(timeout)


class HeldFlusher:
    """A log flusher that runs the next `allowed` jobs inline and holds the rest (their futures pending)."""

    background = True

    def __init__(self) -> None:
        self.allowed = 1_000_000
        self.held: list[tuple[object, Future]] = []

    def submit(self, job) -> Future:
        future: Future = HeldFuture()
        if self.allowed > 0 and not self.held:
            self.allowed -= 1
            job()
            future.set_result(None)
        else:
            self.held.append((job, future))
        return future

    def release(self) -> None:
        held, self.held = self.held, []
        for job, future in held:
            job()
            future.set_result(None)


@run
async def test_end_txn_waits_for_the_prepare_fsync_and_the_markers(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """EndTxn answers once PrepareCommit is on disk and the markers are written; no marker is written before
    the outcome is durable. The CompleteCommit record's fsync is off the caller's path: EndTxn waits for it
    at most END_TXN_WAIT_S (a restart before it lands finishes the commit again:
    test_prepared_transaction_is_completed_at_load)."""
    monkeypatch.setattr(transactions, "END_TXN_WAIT_S", 0.2)
    flusher = HeldFlusher()
    env = Env(tmp_path, state_flusher=flusher)
    c = env.coordinator()
    pid, epoch = await env.open_transaction(c, 10000)
    flusher.allowed = 0  # PrepareCommit's fsync is held, and so is every one after it
    ending = asyncio.ensure_future(c.end_txn("t", pid, epoch, True, FENCED))
    await eventually(lambda: len(flusher.held) == 1)
    for _ in range(5):
        await asyncio.sleep(0)
    assert not ending.done() and c.describe("t").state == S.ONGOING  # adopted once durable
    assert await c.add_partitions("t", pid, epoch, [DATA], FENCED) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert env.markers.calls == [] and env.data.last_stable_offset == 0
    flusher.release()
    assert (await ending)[0] == 0
    assert len(env.markers.calls) == 1 and env.data.last_stable_offset == env.data.high_watermark == 2
    assert c.describe("t").state == S.PREPARE_COMMIT
    assert len(flusher.held) == 1, "the CompleteCommit record waits for its fsync off the caller's path"
    assert (await c.end_txn("t", pid, epoch, True, FENCED))[0] == ErrorCode.CONCURRENT_TRANSACTIONS
    flusher.allowed = 1_000_000
    flusher.release()
    await completed(c, "t", S.COMPLETE_COMMIT)
    assert env.restart().describe("t").state == S.COMPLETE_COMMIT
    assert len(env.markers.calls) == 1


@run
async def test_open_transaction_survives_reload_and_times_out(env: Env) -> None:
    c = env.coordinator()
    pid, epoch = await env.open_transaction(c, 5000)
    env.now += 3000
    fresh = env.restart()
    m = fresh.describe("t")
    assert (m.state, m.start_timestamp, m.partitions) == (S.ONGOING, TS, {DATA})
    assert env.data.last_stable_offset == 0  # the data partition recovered the open transaction too
    assert fresh.abort_timed_out(env.now) == 0
    env.now += 2500
    assert fresh.abort_timed_out(env.now) == 1
    await completed(fresh, "t", S.COMPLETE_ABORT)
    assert fresh.describe("t").producer_epoch == epoch + 1
    assert env.markers.calls == [MarkerCall(pid, epoch + 1, 1, False, frozenset({DATA}))]
    assert env.data.last_stable_offset == env.data.high_watermark
    assert [t.producer_id for t in env.data.aborted_transactions(0, 100)] == [pid]


@run
async def test_list_filters_and_expiry(env: Env) -> None:
    c = env.coordinator()
    _, pid, _ = await c.init_producer_id("a", 5000, -1, -1, FENCED)
    await c.init_producer_id("b", 5000, -1, -1, FENCED)
    assert await c.add_partitions("a", pid, 0, [DATA], FENCED) == 0
    found, unknown = c.list(["Ongoing", "Nope"], [])
    assert [m.transactional_id for m in found] == ["a"] and unknown == ["Nope"]
    assert [m.transactional_id for m in c.list([], [pid])[0]] == ["a"]
    assert c.list(["Nope"], [])[0] == []
    env.now += 10
    assert [m.transactional_id for m in c.list([], [], 5)[0]] == ["a"]
    assert c.list([], [], 50)[0] == []
    assert await c.expire_ids(env.now + c.id_expiration_ms) == 1  # only the idle "b"
    assert c.describe("b") is None
    fresh = env.restart()
    assert fresh.describe("b") is None and fresh.describe("a").state == S.ONGOING


def test_record_round_trip() -> None:
    m = TxnMetadata("tx", 7, 3, 6000, S.ONGOING, 6, 2, TS, TS + 1, {("a", 0), ("b", 3)})
    raw = encode_value(m)
    assert raw[-12:] == b"\0\0\0\0" + struct.pack(">q", -1)  # pending offsets written empty; no next producer id
    assert decode_value("tx", raw) == m
    rotating = TxnMetadata("tx", 7, 32767, 6000, S.PREPARE_COMMIT, 7, 32766, TS, TS + 1, {("a", 0)}, 8)
    assert decode_value("tx", encode_value(rotating)) == rotating
    assert rotating.continued_as == (8, 0)


def version_0(raw: bytes) -> bytes:
    """A version-1 record as version 0 wrote it: no next producer id."""
    return struct.pack(">h", 0) + raw[2:-8]


def test_records_with_pending_offsets_of_an_earlier_version_still_decode() -> None:
    """Earlier versions kept TxnOffsetCommit offsets in the transaction's record; they are skipped."""
    m = TxnMetadata("tx", 7, 3, 6000, S.ONGOING, 6, 2, TS, TS + 1, {("a", 0), ("__consumer_offsets", 3)})

    def string(s: str) -> bytes:
        return struct.pack(">h", len(s)) + s.encode()

    # group, topic, partition int32, offset int64, leader_epoch int32, metadata, commit_timestamp int64
    pending = string("g") + string("a") + struct.pack(">iqi", 0, 9, 1) + string("meta") + struct.pack(">q", TS)
    old = version_0(encode_value(m))[:-4] + struct.pack(">i", 1) + pending
    assert decode_value("tx", old) == m
    with pytest.raises((ValueError, struct.error)):
        decode_value("tx", old[:-3])  # cut inside the pending offset
    with pytest.raises(ValueError):
        decode_value("tx", old + b"\0")


@run
async def test_a_leaders_add_waits_for_another_change_of_the_id_in_flight(env: Env, short_waits: None) -> None:
    """Transactions v2: a producer's first writes reach several partition leaders at once, and each adds its
    partition (Produce v12). An add from a leader (``wait``) waits for another leader's add being written,
    and for the completion of the previous transaction, instead of answering CONCURRENT_TRANSACTIONS (which
    the produce would answer as NOT_ENOUGH_REPLICAS); a client's add (no ``wait``) still gets it at once."""
    c = env.coordinator()
    _, pid, epoch = await c.init_producer_id("t", 10000, -1, -1, FENCED)
    first = asyncio.ensure_future(c.add_partitions("t", pid, epoch, [DATA], FENCED, wait=True))
    await asyncio.sleep(0)  # its state write is in flight
    assert await c.add_partitions("t", pid, epoch, [OFFSETS], FENCED) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert await c.add_partitions("t", pid, epoch, [OFFSETS], FENCED, wait=True) == 0
    assert await first == 0
    assert c.describe("t").partitions == {DATA, OFFSETS}
    env.produce(pid, epoch, 0)
    env.markers.gate = asyncio.Event()  # the markers of the commit are held back
    error, pid, bumped = await c.end_txn("t", pid, epoch, True, FENCED, bump=True)
    assert (error, bumped) == (0, epoch + 1) and c.describe("t").state == S.PREPARE_COMMIT
    waiting = asyncio.ensure_future(c.add_partitions("t", pid, bumped, [DATA], FENCED, wait=True))
    await asyncio.sleep(0.05)
    assert not waiting.done(), "the add waits for the markers of the previous transaction"
    env.markers.gate.set()
    assert await waiting == 0
    m = c.describe("t")
    assert (m.state, m.producer_epoch, m.partitions) == (S.ONGOING, bumped, {DATA})


@run
async def test_a_leaders_add_gives_up_waiting_after_its_deadline(env: Env, short_waits: None,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transactions, "ADD_WAIT_S", 0.05)
    c = env.coordinator()
    pid, epoch = await env.open_transaction(c, 10000)
    env.markers.gate = asyncio.Event()
    error, pid, bumped = await c.end_txn("t", pid, epoch, True, FENCED, bump=True)
    assert error == 0
    assert await c.add_partitions("t", pid, bumped, [DATA], FENCED, wait=True) == ErrorCode.CONCURRENT_TRANSACTIONS
    env.markers.gate.set()
    await completed(c, "t", S.COMPLETE_COMMIT)
