"""What the admin handlers (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs, ElectLeaders, and
Metadata's auto-creation) ask of the cluster, whichever kind it is.

`TopicAdmin` is implemented twice: by the LocalController (cluster/local.py: a single node, topics in the
local registry) and by the ZooKeeper cluster member (cluster/zk_admin.py: topics in ZooKeeper, decided by
the controller). Handlers validate what a request says on its own (names, counts, config values) and leave
the rest — existing topics, replication factors and assignments against the live brokers, whether this
broker is the controller — to the admin, which raises `AdminError` with the Kafka code to answer.
"""

from __future__ import annotations

import random
from typing import Iterator, Protocol

from odradek.cluster.topics import Topic
from odradek.protocol.errors import ErrorCode


class AdminError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


class TopicAdmin(Protocol):
    def check_controller(self) -> None:
        """Raise AdminError(NOT_CONTROLLER) when requests that must reach the controller are sent here."""

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           assignments: dict[int, list[int]] | None, configs: dict[str, str],
                           validate_only: bool, timeout_ms: int) -> Topic: ...

    async def delete_topic(self, name: str, timeout_ms: int) -> None: ...

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                                validate_only: bool, timeout_ms: int) -> None: ...

    async def alter_topic_configs(self, name: str, overrides: dict[str, str]) -> None: ...

    def auto_create_topic(self, name: str) -> None:
        """Start creating ``name`` with the broker defaults (Metadata's auto-creation)."""

    async def elect_leaders(self, preferred: bool, partitions: list[tuple[str, int]] | None,
                            timeout_ms: int) -> dict[tuple[str, int], tuple[int, str | None]]: ...

    async def alter_reassignments(self, wanted: dict[tuple[str, int], list[int] | None],
                                  timeout_ms: int) -> dict[tuple[str, int], tuple[int, str | None]]:
        """Start (target replicas) or cancel (None) partition reassignments; an outcome per partition."""

    async def list_reassignments(self, partitions: list[tuple[str, int]] | None, timeout_ms: int
                                 ) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        """(replicas, adding, removing) of each partition being reassigned."""

    async def alter_broker_configs(self, broker_id: int | None, changes: dict[str, str | None], replace: bool) -> None:
        """Set (a value) or delete (None) dynamic configs of one broker (None: the cluster-wide defaults);
        ``replace`` drops those not named."""

    async def dynamic_broker_configs(self, broker_id: int | None) -> dict[str, str]:
        """The dynamic configs stored for one broker (None: the cluster-wide defaults)."""


def check_assignment(assignment: list[int], brokers: set[int], replication_factor: int | None) -> None:
    """An explicit replica assignment must name distinct, known brokers (INVALID_REPLICA_ASSIGNMENT)."""
    if not assignment:
        raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "A replica assignment may not be empty")
    if len(set(assignment)) != len(assignment):
        raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Duplicate brokers in replica assignment {assignment}")
    unknown = [b for b in assignment if b not in brokers]
    if unknown:
        raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unknown broker(s) {unknown} in replica assignment")
    if replication_factor is not None and len(assignment) != replication_factor:
        raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"Replica assignment {assignment} does not have {replication_factor} replicas")


def _check_factor(replication_factor: int, brokers: int) -> None:
    if replication_factor <= 0:
        raise AdminError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > brokers:
        raise AdminError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Replication factor: {replication_factor} larger than available brokers: {brokers}.")


def _rounds(ordered: list[int], partitions: int, first_partition: int,
            rng: random.Random | None) -> Iterator[tuple[int, int, list[int]]]:
    """Per partition: (partition, its leader, the other brokers in the order its followers are picked).
    Leaders go round-robin over ``ordered`` from a random broker; the followers' order starts at a random
    shift after the leader that grows once per full round, so that neighbouring partitions' replicas land
    on different brokers (Kafka's scheme)."""
    rng = rng or random.Random()
    n = len(ordered)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    for i in range(partitions):
        p = first_partition + i
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        yield p, ordered[first], [ordered[(first + 1 + (shift + j) % (n - 1)) % n] for j in range(n - 1)]


def assign_replicas(brokers: list[int], partitions: int, replication_factor: int, first_partition: int = 0,
                    rng: random.Random | None = None) -> dict[int, list[int]]:
    """Spread ``partitions`` partitions with ``replication_factor`` replicas each over ``brokers``, as Kafka's
    rack-unaware assignment does (`_rounds`). Raises AdminError(INVALID_REPLICATION_FACTOR) when there are
    fewer brokers than replicas."""
    _check_factor(replication_factor, len(brokers))
    return {p: [leader] + others[:replication_factor - 1]
            for p, leader, others in _rounds(sorted(brokers), partitions, first_partition, rng)}


def rack_alternated(racks: dict[int, str]) -> list[int]:
    """The brokers ordered so that racks alternate: the first broker of each rack (racks in name order),
    then the second of each, ... ({1: a, 2: a, 3: b, 4: c} → [1, 3, 4, 2])."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(racks.items()):
        by_rack.setdefault(rack, []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    return [column[i] for i in range(max(map(len, columns), default=0)) for column in columns if i < len(column)]


def assign_replicas_rack_aware(racks: dict[int, str], partitions: int, replication_factor: int,
                               first_partition: int = 0, rng: random.Random | None = None) -> dict[int, list[int]]:
    """Kafka's rack-aware idea: leaders go round-robin over the rack-alternated broker list (so leadership
    spreads over racks as well as brokers), and each follower is the next broker (at the same growing
    shift as the rack-unaware assignment) on a rack that has no replica of the partition yet; once every
    rack has one, racks may repeat (evenly, a second round at a time). ``racks``: live broker → its rack.
    AdminError(INVALID_REPLICATION_FACTOR) when there are fewer brokers than replicas."""
    _check_factor(replication_factor, len(racks))
    out: dict[int, list[int]] = {}
    for p, leader, candidates in _rounds(rack_alternated(racks), partitions, first_partition, rng):
        replicas = [leader]
        used = {racks[leader]}
        while len(replicas) < replication_factor:
            free = [b for b in candidates if b not in replicas]
            chosen = next((b for b in free if racks[b] not in used), None)
            if chosen is None:  # every rack has a replica already: start a new round of racks
                used = set()
                chosen = free[0]
            replicas.append(chosen)
            used.add(racks[chosen])
        out[p] = replicas
    return out


def place_replicas(racks: dict[int, str | None], partitions: int, replication_factor: int,
                   first_partition: int = 0) -> dict[int, list[int]]:
    """Rack-aware placement when every live broker has a rack (`broker.rack`), else rack-unaware, as Kafka
    decides."""
    if racks and all(rack is not None for rack in racks.values()):
        return assign_replicas_rack_aware({b: str(r) for b, r in racks.items()}, partitions, replication_factor,
                                          first_partition)
    return assign_replicas(sorted(racks), partitions, replication_factor, first_partition)
