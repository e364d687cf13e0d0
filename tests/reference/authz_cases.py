"""The authorization parity cases: the users, the ACLs both secured brokers get, and one request body (or a
few variants) per API key, sent as each user at several versions (tests/reference/authz.py runs them).

The ACLs give each user allowed, denied and partly allowed resources of every kind, with literal, prefixed,
wildcard ('*') and DENY bindings:

* alice owns the prefix `alice-` (topics, groups, transactional ids: ALLOW ALL) except `alice-denied`
  (DENY ALL, which wins over the prefix); on the cluster she may DESCRIBE and IDEMPOTENT_WRITE.
* bob may DESCRIBE every topic and group ('*'), READ the topic `alice-data`, WRITE, CREATE and
  DESCRIBE_CONFIGS topics under `bob-`, READ groups under `bob-`; the cluster's DESCRIBE is denied to him
  (a DENY binding with no ALLOW beside it), IDEMPOTENT_WRITE allowed; no transactional id.
* everyone (`User:*`) is denied everything on the topic `secret`; admin is a super user.

A request names several resources of different standing where the API takes a list (so one answer shows
allowed, denied and missing ones side by side): `alice-data`, `bob-data`, `secret`, `alice-denied` exist,
`alice-missing` and `zz-missing` do not (an unauthorised user must learn nothing about either). Requests
that destroy or create something name resources of their own case (`Env.tag`), so cases never depend on
each other's success, and the destructive ones that would harm the shared resources are validate-only or
aimed at names that match nothing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Callable

from tests.security.test_acls import USERS

from .differential import record_batch

Body = dict[str, Any]
PRINCIPALS = ("admin", "alice", "bob")

# the shared resources, created by admin before the cases
TOPICS = ("alice-data", "alice-denied", "secret", "bob-data")
LISTED_TOPICS = ("alice-data", "alice-denied", "secret", "bob-data", "alice-missing", "zz-missing")
GROUPS = ("alice-g", "alice-denied", "bob-g", "zz-g")
TXN_IDS = ("alice-tx", "bob-tx", "zz-tx")
BROKER_NODE_ID = 1  # odradek runs with node.id=1, as the reference does, so broker resource names agree

# ACL codes (Kafka's AclOperation, ResourceType, PatternType, AclPermissionType)
ANY_OP, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION = 1, 2, 3, 4, 5, 6, 7, 8, 9
DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 10, 11, 12
TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
LITERAL, PREFIXED = 3, 4
DENY, ALLOW = 2, 3


def acl(principal: str, resource_type: int, name: str, operation: int, permission: int = ALLOW,
        pattern: int = LITERAL) -> Body:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern,
            "principal": f"User:{principal}", "host": "*", "operation": operation, "permission_type": permission}


ACLS = [
    acl("alice", TOPIC, "alice-", ALL, pattern=PREFIXED),
    acl("alice", TOPIC, "alice-denied", ALL, DENY),
    acl("alice", GROUP, "alice-", ALL, pattern=PREFIXED),
    acl("alice", GROUP, "alice-denied", READ, DENY),
    acl("alice", TXN, "alice-", ALL, pattern=PREFIXED),
    acl("alice", CLUSTER, "kafka-cluster", DESCRIBE),
    acl("alice", CLUSTER, "kafka-cluster", IDEMPOTENT_WRITE),
    acl("bob", TOPIC, "*", DESCRIBE),
    acl("bob", TOPIC, "alice-data", READ),
    *(acl("bob", TOPIC, "bob-", op, pattern=PREFIXED) for op in (WRITE, CREATE, DESCRIBE_CONFIGS)),
    acl("bob", GROUP, "*", DESCRIBE),
    acl("bob", GROUP, "bob-", READ, pattern=PREFIXED),
    acl("bob", CLUSTER, "kafka-cluster", DESCRIBE, DENY),
    acl("bob", CLUSTER, "kafka-cluster", IDEMPOTENT_WRITE),
    acl("*", TOPIC, "secret", ALL, DENY),
]


@dataclass
class Env:
    """What a body builder may use: the case's tag (unique to API, variant, version and user; for names a
    case creates or destroys), the user, the version, and the broker's topic ids."""

    tag: str
    principal: str
    version: int
    topic_ids: dict[str, bytes]

    def topic_id(self, name: str) -> bytes:
        # a name the broker does not know gets an id no broker has (the same on both sides)
        return self.topic_ids.get(name) or uuid.uuid5(uuid.NAMESPACE_DNS, name).bytes


@dataclass(frozen=True)
class Variant:
    name: str
    body: Callable[[Env], Body]
    per_case_topics: Callable[[str], tuple[str, ...]] | None = None  # created by admin before the run


RECORDS = record_batch((b"v0",), 1_700_000_000_000)
NO_PID = {"producer_id": 4711, "producer_epoch": 0}
SOME_TOPICS = ("alice-data", "bob-data", "secret", "zz-missing")


def topics_with(names: tuple[str, ...], e: Env, key: str = "name", **extra: Any) -> list[Body]:
    return [{key: n, "topic_id": e.topic_id(n), **extra} for n in names]


def produce(e: Env) -> Body:
    return {"transactional_id": None, "acks": 1, "timeout_ms": 10000,
            "topic_data": [{"name": n, "topic_id": e.topic_id(n), "partition_data": [{"index": 0, "records": RECORDS}]}
                           for n in SOME_TOPICS]}


def fetch(e: Env) -> Body:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": n, "topic_id": e.topic_id(n), "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 16}]} for n in SOME_TOPICS],
            "forgotten_topics_data": [], "rack_id": ""}


def list_offsets(e: Env) -> Body:
    return {"replica_id": -1, "isolation_level": 0, "timeout_ms": 10000, "topics": [
        {"name": n, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1,
                                    "max_num_offsets": 1}]} for n in SOME_TOPICS]}


def metadata(names: tuple[str, ...] | None) -> Callable[[Env], Body]:
    return lambda e: {"topics": None if names is None else [{"name": n, "topic_id": bytes(16)} for n in names],
                      "allow_auto_topic_creation": False, "include_cluster_authorized_operations": True,
                      "include_topic_authorized_operations": True}


def offset_commit(group: str) -> Callable[[Env], Body]:
    return lambda e: {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                      "group_instance_id": None, "retention_time_ms": -1,
                      "topics": [{"name": n, "topic_id": e.topic_id(n), "partitions": [
                          {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                           "commit_timestamp": -1, "committed_metadata": ""}]} for n in SOME_TOPICS]}


def offset_fetch(groups: tuple[str, ...], all_topics: bool = False) -> Callable[[Env], Body]:
    def build(e: Env) -> Body:
        topics = None if all_topics else [{"name": n, "topic_id": e.topic_id(n), "partition_indexes": [0]}
                                          for n in SOME_TOPICS]
        return {"group_id": groups[0], "topics": topics, "require_stable": False,
                "groups": [{"group_id": g, "member_id": None, "member_epoch": -1, "topics": topics} for g in groups]}
    return build


def join_group(prefix: str) -> Callable[[Env], Body]:
    return lambda e: {"group_id": f"{prefix}{e.tag}", "session_timeout_ms": 6000, "rebalance_timeout_ms": 6000,
                      "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                      "protocols": [{"name": "range", "metadata": b""}], "reason": None}


def group_member(api_body: Callable[[str], Body], group: str) -> Callable[[Env], Body]:
    return lambda e: api_body(group)


def describe_configs(resources: list[tuple[int, str]]) -> Callable[[Env], Body]:
    return lambda e: {"resources": [{"resource_type": t, "resource_name": n, "configuration_keys": ["retention.ms"]
                                     if t == TOPIC else None} for t, n in resources],
                      "include_synonyms": False, "include_documentation": False}


TOPIC_RESOURCES = [(TOPIC, n) for n in SOME_TOPICS]
RETENTION = "604800000"  # the default: validate-only anyway
THROTTLE = ("leader.replication.throttled.rate", "1000000")  # a dynamic broker config both brokers take


def alter_configs(resources: list[tuple[int, str, str, str]]) -> Callable[[Env], Body]:
    return lambda e: {"resources": [{"resource_type": t, "resource_name": n, "configs": [
        {"name": k, "value": v, "config_operation": 0}]} for t, n, k, v in resources], "validate_only": True}


def txn_body(e: Env, txn: str = "alice-tx") -> Body:
    return {"transactional_id": txn, **NO_PID, "group_id": "alice-g", "committed": False}


def add_partitions_to_txn(e: Env) -> Body:
    topics = [{"name": n, "partitions": [0]} for n in SOME_TOPICS]
    return {"v3_and_below_transactional_id": "alice-tx", "v3_and_below_producer_id": NO_PID["producer_id"],
            "v3_and_below_producer_epoch": 0, "v3_and_below_topics": topics,
            "transactions": [{"transactional_id": t, **NO_PID, "verify_only": True, "topics": topics}
                             for t in ("alice-tx", "zz-tx")]}


def txn_offset_commit(e: Env) -> Body:
    return {"transactional_id": "alice-tx", "group_id": "alice-g", **NO_PID, "generation_id": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": n, "partitions": [
                {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]} for n in SOME_TOPICS]}


def delete_topics(e: Env) -> Body:
    names = [*(f"{p}-del-{e.tag}" for p in ("alice", "bob", "zz")), f"alice-missing-{e.tag}", f"zz-missing-{e.tag}"]
    return {"topic_names": names, "topics": [{"name": n, "topic_id": bytes(16)} for n in names], "timeout_ms": 30000}


def share_state(e: Env, **partition: Any) -> Body:
    return {"group_id": "alice-sg", "topics": [{"topic_id": e.topic_id("zz-missing"), "partitions": [
        {"partition": 0, **partition}]}]}


def share_fetch(e: Env) -> Body:
    return {"group_id": "alice-sg", "member_id": str(uuid.uuid5(uuid.NAMESPACE_DNS, e.tag)), "share_session_epoch": 0,
            "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10,
            "topics": [{"topic_id": e.topic_id(n), "partitions": [{"partition_index": 0, "partition_max_bytes": 1 << 16,
                                                                   "acknowledgement_batches": []}]}
                       for n in ("alice-data", "secret")], "forgotten_topics_data": []}


def member_uuid(e: Env) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, e.tag))


def v(name: str, body: Callable[[Env], Body],
      per_case_topics: Callable[[str], tuple[str, ...]] | None = None) -> Variant:
    return Variant(name, body, per_case_topics)


CASES: dict[int, list[Variant]] = {
    0: [v("four topics", produce)],
    1: [v("four topics", fetch)],
    2: [v("four topics", list_offsets)],
    3: [v("six topics", metadata(LISTED_TOPICS)), v("all topics", metadata(None))],
    4: [v("empty", lambda e: {"controller_id": BROKER_NODE_ID, "controller_epoch": 1, "broker_epoch": -1,
                                "partition_states": [], "topic_states": [], "live_leaders": []})],
    5: [v("empty", lambda e: {"controller_id": BROKER_NODE_ID, "controller_epoch": 1, "broker_epoch": -1,
                                "delete_partitions": False, "topic_states": []})],
    6: [v("empty", lambda e: {"controller_id": BROKER_NODE_ID, "controller_epoch": 1, "broker_epoch": -1})],
    7: [v("unknown broker", lambda e: {"broker_id": 99, "broker_epoch": -1})],
    8: [v("alice-g", offset_commit("alice-g")), v("bob-g", offset_commit("bob-g"))],
    9: [v("alice-g", offset_fetch(("alice-g",))), v("bob-g+zz-g", offset_fetch(("bob-g", "zz-g"))),
        v("alice-g all topics", offset_fetch(("alice-g",), all_topics=True))],
    10: [v("groups", lambda e: {"key": "alice-g", "key_type": 0, "coordinator_keys": ["alice-g", "bob-g", "zz-g"]}),
         v("transactional ids", lambda e: {"key": "alice-tx", "key_type": 1,
                                           "coordinator_keys": ["alice-tx", "bob-tx", "zz-tx"]})],
    11: [v("alice group", join_group("alice-j-")), v("bob group", join_group("bob-j-"))],
    12: [v(g, group_member(lambda g: {"group_id": g, "generation_id": 1, "member_id": "m",
                                      "group_instance_id": None}, g)) for g in ("alice-g", "bob-g")],
    13: [v(g, group_member(lambda g: {"group_id": g, "member_id": "m", "members": [
        {"member_id": "m", "group_instance_id": None, "reason": None}]}, g)) for g in ("alice-g", "bob-g")],
    14: [v(g, group_member(lambda g: {"group_id": g, "generation_id": 1, "member_id": "m", "group_instance_id": None,
                                      "protocol_type": "consumer", "protocol_name": "range", "assignments": []}, g))
         for g in ("alice-g", "bob-g")],
    15: [v("four groups", lambda e: {"groups": list(GROUPS), "include_authorized_operations": True})],
    16: [v("all", lambda e: {"states_filter": [], "types_filter": []})],
    18: [v("v3 body", lambda e: {"client_software_name": "authz", "client_software_version": "1"})],
    19: [v("three topics", lambda e: {"topics": [{"name": f"{p}-c-{e.tag}", "num_partitions": 1,
                                                  "replication_factor": 1, "assignments": [], "configs": []}
                                                 for p in ("alice", "bob", "zz")],
                                      "timeout_ms": 30000, "validate_only": False})],
    20: [v("five topics", delete_topics, lambda tag: tuple(f"{p}-del-{tag}" for p in ("alice", "bob", "zz")))],
    21: [v("four topics", lambda e: {"topics": [{"name": n, "partitions": [{"partition_index": 0, "offset": 0}]}
                                                for n in SOME_TOPICS], "timeout_ms": 10000})],
    22: [v("idempotent", lambda e: {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1,
                                    "producer_epoch": -1}),
         v("alice-tx", lambda e: {"transactional_id": "alice-tx", "transaction_timeout_ms": 60000, "producer_id": -1,
                                  "producer_epoch": -1}),
         v("zz-tx", lambda e: {"transactional_id": "zz-tx", "transaction_timeout_ms": 60000, "producer_id": -1,
                               "producer_epoch": -1})],
    23: [v("four topics", lambda e: {"replica_id": -1, "topics": [{"topic": n, "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]} for n in SOME_TOPICS]})],
    24: [v("four topics", add_partitions_to_txn)],
    25: [v("alice-tx alice-g", txn_body)],
    26: [v("alice-tx", txn_body), v("zz-tx", lambda e: txn_body(e, "zz-tx"))],
    27: [v("missing topic", lambda e: {"markers": [{**NO_PID, "transaction_result": False, "coordinator_epoch": 0,
                                                    "transaction_version": 0,
                                                    "topics": [{"name": "zz-missing", "partition_indexes": [0]}]}]})],
    28: [v("four topics", txn_offset_commit)],
    29: [v("any", lambda e: {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                             "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})],
    30: [v("mallory", lambda e: {"creations": [acl("mallory", TOPIC, f"mallory-{e.tag}", READ)]})],
    31: [v("matches nothing", lambda e: {"filters": [{"resource_type_filter": 1, "resource_name_filter": None,
                                                      "pattern_type_filter": 1, "principal_filter": "User:nobody",
                                                      "host_filter": None, "operation": 1, "permission_type": 1}]})],
    32: [v("topics", describe_configs(TOPIC_RESOURCES)),
         v("broker", describe_configs([(4, str(BROKER_NODE_ID))])),
         v("broker logger", describe_configs([(8, str(BROKER_NODE_ID))]))],
    33: [v("topics", alter_configs([(TOPIC, n, "retention.ms", RETENTION) for n in SOME_TOPICS])),
         v("broker", alter_configs([(4, str(BROKER_NODE_ID), *THROTTLE)]))],
    34: [v("missing dir", lambda e: {"dirs": [{"path": "/nonexistent", "topics": [
        {"name": n, "partitions": [0]} for n in SOME_TOPICS]}]})],
    35: [v("four topics", lambda e: {"topics": [{"topic": n, "partitions": [0]} for n in SOME_TOPICS]})],
    37: [v("four topics", lambda e: {"topics": [{"name": n, "count": 2, "assignments": None} for n in SOME_TOPICS],
                                     "timeout_ms": 10000, "validate_only": True})],
    38: [v("self", lambda e: {"owner_principal_type": None, "owner_principal_name": None, "renewers": [],
                              "max_lifetime_ms": -1})],
    39: [v("unknown hmac", lambda e: {"hmac": b"not-a-token", "renew_period_ms": -1})],
    40: [v("unknown hmac", lambda e: {"hmac": b"not-a-token", "expiry_time_period_ms": -1})],
    41: [v("all owners", lambda e: {"owners": None})],
    42: [v("four groups", lambda e: {"groups_names": list(GROUPS)})],
    43: [v("four topics", lambda e: {"election_type": 0, "timeout_ms": 10000,
                                     "topic_partitions": [{"topic": n, "partitions": [0]} for n in SOME_TOPICS]})],
    44: [v("topics", alter_configs([(TOPIC, n, "retention.ms", RETENTION) for n in SOME_TOPICS])),
         v("broker", alter_configs([(4, str(BROKER_NODE_ID), *THROTTLE)])),
         v("broker logger", alter_configs([(8, str(BROKER_NODE_ID), "root", "INFO")]))],
    45: [v("cancel four", lambda e: {"timeout_ms": 10000, "allow_replication_factor_change": True, "topics": [
        {"name": n, "partitions": [{"partition_index": 0, "replicas": None}]} for n in SOME_TOPICS]})],
    46: [v("all", lambda e: {"timeout_ms": 10000, "topics": None})],
    47: [v(g, lambda e, g=g: {"group_id": g, "topics": [{"name": n, "partitions": [{"partition_index": 0}]}
                                                       for n in SOME_TOPICS]}) for g in ("alice-g", "bob-g")],
    48: [v("all", lambda e: {"components": [], "strict": False})],
    49: [v("validate", lambda e: {"entries": [{"entity": [{"entity_type": "user", "entity_name": "carol"}], "ops": [
        {"key": "producer_byte_rate", "value": 1e6, "remove": False}]}], "validate_only": True})],
    50: [v("all", lambda e: {"users": None}), v("alice", lambda e: {"users": [{"name": "alice"}]})],
    51: [v("unknown user", lambda e: {"deletions": [{"name": "nobody", "mechanism": 1}], "upsertions": []})],
    55: [v("metadata", lambda e: {"topics": [{"topic_name": "__cluster_metadata",
                                              "partitions": [{"partition_index": 0}]}]})],
    57: [v("validate nothing", lambda e: {"timeout_ms": 10000, "feature_updates": [], "validate_only": True})],
    60: [v("with operations", lambda e: {"include_cluster_authorized_operations": True, "endpoint_type": 1,
                                         "include_fenced_brokers": False})],
    61: [v("four topics", lambda e: {"topics": [{"name": n, "partition_indexes": [0]} for n in SOME_TOPICS]})],
    64: [v("unknown broker", lambda e: {"broker_id": 99})],
    65: [v("three", lambda e: {"transactional_ids": list(TXN_IDS)})],
    66: [v("all", lambda e: {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                             "transactional_id_pattern": None})],
    68: [v(f"{p} group", lambda e, p=p: {"group_id": f"{p}-h-{e.tag}", "member_id": member_uuid(e), "member_epoch": 0,
                                         "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 10000,
                                         "subscribed_topic_names": ["alice-data"], "subscribed_topic_regex": None,
                                         "server_assignor": None, "topic_partitions": []}) for p in ("alice", "bob")],
    69: [v("four groups", lambda e: {"group_ids": list(GROUPS), "include_authorized_operations": True})],
    88: [v(f"{p} group", lambda e, p=p: {
        "group_id": f"{p}-st-{e.tag}", "member_id": member_uuid(e), "member_epoch": 0, "endpoint_information_epoch": 0,
        "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 10000, "topology": {"epoch": 0, "subtopologies": [
            {"subtopology_id": "0", "source_topics": ["alice-data"], "source_topic_regex": [],
             "state_changelog_topics": [], "repartition_sink_topics": [], "repartition_source_topics": [],
             "copartition_groups": []}]}, "active_tasks": [], "standby_tasks": [], "warmup_tasks": [],
        "process_id": "p", "user_endpoint": None, "client_tags": [], "task_offsets": None, "task_end_offsets": None,
        "shutdown_application": False}) for p in ("alice", "bob")],
    89: [v("four groups", lambda e: {"group_ids": list(GROUPS), "include_authorized_operations": True,
                                     "include_topology_description": False})],
    74: [v("all types", lambda e: {"resource_types": []})],
    75: [v("six topics", lambda e: {"topics": [{"name": n} for n in LISTED_TOPICS], "response_partition_limit": 100,
                                    "cursor": None})],
    76: [v(f"{p} group", lambda e, p=p: {"group_id": f"{p}-s-{e.tag}", "member_id": member_uuid(e), "member_epoch": 0,
                                         "rack_id": None, "subscribed_topic_names": ["alice-data"]})
         for p in ("alice", "bob")],
    77: [v("four groups", lambda e: {"group_ids": list(GROUPS), "include_authorized_operations": True})],
    78: [v("alice-sg", share_fetch)],
    79: [v("alice-sg", lambda e: {**share_fetch(e), "topics": [{"topic_id": e.topic_id("alice-data"), "partitions": [
        {"partition_index": 0, "acknowledgement_batches": [{"first_offset": 0, "last_offset": 0,
                                                            "acknowledge_types": [1]}]}]}]})],
    81: [v("unknown voter", lambda e: {"cluster_id": None, "voter_id": 99, "voter_directory_id": bytes(16)})],
    83: [v("unknown topic", lambda e: share_state(e, state_epoch=0, start_offset=0))],
    84: [v("unknown topic", lambda e: share_state(e, leader_epoch=0))],
    85: [v("unknown topic", lambda e: share_state(e, state_epoch=0, leader_epoch=0, start_offset=0,
                                                  delivery_complete_count=0, state_batches=[]))],
    86: [v("unknown topic", lambda e: share_state(e))],
    87: [v("unknown topic", lambda e: share_state(e, leader_epoch=0))],
    90: [v("two groups", lambda e: {"groups": [{"group_id": g, "topics": None} for g in ("alice-sg", "zz-sg")]}),
         v("two groups, four topics", lambda e: {"groups": [{"group_id": g, "topics": [
             {"topic_name": n, "partitions": [0]} for n in SOME_TOPICS]} for g in ("alice-sg", "zz-sg")]})],
    91: [v("alice-sg", lambda e: {"group_id": "alice-sg", "topics": [{"topic_name": n, "partitions": [
        {"partition_index": 0, "start_offset": 0}]} for n in SOME_TOPICS]})],
    92: [v("alice-sg", lambda e: {"group_id": "alice-sg", "topics": [{"topic_name": n} for n in SOME_TOPICS]})],
}

# versions compared besides each API's lowest, middle and highest: where a request or its authorization
# changes shape (Metadata's cluster operations v8-10, OffsetFetch's groups v8, FindCoordinator's batches v4,
# DescribeGroups' operations v3, DeleteTopics' ids v6, AddPartitionsToTxn's broker form v4, OffsetCommit's
# member epoch v9, the last version before topic ids of Fetch and Produce)
EXTRA_VERSIONS = {0: (12,), 1: (12,), 3: (8, 10), 8: (9,), 9: (7, 8), 10: (3, 4), 15: (3,), 20: (5,), 24: (3, 4)}

# the login APIs, compared elsewhere (tests/security/test_sasl.py); AddRaftVoter, which as admin would change
# the reference's quorum
NOT_SENT = {17, 36, 80}
