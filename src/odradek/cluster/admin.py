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
from typing import Protocol

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


def assign_replicas(brokers: list[int], partitions: int, replication_factor: int, first_partition: int = 0,
                    rng: random.Random | None = None) -> dict[int, list[int]]:
    """Spread ``partitions`` partitions with ``replication_factor`` replicas each over ``brokers``, as Kafka's
    rack-unaware assignment does: leaders round-robin from a random broker, and each partition's followers
    follow its leader at a shift that grows once per full round, so that replicas of neighbouring
    partitions land on different brokers. Raises AdminError(INVALID_REPLICATION_FACTOR) when there are fewer
    brokers than replicas."""
    if replication_factor <= 0:
        raise AdminError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise AdminError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    rng = rng or random.Random()
    ordered = sorted(brokers)
    n = len(ordered)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out: dict[int, list[int]] = {}
    for i in range(partitions):
        p = first_partition + i
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            replicas.append(ordered[(first + 1 + (shift + j) % (n - 1)) % n] if n > 1 else ordered[first])
        out[p] = replicas
    return out
