"""Topic changes, as the controller handles them: topics created (a new `/brokers/topics/TOPIC`, written by
whichever broker took the CreateTopics or auto-created it), topics grown (new partitions in that znode:
CreatePartitions) and topics marked for deletion (`/admin/delete_topics/TOPIC`).

- New partitions get their first state: the first live replica of the assignment leads, the live replicas
  form the ISR, leader epoch 0; the replicas hear LeaderAndIsr (`is_new`) and every broker the metadata.
- A deletion tells every broker the topic's partitions are going (leader -2 in UpdateMetadata, so clients
  stop using them), has every live replica delete its log (StopReplica with deletion; the per-broker
  queues deliver it before anything about a later topic of the same name), and removes the topic, its
  configs and the deletion mark from ZooKeeper. A replica that is down keeps its log until it starts
  again, when it removes logs of topics the cluster no longer has.

Not thread-safe; owned by the event loop (the controller's queue).
"""

from __future__ import annotations

import logging

from odradek.cluster import zk_layout as L
from odradek.cluster.controller.steps import ControllerSteps
from odradek.cluster.zk import NoNodeError

log = logging.getLogger(__name__)


async def on_topics_changed(ctl: ControllerSteps) -> None:
    ctx = ctl.ctx
    names = set(await ctl.zk.children(L.TOPICS, ctl.topics_watch))
    for gone in set(ctx.topics) - names:
        _forget(ctl, gone)
    new = sorted(names - set(ctx.topics))
    if not new:
        return
    batch = ctl.batch()
    for topic in new:
        await ctl.zk.exists(L.topic_path(topic), ctl.topic_watch)  # armed before the read: no change is missed
        assignment = await ctl.store.read_assignment(topic)
        if assignment is None:
            continue
        ctx.topics[topic] = assignment
        log.info("controller: new topic %s with %d partitions", topic, len(assignment.partitions))
        await ctl.start_new_partitions(batch, ctx.partitions(topic))
    batch.send(ctl.channel)


async def on_topic_modified(ctl: ControllerSteps, topic: str) -> None:
    ctx = ctl.ctx
    if topic not in ctx.topics:
        return
    if await ctl.zk.exists(L.topic_path(topic), ctl.topic_watch) is None:
        return  # deleted: on_topics_changed forgets it
    assignment = await ctl.store.read_assignment(topic)
    if assignment is None:
        return
    old = ctx.topics[topic]
    added = sorted(set(assignment.partitions) - set(old.partitions))
    ctx.topics[topic] = assignment
    if added:
        log.info("controller: topic %s grew by partitions %s", topic, added)
        batch = ctl.batch()
        await ctl.start_new_partitions(batch, [(topic, p) for p in added])
        batch.send(ctl.channel)


async def on_deletions(ctl: ControllerSteps) -> None:
    ctx = ctl.ctx
    for topic in sorted(await ctl.zk.children(L.DELETE_TOPICS, ctl.deletions_watch)):
        if topic not in ctx.topics:
            await _delete_node(ctl, L.delete_topic_path(topic))
            continue
        if topic in ctx.deleting:
            continue
        ctx.deleting.add(topic)
        partitions = ctx.partitions(topic)
        batch = ctl.batch()
        batch.add_deleted(ctx.live, partitions)
        for tp in partitions:
            for replica in ctx.replicas(tp):
                batch.add_stop_replica(replica, tp, delete=True)
        # ZooKeeper first: once a broker hears the topic is gone, its name is free to create again
        await ctl.zk.delete_recursive(L.topic_path(topic))
        await _delete_node(ctl, L.topic_config_path(topic))
        await _delete_node(ctl, L.delete_topic_path(topic))
        batch.send(ctl.channel)
        _forget(ctl, topic)
        log.info("controller: deleted topic %s", topic)


def _forget(ctl: ControllerSteps, topic: str) -> None:
    ctx = ctl.ctx
    ctx.topics.pop(topic, None)
    ctx.deleting.discard(topic)
    for tp in [tp for tp in ctx.states if tp[0] == topic]:
        del ctx.states[tp]


async def _delete_node(ctl: ControllerSteps, path: str) -> None:
    try:
        await ctl.zk.delete(path)
    except NoNodeError:
        pass
