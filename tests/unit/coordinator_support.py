"""Helpers shared by the coordinator tests: running test bodies in an event loop, waiting for background
tasks, and internal-topic partitions led by one broker on real logs (with a group Coordinator over them)."""

from __future__ import annotations

import asyncio
import functools
import inspect
from pathlib import Path
from typing import Callable

from odradek.cluster.partition import Partition, ReplicationError
from odradek.config import BrokerConfig
from odradek.coordinator import OFFSETS_TOPIC, Coordinator
from odradek.coordinator.persistence import partition_for
from odradek.coordinator.timers import FakeScheduler
from odradek.protocol.errors import ErrorCode
from odradek.storage import LogConfig, PartitionLog

LOCAL_ID = 0


def run(fn):
    """Run a test body inside an event loop (futures need one), awaiting it when it is a coroutine; pytest
    still hands it its fixtures. Bodies wait on real time only where the code under test does, for
    constants the test made small."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        async def body():
            result = fn(*args, **kwargs)
            if inspect.isawaitable(result):
                await result

        asyncio.run(body())

    return wrapper


async def eventually(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Let the loop run (background tasks, flusher callbacks) until ``condition()`` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        assert loop.time() < deadline, f"not reached within {timeout_s} s"
        await asyncio.sleep(0.001)


class Node:
    """The local replicas of one broker, on real logs under ``directory``. `lead` makes a partition led here
    in the node's current leader epoch; with the ISR = this broker alone (the default) the high watermark
    follows every append at once, as on a single node. Notifications (appends, HW moves) are recorded."""

    def __init__(self, directory: Path, clock: Callable[[], int] | None = None) -> None:
        self.directory = directory
        self.clock = clock
        self.leader_epoch = 0
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.notified: list[tuple[str, int]] = []

    def lead(self, topic: str, index: int, config: LogConfig | None = None, flusher=None,
             isr: tuple[int, ...] = (LOCAL_ID,)) -> Partition:
        options = {} if flusher is None else {"flusher": flusher}
        plog = PartitionLog.open(self.directory / f"{topic}-{index}", config or LogConfig(), clock=self.clock,
                                 **options)
        partition = Partition(topic, index, local_id=LOCAL_ID, log=plog,
                              notify=lambda t, p: self.notified.append((t, p)))
        partition.make_leader(leader_epoch=self.leader_epoch, isr=list(isr), replicas=sorted({LOCAL_ID, *isr}),
                              zk_version=0, now_ms=0)
        self.partitions[(topic, index)] = partition
        return partition

    def replicas_of(self, topic: str) -> Callable[[int], Partition | None]:
        """``get_partition`` for the coordinators of an internal topic."""
        return lambda index: self.partitions.get((topic, index))

    def log(self, topic: str, index: int) -> PartitionLog:
        return self.partitions[(topic, index)].log

    def leader_partition(self, topic: str, index: int) -> Partition:
        """As the replica manager's: the partition if led here, else ReplicationError."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise ReplicationError(f"unknown partition {topic}-{index}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        partition.check_leader()
        return partition

    def restart(self) -> None:
        """The broker restarts: every log is closed, opened again (recovered from disk) and led in the next
        leader epoch, with the default flusher."""
        self.leader_epoch += 1
        for (topic, index), partition in list(self.partitions.items()):
            partition.log.close()
            self.lead(topic, index, partition.log.config, isr=tuple(partition.isr))

    def close(self) -> None:
        for partition in self.partitions.values():
            partition.log.close()


def key_on(partition: int, partitions: int, prefix: str) -> str:
    """A group (or transactional) id that hashes to ``partition`` of an internal topic."""
    return next(f"{prefix}{i}" for i in range(10_000) if partition_for(f"{prefix}{i}", partitions) == partition)


def offsets_coordinator(node: Node, partitions: int, partition_exists: Callable[[str, int], bool],
                        scheduler: FakeScheduler | None = None, config: BrokerConfig | None = None) -> Coordinator:
    """A group Coordinator over ``node``'s `__consumer_offsets` partitions, each led (created if need be) and
    loaded here."""
    for index in range(partitions):
        if (OFFSETS_TOPIC, index) not in node.partitions:
            node.lead(OFFSETS_TOPIC, index)
    coordinator = Coordinator(config or BrokerConfig(), partitions, node.replicas_of(OFFSETS_TOPIC),
                              partition_exists, scheduler or FakeScheduler())
    for index in range(partitions):
        coordinator.load_partition(index)
    return coordinator
