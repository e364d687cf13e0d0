"""Broker changes, as the controller handles them: brokers that register (new, or restarted: a new
registration epoch), brokers whose registration vanished (their ZooKeeper session ended), and brokers that
ask to shut down (ControlledShutdown).

- A broker gone: every partition it led gets a new leader from the live ISR (election.py), or none (the
  partition is offline until an ISR member returns; never a replica outside the ISR unless unclean
  elections are allowed); it leaves the ISR of every partition it followed. Leader epochs go up with each
  change, so the old leader, should it come back, is fenced.
- A broker started: it learns the whole metadata and leads or follows what it holds replicas of; offline
  partitions it can now lead get it as leader; every broker learns it is live.
- A controlled shutdown: leadership of every partition the broker leads moves to another live ISR member
  (which keeps clients on retriable errors only), and it leaves the ISRs it is in and stops fetching
  (StopReplica without deletion; from its request on, the broker itself fetches nothing, so it cannot
  fetch its way back into an ISR it left). Partitions it alone can lead are reported back as remaining.

Not thread-safe; owned by the event loop (the controller's queue).
"""

from __future__ import annotations

import asyncio
import logging

from odradek.cluster import zk_layout as L
from odradek.cluster.controller.election import controlled_shutdown_election, isr_without
from odradek.cluster.controller.requests import RequestBatch
from odradek.cluster.controller.steps import ControllerSteps
from odradek.cluster.zk_layout import BrokerRegistration, PartitionState
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class ShutdownRefused(Exception):
    def __init__(self, error_code: int) -> None:
        super().__init__(f"controlled shutdown refused: error {error_code}")
        self.error_code = error_code


async def on_brokers_changed(ctl: ControllerSteps) -> None:
    ctx = ctl.ctx
    ids = [int(i) for i in await ctl.zk.children(L.BROKER_IDS, ctl.brokers_watch)]
    found = await asyncio.gather(*(ctl.zk.get_or_none(L.broker_path(i)) for i in ids))
    current = {i: L.decode_broker(i, f[0], f[1].czxid) for i, f in zip(ids, found) if f is not None}
    gone = {b for b, reg in ctx.brokers.items() if b not in current or current[b].epoch != reg.epoch}
    started = {b: reg for b, reg in current.items() if b not in ctx.brokers or b in gone}
    if gone:
        await brokers_gone(ctl, gone)
    if started:
        await brokers_started(ctl, started)


async def brokers_gone(ctl: ControllerSteps, gone: set[int]) -> None:
    ctx = ctl.ctx
    log.info("controller: broker(s) %s gone", sorted(gone))
    for broker_id in gone:
        ctx.brokers.pop(broker_id, None)
        ctx.shutting_down.discard(broker_id)
        ctl.channel.remove_broker(broker_id)
    batch = ctl.batch()
    await ctl.elect_offline(batch, [tp for tp in ctx.partitions()
                                    if tp in ctx.states and ctx.states[tp].leader in gone and tp[0] not in ctx.deleting])
    await leave_isr(ctl, batch, gone)
    batch.add_update_metadata(ctx.live, ctx.partitions())
    batch.send(ctl.channel)


async def leave_isr(ctl: ControllerSteps, batch: RequestBatch, gone: set[int],
                    partitions: list[TopicPartition] | None = None) -> None:
    """Remove the ``gone`` replicas from the ISR of every partition whose live leader keeps leading (a
    partition they led was elected anew already). The leader epoch goes up, as Kafka's controller does."""
    ctx = ctl.ctx

    def decide(tp: TopicPartition, current: PartitionState) -> PartitionState | None:
        if current.leader in gone or current.leader < 0 or not set(current.isr) & gone:
            return None
        isr = isr_without(current.isr, gone, current.leader)
        if isr == current.isr:
            return None
        return current.copy(isr=isr, leader_epoch=current.leader_epoch + 1)

    await ctl.decide_and_write(batch, partitions if partitions is not None else ctx.partitions(), decide)


async def brokers_started(ctl: ControllerSteps, started: dict[int, BrokerRegistration]) -> None:
    ctx = ctl.ctx
    log.info("controller: broker(s) %s registered", sorted(started))
    for broker_id, reg in started.items():
        ctx.brokers[broker_id] = reg
        ctl.channel.add_broker(reg)
    batch = ctl.batch()
    batch.add_update_metadata(ctx.live, ctx.partitions())
    for tp in ctx.partitions():
        holders = [r for r in ctx.replicas(tp) if r in started]
        if holders and tp in ctx.states and tp[0] not in ctx.deleting:
            batch.add_leader_and_isr(holders, tp)
    await ctl.elect_offline(batch, [tp for tp in ctx.partitions() if tp in ctx.states and tp[0] not in ctx.deleting
                                    and ctx.states[tp].leader not in ctx.brokers])
    await ctl.start_new_partitions(batch, [tp for tp in ctx.partitions()
                                           if tp not in ctx.states and tp[0] not in ctx.deleting])
    batch.send(ctl.channel)


async def controlled_shutdown(ctl: ControllerSteps, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
    """Move leadership off ``broker_id``; returns the partitions it still leads (it alone can)."""
    ctx = ctl.ctx
    reg = ctx.brokers.get(broker_id)
    if reg is None:
        raise ShutdownRefused(ErrorCode.BROKER_NOT_AVAILABLE)
    if broker_epoch >= 0 and broker_epoch != reg.epoch:
        raise ShutdownRefused(ErrorCode.STALE_BROKER_EPOCH)
    ctx.shutting_down.add(broker_id)
    mine = [tp for tp in ctx.partitions_on(broker_id) if tp in ctx.states and tp[0] not in ctx.deleting]

    def decide(tp: TopicPartition, current: PartitionState) -> PartitionState | None:
        if current.leader != broker_id:
            return None
        elected = controlled_shutdown_election(ctx.replicas(tp), current.isr, ctx.live, ctx.shutting_down)
        if elected is None:
            return None
        return current.copy(leader=elected[0], isr=elected[1], leader_epoch=current.leader_epoch + 1)

    batch = ctl.batch()
    moved = await ctl.decide_and_write(batch, mine, decide)
    followed = [tp for tp in mine if ctx.states[tp].leader != broker_id]
    for tp in followed:
        batch.add_stop_replica(broker_id, tp, delete=False)
    await leave_isr(ctl, batch, {broker_id}, followed)
    batch.send(ctl.channel)
    remaining = [tp for tp in mine if ctx.states[tp].leader == broker_id]
    log.info("controller: controlled shutdown of broker %d: %d partitions moved, %d remaining", broker_id,
             len(moved), len(remaining))
    return remaining
