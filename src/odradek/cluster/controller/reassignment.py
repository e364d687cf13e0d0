"""Partition reassignment (KIP-455), as Kafka's ZooKeeper-era controller does it: AlterPartitionReassignments
and ListPartitionReassignments, and the steps that move a partition's replicas.

With ORS the original replicas, TRS the target ones, RS = TRS + (ORS - TRS) (target first, so the first
target replica is the preferred leader from the start), AR = TRS - ORS and RR = ORS - TRS:

1. The topic znode gets RS as the partition's replicas, with `adding_replicas` AR and `removing_replicas`
   RR, under the controller-epoch fence. That znode is the whole record of the reassignment: a controller
   that takes over reads it and carries on (`resume`).
2. The leader epoch goes up and every replica of RS hears LeaderAndIsr: the new replicas create their logs
   and start following; the leader counts them among its followers.
3. Nothing more happens until every replica of AR is in the ISR (the leader adds them once they have
   caught up, and its ISR change notification reaches the controller: `check`).
4. Then the partition finishes: a leader outside TRS (or not live) is replaced by the first live TRS
   member of the ISR; the ISR shrinks to its TRS members, the leader epoch goes up, the topic znode gets
   TRS with the reassignment cleared, TRS hears LeaderAndIsr, every broker the metadata, and RR
   StopReplica with deletion (their logs go).

A cancellation (null replicas) reverts to ORS at once: ORS members are still replicas, so step 4 runs with
ORS as the target and AR as the replicas to remove. A new target for a partition that is being reassigned
starts from its ORS again; adding replicas the new target drops are stopped and deleted.

Not thread-safe; owned by the event loop (the controller's queue).
"""

from __future__ import annotations

import logging

from odradek.cluster import zk_layout as L
from odradek.cluster.controller.requests import RequestBatch
from odradek.cluster.controller.steps import ControllerSteps
from odradek.cluster.zk_layout import PartitionState, TopicAssignment
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Outcome = tuple[int, str | None]  # (error code, message)


def validate_target(replicas: list[int], live: set[int]) -> Outcome | None:
    """INVALID_REPLICA_ASSIGNMENT for an empty target, duplicates, or brokers that are not live."""
    if not replicas:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The target replica list may not be empty"
    if len(set(replicas)) != len(replicas):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Duplicate brokers in the target replicas {replicas}"
    if any(r < 0 for r in replicas):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in the target replicas {replicas}"
    unknown = sorted(r for r in replicas if r not in live)
    if unknown:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Broker(s) {unknown} in the target replicas are not live"
    return None


async def alter(ctl: ControllerSteps, wanted: dict[TopicPartition, list[int] | None]) -> dict[TopicPartition, Outcome]:
    """AlterPartitionReassignments: start (a target) or cancel (None) each partition's reassignment."""
    ctx = ctl.ctx
    out: dict[TopicPartition, Outcome] = {}
    batch = ctl.batch()
    for tp, target in sorted(wanted.items(), key=lambda item: item[0]):
        assignment = ctx.topics.get(tp[0])
        if assignment is None or tp[1] not in assignment.partitions or tp[0] in ctx.deleting \
                or tp not in ctx.states:
            out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unknown partition {tp[0]}-{tp[1]}"
            continue
        if target is None:
            if not assignment.reassigning(tp[1]):
                out[tp] = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"No reassignment of {tp[0]}-{tp[1]} is in progress"
                continue
            log.info("controller: cancelling the reassignment of %s-%d (back to %s)", tp[0], tp[1],
                     assignment.original(tp[1]))
            await _finish(ctl, batch, tp, assignment.original(tp[1]))
            out[tp] = ErrorCode.NONE, None
            continue
        problem = validate_target(target, ctx.live)
        if problem is not None:
            out[tp] = problem
            continue
        await _start(ctl, batch, tp, list(target))
        out[tp] = ErrorCode.NONE, None
    batch.send(ctl.channel)
    await check(ctl, [tp for tp, (code, _) in out.items() if code == ErrorCode.NONE])
    return out


Ongoing = tuple[list[int], list[int], list[int]]  # (replicas, adding, removing)


def ongoing(ctl: ControllerSteps, partitions: list[TopicPartition] | None) -> dict[TopicPartition, Ongoing]:
    """ListPartitionReassignments: (replicas, adding, removing) of each partition being reassigned, among
    ``partitions`` (None: all)."""
    ctx = ctl.ctx
    out = {}
    for tp in ctx.partitions() if partitions is None else partitions:
        assignment = ctx.topics.get(tp[0])
        if assignment is not None and assignment.reassigning(tp[1]) and tp[0] not in ctx.deleting:
            out[tp] = (list(assignment.partitions[tp[1]]), list(assignment.adding.get(tp[1], [])),
                       list(assignment.removing.get(tp[1], [])))
    return out


async def _start(ctl: ControllerSteps, batch: RequestBatch, tp: TopicPartition, target: list[int]) -> None:
    ctx = ctl.ctx
    topic, index = tp
    assignment = ctx.topics[topic]
    original = assignment.original(index)
    dropped = [r for r in assignment.adding.get(index, []) if r not in target]  # added by an earlier target
    if target == original:
        if assignment.reassigning(index):  # the same as cancelling
            await _finish(ctl, batch, tp, original)
        return
    replicas = target + [r for r in original if r not in target]
    updated = _with_partition(assignment, index, replicas, [r for r in target if r not in original],
                              [r for r in original if r not in target])
    await ctl.store.write_assignment(topic, updated)
    ctx.topics[topic] = updated
    log.info("controller: reassigning %s-%d from %s to %s (replicas now %s)", topic, index, original, target, replicas)
    for replica in dropped:
        batch.add_stop_replica(replica, tp, delete=True)
    # a new leader epoch, so that every replica (the new ones included) takes the new replica set
    await ctl.decide_and_write(batch, [tp], lambda _tp, current: current.copy(
        leader_epoch=current.leader_epoch + 1, isr=[r for r in current.isr if r in replicas] or current.isr))
    for replica in updated.adding.get(index, []):
        batch.add_leader_and_isr([replica], tp, is_new=True)


async def check(ctl: ControllerSteps, partitions: list[TopicPartition]) -> None:
    """Finish the reassignments among ``partitions`` whose adding replicas have all joined the ISR."""
    ctx = ctl.ctx
    batch = ctl.batch()
    for tp in partitions:
        assignment = ctx.topics.get(tp[0])
        state = ctx.states.get(tp)
        if assignment is None or state is None or not assignment.reassigning(tp[1]) or tp[0] in ctx.deleting:
            continue
        if all(r in state.isr for r in assignment.adding.get(tp[1], [])):
            await _finish(ctl, batch, tp, assignment.target(tp[1]))
    batch.send(ctl.channel)


async def resume(ctl: ControllerSteps) -> None:
    """A new controller: partitions left mid-reassignment carry on (their replicas have heard of the
    reassignment's replica set from the failover's LeaderAndIsr); finish those that are ready."""
    ctx = ctl.ctx
    pending = [tp for tp in ctx.partitions() if ctx.topics[tp[0]].reassigning(tp[1])]
    if pending:
        log.info("controller: resuming the reassignment of %d partition(s)", len(pending))
        await check(ctl, pending)


async def _finish(ctl: ControllerSteps, batch: RequestBatch, tp: TopicPartition, target: list[int]) -> None:
    """Make ``target`` the replicas (step 4 above, or a cancellation)."""
    ctx = ctl.ctx
    topic, index = tp
    assignment = ctx.topics[topic]
    removed = [r for r in assignment.partitions[index] if r not in target]
    live = ctx.live - ctx.shutting_down

    def decide(_tp: TopicPartition, current: PartitionState) -> PartitionState | None:
        isr = [r for r in current.isr if r in target]
        leader = current.leader
        if leader not in target or leader not in live:
            # the first live target replica in the ISR; none (the ISR members being removed are the only
            # ones in sync): keep the state and let the partition wait
            leader = next((r for r in target if r in isr and r in live), -1)
            if leader < 0:
                return None
        return current.copy(leader=leader, isr=isr or [leader], leader_epoch=current.leader_epoch + 1)

    state = ctx.states[tp]
    if decide(tp, state) is None:
        log.warning("controller: %s-%d cannot finish its reassignment to %s yet: no target replica is a live ISR "
                    "member (ISR %s)", topic, index, target, state.isr)
        return
    updated = _with_partition(assignment, index, list(target), [], [])
    # the new replica set first: the LeaderAndIsr decide_and_write sends names it, and goes to it only
    ctx.topics[topic] = updated
    written = await ctl.decide_and_write(batch, [tp], decide)
    if tp not in written:
        ctx.topics[topic] = assignment  # the state moved on and no longer allows it: try on the next check
        return
    await ctl.store.write_assignment(topic, updated)
    for replica in removed:
        batch.add_stop_replica(replica, tp, delete=True)
    log.info("controller: %s-%d now has replicas %s (leader %d, ISR %s); removed %s", topic, index, target,
             ctx.states[tp].leader, ctx.states[tp].isr, removed)


def _with_partition(assignment: TopicAssignment, index: int, replicas: list[int], adding: list[int],
                    removing: list[int]) -> TopicAssignment:
    partitions = dict(assignment.partitions)
    partitions[index] = replicas
    adding_map = {p: r for p, r in assignment.adding.items() if p != index}
    removing_map = {p: r for p, r in assignment.removing.items() if p != index}
    if adding:
        adding_map[index] = adding
    if removing:
        removing_map[index] = removing
    return L.TopicAssignment(assignment.topic_id, partitions, adding_map, removing_map)
