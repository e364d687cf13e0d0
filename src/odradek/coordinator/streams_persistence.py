"""The record that keeps a streams group (streams_group.py) in `__consumer_offsets`.

Key: StreamsGroupKey (persistence.py, key version 1004, odradek's own). Value: int16 version = 0, then the
whole group state as UTF-8 JSON (written whenever it changed, like ConsumerGroupValue)::

    {"group_epoch", "assignment_epoch", "state_timestamp_ms", "standby_replicas",
     "topology": null | {"epoch", "subtopologies": [{"id", "source_topics", "repartition_sinks",
                         "changelogs": [T], "repartition_sources": [T], "copartition_groups": [[[i], [i]]]}]},
     "members": [{"member_id", "process_id", "instance_id", "rack_id", "client_id", "client_host",
                  "rebalance_timeout_ms", "topology_epoch", "user_endpoint": null | [host, port],
                  "client_tags": {k: v}, "member_epoch", "previous_member_epoch", "state",
                  "assigned": S, "pending_revocation": S, "target": S}]}

where T = [name, partitions, replication_factor, [[key, value]]] and S = [active, standby, warmup], each a
list of [subtopology id, partition]. The configured topology is not stored: it is recomputed from the
topology and the cluster's topics when the group is loaded.
"""

from __future__ import annotations

import json
import struct

from odradek.coordinator.consumer_group import MemberState
from odradek.coordinator.streams_group import StreamsGroup, StreamsMember, Subtopology, TaskSets, TopicInfo, Topology

VALUE_VERSION = 0


def _tasks(ts: TaskSets) -> list:
    return [sorted([s, p] for s, p in role) for role in ts.roles()]


def _task_sets(raw: list) -> TaskSets:
    return TaskSets(*({(str(s), int(p)) for s, p in role} for role in raw))


def _topic(t: TopicInfo) -> list:
    return [t.name, t.partitions, t.replication_factor, [list(kv) for kv in t.configs]]


def _topic_info(raw: list) -> TopicInfo:
    return TopicInfo(raw[0], int(raw[1]), int(raw[2]), tuple((k, v) for k, v in raw[3]))


def encode_streams_group_value(g: StreamsGroup) -> bytes:
    topology = None
    if g.topology is not None:
        topology = {"epoch": g.topology.epoch, "subtopologies": [{
            "id": s.subtopology_id, "source_topics": list(s.source_topics),
            "repartition_sinks": list(s.repartition_sinks), "changelogs": [_topic(t) for t in s.changelogs],
            "repartition_sources": [_topic(t) for t in s.repartition_sources],
            "copartition_groups": [[list(a), list(b)] for a, b in s.copartition_groups],
        } for s in g.topology.subtopologies]}
    members = [{
        "member_id": m.member_id, "process_id": m.process_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
        "client_id": m.client_id, "client_host": m.client_host, "rebalance_timeout_ms": m.rebalance_timeout_ms,
        "topology_epoch": m.topology_epoch, "user_endpoint": list(m.user_endpoint) if m.user_endpoint else None,
        "client_tags": m.client_tags, "member_epoch": m.member_epoch,
        "previous_member_epoch": m.previous_member_epoch, "state": m.state.value,
        "assigned": _tasks(m.assigned), "pending_revocation": _tasks(m.pending_revocation),
        "target": _tasks(g.target.get(m.member_id) or TaskSets()),
    } for m in sorted(g.members.values(), key=lambda m: m.member_id)]
    body = {"group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
            "state_timestamp_ms": g.state_timestamp_ms, "standby_replicas": g.standby_replicas,
            "topology": topology, "members": members}
    return struct.pack(">h", VALUE_VERSION) + json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def decode_streams_group_value(group_id: str, raw: bytes) -> StreamsGroup:
    (version,) = struct.unpack_from(">h", raw)
    if version != VALUE_VERSION:
        raise ValueError(f"unknown streams group value version {version}")
    body = json.loads(raw[2:].decode())
    g = StreamsGroup(group_id, group_epoch=int(body["group_epoch"]), assignment_epoch=int(body["assignment_epoch"]),
                     state_timestamp_ms=int(body["state_timestamp_ms"]),
                     standby_replicas=int(body.get("standby_replicas", -1)))
    t = body["topology"]
    if t is not None:
        g.topology = Topology(int(t["epoch"]), tuple(Subtopology(
            s["id"], tuple(s["source_topics"]), tuple(s["repartition_sinks"]),
            tuple(_topic_info(x) for x in s["changelogs"]), tuple(_topic_info(x) for x in s["repartition_sources"]),
            tuple((tuple(a), tuple(b)) for a, b in s["copartition_groups"])) for s in t["subtopologies"]))
    for m in body["members"]:
        member = StreamsMember(
            m["member_id"], process_id=m["process_id"], instance_id=m["instance_id"], rack_id=m["rack_id"],
            client_id=m["client_id"], client_host=m["client_host"], rebalance_timeout_ms=m["rebalance_timeout_ms"],
            topology_epoch=m["topology_epoch"],
            user_endpoint=(m["user_endpoint"][0], int(m["user_endpoint"][1])) if m["user_endpoint"] else None,
            client_tags=dict(m["client_tags"]), member_epoch=m["member_epoch"],
            previous_member_epoch=m["previous_member_epoch"], state=MemberState(m["state"]),
            assigned=_task_sets(m["assigned"]), pending_revocation=_task_sets(m["pending_revocation"]))
        g.add(member)  # type: ignore[arg-type]  # (registers a static member's instance id too)
        g.target[member.member_id] = _task_sets(m["target"])
    return g
