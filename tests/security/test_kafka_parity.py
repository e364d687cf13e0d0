"""Authorization and error answers compared with Apache Kafka 4.4 in the same run (issue 36, item 4).

A secured Kafka (tests/security/secured_kafka.py) and a secured odradek (test_acls.SecuredBroker) with the
same users get the same requests on their SASL_PLAINTEXT listeners, as alice (named in no ACL but the ones
made here) and as the super user admin; the answers must match: AddPartitionsToTxn's broker form, DeleteTopics
not telling who may not describe a topic whether it exists, OffsetFetch's group error in every version,
BROKER_LOGGER configs, the delegation token APIs, UpdateFeatures, ListConfigResources, AlterReplicaLogDirs,
and what happens to a request for an API key or version neither serves. The two brokers' ids differ (Kafka 1,
odradek 0), so messages naming an id are compared with each broker's own.
"""

from __future__ import annotations

import os
import re
import uuid
from typing import Iterator

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.records.codec import build_batch
from tests.interop.helpers import read_frame, wait_until
from tests.security.secured_kafka import SecuredKafka, secured_kafka
from tests.security.test_acl_every_api import Session
from tests.security.test_acls import USERS, SecuredBroker

pytestmark = pytest.mark.timeout(300)

KAFKA_LOGGER = "kafka.server.KafkaApis"
ODRADEK_LOGGER = "odradek.broker.core"


class Side:
    """One broker under comparison: its SASL port, node id, log dir and a logger it has."""

    def __init__(self, name: str, port: int, node_id: int, log_dir: str, logger: str) -> None:
        self.name, self.port, self.node_id, self.log_dir, self.logger = name, port, node_id, log_dir, logger

    def call(self, user: str, api_key: int, version: int, body: dict) -> dict:
        session = Session(self.port, user, USERS[user])
        try:
            return session.call(api_key, version, body)
        finally:
            session.close()

    def __repr__(self) -> str:
        return self.name


@pytest.fixture(scope="module")
def kafka() -> Iterator[SecuredKafka]:
    yield from secured_kafka()


@pytest.fixture(scope="module")
def odradek(tmp_path_factory) -> Iterator[SecuredBroker]:
    broker = SecuredBroker(tmp_path_factory.mktemp("kafka-parity"))
    yield broker
    broker.process.stop()


CREATE = {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1} for name in ("t", "doomed", "desc-t")],
          "timeout_ms": 15000}
# alice may describe topics named desc-*, and nothing else
DESCRIBE_ACL = {"resource_type": 2, "resource_name": "desc-", "resource_pattern_type": 4, "principal": "User:alice",
                "host": "*", "operation": 8, "permission_type": 3}


def _prepare(side: Side) -> Side:
    created = side.call("admin", 19, 7, CREATE)
    assert {t["error_code"] for t in created["topics"]} == {0}, (side, created)
    assert side.call("admin", 30, 3, {"creations": [DESCRIBE_ACL]})["results"][0]["error_code"] == 0
    # Kafka's authorizer takes the ACL from its metadata log: wait until alice sees the topic
    wait_until(lambda: _describes(side, "desc-t"), timeout=30, message=f"{side} applying the ACL")
    return side


@pytest.fixture(scope="module")
def odradek_side(odradek) -> Side:
    """odradek alone: the tests of odradek's own behaviour run without Kafka too."""
    return _prepare(Side("odradek", odradek.sasl, 0, os.path.abspath(odradek.process.data_dir), ODRADEK_LOGGER))


@pytest.fixture(scope="module")
def sides(kafka, odradek_side) -> list[Side]:
    return [_prepare(Side("kafka", kafka.sasl, 1, str(kafka.kafka.work_dir / "data"), KAFKA_LOGGER)), odradek_side]


def _describes(side: Side, topic: str) -> bool:
    answer = side.call("alice", 3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    return answer["topics"][0]["error_code"] == 0


def each(sides: list[Side], user: str, api_key: int, version: int, body: dict) -> list[dict]:
    return [side.call(user, api_key, version, body) for side in sides]


# ------------------------------------------------------------------------------------ the listed differences

@pytest.mark.parametrize("version", [4, 5])
@pytest.mark.parametrize("verify_only", [True, False])
def test_add_partitions_to_txn_broker_form_needs_cluster_action(sides, version, verify_only):
    body = {"transactions": [{"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
                              "verify_only": verify_only, "topics": [{"name": "t", "partitions": [0]}]}]}
    for answer in each(sides, "alice", 24, version, body):
        assert (answer["error_code"], answer["results_by_transaction"]) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    for answer in each(sides, "admin", 24, version, body):
        assert answer["error_code"] == 0 and len(answer["results_by_transaction"]) == 1


def _by_name(answer: dict) -> dict:
    return {(r["name"], r.get("topic_id")): (r["error_code"], r.get("error_message")) for r in answer["responses"]}


@pytest.mark.parametrize("version", [1, 4, 5, 6])
def test_delete_topics_tells_an_unauthorised_user_nothing(sides, version):
    names = ["doomed", "missing", "desc-t", "desc-missing", "__consumer_offsets"]
    if version < 6:
        body = {"topic_names": names, "timeout_ms": 5000}
    else:
        body = {"topics": [{"name": n} for n in names] + [{"name": None, "topic_id": uuid.uuid4().bytes}],
                "timeout_ms": 5000}
    kafka_answer, odradek_answer = each(sides, "alice", 20, version, body)
    assert _by_name(odradek_answer) == _by_name(kafka_answer)
    codes = {name: code for (name, _), (code, _) in _by_name(odradek_answer).items()}
    assert codes["missing"] == codes["doomed"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert codes["desc-missing"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # may describe: may know it is absent
    assert codes["desc-t"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_delete_topics_by_id_hides_the_name_of_an_undescribable_topic(sides):
    for side in sides:
        topics = side.call("admin", 3, 12, {"topics": [{"name": "doomed"}, {"name": "desc-t"}],
                                             "allow_auto_topic_creation": False})["topics"]
        ids = {t["name"]: t["topic_id"] for t in topics}
        answer = side.call("alice", 20, 6, {"topics": [{"name": None, "topic_id": ids["doomed"]},
                                                       {"name": None, "topic_id": ids["desc-t"]}], "timeout_ms": 5000})
        got = {r["topic_id"]: (r["name"], r["error_code"]) for r in answer["responses"]}
        assert got == {ids["doomed"]: (None, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                       ids["desc-t"]: ("desc-t", ErrorCode.TOPIC_AUTHORIZATION_FAILED)}, side


def _offset_fetch_body(version: int) -> dict:
    if version < 8:
        return {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}], "require_stable": False}
    topic = {"topic_id": bytes(16)} if version >= 10 else {"name": "t"}
    return {"groups": [{"group_id": "g", "member_id": None, "member_epoch": -1,
                        "topics": [{**topic, "partition_indexes": [0, 1]}]}], "require_stable": False}


@pytest.mark.parametrize("version", range(1, 11))
def test_offset_fetch_refuses_an_unauthorised_group_in_every_version(sides, version):
    kafka_answer, odradek_answer = each(sides, "alice", 9, version, _offset_fetch_body(version))
    assert odradek_answer == kafka_answer
    if version < 2:  # no top-level error: on each partition
        assert [p["error_code"] for p in odradek_answer["topics"][0]["partitions"]] == \
            [ErrorCode.GROUP_AUTHORIZATION_FAILED] * 2


def test_offset_fetch_v0_answers_like_v1(odradek_side):
    """Kafka 4.4 no longer speaks v0; odradek does, and refuses as v1 does."""
    answer = odradek_side.call("alice", 9, 0, _offset_fetch_body(0))
    assert [(p["partition_index"], p["committed_offset"], p["error_code"]) for p in answer["topics"][0]["partitions"]] \
        == [(0, -1, ErrorCode.GROUP_AUTHORIZATION_FAILED), (1, -1, ErrorCode.GROUP_AUTHORIZATION_FAILED)]


# ------------------------------------------------------------------------------------------ BROKER_LOGGER

def _describe_loggers(side: Side, user: str, name: str, keys: list[str] | None, version: int = 4) -> dict:
    return side.call(user, 32, version, {"resources": [{"resource_type": 8, "resource_name": name,
                                                        "configuration_keys": keys}],
                                         "include_synonyms": True, "include_documentation": True})["results"][0]


@pytest.mark.parametrize("version", [1, 4])
def test_broker_logger_describe(sides, version):
    for side in sides:
        refused = _describe_loggers(side, "alice", str(side.node_id), None, version)
        assert (refused["error_code"], refused["error_message"], refused["configs"]) == \
            (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", [])
        served = _describe_loggers(side, "admin", str(side.node_id), None, version)
        assert (served["error_code"], served["error_message"]) == (0, "")
        names = {c["name"] for c in served["configs"]}
        assert "root" in names and side.logger in names, side
        root = next(c for c in served["configs"] if c["name"] == "root")
        assert {k: v for k, v in root.items() if k != "value"} == {
            "name": "root", "read_only": False, "config_source": 6, "is_default": False, "is_sensitive": False,
            "synonyms": [], "config_type": 0, "documentation": ""}, side
        assert root["value"] in {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}
        only = _describe_loggers(side, "admin", str(side.node_id), ["root", "no.such.logger"], version)
        assert [c["name"] for c in only["configs"]] == ["root"]
        other = side.node_id + 5
        for name, message in [("", "Broker id must not be empty"),
                              ("x", "Broker id must be an integer, but it is: x"),
                              (str(other), f"Unexpected broker id, expected {side.node_id} but received {other}")]:
            wrong = _describe_loggers(side, "admin", name, None, version)
            assert (wrong["error_code"], wrong["error_message"], wrong["configs"]) == \
                (ErrorCode.INVALID_REQUEST, message, []), side


def _alter_loggers(side: Side, user: str, changes: list[tuple[str, int, str | None]], name: str | None = None,
                   validate_only: bool = False, api_key: int = 44) -> tuple[int, str | None]:
    key = "config_operation" if api_key == 44 else None
    configs = [{"name": n, "value": v, **({key: op} if key else {})} for n, op, v in changes]
    answer = side.call(user, api_key, 1, {"resources": [
        {"resource_type": 8, "resource_name": str(side.node_id) if name is None else name, "configs": configs}],
        "validate_only": validate_only})["responses"][0]
    message = answer["error_message"]
    if message is not None:  # each broker names its own logger and id
        message = message.replace(side.logger, "LOGGER").replace(f"Expected {side.node_id},", "Expected ID,")
    return answer["error_code"], message


def _level(side: Side, logger: str) -> str:
    return next(c["value"] for c in _describe_loggers(side, "admin", str(side.node_id), [logger])["configs"])


def test_broker_logger_changes_are_checked_as_kafka_checks_them(sides):
    cases = [
        ("alice", [("L", 0, "DEBUG")], None),
        ("alice", [("L", 0, "DEBUG"), ("L", 0, "INFO")], None),  # duplicates: refused before authorization
        ("alice", [("L", 0, None)], None),
        ("admin", [("L", 0, "info")], None),
        ("admin", [("L", 0, "LOUD")], None),
        ("admin", [("L", 0, "OFF")], None),
        ("admin", [("no.such.Logger", 0, "DEBUG")], None),
        ("admin", [("root", 1, None)], None),
        ("admin", [("L", 2, "DEBUG")], None),
        ("admin", [("L", 3, "DEBUG")], None),
        ("admin", [("L", 9, "DEBUG")], None),
        ("admin", [("L", 0, "DEBUG")], "x"),
        ("admin", [("L", 0, "DEBUG")], ""),
        ("admin", [("L", 0, "DEBUG")], "7"),
        ("admin", [("L", 0, "TRACE")], None),
        ("admin", [("L", 1, None)], None),
    ]
    for user, changes, name in cases:
        answers = []
        for side in sides:
            concrete = [(side.logger if n == "L" else n, op, v) for n, op, v in changes]
            answers.append(_alter_loggers(side, user, concrete, name))
        assert answers[0] == answers[1], (user, changes, name, answers)


def test_broker_logger_levels_follow_the_root(sides):
    for side in sides:
        before = _level(side, "root")
        assert _alter_loggers(side, "admin", [(side.logger, 0, "DEBUG")], validate_only=True) == (0, None)
        assert _level(side, side.logger) == before  # validate_only changes nothing
        assert _alter_loggers(side, "admin", [(side.logger, 0, "ERROR")]) == (0, None)
        assert _level(side, side.logger) == "ERROR"
        assert _alter_loggers(side, "admin", [(side.logger, 1, None)]) == (0, None)
        assert _level(side, side.logger) == before
        assert _alter_loggers(side, "admin", [("root", 0, "FATAL")]) == (0, None)
        assert _level(side, side.logger) == "FATAL", side  # unset: it follows the root again
        assert _alter_loggers(side, "admin", [("root", 0, before)]) == (0, None)


def test_legacy_alter_configs_refuses_broker_loggers(sides):
    for user in ("alice", "admin"):
        answers = [_alter_loggers(side, user, [(side.logger, 0, "DEBUG")], api_key=33) for side in sides]
        assert answers == [(ErrorCode.INVALID_REQUEST, "Unknown resource type 8")] * 2


def test_a_debug_level_set_at_run_time_reaches_the_log(odradek, odradek_side):
    """odradek's own logger set to DEBUG: a refused idempotent batch is logged at DEBUG from then on."""
    side = odradek_side
    marker = "produce to t-0 refused"

    def refused_batch(sequence: int) -> None:
        records = build_batch([(b"k", b"v", (), 1_700_000_000_000)], producer_id=4242, producer_epoch=0,
                              base_sequence=sequence)
        answer = side.call("admin", 0, 9, {"acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": records}]}]})
        return answer["responses"][0]["partition_responses"][0]["error_code"]

    assert refused_batch(0) == 0
    assert refused_batch(7) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert marker not in odradek.process.log_path.read_text()  # the broker logs at INFO
    assert _alter_loggers(side, "admin", [("odradek", 0, "DEBUG")]) == (0, None)
    try:
        assert _level(side, ODRADEK_LOGGER) == "DEBUG"
        assert refused_batch(9) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        wait_until(lambda: marker in odradek.process.log_path.read_text(), timeout=10,
                   message="the DEBUG line in the broker's log")
        assert re.search(r"DEBUG odradek\.broker\.handlers\.k00_produce: produce to t-0 refused",
                         odradek.process.log_path.read_text())
        assert "Updated the log level of odradek to DEBUG" in odradek.process.log_path.read_text()
    finally:
        assert _alter_loggers(side, "admin", [("odradek", 1, None)]) == (0, None)


# ------------------------------------------------------------------------------ the APIs odradek lacked

TOKEN_CASES = [
    (38, 1, {"renewers": [], "max_lifetime_ms": -1}),
    (38, 3, {"owner_principal_type": None, "owner_principal_name": None, "renewers": [], "max_lifetime_ms": -1}),
    (38, 3, {"owner_principal_type": "User", "owner_principal_name": "bob", "renewers": [], "max_lifetime_ms": -1}),
    (38, 3, {"owner_principal_type": None, "owner_principal_name": None, "max_lifetime_ms": -1,
             "renewers": [{"principal_type": "Group", "principal_name": "ops"}]}),
    (39, 2, {"hmac": b"abc", "renew_period_ms": -1}),
    (40, 2, {"hmac": b"abc", "expiry_time_period_ms": -1}),
    (41, 1, {"owners": None}),
    (41, 3, {"owners": [{"principal_type": "User", "principal_name": "alice"}]}),
]


@pytest.mark.parametrize("api_key, version, body", TOKEN_CASES)
@pytest.mark.parametrize("user", ["alice", "admin"])
def test_delegation_token_apis(sides, user, api_key, version, body):
    kafka_answer, odradek_answer = each(sides, user, api_key, version, body)
    assert odradek_answer == kafka_answer


FEATURE_CASES = [
    [],
    [{"feature": "transaction.version", "max_version_level": 2, "upgrade_type": 1, "allow_downgrade": False}],
    [{"feature": "group.version", "max_version_level": 0, "upgrade_type": 1, "allow_downgrade": False}],
    [{"feature": "no.such", "max_version_level": 1, "upgrade_type": 1, "allow_downgrade": False}],
    [{"feature": "transaction.version", "max_version_level": 9, "upgrade_type": 1, "allow_downgrade": False}],
]


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("updates", FEATURE_CASES, ids=["none", "same-level", "downgrade", "unknown", "too-high"])
def test_update_features(sides, version, updates):
    body = {"timeout_ms": 5000, "feature_updates": updates, "validate_only": True}
    refused = each(sides, "alice", 57, version, body)
    assert [(a["error_code"], a["results"]) for a in refused] == [(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])] * 2
    kafka_answer, odradek_answer = each(sides, "admin", 57, version, body)
    kafka_answer["error_message"] = (kafka_answer["error_message"] or "").replace("controller 1", "controller ID")
    odradek_answer["error_message"] = (odradek_answer["error_message"] or "").replace("controller 0", "controller ID")
    assert odradek_answer == kafka_answer


def _resources(answer: dict) -> set[tuple[int, str]]:
    return {(r["resource_type"], r["resource_name"]) for r in answer["config_resources"]
            if not r["resource_name"].startswith("__")}  # internal topics exist on either side at other times


@pytest.mark.parametrize("types", [[], [2], [4], [8], [16], [32], [2, 8], [0], [99], [2, 2]])
def test_list_config_resources(sides, types):
    for answer in each(sides, "alice", 74, 1, {"resource_types": types}):
        assert (answer["error_code"], answer["config_resources"]) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    kafka_answer, odradek_answer = each(sides, "admin", 74, 1, {"resource_types": types})
    assert odradek_answer["error_code"] == kafka_answer["error_code"]
    own_ids = {(kind, name.replace("1", "ID")) for kind, name in _resources(kafka_answer)}
    assert {(kind, name.replace("0", "ID")) for kind, name in _resources(odradek_answer)} == own_ids
    assert [a["config_resources"] for a in each(sides, "admin", 74, 0, {})] == [[], []]


def test_alter_replica_log_dirs(sides):
    for side in sides:
        cases = [(side.log_dir, "t", [0], 0), ("/nonexistent", "t", [0], ErrorCode.LOG_DIR_NOT_FOUND),
                 (side.log_dir + "/", "t", [0], ErrorCode.LOG_DIR_NOT_FOUND), ("relative", "t", [0], 57),
                 (side.log_dir, "missing", [0], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                 (side.log_dir, "t", [5], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        for version in (1, 2):
            for path, topic, partitions, expected in cases:
                body = {"dirs": [{"path": path, "topics": [{"name": topic, "partitions": partitions}]}]}
                refused = side.call("alice", 34, version, body)["results"]
                assert [p["error_code"] for r in refused for p in r["partitions"]] == \
                    [ErrorCode.CLUSTER_AUTHORIZATION_FAILED], side
                done = side.call("admin", 34, version, body)["results"]
                assert [(r["topic_name"], p["partition_index"], p["error_code"]) for r in done for p in r["partitions"]] \
                    == [(topic, partitions[0], expected)], (side, path, topic)
        last_wins = side.call("admin", 34, 2, {"dirs": [{"path": side.log_dir, "topics": [{"name": "t", "partitions": [0]}]},
                                                      {"path": "/x", "topics": [{"name": "t", "partitions": [0]}]}]})
        assert last_wins["results"] == [{"topic_name": "t", "partitions": [{"partition_index": 0, "error_code": 57}]}]


def test_both_advertise_the_same_versions_of_the_added_apis(sides):
    answers = each(sides, "alice", 18, 3, {"client_software_name": "parity", "client_software_version": "1"})
    ranges = [{k["api_key"]: (k["min_version"], k["max_version"]) for k in a["api_keys"]} for a in answers]
    for key in (34, 38, 39, 40, 41, 57, 74):
        assert ranges[1].get(key) == ranges[0].get(key), key


@pytest.mark.parametrize("api_key, version", [(999, 0), (3, 99), (34, 0), (93, 0)])
def test_a_request_neither_serves_closes_the_connection(sides, api_key, version):
    """Kafka 4.4 closes the connection on an API key or version it does not serve (only ApiVersions is
    answered at any version); so does odradek."""
    import struct

    for side in sides:
        session = Session(side.port, "alice", USERS["alice"])
        try:
            header = struct.pack(">hhih", api_key, version, 99, 4) + b"test"
            session.sock.sendall(struct.pack(">i", len(header) + 1) + header + b"\0")
            with pytest.raises((EOFError, ConnectionError)):
                read_frame(session.sock, timeout=10)
        finally:
            session.close()


def test_kafka_python_admin_reads_and_changes_broker_loggers(sides):
    """A real client's view: kafka-python's admin lists the config resources, describes the broker's loggers
    and sets one (IncrementalAlterConfigs), against both brokers."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    for side in sides:
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{side.port}", security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism="PLAIN", sasl_plain_username="admin",
                                 sasl_plain_password=USERS["admin"], request_timeout_ms=20000)
        try:
            listed = admin.list_config_resources()
            assert listed["broker_logger"] == [str(side.node_id)] and {"t", "doomed"} <= set(listed["topic"]), side
            logger = ConfigResource(ConfigResourceType.BROKER_LOGGER, str(side.node_id))
            described = admin.describe_configs([logger], config_filter="all")["broker_logger"][str(side.node_id)]
            assert "root" in described and side.logger in described, side
            result = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, str(side.node_id),
                                                         configs={side.logger: ("SET", "TRACE")})],
                                         raise_on_unknown=False, incremental=True)
            assert result == {"broker_logger": {str(side.node_id): "OK"}}, (side, result)
            assert _level(side, side.logger) == "TRACE"
            admin.alter_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, str(side.node_id),
                                                configs={side.logger: ("DELETE", None)})],
                                raise_on_unknown=False, incremental=True)
            assert _level(side, side.logger) == _level(side, "root")
        finally:
            admin.close()


def _grant(side: Side, user: str, operation: int) -> None:
    acl = {"resource_type": 4, "resource_name": "kafka-cluster", "resource_pattern_type": 3,
           "principal": f"User:{user}", "host": "*", "operation": operation, "permission_type": 3}
    assert side.call("admin", 30, 3, {"creations": [acl]})["results"][0]["error_code"] == 0


def _cluster_outcomes(side: Side, user: str) -> dict[str, int]:
    """What ``user`` gets from each cluster-level API added here."""
    logger = [{"resource_type": 8, "resource_name": str(side.node_id), "configs": [
        {"name": "root", "config_operation": 0, "value": "WARN"}]}]
    return {
        "ListConfigResources": side.call(user, 74, 1, {"resource_types": [8]})["error_code"],
        "DescribeConfigs(logger)": _describe_loggers(side, user, str(side.node_id), ["root"])["error_code"],
        "IncrementalAlterConfigs(logger)": side.call(user, 44, 1, {"resources": logger, "validate_only": True})[
            "responses"][0]["error_code"],
        "UpdateFeatures": side.call(user, 57, 2, {"timeout_ms": 5000, "feature_updates": [], "validate_only": True})[
            "error_code"],
        "AlterReplicaLogDirs": side.call(user, 34, 2, {"dirs": [{"path": side.log_dir, "topics": [
            {"name": "t", "partitions": [0]}]}]})["results"][0]["partitions"][0]["error_code"],
    }


def test_which_cluster_operation_each_added_api_needs(sides):
    """bob, granted DESCRIBE_CONFIGS on the cluster and then ALTER: the same APIs open up on both brokers."""
    steps = []
    # DESCRIBE_CONFIGS, then ALTER as well; each with an API it opens, to wait for (Kafka applies ACLs from its
    # metadata log, a moment later)
    for operation, opened in ((10, "ListConfigResources"), (7, "UpdateFeatures")):
        for side in sides:
            _grant(side, "bob", operation)
        outcomes = []
        for side in sides:
            wait_until(lambda s=side: _cluster_outcomes(s, "bob")[opened] == 0, timeout=30,
                       message=f"{side} applying bob's ACL")
            outcomes.append(_cluster_outcomes(side, "bob"))
        assert outcomes[0] == outcomes[1], (operation, outcomes)
        steps.append(outcomes[1])
    denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert steps[0] == {"ListConfigResources": 0, "DescribeConfigs(logger)": 0,
                        "IncrementalAlterConfigs(logger)": denied, "UpdateFeatures": denied,
                        "AlterReplicaLogDirs": denied}
    assert steps[1]["UpdateFeatures"] == steps[1]["AlterReplicaLogDirs"] == 0
    assert steps[1]["IncrementalAlterConfigs(logger)"] == denied  # ALTER is not ALTER_CONFIGS


def test_api_versions_at_a_version_neither_speaks(sides):
    """Error 35 with a v0 body naming ApiVersions' own range only (KIP-511), before or after a login."""
    import struct

    for side in sides:
        for user in (None, "alice"):
            session = Session(side.port, user, USERS.get(user, ""))
            try:
                header = struct.pack(">hhih", 18, 99, 7, 4) + b"test" + b"\0"
                session.sock.sendall(struct.pack(">i", len(header)) + header)
                payload = read_frame(session.sock, timeout=10)
                correlation_id, error, count, key, low = struct.unpack_from(">ihihh", payload)
                assert (correlation_id, error, count, key, low) == (7, ErrorCode.UNSUPPORTED_VERSION, 1, 18, 0), side
                assert len(payload) == 4 + 2 + 4 + 6, side
            finally:
                session.close()


@pytest.mark.parametrize("api_key, version, body", TOKEN_CASES)
def test_no_delegation_tokens_over_plaintext(kafka, odradek, api_key, version, body):
    """On a PLAINTEXT listener every token request is DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, before any other
    check, on both brokers."""
    answers = []
    for port in (kafka.kafka.port, odradek.plain):
        session = Session(port)
        try:
            answers.append(session.call(api_key, version, body))
        finally:
            session.close()
    assert answers[1] == answers[0]
    assert answers[1]["error_code"] == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
