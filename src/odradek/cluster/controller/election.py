"""Leader election rules (Kafka's PartitionLeaderElectionAlgorithms): pure functions of a partition's
replica assignment, its ISR and the live brokers, so every rule is one small place to read and test.

Each returns the new (leader, ISR), or None when no replica may lead. Replicas are tried in assignment
order, so the first replica, the preferred leader, wins whenever it can.
"""

from __future__ import annotations

Election = tuple[int, list[int]]


def offline_election(replicas: list[int], isr: list[int], live: set[int], unclean: bool) -> Election | None:
    """The leader is gone (or there never was one): the first live replica that is in the ISR, which
    shrinks to its live members. Outside the ISR only with ``unclean`` (unclean.leader.election.enable),
    at the price of losing what the ISR had and this replica lacks."""
    live_isr = [r for r in isr if r in live]
    for replica in replicas:
        if replica in live_isr:
            return replica, live_isr
    if unclean:
        for replica in replicas:
            if replica in live:
                return replica, [replica]
    return None


def controlled_shutdown_election(replicas: list[int], isr: list[int], live: set[int],
                                 shutting_down: set[int]) -> Election | None:
    """The leader is shutting down: the first live ISR member that is not, and the ISR without those
    shutting down."""
    new_isr = [r for r in isr if r in live and r not in shutting_down]
    for replica in replicas:
        if replica in new_isr:
            return replica, new_isr
    return None


def preferred_election(replicas: list[int], isr: list[int], live: set[int]) -> Election | None:
    """Move leadership back to the preferred replica (the first assigned), if it is live and in sync."""
    preferred = replicas[0] if replicas else -1
    if preferred in live and preferred in isr:
        return preferred, list(isr)
    return None


def isr_without(isr: list[int], gone: set[int], leader: int) -> list[int]:
    """The ISR once the replicas in ``gone`` leave it. The last member stays (even when gone): it holds
    everything committed, and a clean election needs it back."""
    kept = [r for r in isr if r not in gone]
    if kept:
        return kept
    return [leader] if leader in isr else isr[:1]
