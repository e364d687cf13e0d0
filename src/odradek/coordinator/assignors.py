"""Server-side partition assignors of the consumer group protocol (KIP-848): `uniform` and `range`.

An assignor sees the group as it is after a membership or subscription change and returns the *target
assignment*: for every member, the partitions it should own. Members then converge on it through the
reconciliation in `consumer_group.py` (revoke first, then take over what others released).

Both assignors are deterministic (members and topics in sorted order) and sticky: a partition stays with
the member that has it in the current target whenever balance allows, so a member joining or leaving moves
as few partitions as it can.

* ``uniform``: every member gets a share of all the partitions it subscribes to, as even as the
  subscriptions allow (with identical subscriptions: counts differ by at most one). A partition moves only
  from a member above its share to one below it.
* ``range``: per topic, the members subscribed to it, sorted by member id, get consecutive ranges of its
  partitions; the first ``partitions % members`` members one more. Topics with the same partition count
  and subscribers are therefore co-partitioned (member k gets the same partition numbers of each), which
  joins across topics rely on. Sticky in the sense that a member keeps its range as long as the member
  list and partition count stay the same.

Pure functions, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

TopicId = bytes
Assignment = dict[TopicId, frozenset[int]]


@dataclass(frozen=True)
class AssignorMember:
    subscribed: frozenset[TopicId]  # topic ids that exist and the member subscribes to (names or regex)
    current: Assignment  # its partitions in the current target assignment


def _flatten(assignment: Assignment) -> set[tuple[TopicId, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


def _group(partitions: set[tuple[TopicId, int]]) -> Assignment:
    out: dict[TopicId, set[int]] = {}
    for t, p in partitions:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


def uniform(members: dict[str, AssignorMember], topics: dict[TopicId, int]) -> dict[str, Assignment]:
    """Spread every subscribed partition as evenly as the subscriptions allow, moving as few as possible."""
    order = sorted(members)
    owned: dict[str, set[tuple[TopicId, int]]] = {m: set() for m in order}
    taken: set[tuple[TopicId, int]] = set()
    # 1. keep what members have and may still have (each partition once)
    for m in order:
        spec = members[m]
        for t, p in sorted(_flatten(spec.current)):
            if t in spec.subscribed and p < topics.get(t, 0) and (t, p) not in taken:
                owned[m].add((t, p))
                taken.add((t, p))
    eligible: dict[tuple[TopicId, int], list[str]] = {}
    for t in sorted(topics):
        subscribers = [m for m in order if t in members[m].subscribed]
        if subscribers:
            for p in range(topics[t]):
                eligible[(t, p)] = subscribers
    # 2. a member above the even share (with identical subscriptions) gives up its extra partitions first
    everyone_same = len({members[m].subscribed for m in order}) <= 1
    if everyone_same and order:
        total = len(eligible)
        base, extra = divmod(total, len(order))
        # the members with the most kept partitions keep the +1 slots
        by_kept = sorted(order, key=lambda m: (-len(owned[m]), m))
        quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_kept)}
        for m in order:
            surplus = len(owned[m]) - quota[m]
            if surplus > 0:
                for tp in sorted(owned[m], reverse=True)[:surplus]:
                    owned[m].discard(tp)
                    taken.discard(tp)
    # 3. every free partition to the eligible member that has the fewest (topics with fewest subscribers first)
    free = sorted((tp for tp in eligible if tp not in taken), key=lambda tp: (len(eligible[tp]), tp))
    for tp in free:
        m = min(eligible[tp], key=lambda x: (len(owned[x]), x))
        owned[m].add(tp)
        taken.add(tp)
    # 4. even out what uneven subscriptions left: move from the fullest to an eligible emptier member
    for _ in range(len(eligible) + 1):
        moved = False
        for m in sorted(order, key=lambda x: (-len(owned[x]), x)):
            for tp in sorted(owned[m]):
                target = min(eligible[tp], key=lambda x: (len(owned[x]), x))
                if len(owned[target]) + 1 < len(owned[m]):
                    owned[m].discard(tp)
                    owned[target].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    return {m: _group(owned[m]) for m in order}


def range_(members: dict[str, AssignorMember], topics: dict[TopicId, int]) -> dict[str, Assignment]:
    """Per topic, consecutive ranges of partitions to its subscribers in member id order."""
    out: dict[str, dict[TopicId, frozenset[int]]] = {m: {} for m in sorted(members)}
    for t in sorted(topics):
        subscribers = sorted(m for m, spec in members.items() if t in spec.subscribed)
        if not subscribers:
            continue
        base, extra = divmod(topics[t], len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            n = base + (1 if i < extra else 0)
            if n:
                out[m][t] = frozenset(range(start, start + n))
            start += n
    return out


ASSIGNORS: dict[str, Callable[[dict[str, AssignorMember], dict[TopicId, int]], dict[str, Assignment]]] = {
    "uniform": uniform,
    "range": range_,
}
