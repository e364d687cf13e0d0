"""The streams group protocol (KIP-1071) at the request level against odradek: standby tasks, the revocation
handshake, a coordinator restart, and hostile input (malformed and huge topologies, fenced epochs, garbage
frames). Kafka's answers to the same requests are compared in tests/reference/scenarios_streams.py; the
application-level comparison is test_streams_word_count.py.

The members here are raw StreamsGroupHeartbeats, so each step is visible: m1 (process p1) alone owns every
active task; m2 (process p2) joins and the target moves half the active tasks to it, with one standby copy of
each task on the other process (`group.streams.num.standby.replicas=1`); m1 is asked to revoke, m2 gets the
moved tasks only once m1's heartbeat no longer reports them.
"""

from __future__ import annotations

import socket
import struct

import pytest

from odradek.protocol import codec
from tests.interop.helpers import wait_until
from tests.interop.test_groups_confluent import create_topic
from tests.reference.differential import Connection, ConnectionClosed

HEARTBEAT, DESCRIBE, API_VERSIONS = 88, 89, 18
PARTITIONS = 4
SETTINGS = {"group.streams.num.standby.replicas": "1", "group.streams.initial.rebalance.delay.ms": "0"}


def topology(source: str, subtopologies: int = 1) -> dict:
    return {"epoch": 0, "subtopologies": [{
        "subtopology_id": str(i), "source_topics": [source], "source_topic_regex": [],
        "state_changelog_topics": [], "repartition_sink_topics": [], "repartition_source_topics": [],
        "copartition_groups": []} for i in range(subtopologies)]}


def body(group: str, member: str, epoch: int, **fields) -> dict:
    out = {"group_id": group, "member_id": member, "member_epoch": epoch, "endpoint_information_epoch": 0,
           "instance_id": None, "rack_id": None, "rebalance_timeout_ms": -1, "topology": None, "active_tasks": None,
           "standby_tasks": None, "warmup_tasks": None, "process_id": None, "user_endpoint": None,
           "client_tags": None, "task_offsets": None, "task_end_offsets": None, "shutdown_application": False}
    out.update(fields)
    return out


def join(group: str, member: str, source: str, **fields) -> dict:
    return body(group, member, 0, rebalance_timeout_ms=30000, topology=topology(source), active_tasks=[],
                standby_tasks=[], warmup_tasks=[], process_id=f"p-{member}", client_tags=[], **fields)


def tasks(listed: list[dict] | None) -> set[tuple[str, int]] | None:
    if listed is None:
        return None
    return {(t["subtopology_id"], p) for t in listed for p in t["partitions"]}


def as_lists(owned: set[tuple[str, int]]) -> list[dict]:
    by: dict[str, list[int]] = {}
    for s, p in sorted(owned):
        by.setdefault(s, []).append(p)
    return [{"subtopology_id": s, "partitions": ps} for s, ps in by.items()]


class Member:
    """A raw streams member that remembers what it was given and reports it back, as the client does."""

    def __init__(self, conn: Connection, group: str, member_id: str, source: str) -> None:
        self.conn, self.group, self.member_id, self.source = conn, group, member_id, source
        self.epoch = 0
        self.active: set[tuple[str, int]] = set()
        self.standby: set[tuple[str, int]] = set()
        self.last: dict = {}

    def heartbeat(self, report: bool = True) -> dict:
        if self.epoch == 0:
            req = join(self.group, self.member_id, self.source)
        elif report:
            req = body(self.group, self.member_id, self.epoch, active_tasks=as_lists(self.active),
                       standby_tasks=as_lists(self.standby), warmup_tasks=[])
        else:
            req = body(self.group, self.member_id, self.epoch)
        r = self.conn.request(HEARTBEAT, 1, req)
        assert r["error_code"] == 0, r
        self.epoch = r["member_epoch"]
        if r["active_tasks"] is not None:
            self.active, self.standby = tasks(r["active_tasks"]), tasks(r["standby_tasks"])
        self.last = r
        return r


def describe(conn: Connection, group: str) -> dict:
    return conn.request(DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False,
                                      "include_topology_description": False})["groups"][0]


ALL = {("0", p) for p in range(PARTITIONS)}


@pytest.mark.timeout(180)
def test_standby_tasks_revocation_and_restart(broker_factory, topic_name):
    broker = broker_factory(SETTINGS)
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    group = topic_name + "-app"
    conn = Connection(broker.bootstrap)
    m1 = Member(conn, group, "m1", topic_name)
    wait_until(lambda: m1.heartbeat() and m1.active == ALL, 20, 0.1, "m1 owning every task")
    assert m1.standby == set()  # one process: nowhere to put a standby copy
    m2 = Member(conn, group, "m2", topic_name)
    m2.heartbeat()
    assert m2.active == set(), "m2 was given tasks m1 has not released"
    m2_standby_first = set(m2.standby)
    epoch_before = m1.epoch
    m1.heartbeat(report=False)  # told to revoke: fewer tasks, the same epoch
    assert m1.epoch == epoch_before and 0 < len(m1.active) < PARTITIONS
    kept = set(m1.active)
    m2.heartbeat()
    assert m2.active == set(), "tasks handed to m2 before m1 reported them revoked"
    m1.heartbeat()  # reports only what it kept: the revocation is acknowledged, m1 moves to the new epoch
    assert m1.epoch > epoch_before

    def converged() -> bool:
        m2.heartbeat()
        m1.heartbeat()
        return m1.active | m2.active == ALL and not m1.active & m2.active and describe(conn, group)[
            "group_state"] == "Stable"

    wait_until(converged, 20, 0.1, "the group Stable with the tasks split")
    assert m1.active == kept and len(m2.active) == PARTITIONS - len(kept)
    # each task has one standby copy on the other process
    assert m1.standby == m2.active and m2.standby == m1.active
    assert m2_standby_first <= ALL
    described = describe(conn, group)
    assert described["error_code"] == 0 and len(described["members"]) == 2
    assert described["topology"]["subtopologies"][0]["source_topics"] == [topic_name]
    state_before = {m["member_id"]: (m["member_epoch"], tasks(m["assignment"]["active_tasks"]),
                                     tasks(m["assignment"]["standby_tasks"])) for m in described["members"]}
    group_epoch = described["group_epoch"]
    conn.close()

    # a coordinator restart: the group comes back from __consumer_offsets, members keep their epochs
    broker.stop()
    broker = broker_factory(SETTINGS)  # the same data directory
    conn = Connection(broker.bootstrap)
    m1.conn = m2.conn = conn
    after = wait_until(lambda: (d := describe(conn, group))["error_code"] == 0 and d, 30, 0.2, "the group loaded")
    assert after["group_epoch"] == group_epoch
    assert {m["member_id"]: (m["member_epoch"], tasks(m["assignment"]["active_tasks"]),
                             tasks(m["assignment"]["standby_tasks"])) for m in after["members"]} == state_before
    r = m1.heartbeat()
    assert r["error_code"] == 0 and m1.active == kept  # not fenced, nothing moved
    conn.close()


@pytest.mark.timeout(120)
def test_hostile_streams_heartbeats(broker_factory, topic_name):
    broker = broker_factory(SETTINGS)
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    group = topic_name + "-app"
    conn = Connection(broker.bootstrap)
    m1 = Member(conn, group, "m1", topic_name)
    wait_until(lambda: m1.heartbeat() and m1.active == ALL, 20, 0.1, "m1 owning every task")

    # unknown member epochs: ahead is fenced, a stale one too, an unknown member is told so
    for epoch in (m1.epoch + 1, 10_000, 1 if m1.epoch > 2 else None):
        if epoch is None:
            continue
        r = conn.request(HEARTBEAT, 1, body(group, "m1", epoch))
        assert r["error_code"] == 110, r  # FENCED_MEMBER_EPOCH
    assert conn.request(HEARTBEAT, 1, body(group, "ghost", 1))["error_code"] == 25  # UNKNOWN_MEMBER_ID
    assert conn.request(HEARTBEAT, 1, body(group + "-none", "m1", 1))["error_code"] == 69  # GROUP_ID_NOT_FOUND

    # tasks that do not exist
    r = conn.request(HEARTBEAT, 1, body(group, "m1", m1.epoch, active_tasks=[{"subtopology_id": "0",
                                                                               "partitions": [2**31 - 1, -5]}],
                                        standby_tasks=[], warmup_tasks=[]))
    assert r["error_code"] == 42, r  # INVALID_REQUEST

    # malformed topologies
    bad = topology(topic_name)
    bad["subtopologies"][0]["copartition_groups"] = [{"source_topics": [-1], "source_topic_regex": [],
                                                      "repartition_source_topics": [32000]}]
    assert conn.request(HEARTBEAT, 1, join(group, "m9", topic_name) | {"topology": bad})["error_code"] == 130
    bad = topology(topic_name)
    bad["subtopologies"][0]["repartition_source_topics"] = [{"name": "", "partitions": -7, "replication_factor": -1,
                                                             "topic_configs": []}]
    assert conn.request(HEARTBEAT, 1, join(group, "m9", topic_name) | {"topology": bad})["error_code"] == 130

    # a huge topology: 3000 subtopologies each reading a topic that does not exist; answered, not adopted
    # by the existing group (a different topology, same epoch), and a fresh group reports the missing topics
    huge = {"epoch": 0, "subtopologies": [{
        "subtopology_id": f"s{i}", "source_topics": [f"{topic_name}-missing-{i:05d}-" + "x" * 150],
        "source_topic_regex": [], "state_changelog_topics": [{"name": f"{topic_name}-cl-{i}", "partitions": 0,
                                                              "replication_factor": 0, "topic_configs": []}],
        "repartition_sink_topics": [], "repartition_source_topics": [], "copartition_groups": []}
        for i in range(3000)]}
    r = conn.request(HEARTBEAT, 1, join(group, "m9", topic_name) | {"topology": huge})
    assert r["error_code"] == 42, r  # Kafka: "Topology updates are not supported yet."
    r = conn.request(HEARTBEAT, 1, join(group + "-huge", "h1", topic_name) | {"topology": huge})
    assert r["error_code"] == 0 and [s["status_code"] for s in r["status"]] == [1], r  # MISSING_SOURCE_TOPICS
    d = describe(conn, group + "-huge")
    assert d["group_state"] == "NotReady" and len(d["topology"]["subtopologies"]) == 3000

    # garbage: a StreamsGroupHeartbeat frame cut short, then random bytes after a valid header
    frame = codec.encode_request(HEARTBEAT, 1, 77, "hostile", join(group, "m7", topic_name))
    for payload in (frame[4:4 + (len(frame) - 4) // 2], frame[4:14] + b"\xff" * 64):
        host, port = broker.bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(struct.pack(">i", len(payload)) + payload)
            sock.settimeout(10)
            try:
                got = sock.recv(65536)
            except (ConnectionResetError, socket.timeout):
                got = b""
            assert got == b"", "a garbled StreamsGroupHeartbeat got an answer instead of a closed connection"

    # the broker still serves, and the group is intact
    r = m1.heartbeat()
    assert r["error_code"] == 0 and m1.active == ALL
    try:
        assert conn.request(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})[
            "error_code"] == 0
    except ConnectionClosed:
        pytest.fail("the broker closed a healthy connection")
    conn.close()
