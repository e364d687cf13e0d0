"""Streams groups (KIP-1071) in a three-broker cluster: the group's coordinator (the leader of its
`__consumer_offsets` partition, whichever broker that is) creates the internal topics the topology needs
through ZooKeeper, with the partition counts it decided and `default.replication.factor` replicas; when that
broker is killed, the broker that takes over the partition restores the group from the replicated log and the
members carry on with their epochs and tasks."""

from __future__ import annotations

import pytest

from odradek.protocol.api_keys import ApiKey
from tests.cluster.common import REPLICATED, create_topic
from tests.interop.helpers import wait_until
from tests.interop.test_broker_semantics import request
from tests.streams.test_streams_group_protocol import join, body, tasks, as_lists

SETTINGS = {**REPLICATED, "group.streams.initial.rebalance.delay.ms": "0"}
PARTITIONS = 3


def topology(source: str, app: str) -> dict:
    """Word count's: 0 reads the source and writes the repartition topic, 1 reads it into a store."""
    return {"epoch": 0, "subtopologies": [
        {"subtopology_id": "0", "source_topics": [source], "source_topic_regex": [], "state_changelog_topics": [],
         "repartition_sink_topics": [f"{app}-rp"], "repartition_source_topics": [], "copartition_groups": []},
        {"subtopology_id": "1", "source_topics": [], "source_topic_regex": [],
         "state_changelog_topics": [{"name": f"{app}-cl", "partitions": 0, "replication_factor": 0,
                                     "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}],
         "repartition_sink_topics": [], "copartition_groups": [],
         "repartition_source_topics": [{"name": f"{app}-rp", "partitions": 0, "replication_factor": 0,
                                        "topic_configs": []}]}]}


def coordinator_of(cluster, group: str) -> int:
    def ask():
        node = cluster.running_ids()[0]
        found = request(cluster.broker(node).bootstrap, ApiKey.FIND_COORDINATOR, 4,
                        {"key_type": 0, "coordinator_keys": [group]})["coordinators"][0]
        return found["node_id"] if found["error_code"] == 0 and found["node_id"] in cluster.running_ids() else None
    return wait_until(ask, timeout=60, interval=0.2, message=f"a coordinator for {group}")


@pytest.mark.timeout(240)
def test_internal_topics_created_and_group_survives_coordinator_kill(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=SETTINGS).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name, PARTITIONS)
    app = topic_name + "-app"
    coordinator = coordinator_of(cluster, app)
    address = cluster.broker(coordinator).bootstrap
    all_tasks = {(s, p) for s in "01" for p in range(PARTITIONS)}

    held: dict[str, set] = {}
    epoch: dict[str, int] = {}

    def heartbeat(member: str, at: str) -> dict:
        if member not in epoch:
            req = join(app, member, topic_name) | {"topology": topology(topic_name, app)}
        else:
            req = body(app, member, epoch[member], active_tasks=as_lists(held.get(member, set())), standby_tasks=[],
                       warmup_tasks=[])
        r = request(at, ApiKey.STREAMS_GROUP_HEARTBEAT, 1, req)
        if r["error_code"] == 0:
            epoch[member] = r["member_epoch"]
            if r["active_tasks"] is not None:
                held[member] = tasks(r["active_tasks"])
        return r

    first = heartbeat("m1", address)
    assert [s["status_code"] for s in first["status"]] == [3], first  # MISSING_INTERNAL_TOPICS
    # created through ZooKeeper with the decided counts and three replicas, seen by every broker
    for name in (f"{app}-rp", f"{app}-cl"):
        wait_until(lambda: all(len(cluster.partition_state(name, p).isr) == 3 for p in range(PARTITIONS)),
                   timeout=60, interval=0.3, message=f"{name} with {PARTITIONS} replicated partitions")
    wait_until(lambda: heartbeat("m1", address)["error_code"] == 0 and held.get("m1") == all_tasks,
               timeout=60, interval=0.3, message="m1 running every task once the internal topics exist")
    heartbeat("m2", address)
    wait_until(lambda: [heartbeat(m, address) for m in ("m1", "m2")] and held["m1"] | held["m2"] == all_tasks
               and held["m1"] and held["m2"] and not held["m1"] & held["m2"], timeout=60, interval=0.3,
               message="the tasks split between m1 and m2")
    before = {m: (epoch[m], set(held[m])) for m in ("m1", "m2")}

    cluster.kill(coordinator)
    successor = coordinator_of(cluster, app)
    assert successor != coordinator
    address = cluster.broker(successor).bootstrap

    def carried_on() -> bool:
        answers = [heartbeat(m, address) for m in ("m1", "m2")]
        return all(a["error_code"] == 0 for a in answers)

    wait_until(carried_on, timeout=60, interval=0.5, message="both members accepted by the new coordinator")
    assert {m: (epoch[m], held[m]) for m in ("m1", "m2")} == before  # the same epochs and tasks
    described = request(address, ApiKey.STREAMS_GROUP_DESCRIBE, 1, {
        "group_ids": [app], "include_authorized_operations": False, "include_topology_description": False})
    group = described["groups"][0]
    assert group["error_code"] == 0 and group["group_state"] == "Stable"
    assert {t["name"]: t["partitions"] for s in group["topology"]["subtopologies"]
            for t in s["state_changelog_topics"] + s["repartition_source_topics"]} == {
        f"{app}-rp": PARTITIONS, f"{app}-cl": PARTITIONS}
