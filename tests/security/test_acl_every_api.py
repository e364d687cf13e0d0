"""Every API that Kafka protects, one request each, as three clients: one that has not logged in (its
connection is closed), alice, logged in but named in no ACL (the API's authorization error, and no
names learnt where Kafka filters), and the super user admin (no authorization error). Requests are built
with odradek's codec and sent over a SASL_PLAINTEXT (PLAIN) listener."""

from __future__ import annotations

import socket
import struct
from typing import Callable

import pytest
from confluent_kafka.admin import NewTopic

from odradek.protocol import codec
from odradek.protocol.errors import ErrorCode
from odradek.records.codec import build_batch
from tests.interop.helpers import recv_exact, wait_closed
from tests.security.test_acls import SecuredBroker

TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
DENIALS = {TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED}


class Session:
    """One connection to the SASL listener, logged in with PLAIN (or not at all)."""

    def __init__(self, port: int, user: str | None = None, password: str = "") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=15)
        self.correlation_id = 0
        if user is not None:
            assert self.call(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
            answer = self.call(36, 2, {"auth_bytes": f"\0{user}\0{password}".encode()})
            assert answer["error_code"] == 0, answer

    def send(self, api_key: int, version: int, body: dict) -> None:
        self.correlation_id += 1
        self.sock.sendall(codec.encode_request(api_key, version, self.correlation_id, "acl-test", body))

    def call(self, api_key: int, version: int, body: dict) -> dict:
        self.send(api_key, version, body)
        # recv_exact: with a socket timeout, MSG_WAITALL may return a part of a response sent in pieces
        size = struct.unpack(">i", recv_exact(self.sock, 4))[0]
        return codec.decode_response(api_key, version, recv_exact(self.sock, size))[1]

    def close(self) -> None:
        self.sock.close()


def first(path: str) -> Callable[[dict], int]:
    """The error code at ``path`` ("topics.partitions.error_code": the first element of each array)."""
    def get(body: dict) -> int:
        value = body
        for key in path.split("."):
            value = value[key]
            if isinstance(value, list):
                value = value[0]
        return value
    return get


RECORDS = build_batch([(b"k", b"v", (), 1_700_000_000_000)])
ACL = {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:mallory",
       "host": "*", "operation": 3, "permission_type": 3}
ACL_FILTER = {"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1, "permission_type": 1}

# (name, api key, version, body, where the error code is, alice's code, what admin may get besides NONE)
CASES = [
    ("Produce", 0, 9, {"acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": RECORDS}]}]},
     "responses.partition_responses.error_code", TOPIC_DENIED, ()),
    ("Fetch", 1, 12, {"max_wait_ms": 0, "max_bytes": 10000, "topics": [
        {"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 10000}]}]},
     "responses.partitions.error_code", TOPIC_DENIED, ()),
    ("ListOffsets", 2, 7, {"replica_id": -1, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "timestamp": -1}]}]}, "topics.partitions.error_code", TOPIC_DENIED, ()),
    ("OffsetCommit", 8, 8, {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 0}]}]},
     "topics.partitions.error_code", GROUP_DENIED, ()),
    ("OffsetFetch", 9, 8, {"groups": [{"group_id": "g", "topics": None}]}, "groups.error_code", GROUP_DENIED, ()),
    ("FindCoordinator", 10, 4, {"key_type": 0, "coordinator_keys": ["g"]}, "coordinators.error_code",
     GROUP_DENIED, (ErrorCode.COORDINATOR_NOT_AVAILABLE,)),
    ("FindCoordinator (transactional)", 10, 4, {"key_type": 1, "coordinator_keys": ["tx"]},
     "coordinators.error_code", TXN_DENIED, (ErrorCode.COORDINATOR_NOT_AVAILABLE,)),
    ("JoinGroup", 11, 9, {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                          "member_id": "", "protocol_type": "consumer",
                          "protocols": [{"name": "range", "metadata": b""}]},
     "error_code", GROUP_DENIED, (ErrorCode.MEMBER_ID_REQUIRED,)),
    ("Heartbeat", 12, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"}, "error_code", GROUP_DENIED,
     (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION)),
    ("LeaveGroup", 13, 5, {"group_id": "g", "members": [{"member_id": "m"}]}, "error_code", GROUP_DENIED,
     (ErrorCode.UNKNOWN_MEMBER_ID,)),
    ("SyncGroup", 14, 5, {"group_id": "g", "generation_id": 1, "member_id": "m", "protocol_type": "consumer",
                          "protocol_name": "range", "assignments": []}, "error_code", GROUP_DENIED,
     (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION)),
    ("DescribeGroups", 15, 5, {"groups": ["g"]}, "groups.error_code", GROUP_DENIED, ()),
    ("CreateTopics", 19, 7, {"topics": [{"name": "created", "num_partitions": 1, "replication_factor": 1}],
                             "timeout_ms": 10000}, "topics.error_code", TOPIC_DENIED, ()),
    ("DeleteTopics", 20, 6, {"topics": [{"name": "doomed"}], "timeout_ms": 10000}, "responses.error_code",
     TOPIC_DENIED, ()),
    ("DeleteRecords", 21, 2, {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 0}]}],
                              "timeout_ms": 5000}, "topics.partitions.error_code", TOPIC_DENIED, ()),
    ("InitProducerId (idempotent)", 22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000},
     "error_code", CLUSTER_DENIED, ()),
    ("InitProducerId (transactional)", 22, 4, {"transactional_id": "tx", "transaction_timeout_ms": 60000},
     "error_code", TXN_DENIED, (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)),
    ("OffsetForLeaderEpoch", 23, 4, {"topics": [{"topic": "t", "partitions": [
        {"partition": 0, "leader_epoch": 0}]}]}, "topics.partitions.error_code", TOPIC_DENIED, ()),
    ("AddPartitionsToTxn", 24, 3, {"v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 1,
                                   "v3_and_below_producer_epoch": 0,
                                   "v3_and_below_topics": [{"name": "t", "partitions": [0]}]},
     "results_by_topic_v3_and_below.results_by_partition.partition_error_code", TXN_DENIED, None),
    ("AddOffsetsToTxn", 25, 3, {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "group_id": "g"},
     "error_code", TXN_DENIED, None),
    ("EndTxn", 26, 3, {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "committed": True},
     "error_code", TXN_DENIED, None),
    ("TxnOffsetCommit", 28, 3, {"transactional_id": "tx", "group_id": "g", "producer_id": 1, "producer_epoch": 0,
                                "topics": [{"name": "t", "partitions": [
                                    {"partition_index": 0, "committed_offset": 0}]}]},
     "topics.partitions.error_code", TXN_DENIED, None),
    ("DescribeAcls", 29, 3, {"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1,
                             "permission_type": 1}, "error_code", CLUSTER_DENIED, ()),
    ("CreateAcls", 30, 3, {"creations": [ACL]}, "results.error_code", CLUSTER_DENIED, ()),
    ("DeleteAcls", 31, 3, {"filters": [ACL_FILTER]}, "filter_results.error_code", CLUSTER_DENIED, ()),
    ("DescribeConfigs", 32, 4, {"resources": [{"resource_type": 2, "resource_name": "t"}]}, "results.error_code",
     TOPIC_DENIED, ()),
    ("DescribeConfigs (broker)", 32, 4, {"resources": [{"resource_type": 4, "resource_name": "0"}]},
     "results.error_code", CLUSTER_DENIED, ()),
    ("AlterConfigs", 33, 2, {"resources": [{"resource_type": 2, "resource_name": "t", "configs": [
        {"name": "retention.ms", "value": "86400000"}]}]}, "responses.error_code", TOPIC_DENIED, ()),
    ("DescribeLogDirs", 35, 4, {"topics": None}, "error_code", CLUSTER_DENIED, ()),
    ("CreatePartitions", 37, 3, {"topics": [{"name": "t", "count": 2, "assignments": None}], "timeout_ms": 10000},
     "results.error_code", TOPIC_DENIED, ()),
    ("DeleteGroups", 42, 2, {"groups_names": ["g"]}, "results.error_code", GROUP_DENIED,
     (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.NON_EMPTY_GROUP)),
    ("ElectLeaders", 43, 2, {"election_type": 0, "topic_partitions": None, "timeout_ms": 5000}, "error_code",
     CLUSTER_DENIED, ()),
    ("IncrementalAlterConfigs", 44, 1, {"resources": [{"resource_type": 2, "resource_name": "t", "configs": [
        {"name": "retention.ms", "config_operation": 0, "value": "86400000"}]}]}, "responses.error_code",
     TOPIC_DENIED, ()),
    ("AlterPartitionReassignments", 45, 0, {"timeout_ms": 5000, "topics": []}, "error_code", CLUSTER_DENIED, ()),
    ("ListPartitionReassignments", 46, 0, {"timeout_ms": 5000, "topics": None}, "error_code", CLUSTER_DENIED, ()),
    ("OffsetDelete", 47, 0, {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]},
     "error_code", GROUP_DENIED, (ErrorCode.GROUP_ID_NOT_FOUND,)),
    ("DescribeClientQuotas", 48, 1, {"components": [], "strict": False}, "error_code", CLUSTER_DENIED, ()),
    ("AlterClientQuotas", 49, 1, {"entries": [{"entity": [{"entity_type": "user", "entity_name": "x"}], "ops": [
        {"key": "producer_byte_rate", "value": 1e6, "remove": False}]}], "validate_only": True},
     "entries.error_code", CLUSTER_DENIED, ()),
    ("DescribeUserScramCredentials", 50, 0, {"users": None}, "error_code", CLUSTER_DENIED, ()),
    ("AlterUserScramCredentials", 51, 0, {"deletions": [{"name": "x", "mechanism": 1}], "upsertions": []},
     "results.error_code", CLUSTER_DENIED, (ErrorCode.RESOURCE_NOT_FOUND,)),
    ("DescribeProducers", 61, 0, {"topics": [{"name": "t", "partition_indexes": [0]}]},
     "topics.partitions.error_code", TOPIC_DENIED, ()),
    ("DescribeTransactions", 65, 0, {"transactional_ids": ["tx"]}, "transaction_states.error_code", TXN_DENIED,
     (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, ErrorCode.COORDINATOR_NOT_AVAILABLE)),
    ("ConsumerGroupHeartbeat", 68, 1, {"group_id": "g", "member_id": "m", "member_epoch": 0,
                                       "rebalance_timeout_ms": 10000, "subscribed_topic_names": ["t"],
                                       "topic_partitions": []}, "error_code", GROUP_DENIED, ()),
    ("ConsumerGroupDescribe", 69, 1, {"group_ids": ["g"]}, "groups.error_code", GROUP_DENIED,
     (ErrorCode.GROUP_ID_NOT_FOUND,)),
    ("DescribeConfigs (broker logger)", 32, 4, {"resources": [{"resource_type": 8, "resource_name": "0"}]},
     "results.error_code", CLUSTER_DENIED, ()),
    ("IncrementalAlterConfigs (broker logger)", 44, 1, {"resources": [{"resource_type": 8, "resource_name": "0",
                                                                       "configs": [{"name": "root", "config_operation": 0,
                                                                                    "value": "INFO"}]}],
                                                        "validate_only": True},
     "responses.error_code", CLUSTER_DENIED, ()),
    ("AlterReplicaLogDirs", 34, 2, {"dirs": [{"path": "/nonexistent", "topics": [{"name": "t", "partitions": [0]}]}]},
     "results.partitions.error_code", CLUSTER_DENIED, (ErrorCode.LOG_DIR_NOT_FOUND,)),
    # tokens: only CreateDelegationToken for another owner is authorized; the rest is "disabled" for everyone
    ("CreateDelegationToken (other owner)", 38, 3, {"owner_principal_type": "User", "owner_principal_name": "bob",
                                                    "renewers": [], "max_lifetime_ms": -1},
     "error_code", ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, (ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED,)),
    ("CreateDelegationToken", 38, 3, {"owner_principal_type": None, "owner_principal_name": None, "renewers": [],
                                      "max_lifetime_ms": -1},
     "error_code", ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, (ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED,)),
    ("RenewDelegationToken", 39, 2, {"hmac": b"x", "renew_period_ms": -1}, "error_code",
     ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, (ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED,)),
    ("ExpireDelegationToken", 40, 2, {"hmac": b"x", "expiry_time_period_ms": -1}, "error_code",
     ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, (ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED,)),
    ("DescribeDelegationToken", 41, 3, {"owners": None}, "error_code", ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED,
     (ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED,)),
    ("UpdateFeatures", 57, 2, {"timeout_ms": 5000, "feature_updates": [
        {"feature": "transaction.version", "max_version_level": 2, "upgrade_type": 1}], "validate_only": True},
     "error_code", CLUSTER_DENIED, ()),
    ("ListConfigResources", 74, 1, {"resource_types": []}, "error_code", CLUSTER_DENIED, ()),
    # brokers' own requests: CLUSTER_ACTION (admin, a super user, would act on them: not sent as admin)
    ("LeaderAndIsr", 4, 5, {"controller_id": 1, "controller_epoch": 1}, "error_code", CLUSTER_DENIED, None),
    ("StopReplica", 5, 3, {"controller_id": 1, "controller_epoch": 1}, "error_code", CLUSTER_DENIED, None),
    ("UpdateMetadata", 6, 7, {"controller_id": 1, "controller_epoch": 1}, "error_code", CLUSTER_DENIED, None),
    ("ControlledShutdown", 7, 3, {"broker_id": 7, "broker_epoch": 1}, "error_code", CLUSTER_DENIED, None),
    ("AddPartitionsToTxn (broker form)", 24, 5, {"transactions": [
        {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "verify_only": True,
         "topics": [{"name": "t", "partitions": [0]}]}]}, "error_code", CLUSTER_DENIED, None),
    ("WriteTxnMarkers", 27, 1, {"markers": [{"producer_id": 1, "producer_epoch": 0, "transaction_result": True,
                                              "topics": [{"name": "t", "partition_indexes": [0]}],
                                              "coordinator_epoch": 0}]},
     "markers.topics.partitions.error_code", CLUSTER_DENIED, None),
]


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    broker = SecuredBroker(tmp_path_factory.mktemp("acl-every-api"))
    admin = broker.admin()
    for future in admin.create_topics([NewTopic("t", 1, 1), NewTopic("doomed", 1, 1)]).values():
        future.result(20)
    yield broker
    broker.process.stop()


@pytest.mark.parametrize("name, api_key, version, body, where, denied, admin_may", CASES, ids=[c[0] for c in CASES])
def test_every_protected_api(secured, name, api_key, version, body, where, denied, admin_may):
    alice = Session(secured.sasl, "alice", "alice-pw")
    try:
        assert first(where)(alice.call(api_key, version, body)) == denied
    finally:
        alice.close()
    if admin_may is None:
        return
    admin = Session(secured.sasl, "admin", "admin-pw")
    try:
        code = first(where)(admin.call(api_key, version, body))
    finally:
        admin.close()
    assert code not in DENIALS and (code == 0 or code in admin_may), f"{name}: admin got {code}"


def test_an_unauthenticated_connection_is_closed(secured):
    for api_key, version, body in [(3, 12, {"topics": None}), (0, 9, CASES[0][3]), (29, 3, CASES[22][3]),
                                   (41, 3, {"owners": None}), (74, 1, {"resource_types": []}),
                                   (57, 2, {"feature_updates": []})]:
        anonymous = Session(secured.sasl)
        try:
            anonymous.send(api_key, version, body)
            assert wait_closed(anonymous.sock), f"api {api_key} answered before a login"
        finally:
            anonymous.close()


def test_names_are_filtered_not_refused(secured):
    """Metadata, ListGroups and ListTransactions answer alice, naming nothing she may not describe."""
    admin = Session(secured.sasl, "admin", "admin-pw")
    alice = Session(secured.sasl, "alice", "alice-pw")
    try:
        metadata = {"topics": None, "allow_auto_topic_creation": False}
        assert "t" in {t["name"] for t in admin.call(3, 12, metadata)["topics"]}
        assert alice.call(3, 12, metadata)["topics"] == []
        named = alice.call(3, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": False})["topics"]
        assert [(t["name"], t["error_code"], t["partitions"]) for t in named] == [("t", TOPIC_DENIED, [])]
        # a group committed by admin, listed to admin only
        admin.call(8, 8, CASES[3][3])
        assert "g" in {g["group_id"] for g in admin.call(16, 4, {"states_filter": []})["groups"]}
        groups = alice.call(16, 4, {"states_filter": []})
        assert (groups["error_code"], groups["groups"]) == (0, [])
        listed = alice.call(66, 0, {"state_filters": [], "producer_id_filters": []})
        assert (listed["error_code"], listed["transaction_states"]) == (0, [])
    finally:
        admin.close()
        alice.close()
