"""Differential scenarios of KIP-848, the consumer group protocol: ConsumerGroupHeartbeat (68),
ConsumerGroupDescribe (69) and what the other group APIs answer about a consumer-protocol group.

Same DSL as scenarios.py (its helpers are reused). Member ids are chosen by the client (v1 requires it), fixed
strings "m1", "m2" here; only the v0 join and classic JoinGroup get generated ids, which the normaliser aliases.
The projection `members_sorted` orders members (and groups) by id before normalising, so the aliases the
normaliser hands out (`<member 1>`, ...) follow the ids, not the broker's order.

Two things of Kafka 4.4's group coordinator that the setups take care of (the findings are in
/tmp/kip848_findings.md when this was written):

* it learns of a new topic from the metadata image a moment after Metadata shows it, so a member that joins
  right after CreateTopics may get an empty assignment: `consumer_topic()` waits until a throwaway group's
  member is assigned the topic;
* it recomputes a group's target assignment at most once per `group.consumer.assignment.interval.ms` (1 s by
  default): a member joining within 1 s of the last computation gets the old assignment epoch and the group is
  "Assigning" until a later heartbeat. `pause()` before a second member joins makes Kafka compute the new target
  in that join, which is what a coordinator that assigns synchronously always does.
"""

from __future__ import annotations

import struct
import time
from typing import Any, Callable

from .differential import Body, Call, Ctx, Scenario
from .scenarios import (DESCRIBE_GROUPS, JOIN_GROUP, LIST_GROUPS, METADATA, OFFSET_COMMIT, OFFSET_FETCH,
                        SYNC_GROUP, create_topic, group_id, group_ready, own_groups, subscription)

CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE, API_VERSIONS = 68, 69, 18
PARTITIONS = 3


# ------------------------------------------------------------------------------------------------ requests

def hb_body(member: str | Callable[[Ctx], str], epoch: int | Callable[[Ctx], int], *, join: bool = False,
            group: Callable[[Ctx], str] = group_id, owned: Callable[[Ctx], list | None] | None = None,
            **fields: Any) -> Callable[[Ctx], Body]:
    """A ConsumerGroupHeartbeat. `join`: the fields of a (re)join (rebalance timeout, the scenario's topic,
    topic_partitions []); else every optional field null. `owned`: the topic_partitions sent; `fields` override
    anything (a callable value is given the context)."""
    def build(c: Ctx) -> Body:
        body = {"group_id": group(c), "member_id": member(c) if callable(member) else member,
                "member_epoch": epoch(c) if callable(epoch) else epoch, "instance_id": None, "rack_id": None,
                "rebalance_timeout_ms": -1, "subscribed_topic_names": None, "subscribed_topic_regex": None,
                "server_assignor": None, "topic_partitions": None}
        if join:
            body.update(rebalance_timeout_ms=30000, subscribed_topic_names=[c.topic()], topic_partitions=[])
        if owned is not None:
            body["topic_partitions"] = owned(c)
        body.update({k: (v(c) if callable(v) else v) for k, v in fields.items()})
        return body
    return build


def partitions_of(*indexes: int) -> Callable[[Ctx], list]:
    """topic_partitions naming the scenario's topic (by id, learnt from Metadata during the setup)."""
    return lambda c: [{"topic_id": c.topic_id(c.topic()), "partitions": list(indexes)}]


def epoch_of(member: str) -> Callable[[Ctx], int]:
    return lambda c: c.vars[f"epoch {member}"]


def save_epoch(member: str) -> Callable[[Ctx, Body], None]:
    def save(c: Ctx, r: Body) -> None:
        if r["error_code"] == 0 and r["member_epoch"] > 0:
            c.vars[f"epoch {member}"] = r["member_epoch"]
    return save


def ok(r: Body) -> bool:
    return r["error_code"] == 0


def heartbeat(member: str, epoch: int | Callable[[Ctx], int] | None = None, **kw: Any) -> Call:
    """Setup: a heartbeat that must succeed; the member's epoch (saved) unless given."""
    return Call(CONSUMER_GROUP_HEARTBEAT, hb_body(member, epoch if epoch is not None else epoch_of(member), **kw),
                until=ok, save=save_epoch(member))


def join(member: str, **kw: Any) -> Call:
    """Setup: a member joins (epoch 0, the scenario's topic), its epoch saved."""
    return Call(CONSUMER_GROUP_HEARTBEAT, hb_body(member, 0, join=True, **kw), until=ok, save=save_epoch(member))


def hb(member: str, epoch: int | Callable[[Ctx], int] | None = None, version: int | None = None, **kw: Any) -> Call:
    """The compared heartbeat (the member's saved epoch unless given)."""
    return Call(CONSUMER_GROUP_HEARTBEAT, hb_body(member, epoch if epoch is not None else epoch_of(member), **kw),
                version=version)


def pause(seconds: float = 1.2) -> Call:
    """Setup: let Kafka's assignment interval (group.consumer.assignment.interval.ms, 1 s) pass, so that the next
    join computes the new target assignment at once. A Metadata request of no topics, sent after the pause."""
    def build(c: Ctx) -> Body:
        time.sleep(seconds)
        return {"topics": [], "allow_auto_topic_creation": False}
    return Call(METADATA, build)


def probe_group(c: Ctx) -> str:
    return c.topic("probe")


def consumer_topic(partitions: int = PARTITIONS) -> tuple[Call, ...]:
    """Setup: the scenario's topic, known to the group coordinator (a member of a throwaway group is assigned it,
    then leaves), and the scenario's group's coordinator ready."""
    return (*create_topic(partitions=partitions), *group_ready(),
            Call(CONSUMER_GROUP_HEARTBEAT, hb_body("probe", 0, join=True, group=probe_group),
                 until=lambda r: ok(r) and bool(r["assignment"]) and bool(r["assignment"]["topic_partitions"]),
                 save=save_epoch("probe")),
            Call(CONSUMER_GROUP_HEARTBEAT, hb_body("probe", -1, group=probe_group), until=ok))


def one_member() -> tuple[Call, ...]:
    """Setup: m1 alone in the group, owning every partition (epoch 2)."""
    return (*consumer_topic(), join("m1"))


def two_members() -> tuple[Call, ...]:
    """Setup: m1 owns every partition, then m2 joins (a second later): the new target (uniform assignor) moves one
    partition from m1 to m2, which m1 has not been told yet."""
    return (*one_member(), pause(), join("m2"))


def revoking() -> tuple[Call, ...]:
    """Setup: two_members, and m1's heartbeat that told it to revoke (m1 still at its old epoch)."""
    return (*two_members(), heartbeat("m1"))


def revoked() -> tuple[Call, ...]:
    """Setup: revoking, and m1's heartbeat that acknowledges the revocation (it owns partitions 0 and 1)."""
    return (*revoking(), heartbeat("m1", owned=partitions_of(0, 1)))


def reconciled() -> tuple[Call, ...]:
    """Setup: revoked, and m2's heartbeat that gave it the freed partition: the group is Stable."""
    return (*revoked(), heartbeat("m2"))


def static_member() -> tuple[Call, ...]:
    return (*consumer_topic(), join("m1", instance_id="i1"))


def cg_describe(*groups: Callable[[Ctx], str], operations: bool = False) -> Callable[[Ctx], Body]:
    return lambda c: {"group_ids": [g(c) for g in (groups or (group_id,))],
                      "include_authorized_operations": operations}


def other_group(name: str) -> Callable[[Ctx], str]:
    return lambda c: c.topic(name)


def commit_v(epoch: int, member: str, partition: int = 0) -> Callable[[Ctx], Body]:
    def build(c: Ctx) -> Body:
        name = c.topic()
        return {"group_id": group_id(c), "generation_id_or_member_epoch": epoch, "member_id": member,
                "group_instance_id": None, "retention_time_ms": -1,
                "topics": [{"name": name, "topic_id": c.topic_id(name),
                            "partitions": [{"partition_index": partition, "committed_offset": 5,
                                            "committed_leader_epoch": -1, "committed_metadata": "m"}]}]}
    return build


def fetch_v(member: str | None, epoch: int, all_topics: bool = False) -> Callable[[Ctx], Body]:
    def build(c: Ctx) -> Body:
        topics = None if all_topics else [{"name": c.topic(), "topic_id": c.topic_id(c.topic()),
                                          "partition_indexes": [0, 1]}]
        return {"group_id": group_id(c), "topics": topics, "require_stable": False,
                "groups": [{"group_id": group_id(c), "member_id": member, "member_epoch": epoch, "topics": topics}]}
    return build


def committed(epoch: int = 2, member: str = "m1", partition: int = 0) -> Call:
    """Setup: an OffsetCommit v9 that must succeed."""
    return Call(OFFSET_COMMIT, commit_v(epoch, member, partition), version=9,
                until=lambda r: all(p["error_code"] == 0 for t in r["topics"] for p in t["partitions"]))


def classic_join_body(member: Callable[[Ctx], str] = lambda c: c.vars.get("classic", ""),
                      protocol_type: str = "consumer") -> Callable[[Ctx], Body]:
    return lambda c: {"group_id": group_id(c), "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000,
                      "member_id": member(c), "group_instance_id": None, "protocol_type": protocol_type,
                      "protocols": [{"name": "range", "metadata": subscription(c.topic())}], "reason": None}


def save_classic(c: Ctx, r: Body) -> None:
    c.vars["classic"] = r["member_id"]
    c.vars["generation"] = r["generation_id"]


EMPTY_ASSIGNMENT = struct.pack(">hii", 0, 0, -1)  # ConsumerProtocolAssignment v0: no topics, null user data


def classic_group(protocol_type: str = "consumer") -> tuple[Call, ...]:
    """Setup: a classic group with one member, joined and synced (Stable), assigned nothing."""
    return (Call(JOIN_GROUP, classic_join_body(lambda c: "", protocol_type), version=9, save=save_classic),
            Call(JOIN_GROUP, classic_join_body(protocol_type=protocol_type), version=9, until=ok, save=save_classic),
            Call(SYNC_GROUP, lambda c: {"group_id": group_id(c), "generation_id": c.vars["generation"],
                                        "member_id": c.vars["classic"], "group_instance_id": None,
                                        "protocol_type": protocol_type, "protocol_name": "range",
                                        "assignments": [{"member_id": c.vars["classic"],
                                                         "assignment": EMPTY_ASSIGNMENT}]}, until=ok))


def admin_commit() -> Call:
    """Setup: a commit with no member (epoch -1): creates an empty classic group holding the offset."""
    return committed(-1, "")


# ---------------------------------------------------------------------------------------------- projections

def members_sorted(c: Ctx, r: Any) -> Any:
    """Every list of groups or members in id order (the normaliser aliases member ids in order of appearance)."""
    if isinstance(r, dict):
        return {k: members_sorted(c, v) for k, v in r.items()}
    if isinstance(r, list):
        items = [members_sorted(c, v) for v in r]
        for key in ("group_id", "member_id"):
            if items and all(isinstance(v, dict) and isinstance(v.get(key), str) for v in items):
                return sorted(items, key=lambda v: v[key])
        return items
    return r


def without_assignment(c: Ctx, r: Body) -> Body:
    """A heartbeat's answer without the partitions assigned (which of two members gets two of three partitions
    depends on a generated member id)."""
    return {**r, "assignment": None if r["assignment"] is None else "<present>"}


def group_version_feature(c: Ctx, r: Body) -> Body:
    return {"error_code": r["error_code"],
            "supported_features": [f for f in r["supported_features"] if f["name"] == "group.version"],
            "finalized_features": [f for f in r["finalized_features"] if f["name"] == "group.version"]}


def api_range(*keys: int) -> Callable[[Ctx, Body], Body]:
    return lambda c, r: {"api_keys": [k for k in r["api_keys"] if k["api_key"] in keys]}


def S(id: str, setup: tuple[Call, ...], request: Call, **kw: Any) -> Scenario:
    kw.setdefault("project", members_sorted)
    return Scenario(id, tuple(setup), request, **kw)


# ------------------------------------------------------------------------------------------------ scenarios

SCENARIOS_KIP848: list[Scenario] = [
    # --- ApiVersions
    S("cg-api-versions", (), Call(API_VERSIONS, {"client_software_name": "odradek-differential",
                                                 "client_software_version": "1"}),
      project=api_range(CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE)),
    S("cg-api-versions-group-version-feature", (), Call(API_VERSIONS, {"client_software_name": "odradek-differential",
                                                                       "client_software_version": "1"}),
      project=group_version_feature),

    # --- ConsumerGroupHeartbeat: joining
    S("cg-heartbeat-join", consumer_topic(), hb("m1", 0, join=True)),
    S("cg-heartbeat-join-v0-generates-member-id", consumer_topic(), hb("", 0, version=0, join=True)),
    S("cg-heartbeat-join-v1-empty-member-id", consumer_topic(), hb("", 0, join=True)),
    S("cg-heartbeat-join-no-topics", consumer_topic(), hb("m1", 0, join=True, subscribed_topic_names=[])),
    S("cg-heartbeat-join-unknown-topic", consumer_topic(),
      hb("m1", 0, join=True, subscribed_topic_names=lambda c: [c.topic("missing")])),
    S("cg-heartbeat-join-range-assignor", consumer_topic(), hb("m1", 0, join=True, server_assignor="range")),
    S("cg-heartbeat-join-names-and-regex", consumer_topic(),
      hb("m1", 0, join=True, subscribed_topic_regex=lambda c: c.topic() + ".*")),
    S("cg-heartbeat-rejoin-epoch-0", one_member(), hb("m1", 0, join=True)),
    S("cg-heartbeat-second-member-join", (*one_member(), pause()), hb("m2", 0, join=True)),

    # --- ConsumerGroupHeartbeat: steady state
    S("cg-heartbeat-steady", one_member(), hb("m1")),
    S("cg-heartbeat-steady-reporting-owned", one_member(), hb("m1", owned=partitions_of(0, 1, 2))),

    # --- ConsumerGroupHeartbeat: revocation (m1 owns 0-2; m2 joins; partition 2 moves to m2)
    S("cg-heartbeat-revocation", two_members(), hb("m1")),
    S("cg-heartbeat-revocation-repeated", revoking(), hb("m1", owned=partitions_of(0, 1, 2))),
    S("cg-heartbeat-revocation-acknowledged", revoking(), hb("m1", owned=partitions_of(0, 1))),
    S("cg-heartbeat-new-member-before-revocation", revoking(), hb("m2")),
    S("cg-heartbeat-new-member-after-revocation", revoked(), hb("m2")),
    S("cg-heartbeat-reconciled", reconciled(), hb("m2")),

    # --- ConsumerGroupHeartbeat: leaving
    S("cg-heartbeat-leave", one_member(), hb("m1", -1)),
    S("cg-heartbeat-after-leave", (*one_member(), heartbeat("m1", -1)), hb("m1", 2)),
    S("cg-heartbeat-leave-twice", (*one_member(), heartbeat("m1", -1)), hb("m1", -1)),
    S("cg-heartbeat-leave-unknown-member", one_member(), hb("nobody", -1)),
    S("cg-heartbeat-static-leave", static_member(), hb("m1", -2, instance_id="i1")),
    S("cg-heartbeat-static-leave-unknown-instance", static_member(), hb("m1", -2, instance_id="i9")),
    S("cg-heartbeat-static-leave-without-instance", static_member(), hb("m1", -2)),
    S("cg-heartbeat-leave-static-member-for-good", static_member(), hb("m1", -1, instance_id="i1")),
    S("cg-heartbeat-static-rejoin-after-leave", (*static_member(), heartbeat("m1", -2, instance_id="i1")),
      hb("m2", 0, join=True, instance_id="i1")),
    S("cg-heartbeat-instance-id-in-use", static_member(), hb("m2", 0, join=True, instance_id="i1")),

    # --- ConsumerGroupHeartbeat: errors
    S("cg-heartbeat-empty-group-id", consumer_topic(), hb("m1", 0, join=True, group=lambda c: "")),
    S("cg-heartbeat-empty-member-id-epoch-2", one_member(), hb("", 2)),
    S("cg-heartbeat-unknown-member", one_member(), hb("nobody", 2)),
    S("cg-heartbeat-unknown-member-joining-without-fields", one_member(), hb("nobody", 0)),
    S("cg-heartbeat-fenced-higher-epoch", one_member(), hb("m1", 5)),
    S("cg-heartbeat-fenced-lower-epoch", one_member(), hb("m1", 1)),
    S("cg-heartbeat-invalid-epoch", one_member(), hb("m1", -3)),
    S("cg-heartbeat-unknown-group", consumer_topic(), hb("m1", 2)),
    S("cg-heartbeat-join-without-rebalance-timeout", consumer_topic(), hb("m1", 0, join=True, rebalance_timeout_ms=-1)),
    S("cg-heartbeat-join-without-subscription", consumer_topic(), hb("m1", 0, join=True, subscribed_topic_names=None)),
    S("cg-heartbeat-join-null-topic-partitions", consumer_topic(), hb("m1", 0, join=True, topic_partitions=None)),
    S("cg-heartbeat-join-unsupported-assignor", consumer_topic(), hb("m1", 0, join=True, server_assignor="bogus")),
    S("cg-heartbeat-join-invalid-regex", consumer_topic(),
      hb("m1", 0, join=True, subscribed_topic_names=None, subscribed_topic_regex="[")),

    # --- ConsumerGroupDescribe
    S("cg-describe-one-member", one_member(), Call(CONSUMER_GROUP_DESCRIBE, cg_describe())),
    S("cg-describe-one-member-v0", one_member(), Call(CONSUMER_GROUP_DESCRIBE, cg_describe(), version=0)),
    S("cg-describe-reconciling", revoking(), Call(CONSUMER_GROUP_DESCRIBE, cg_describe())),
    S("cg-describe-stable-two-members", reconciled(), Call(CONSUMER_GROUP_DESCRIBE, cg_describe())),
    S("cg-describe-empty-after-leave", (*one_member(), heartbeat("m1", -1)),
      Call(CONSUMER_GROUP_DESCRIBE, cg_describe())),
    S("cg-describe-static-member", static_member(), Call(CONSUMER_GROUP_DESCRIBE, cg_describe())),
    S("cg-describe-unknown-group", group_ready(), Call(CONSUMER_GROUP_DESCRIBE, cg_describe())),
    S("cg-describe-empty-group-id", group_ready(), Call(CONSUMER_GROUP_DESCRIBE, cg_describe(lambda c: ""))),
    S("cg-describe-classic-group", (*group_ready(), *classic_group()), Call(CONSUMER_GROUP_DESCRIBE, cg_describe())),

    # --- the classic group APIs about a consumer-protocol group
    S("cg-describe-groups-v5", one_member(),
      Call(DESCRIBE_GROUPS, lambda c: {"groups": [group_id(c)], "include_authorized_operations": False}, version=5)),
    S("cg-describe-groups-v6", one_member(),
      Call(DESCRIBE_GROUPS, lambda c: {"groups": [group_id(c)], "include_authorized_operations": False}, version=6)),
    S("cg-list-groups", revoking(), Call(LIST_GROUPS, {"states_filter": [], "types_filter": []}), project=own_groups),
    S("cg-list-groups-consumer-type", one_member(),
      Call(LIST_GROUPS, {"states_filter": [], "types_filter": ["consumer"]}), project=own_groups),
    S("cg-list-groups-classic-type", one_member(),
      Call(LIST_GROUPS, {"states_filter": [], "types_filter": ["classic"]}), project=own_groups),
    S("cg-list-groups-empty-consumer-group", (*one_member(), heartbeat("m1", -1)),
      Call(LIST_GROUPS, {"states_filter": ["empty"], "types_filter": ["Consumer"]}), project=own_groups),

    # --- OffsetCommit / OffsetFetch with member epochs
    S("cg-offset-commit", one_member(), Call(OFFSET_COMMIT, commit_v(2, "m1"), version=9)),
    S("cg-offset-commit-stale-epoch", one_member(), Call(OFFSET_COMMIT, commit_v(1, "m1"), version=9)),
    S("cg-offset-commit-higher-epoch", one_member(), Call(OFFSET_COMMIT, commit_v(3, "m1"), version=9)),
    S("cg-offset-commit-unknown-member", one_member(), Call(OFFSET_COMMIT, commit_v(2, "nobody"), version=9)),
    S("cg-offset-commit-without-member", one_member(), Call(OFFSET_COMMIT, commit_v(-1, ""), version=9)),
    S("cg-offset-commit-v8", one_member(), Call(OFFSET_COMMIT, commit_v(2, "m1"), version=8)),
    S("cg-offset-commit-after-leave", (*one_member(), heartbeat("m1", -1)),
      Call(OFFSET_COMMIT, commit_v(-1, ""), version=9)),
    S("cg-offset-commit-after-leave-with-member", (*one_member(), heartbeat("m1", -1)),
      Call(OFFSET_COMMIT, commit_v(2, "m1"), version=9)),
    S("cg-offset-fetch", (*one_member(), committed()), Call(OFFSET_FETCH, fetch_v("m1", 2), version=9)),
    S("cg-offset-fetch-stale-epoch", (*one_member(), committed()), Call(OFFSET_FETCH, fetch_v("m1", 1), version=9)),
    S("cg-offset-fetch-higher-epoch", (*one_member(), committed()), Call(OFFSET_FETCH, fetch_v("m1", 3), version=9)),
    S("cg-offset-fetch-member-without-epoch", (*one_member(), committed()),
      Call(OFFSET_FETCH, fetch_v("m1", -1), version=9)),
    S("cg-offset-fetch-unknown-member", (*one_member(), committed()),
      Call(OFFSET_FETCH, fetch_v("nobody", 2), version=9)),
    S("cg-offset-fetch-without-member", (*one_member(), committed()), Call(OFFSET_FETCH, fetch_v(None, -1), version=9)),

    # --- classic and consumer protocols in one group
    S("cg-heartbeat-converts-empty-classic-group", (*consumer_topic(), admin_commit()), hb("m1", 0, join=True)),
    S("cg-converted-classic-group-keeps-offsets", (*consumer_topic(), admin_commit(), join("m1")),
      Call(OFFSET_FETCH, fetch_v(None, -1, all_topics=True), version=9)),
    S("cg-classic-join-into-empty-consumer-group", (*one_member(), committed(), heartbeat("m1", -1)),
      Call(JOIN_GROUP, classic_join_body(lambda c: ""), version=9)),
    S("cg-classic-join-converts-empty-consumer-group",
      (*one_member(), committed(), heartbeat("m1", -1),
       Call(JOIN_GROUP, classic_join_body(lambda c: ""), version=9, save=save_classic)),
      Call(JOIN_GROUP, classic_join_body(), version=9)),
    S("cg-describe-converted-consumer-group",
      (*one_member(), committed(), heartbeat("m1", -1),
       Call(JOIN_GROUP, classic_join_body(lambda c: ""), version=9, save=save_classic),
       Call(JOIN_GROUP, classic_join_body(), version=9, until=ok)),
      Call(CONSUMER_GROUP_DESCRIBE, cg_describe())),
    S("cg-converted-consumer-group-keeps-offsets",
      (*one_member(), committed(), heartbeat("m1", -1),
       Call(JOIN_GROUP, classic_join_body(lambda c: ""), version=9, save=save_classic),
       Call(JOIN_GROUP, classic_join_body(), version=9, until=ok)),
      Call(OFFSET_FETCH, fetch_v(None, -1, all_topics=True), version=9)),
    S("cg-classic-join-into-consumer-group", one_member(),
      Call(JOIN_GROUP, classic_join_body(lambda c: ""), version=9)),
    S("cg-classic-join-into-consumer-group-with-member-id",
      (*one_member(), pause(), Call(JOIN_GROUP, classic_join_body(lambda c: ""), version=9, save=save_classic)),
      Call(JOIN_GROUP, classic_join_body(), version=9)),
    S("cg-classic-join-other-protocol-type-into-consumer-group", one_member(),
      Call(JOIN_GROUP, classic_join_body(lambda c: "", protocol_type="connect"), version=9)),
    S("cg-heartbeat-into-classic-group", (*consumer_topic(), *classic_group()), hb("m1", 0, join=True),
      project=without_assignment),
    S("cg-heartbeat-into-classic-group-of-other-protocol-type", (*consumer_topic(), *classic_group("connect")),
      hb("m1", 0, join=True)),
]

assert len({s.id for s in SCENARIOS_KIP848}) == len(SCENARIOS_KIP848), "scenario ids must be unique"
