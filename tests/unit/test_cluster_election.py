"""Leader election rules (cluster/controller/election.py) and replica assignment (cluster/admin.py).

The election functions are pure: (replicas, ISR, live brokers, ...) in, (leader, ISR) or None out. Every
rule Kafka's PartitionLeaderElectionAlgorithms has is pinned here, including the cases where nobody may
lead. assign_replicas is checked over a grid of (brokers, partitions, replication factor) for the
properties Kafka's rack-unaware assignment guarantees.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from odradek.cluster.admin import AdminError, assign_replicas, check_assignment
from odradek.cluster.controller.election import (controlled_shutdown_election, isr_without, offline_election,
                                                 preferred_election)
from odradek.protocol.errors import ErrorCode

# -- offline_election -------------------------------------------------------------------------------------


def test_offline_election_prefers_the_first_live_isr_member_in_assignment_order() -> None:
    # The ISR lists 3 before 2, but the assignment order decides: 2 comes first there.
    assert offline_election([1, 2, 3], [3, 2], {2, 3}, unclean=False) == (2, [3, 2])
    # The preferred replica wins whenever it may lead.
    assert offline_election([1, 2, 3], [1, 2, 3], {1, 2, 3}, unclean=False) == (1, [1, 2, 3])


def test_offline_election_skips_live_replicas_outside_the_isr() -> None:
    # 2 is live and comes before 3 in the assignment, but only 3 is in sync.
    assert offline_election([1, 2, 3], [1, 3], {2, 3}, unclean=False) == (3, [3])


def test_offline_election_shrinks_the_isr_to_its_live_members_keeping_its_order() -> None:
    leader, isr = offline_election([1, 2, 3, 4], [4, 1, 3, 2], {2, 3, 4}, unclean=False)
    assert leader == 2
    assert isr == [4, 3, 2]


def test_offline_election_ignores_isr_members_that_are_not_assigned() -> None:
    # A stale ISR entry (5 is not a replica) never becomes leader.
    assert offline_election([1, 2], [5, 2], {2, 5}, unclean=False) == (2, [5, 2])
    assert offline_election([1, 2], [5], {5}, unclean=False) is None


def test_offline_election_without_any_live_isr_member_elects_nobody_when_clean() -> None:
    assert offline_election([1, 2, 3], [1], {2, 3}, unclean=False) is None
    assert offline_election([1, 2, 3], [], {1, 2, 3}, unclean=False) is None
    assert offline_election([1, 2, 3], [1, 2, 3], set(), unclean=False) is None


def test_unclean_election_takes_the_first_live_replica_and_an_isr_of_itself() -> None:
    assert offline_election([1, 2, 3], [1], {3, 2}, unclean=True) == (2, [2])
    assert offline_election([1, 2, 3], [], {3}, unclean=True) == (3, [3])


def test_unclean_election_still_prefers_a_live_isr_member() -> None:
    # unclean.leader.election.enable only matters when no ISR member is alive.
    assert offline_election([1, 2, 3], [3], {2, 3}, unclean=True) == (3, [3])
    assert offline_election([1, 2, 3], [1, 3], {1, 2, 3}, unclean=True) == (1, [1, 3])


def test_unclean_election_with_no_live_replica_elects_nobody() -> None:
    assert offline_election([1, 2, 3], [1], {4, 5}, unclean=True) is None
    assert offline_election([], [], {1}, unclean=True) is None


def test_offline_election_returns_a_fresh_isr_list() -> None:
    isr = [1, 2]
    _, new_isr = offline_election([1, 2], isr, {1, 2}, unclean=False)
    new_isr.append(9)
    assert isr == [1, 2]


# -- controlled_shutdown_election -------------------------------------------------------------------------


def test_controlled_shutdown_moves_leadership_to_the_next_isr_member_not_shutting_down() -> None:
    assert controlled_shutdown_election([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}) == (2, [2, 3])
    assert controlled_shutdown_election([1, 2, 3], [3, 1, 2], {1, 2, 3}, {1, 2}) == (3, [3])


def test_controlled_shutdown_drops_dead_and_shutting_down_members_from_the_isr() -> None:
    assert controlled_shutdown_election([1, 2, 3, 4], [1, 2, 3, 4], {1, 3, 4}, {1}) == (3, [3, 4])


def test_controlled_shutdown_with_no_other_isr_member_elects_nobody() -> None:
    # Outside the ISR is never an option here, unclean or not: the shutdown waits or retries instead.
    assert controlled_shutdown_election([1, 2, 3], [1], {1, 2, 3}, {1}) is None
    assert controlled_shutdown_election([1, 2], [1, 2], {1}, {1}) is None
    assert controlled_shutdown_election([1, 2], [1, 2], {1, 2}, {1, 2}) is None


def test_controlled_shutdown_picks_in_assignment_order() -> None:
    assert controlled_shutdown_election([1, 3, 2], [1, 2, 3], {1, 2, 3}, {1}) == (3, [2, 3])


# -- preferred_election -----------------------------------------------------------------------------------


def test_preferred_election_returns_to_the_first_assigned_replica_when_live_and_in_sync() -> None:
    assert preferred_election([2, 1, 3], [1, 3, 2], {1, 2, 3}) == (2, [1, 3, 2])


def test_preferred_election_keeps_the_isr_as_it_is_even_with_dead_members() -> None:
    # Only the leader changes; an ISR shrink is not this election's business.
    assert preferred_election([1, 2, 3], [1, 2, 3], {1, 2}) == (1, [1, 2, 3])


def test_preferred_election_refuses_a_preferred_replica_that_is_dead_or_out_of_sync() -> None:
    assert preferred_election([1, 2, 3], [1, 2, 3], {2, 3}) is None
    assert preferred_election([1, 2, 3], [2, 3], {1, 2, 3}) is None
    assert preferred_election([], [1], {1}) is None


def test_preferred_election_returns_a_copy_of_the_isr() -> None:
    isr = [1, 2]
    _, new_isr = preferred_election([1, 2], isr, {1, 2})
    assert new_isr == isr and new_isr is not isr


# -- isr_without ------------------------------------------------------------------------------------------


def test_isr_without_removes_the_gone_replicas_in_order() -> None:
    assert isr_without([1, 2, 3, 4], {2, 4}, leader=1) == [1, 3]
    assert isr_without([1, 2, 3], set(), leader=1) == [1, 2, 3]
    assert isr_without([1, 2, 3], {7}, leader=1) == [1, 2, 3]


def test_isr_without_keeps_the_last_member_even_when_it_is_gone() -> None:
    # The last in-sync replica holds everything committed: a clean election needs it back.
    assert isr_without([3], {3}, leader=3) == [3]
    assert isr_without([1, 2], {1, 2}, leader=2) == [2]  # the leader, when it is a member
    assert isr_without([1, 2], {1, 2}, leader=-1) == [1]  # else the first member
    assert isr_without([1, 2], {1, 2}, leader=5) == [1]


def test_isr_without_an_empty_isr_stays_empty() -> None:
    assert isr_without([], {1}, leader=1) == []


# -- assign_replicas --------------------------------------------------------------------------------------

GRID = [(brokers, partitions, rf)
        for brokers in (1, 2, 3, 4, 5, 7)
        for partitions in (1, 2, 3, 5, 6, 12, 20, 21, 49)
        for rf in range(1, brokers + 1)]


@pytest.mark.parametrize("n_brokers,partitions,rf", GRID)
def test_assign_replicas_gives_every_partition_rf_distinct_known_replicas(n_brokers: int, partitions: int,
                                                                          rf: int) -> None:
    brokers = [10 + 3 * i for i in range(n_brokers)]  # ids that are neither 0.. nor contiguous
    for seed in range(4):
        out = assign_replicas(list(reversed(brokers)), partitions, rf, rng=random.Random(seed))
        assert sorted(out) == list(range(partitions))
        for p, replicas in out.items():
            assert len(replicas) == rf, (p, replicas)
            assert len(set(replicas)) == rf, (p, replicas)
            assert set(replicas) <= set(brokers), (p, replicas)


@pytest.mark.parametrize("n_brokers,partitions,rf", GRID)
def test_assign_replicas_spreads_leaders_evenly(n_brokers: int, partitions: int, rf: int) -> None:
    brokers = list(range(1, n_brokers + 1))
    for seed in range(4):
        out = assign_replicas(brokers, partitions, rf, rng=random.Random(seed))
        leaders = Counter(replicas[0] for replicas in out.values())
        counts = [leaders.get(b, 0) for b in brokers]
        # Leaders go round-robin: any run of partitions is spread to within one, exactly even on full rounds.
        assert max(counts) - min(counts) <= 1, (seed, out)
        if partitions % n_brokers == 0:
            assert set(counts) == {partitions // n_brokers}, (seed, out)


@pytest.mark.parametrize("n_brokers,rf", [(3, 3), (4, 2), (5, 3), (6, 3)])
def test_assign_replicas_spreads_all_replicas_evenly_over_full_rounds(n_brokers: int, rf: int) -> None:
    brokers = list(range(n_brokers))
    partitions = n_brokers * (n_brokers - 1)  # every shift of the followers comes around once
    out = assign_replicas(brokers, partitions, rf, rng=random.Random(7))
    load = Counter(b for replicas in out.values() for b in replicas)
    assert set(load.values()) == {partitions * rf // n_brokers}


def test_assign_replicas_shifts_followers_after_each_full_round() -> None:
    # With a fixed start the layout is Kafka's: leaders round-robin, the first follower one further on,
    # one more after every full round of leaders.
    class Fixed(random.Random):
        def randrange(self, *args, **kwargs) -> int:  # start index and shift both 0
            return 0

    out = assign_replicas([1, 2, 3], 6, 2, rng=Fixed())
    assert out == {0: [1, 2], 1: [2, 3], 2: [3, 1], 3: [1, 3], 4: [2, 1], 5: [3, 2]}


def test_assign_replicas_first_partition_offsets_the_partition_numbers() -> None:
    out = assign_replicas([1, 2, 3], 4, 2, first_partition=5, rng=random.Random(1))
    assert sorted(out) == [5, 6, 7, 8]
    # leaders still go round-robin over consecutive partitions
    leaders = [out[p][0] for p in sorted(out)]
    assert all(leaders[i] != leaders[i + 1] for i in range(len(leaders) - 1))
    for replicas in out.values():
        assert len(set(replicas)) == 2


def test_assign_replicas_shift_counts_rounds_from_partition_zero() -> None:
    # Partitions added later (first_partition=N) shift their followers by the rounds before N, as Kafka's
    # assignment for CreatePartitions does.
    class Fixed(random.Random):
        def randrange(self, *args, **kwargs) -> int:
            return 0

    assert assign_replicas([1, 2, 3], 3, 2, first_partition=3, rng=Fixed()) == {3: [1, 3], 4: [2, 1], 5: [3, 2]}
    assert assign_replicas([1, 2, 3], 2, 2, first_partition=2, rng=Fixed()) == {2: [3, 1], 3: [1, 3]}


def test_assign_replicas_zero_partitions_is_empty() -> None:
    assert assign_replicas([1, 2], 0, 1) == {}


@pytest.mark.parametrize("n_brokers,rf", [(1, 2), (2, 3), (3, 4), (0, 1)])
def test_assign_replicas_refuses_a_replication_factor_above_the_broker_count(n_brokers: int, rf: int) -> None:
    with pytest.raises(AdminError) as info:
        assign_replicas(list(range(n_brokers)), 3, rf)
    assert info.value.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert f"{rf}" in info.value.message and f"{n_brokers}" in info.value.message


@pytest.mark.parametrize("rf", [0, -1, -3])
def test_assign_replicas_refuses_a_non_positive_replication_factor(rf: int) -> None:
    with pytest.raises(AdminError) as info:
        assign_replicas([1, 2, 3], 3, rf)
    assert info.value.error_code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_assign_replicas_does_not_depend_on_the_order_brokers_are_given_in() -> None:
    a = assign_replicas([3, 1, 2], 6, 2, rng=random.Random(5))
    b = assign_replicas([1, 2, 3], 6, 2, rng=random.Random(5))
    assert a == b


def test_assign_replicas_uses_every_broker_as_a_leader_start() -> None:
    # The start is random: over many draws every broker leads partition 0 at some point.
    firsts = {assign_replicas([1, 2, 3, 4], 1, 1, rng=random.Random(seed))[0][0] for seed in range(200)}
    assert firsts == {1, 2, 3, 4}


# -- check_assignment -------------------------------------------------------------------------------------


def test_check_assignment_accepts_distinct_known_brokers() -> None:
    check_assignment([1, 2, 3], {1, 2, 3, 4}, 3)
    check_assignment([4], {1, 2, 3, 4}, None)
    check_assignment([2, 1], {1, 2}, None)


@pytest.mark.parametrize("assignment,brokers,rf,fragment", [
    ([], {1, 2}, None, "empty"),
    ([1, 1], {1, 2}, None, "Duplicate"),
    ([1, 2, 1], {1, 2}, 3, "Duplicate"),
    ([1, 9], {1, 2}, None, "Unknown"),
    ([1, 2], {1, 2, 3}, 3, "does not have 3 replicas"),
    ([1, 2, 3], {1, 2, 3}, 2, "does not have 2 replicas"),
])
def test_check_assignment_errors(assignment: list[int], brokers: set[int], rf: int | None, fragment: str) -> None:
    with pytest.raises(AdminError) as info:
        check_assignment(assignment, brokers, rf)
    assert info.value.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert fragment in info.value.message


def test_assignments_pass_their_own_check() -> None:
    for n, rf in itertools.product(range(1, 6), range(1, 6)):
        if rf > n:
            continue
        brokers = set(range(100, 100 + n))
        for replicas in assign_replicas(sorted(brokers), 7, rf).values():
            check_assignment(replicas, brokers, rf)
