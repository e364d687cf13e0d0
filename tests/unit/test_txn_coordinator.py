"""TransactionCoordinator state machine on real partition logs: commit, abort, fencing, timeouts, staged
offsets, and recovery from `__transaction_state`."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

import pytest

from odradek.config import BrokerConfig
from odradek.coordinator.persistence import OffsetsTopicLog, OffsetValue
from odradek.coordinator.producer_ids import ProducerIdManager
from odradek.coordinator.transactions import TransactionCoordinator
from odradek.coordinator.txn_state import TxnMetadata, TxnState, decode_value, encode_value
from odradek.protocol.errors import ErrorCode
from odradek.records.batch import validate_v2
from odradek.records.codec import build_batch
from odradek.storage import LogConfig, PartitionLog

TS = 1_700_000_000_000
FENCED = ErrorCode.PRODUCER_FENCED
S = TxnState


class FakeGroups:
    def __init__(self) -> None:
        self.committed: dict[tuple[str, str, int], int] = {}

    def check_member(self, group_id, generation, member_id, instance) -> int:
        return 0

    def commit(self, group_id, offsets) -> None:
        for (t, p), v in offsets:
            self.committed[(group_id, t, p)] = v.offset


class Env:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.now = TS
        self.data = PartitionLog.open(tmp / "data-0", LogConfig(), clock=self.clock)
        self.state_log = PartitionLog.open(tmp / "__transaction_state-0", LogConfig(), clock=self.clock)
        self.groups = FakeGroups()
        self.notified: list[tuple[str, int]] = []

    def clock(self) -> int:
        return self.now

    def coordinator(self) -> TransactionCoordinator:
        config = BrokerConfig({"transaction.max.timeout.ms": "60000"})
        c = TransactionCoordinator(
            config, OffsetsTopicLog(1, lambda p: self.state_log, self.clock), ProducerIdManager(self.tmp).allocate,
            lambda t, p: self.data if (t, p) == ("data", 0) else None, lambda t, p: self.notified.append((t, p)),
            lambda group: 0, self.groups, self.clock)
        c.load()
        return c

    def open_transaction(self, c: TransactionCoordinator, timeout_ms: int) -> tuple[int, int]:
        """Transactional id "t" gets a producer id, adds data-0 and writes one record to it."""
        _, pid, epoch = c.init_producer_id("t", timeout_ms, -1, -1, FENCED)
        c.add_partitions("t", pid, epoch, [("data", 0)], FENCED)
        self.produce(pid, epoch, 0)
        return pid, epoch

    def produce(self, pid: int, epoch: int, seq: int) -> None:
        buf = bytearray(build_batch([(None, b"v", None, TS)], producer_id=pid, producer_epoch=epoch,
                                    base_sequence=seq, transactional=True))
        self.data.append(buf, validate_v2(buf))


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def test_commit_writes_markers_and_offsets(env: Env) -> None:
    c = env.coordinator()
    assert c.init_producer_id("t", 0, -1, -1, FENCED)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert c.init_producer_id("t", 60001, -1, -1, FENCED)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    err, pid, epoch = c.init_producer_id("t", 10000, -1, -1, FENCED)
    assert (err, epoch) == (0, 0)
    assert c.add_partitions("t", pid, epoch, [("data", 0)], FENCED) == 0
    env.produce(pid, epoch, 0)
    assert env.data.last_stable_offset == 0
    assert c.add_offsets("t", pid, epoch, "g", FENCED) == 0
    value = OffsetValue(5, -1, "")
    assert c.txn_offset_commit("t", "g", pid, epoch, -1, "", None, [("data", 0, value)], lambda t, p: True) == {
        ("data", 0): 0}
    assert c.has_pending_offset("g", "data", 0) and not env.groups.committed
    assert c.end_txn("t", pid, epoch, True, FENCED) == 0
    assert env.data.last_stable_offset == env.data.high_watermark == 2
    assert env.groups.committed == {("g", "data", 0): 5} and not c.has_pending_offset("g", "data", 0)
    assert env.notified == [("data", 0)]
    m = c.describe("t")
    assert m.state == S.COMPLETE_COMMIT and not m.partitions and not m.pending_offsets
    assert c.end_txn("t", pid, epoch, True, FENCED) == 0  # retry
    assert c.end_txn("t", pid, epoch, False, FENCED) == ErrorCode.INVALID_TXN_STATE
    assert c.end_txn("t", pid + 1, epoch, True, FENCED) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_timeout_aborts_and_fences(env: Env) -> None:
    c = env.coordinator()
    pid, epoch = env.open_transaction(c, 1000)
    env.now += 500
    assert c.abort_timed_out(env.now) == 0
    env.now += 600
    assert c.abort_timed_out(env.now) == 1
    m = c.describe("t")
    assert (m.state, m.producer_epoch) == (S.COMPLETE_ABORT, 1)
    assert env.data.last_stable_offset == env.data.high_watermark
    assert [t.producer_id for t in env.data.aborted_transactions(0, 100)] == [pid]
    assert c.end_txn("t", pid, epoch, True, FENCED) == FENCED
    assert c.add_partitions("t", pid, epoch, [("data", 0)], ErrorCode.INVALID_PRODUCER_EPOCH) == \
        ErrorCode.INVALID_PRODUCER_EPOCH
    assert c.init_producer_id("t", 1000, -1, -1, FENCED) == (0, pid, 2)


def test_init_aborts_the_open_transaction_of_the_previous_epoch(env: Env) -> None:
    c = env.coordinator()
    _, pid, _ = c.init_producer_id("t", 10000, -1, -1, FENCED)
    c.add_partitions("t", pid, 0, [("data", 0)], FENCED)
    env.produce(pid, 0, 0)
    assert c.init_producer_id("t", 10000, -1, -1, FENCED) == (0, pid, 2)  # abort at epoch 1, then bump
    assert env.data.last_stable_offset == env.data.high_watermark
    assert len(env.data.aborted_transactions(0, 100)) == 1


def test_prepared_transaction_is_completed_at_load(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    c = env.coordinator()
    pid, epoch = env.open_transaction(c, 10000)

    def broken(*args):
        raise OSError("disk gone")

    monkeypatch.setattr(c, "_write_markers", broken)
    assert c.end_txn("t", pid, epoch, True, FENCED) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert c.describe("t").state == S.PREPARE_COMMIT
    assert c.add_partitions("t", pid, epoch, [("data", 0)], FENCED) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert env.data.last_stable_offset == 0
    fresh = env.coordinator()  # a restart: replays __transaction_state and finishes the commit
    assert fresh.describe("t").state == S.COMPLETE_COMMIT
    assert env.data.last_stable_offset == env.data.high_watermark
    assert env.data.aborted_transactions(0, 100) == []


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
        for job, future in self.held:
            job()
            future.set_result(None)
        self.held.clear()


def test_end_txn_waits_for_the_prepare_fsync_only(env: Env) -> None:
    """EndTxn answers once PrepareCommit is on disk; the CompleteCommit record's fsync is queued behind it
    (a restart before it lands finishes the commit again: test_prepared_transaction_is_completed_at_load)."""
    flusher = HeldFlusher()
    env.state_log.close()
    env.state_log = PartitionLog.open(env.tmp / "__transaction_state-0", LogConfig(), clock=env.clock,
                                      flusher=flusher)
    c = env.coordinator()
    pid, epoch = env.open_transaction(c, 10000)
    flusher.allowed = 1  # PrepareCommit's fsync runs, the ones after it are held
    assert c.end_txn("t", pid, epoch, True, FENCED) == 0
    assert c.describe("t").state == S.COMPLETE_COMMIT
    assert len(flusher.held) == 1, "the CompleteCommit record waits for its fsync off the caller's path"
    assert env.data.last_stable_offset == env.data.high_watermark
    flusher.release()
    fresh = env.coordinator()
    assert fresh.describe("t").state == S.COMPLETE_COMMIT


def test_open_transaction_survives_reload_and_times_out(env: Env) -> None:
    c = env.coordinator()
    pid, epoch = env.open_transaction(c, 5000)
    env.now += 3000
    fresh = env.coordinator()
    m = fresh.describe("t")
    assert (m.state, m.start_timestamp, m.partitions) == (S.ONGOING, TS, {("data", 0)})
    assert fresh.abort_timed_out(env.now) == 0
    env.now += 2500
    assert fresh.abort_timed_out(env.now) == 1
    assert fresh.describe("t").state == S.COMPLETE_ABORT


def test_list_filters_and_expiry(env: Env) -> None:
    c = env.coordinator()
    _, pid, _ = c.init_producer_id("a", 5000, -1, -1, FENCED)
    c.init_producer_id("b", 5000, -1, -1, FENCED)
    c.add_partitions("a", pid, 0, [("data", 0)], FENCED)
    found, unknown = c.list(["Ongoing", "Nope"], [])
    assert [m.transactional_id for m in found] == ["a"] and unknown == ["Nope"]
    assert [m.transactional_id for m in c.list([], [pid])[0]] == ["a"]
    assert c.list(["Nope"], [])[0] == []
    env.now += 10
    assert [m.transactional_id for m in c.list([], [], 5)[0]] == ["a"]
    assert c.list([], [], 50)[0] == []
    assert c.expire_ids(env.now + c.id_expiration_ms) == 1  # only the idle "b"
    assert c.describe("b") is None and env.coordinator().describe("b") is None


def test_record_round_trip() -> None:
    m = TxnMetadata("tx", 7, 3, 6000, S.ONGOING, 6, 2, TS, TS + 1, {("a", 0), ("b", 3)},
                    {("g", "a", 0): OffsetValue(9, 1, "meta", TS)})
    assert decode_value("tx", encode_value(m)) == m
