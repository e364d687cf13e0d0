"""The share coordinator's merge of written states, and a share-partition leader reading its window from a
share coordinator that answers later (coordinator/share_coordinator.py, share_groups.py). No processes."""

from concurrent.futures import Future

import pytest

from odradek.coordinator.share_coordinator import StoredState, merge_runs
from odradek.coordinator.share_groups import ShareError, ShareGroupConfig, ShareGroupCoordinator
from odradek.coordinator.share_partition import ACKNOWLEDGED, ARCHIVED, AVAILABLE
from odradek.coordinator.timers import FakeScheduler
from odradek.protocol.errors import ErrorCode
from odradek.storage.flusher import completed_future
from tests.unit.test_share_partition import _Metadata, _Topic, batches

TID = b"T" * 16


def test_a_write_moves_the_start_and_replaces_what_its_batches_cover():
    old = [(10, 12, ACKNOWLEDGED, 1), (13, 14, AVAILABLE, 2)]
    assert merge_runs(old, 11, [(13, 13, ARCHIVED, 5)]) == [(11, 12, ACKNOWLEDGED, 1), (13, 13, ARCHIVED, 5),
                                                           (14, 14, AVAILABLE, 2)]
    assert merge_runs(old, 15, []) == []
    state = StoredState(0, 3, 11, merge_runs(old, 11, []))
    assert (state.end, state.delivery_complete()) == (15, 2)


class _SlowPersister:
    """A share coordinator elsewhere: reads answer when the test says so; writes are recorded."""

    def __init__(self) -> None:
        self.reads: list[Future] = []
        self.writes: list[tuple] = []

    def read(self, key, leader_epoch):
        self.reads.append(Future())
        return self.reads[-1]

    def write(self, key, state_epoch, leader_epoch, start, runs):
        self.writes.append((key, state_epoch, leader_epoch, start, runs))
        done: Future = Future()
        done.set_result(ErrorCode.NONE)
        return done


def test_a_leader_waits_for_the_stored_state_then_serves_it():
    persister = _SlowPersister()
    woken = []
    coordinator = ShareGroupCoordinator(ShareGroupConfig(), FakeScheduler(), lambda g, r: completed_future(),
                                        persister, _Metadata(_Topic("t", TID, 1)), lambda t, p: woken.append((t, p)))
    for _ in range(2):  # no second read while the first is out
        with pytest.raises(ShareError) as refused:
            coordinator.share_partition("g", TID, 0, 0, 100, leader_epoch=7)
        assert refused.value.error_code == ErrorCode.LEADER_NOT_AVAILABLE
    assert len(persister.reads) == 1
    persister.reads[0].set_result((ErrorCode.NONE, StoredState(2, 6, 40, [(40, 41, ACKNOWLEDGED, 1),
                                                                           (42, 42, AVAILABLE, 3)])))
    assert woken == [("t", 0)]  # the parked fetch looks again
    sp = coordinator.share_partition("g", TID, 0, 0, 100, leader_epoch=7)
    assert (sp.start, sp.end, sp.records[42].delivery_count) == (42, 43, 3)
    sp.acquire("m", batches((42, 45)), 10, 0, 1000)
    coordinator.store([("g", TID, 0)])
    (key, state_epoch, leader_epoch, start, runs), = persister.writes
    assert (state_epoch, leader_epoch, start) == (2, 7, 42)  # written at the epochs it was read at
    # the partition moves away: its window goes, and the next leadership reads it again
    coordinator.forget_partition(TID, 0)
    with pytest.raises(ShareError):
        coordinator.share_partition("g", TID, 0, 0, 100, leader_epoch=9)
    assert len(persister.reads) == 2
