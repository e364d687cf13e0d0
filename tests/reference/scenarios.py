"""The differential scenarios: a few setup calls and one compared request each, run on Kafka and odradek.

Every name a scenario uses (topics, groups, transactional ids) starts with `ctx.prefix`, unique to the
scenario and the run, so scenarios leave each other alone; helpers take a suffix. Record timestamps are
`RUN_TS` (+ a few ms), fixed for the run and recent (time-based retention never applies), the same on both
brokers so stored batches can be compared byte for byte.

Setup calls that depend on asynchronous work repeat until it is done (`until`): topic creation is waited
for with Metadata, coordinators with FindCoordinator and a harmless request to them. The compared request is
sent once.
"""

from __future__ import annotations

import re
import struct
import time
from typing import Any, Callable

from .differential import Body, Call, Ctx, Scenario, record_batch

RUN_TS = int(time.time() * 1000) // 1000 * 1000

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 0, 1, 2, 3, 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 11, 12, 13, 14, 15, 16
CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH = 19, 20, 21, 22, 23
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, DESCRIBE_CONFIGS, ALTER_CONFIGS = 24, 25, 26, 32, 33
CREATE_PARTITIONS, DELETE_GROUPS, INCREMENTAL_ALTER_CONFIGS, OFFSET_DELETE = 37, 42, 44, 47
DESCRIBE_CLUSTER, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 60, 61, 65, 66
DESCRIBE_TOPIC_PARTITIONS = 75
TXN_OFFSET_COMMIT = 28

TOPIC, BROKER = 2, 4  # config resource types
SET, DELETE, APPEND = 0, 1, 2  # incremental config operations
EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -2, -1, -3, -4
RETRIABLE_COORDINATOR = (14, 15, 16)  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR


# ----------------------------------------------------------------------------------------------- topics

def first_topic_error(r: Body) -> int:
    return r["topics"][0]["error_code"]


def topic_ready(partitions: int) -> Callable[[Body], bool]:
    def ready(r: Body) -> bool:
        t = r["topics"][0]
        return (t["error_code"] == 0 and len(t["partitions"]) == partitions
                and all(p["error_code"] == 0 and p["leader_id"] >= 0 for p in t["partitions"]))
    return ready


def metadata_body(*suffixes: str, auto_create: bool = False) -> Callable[[Ctx], Body]:
    return lambda c: {"topics": [{"name": c.topic(s), "topic_id": bytes(16)} for s in suffixes],
                      "allow_auto_topic_creation": auto_create}


def wait_topic(suffix: str = "", partitions: int = 1) -> Call:
    return Call(METADATA, metadata_body(suffix), until=topic_ready(partitions))


def create_topic_body(suffix: str = "", partitions: int = 1, replication: int = 1,
                      configs: dict[str, str] | None = None, validate_only: bool = False,
                      name: Callable[[Ctx], str] | None = None) -> Callable[[Ctx], Body]:
    return lambda c: {"topics": [{"name": name(c) if name else c.topic(suffix), "num_partitions": partitions,
                                  "replication_factor": replication, "assignments": [],
                                  "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
                      "timeout_ms": 30000, "validate_only": validate_only}


def create_topic(suffix: str = "", partitions: int = 1, configs: dict[str, str] | None = None) -> tuple[Call, ...]:
    """Setup: create a topic and wait until Metadata shows every partition with a leader and the partitions
    answer ListOffsets (Kafka's metadata cache can show a leader a moment before its replica manager has it)."""
    return (Call(CREATE_TOPICS, create_topic_body(suffix, partitions, configs=configs),
                 until=lambda r: first_topic_error(r) == 0),
            wait_topic(suffix, partitions),
            Call(LIST_OFFSETS, lambda c: {"replica_id": -1, "isolation_level": 0, "timeout_ms": 10000, "topics": [
                {"name": c.topic(suffix), "partitions": [{"partition_index": i, "current_leader_epoch": -1,
                                                          "timestamp": LATEST} for i in range(partitions)]}]},
                 until=lambda r: all(p["error_code"] == 0 for p in r["topics"][0]["partitions"])))


# ------------------------------------------------------------------------------------------ produce/fetch

def produce_body(suffix: str = "", values: tuple[bytes, ...] = (b"v0", b"v1", b"v2"), partition: int = 0,
                 acks: int = -1, ts: int = 0, transactional: bool = False,
                 batch: Callable[[Ctx], bytes] | None = None, **batch_kw: Any) -> Callable[[Ctx], Body]:
    def build(c: Ctx) -> Body:
        kw = {k: (v(c) if callable(v) else v) for k, v in batch_kw.items()}
        records = batch(c) if batch else record_batch(values, RUN_TS + ts, **kw)
        name = c.topic(suffix)
        return {"transactional_id": c.topic("tx") if transactional else None, "acks": acks, "timeout_ms": 10000,
                "topic_data": [{"name": name, "topic_id": c.topic_id(name),
                                "partition_data": [{"index": partition, "records": records}]}]}
    return build


def produce_error(r: Body) -> int:
    return r["responses"][0]["partition_responses"][0]["error_code"]


def produce(suffix: str = "", **kw: Any) -> Call:
    """Setup: a produce that must succeed (repeated while the partition is not ready)."""
    return Call(PRODUCE, produce_body(suffix, **kw), until=lambda r: produce_error(r) == 0)


def filled_topic(suffix: str = "", partitions: int = 1) -> tuple[Call, ...]:
    """Setup: a topic holding three batches of three records, at RUN_TS, +10 and +20 ms."""
    return (*create_topic(suffix, partitions), produce(suffix, ts=0), produce(suffix, ts=10),
            produce(suffix, ts=20))


def fetch_body(suffix: str = "", offset: int = 0, partition: int = 0, isolation: int = 0,
               topic: Callable[[Ctx], str] | None = None) -> Callable[[Ctx], Body]:
    def build(c: Ctx) -> Body:
        name = topic(c) if topic else c.topic(suffix)
        return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": name, "topic_id": c.topic_id(name),
                            "partitions": [{"partition": partition, "current_leader_epoch": -1,
                                            "fetch_offset": offset, "last_fetched_epoch": -1,
                                            "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": [], "rack_id": ""}
    return build


def list_offsets_body(timestamp: int, suffix: str = "", partition: int = 0,
                      isolation: int = 0) -> Callable[[Ctx], Body]:
    return lambda c: {"replica_id": -1, "isolation_level": isolation, "timeout_ms": 10000,
                      "topics": [{"name": c.topic(suffix),
                                  "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                  "timestamp": timestamp}]}]}


# ----------------------------------------------------------------------------------------------- groups

def coordinator_error(r: Body) -> int:
    return r["coordinators"][0]["error_code"] if r["coordinators"] else r["error_code"]


def find_coordinator_body(key: Callable[[Ctx], str], key_type: int = 0) -> Callable[[Ctx], Body]:
    return lambda c: {"key": key(c), "key_type": key_type, "coordinator_keys": [key(c)]}


def group_id(c: Ctx) -> str:
    return c.topic("g")


def group_ready() -> tuple[Call, ...]:
    """Setup: the group coordinator exists and has loaded (Kafka creates __consumer_offsets on demand)."""
    return (Call(FIND_COORDINATOR, find_coordinator_body(group_id), until=lambda r: coordinator_error(r) == 0),
            Call(DESCRIBE_GROUPS, lambda c: {"groups": [group_id(c)]},
                 until=lambda r: r["groups"][0]["error_code"] not in RETRIABLE_COORDINATOR))


def subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, user data (null)."""
    t = topic.encode()
    return struct.pack(">hih", 0, 1, len(t)) + t + struct.pack(">i", -1)


def assignment(topic: str) -> bytes:
    """ConsumerProtocolAssignment v0: version, [topic, [partition 0]], user data (null)."""
    t = topic.encode()
    return struct.pack(">hih", 0, 1, len(t)) + t + struct.pack(">iii", 1, 0, -1)


def join_body(member: Callable[[Ctx], str] = lambda c: c.vars.get("member", ""), session_timeout: int = 30000,
              protocol_type: str = "consumer") -> Callable[[Ctx], Body]:
    return lambda c: {"group_id": group_id(c), "session_timeout_ms": session_timeout,
                      "rebalance_timeout_ms": 30000, "member_id": member(c), "group_instance_id": None,
                      "protocol_type": protocol_type,
                      "protocols": [{"name": "range", "metadata": subscription(c.topic())}], "reason": None}


def save_member(c: Ctx, r: Body) -> None:
    c.vars["member"] = r["member_id"]
    c.vars["generation"] = r["generation_id"]


def joined() -> tuple[Call, ...]:
    """Setup: one member joined (the second JoinGroup after MEMBER_ID_REQUIRED), generation saved."""
    return (*group_ready(),
            Call(JOIN_GROUP, join_body(lambda c: ""), save=save_member),
            Call(JOIN_GROUP, join_body(), until=lambda r: r["error_code"] == 0, save=save_member))


def sync_body(generation: Callable[[Ctx], int] = lambda c: c.vars["generation"],
              member: Callable[[Ctx], str] = lambda c: c.vars["member"]) -> Callable[[Ctx], Body]:
    return lambda c: {"group_id": group_id(c), "generation_id": generation(c), "member_id": member(c),
                      "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
                      "assignments": [{"member_id": member(c), "assignment": assignment(c.topic())}]}


def stable_group() -> tuple[Call, ...]:
    """Setup: one member joined and synced: the group is Stable."""
    return (*joined(), Call(SYNC_GROUP, sync_body(), until=lambda r: r["error_code"] == 0))


def heartbeat_body(generation: Callable[[Ctx], int] = lambda c: c.vars["generation"],
                   member: Callable[[Ctx], str] = lambda c: c.vars["member"]) -> Callable[[Ctx], Body]:
    return lambda c: {"group_id": group_id(c), "generation_id": generation(c), "member_id": member(c),
                      "group_instance_id": None}


def leave_body(member: Callable[[Ctx], str] = lambda c: c.vars["member"]) -> Callable[[Ctx], Body]:
    return lambda c: {"group_id": group_id(c), "member_id": member(c),
                      "members": [{"member_id": member(c), "group_instance_id": None, "reason": None}]}


def commit_body(suffix: str = "", offset: int = 2, generation: Callable[[Ctx], int] = lambda c: -1,
                member: Callable[[Ctx], str] = lambda c: "") -> Callable[[Ctx], Body]:
    def build(c: Ctx) -> Body:
        name = c.topic(suffix)
        return {"group_id": group_id(c), "generation_id_or_member_epoch": generation(c), "member_id": member(c),
                "group_instance_id": None, "retention_time_ms": -1,
                "topics": [{"name": name, "topic_id": c.topic_id(name),
                            "partitions": [{"partition_index": 0, "committed_offset": offset,
                                            "committed_leader_epoch": -1, "committed_metadata": "m"}]}]}
    return build


def offset_fetch_body(all_topics: bool = False) -> Callable[[Ctx], Body]:
    def build(c: Ctx) -> Body:
        topics = None if all_topics else [{"name": c.topic(), "topic_id": c.topic_id(c.topic()),
                                          "partition_indexes": [0]}]
        return {"group_id": group_id(c), "topics": topics, "require_stable": False,
                "groups": [{"group_id": group_id(c), "member_id": None, "member_epoch": -1, "topics": topics}]}
    return build


# --------------------------------------------------------------------------------------------- transactions

def txn_id(c: Ctx) -> str:
    return c.topic("tx")


def txn_ready() -> Call:
    return Call(FIND_COORDINATOR, find_coordinator_body(txn_id, key_type=1),
                until=lambda r: coordinator_error(r) == 0)


def init_pid_body(transactional: bool, timeout_ms: int = 60000) -> Callable[[Ctx], Body]:
    return lambda c: {"transactional_id": txn_id(c) if transactional else None,
                      "transaction_timeout_ms": timeout_ms, "producer_id": -1, "producer_epoch": -1}


def save_pid(c: Ctx, r: Body) -> None:
    c.vars["pid"] = r["producer_id"]
    c.vars["epoch"] = r["producer_epoch"]


def init_pid(transactional: bool) -> tuple[Call, ...]:
    """Setup: a producer id (transactional: after the transaction coordinator is ready)."""
    init = Call(INIT_PRODUCER_ID, init_pid_body(transactional), until=lambda r: r["error_code"] == 0, save=save_pid)
    return (txn_ready(), init) if transactional else (init,)


def add_partitions_body(pid: Callable[[Ctx], int] = lambda c: c.vars["pid"],
                        epoch: Callable[[Ctx], int] = lambda c: c.vars["epoch"]) -> Callable[[Ctx], Body]:
    """The client form (v3 and below) and, for the same request at v4+, the broker form."""
    def build(c: Ctx) -> Body:
        topics = [{"name": c.topic(), "partitions": [0]}]
        return {"v3_and_below_transactional_id": txn_id(c), "v3_and_below_producer_id": pid(c),
                "v3_and_below_producer_epoch": epoch(c), "v3_and_below_topics": topics,
                "transactions": [{"transactional_id": txn_id(c), "producer_id": pid(c), "producer_epoch": epoch(c),
                                  "verify_only": False, "topics": topics}]}
    return build


def open_transaction() -> tuple[Call, ...]:
    """Setup: a topic with a transaction open on it: three transactional records, not yet committed."""
    return (*create_topic(), *init_pid(True),
            Call(ADD_PARTITIONS_TO_TXN, add_partitions_body(), cap=3,
                 until=lambda r: all(p["partition_error_code"] == 0 for t in r["results_by_topic_v3_and_below"]
                                     for p in t["results_by_partition"])),
            produce(transactional=True, attributes=0x10, producer_id=lambda c: c.vars["pid"],
                    producer_epoch=lambda c: c.vars["epoch"], base_sequence=0))


def transient_produce_error(r: Body) -> bool:
    """NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS: what Kafka 4 answers a transactional produce while its
    check with the transaction coordinator (KIP-890) cannot complete yet; a client retries them."""
    return produce_error(r) in (6, 19)


def txn_batch(**kw: Any) -> Callable[[Ctx], Body]:
    """A produce of a transactional batch with the saved producer id and epoch (overridable)."""
    fields = {"producer_id": lambda c: c.vars["pid"], "producer_epoch": lambda c: c.vars["epoch"],
              "base_sequence": 0, **kw}
    return produce_body(transactional=True, attributes=0x10, **fields)


def end_txn_body(pid: Callable[[Ctx], int] = lambda c: c.vars["pid"], commit: bool = True) -> Callable[[Ctx], Body]:
    return lambda c: {"transactional_id": txn_id(c), "producer_id": pid(c),
                      "producer_epoch": c.vars.get("epoch", 0), "committed": commit}


def end_txn_v2(commit: bool = True, **kw: Any) -> Call:
    """EndTxn v5 (transactions v2: the epoch is bumped); the new epoch is not saved, so later calls may use the
    old one."""
    return Call(END_TXN, end_txn_body(commit=commit), version=5, **kw)


def ended_v2(commit: bool = True) -> tuple[Call, ...]:
    """Setup: EndTxn v5, then until the transaction is complete (Kafka answers once Prepare* is written)."""
    done = "CompleteCommit" if commit else "CompleteAbort"
    return (end_txn_v2(commit, until=lambda r: r["error_code"] == 0),
            Call(DESCRIBE_TRANSACTIONS, describe_txn,
                 until=lambda r: r["transaction_states"][0]["transaction_state"] == done))


def first_write_v2() -> Call:
    """Setup: a v2 producer's first transactional write to the topic (Produce v12 adds the partition)."""
    return Call(PRODUCE, txn_batch(), version=12, until=lambda r: produce_error(r) == 0)


def txn_offset_commit_body(c: Ctx) -> Body:
    return {"transactional_id": txn_id(c), "group_id": group_id(c), "producer_id": c.vars["pid"],
            "producer_epoch": c.vars["epoch"], "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": c.topic(), "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                         "committed_leader_epoch": -1, "committed_metadata": ""}]}]}


def describe_txn(c: Ctx) -> Body:
    return {"transactional_ids": [txn_id(c)]}


# ----------------------------------------------------------------------------------------------- configs

def configs_body(resource_type: int, name: Callable[[Ctx], str],
                 keys: list[str] | None = None) -> Callable[[Ctx], Body]:
    return lambda c: {"resources": [{"resource_type": resource_type, "resource_name": name(c),
                                     "configuration_keys": keys}],
                      "include_synonyms": False, "include_documentation": False}


def alter_body(configs: dict[str, str], name: Callable[[Ctx], str] = lambda c: c.topic(),
               validate_only: bool = False) -> Callable[[Ctx], Body]:
    return lambda c: {"resources": [{"resource_type": TOPIC, "resource_name": name(c),
                                     "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                      "validate_only": validate_only}


def incremental_body(configs: list[tuple[str, int, str | None]], name: Callable[[Ctx], str] = lambda c: c.topic(),
                     validate_only: bool = False) -> Callable[[Ctx], Body]:
    return lambda c: {"resources": [{"resource_type": TOPIC, "resource_name": name(c),
                                     "configs": [{"name": k, "config_operation": op, "value": v}
                                                 for k, op, v in configs]}],
                      "validate_only": validate_only}


def config_applied(name: str, value: str) -> Call:
    """Setup: wait until DescribeConfigs shows a topic config change (Kafka applies it asynchronously)."""
    return Call(DESCRIBE_CONFIGS, configs_body(TOPIC, lambda c: c.topic(), [name]),
                until=lambda r: any(cfg["name"] == name and cfg["value"] == value
                                    for cfg in r["results"][0]["configs"]))


BROKER_KEYS = ["num.partitions", "auto.create.topics.enable", "message.max.bytes", "default.replication.factor",
               "log.retention.hours", "log.retention.ms", "log.segment.bytes", "offsets.topic.num.partitions",
               "group.min.session.timeout.ms", "group.max.session.timeout.ms", "transaction.max.timeout.ms",
               "min.insync.replicas", "compression.type", "log.cleanup.policy", "delete.topic.enable"]


# ----------------------------------------------------------------------------------------------- projections

def own_topics(c: Ctx, r: Body) -> Body:
    """Metadata for every topic, narrowed to this scenario's topics (other scenarios' topics vary with what ran)."""
    return {**r, "topics": [t for t in r["topics"] if (t["name"] or "").startswith(c.prefix)]}


def dtp_body(*suffixes: str, limit: int = 2000, cursor: tuple[str, int] | None = None) -> Callable[[Ctx], Body]:
    """DescribeTopicPartitions of this scenario's topics (none: every topic), from (topic suffix, partition)."""
    def build(c: Ctx) -> Body:
        return {"topics": [{"name": c.topic(x)} for x in suffixes], "response_partition_limit": limit,
                "cursor": None if cursor is None else {"topic_name": c.topic(cursor[0]), "partition_index": cursor[1]}}
    return build


def own_topics_paged(c: Ctx, r: Body) -> Body:
    """DescribeTopicPartitions of every topic, narrowed to this scenario's (the cursor may lead elsewhere)."""
    mine = own_topics(c, r)
    cursor = r["next_cursor"]
    return {**mine, "next_cursor": cursor if cursor is None or cursor["topic_name"].startswith(c.prefix) else "other"}


def own_groups(c: Ctx, r: Body) -> Body:
    return {**r, "groups": [g for g in r["groups"] if g["group_id"].startswith(c.prefix)]}


def own_transactions(c: Ctx, r: Body) -> Body:
    return {**r, "transaction_states": [t for t in r["transaction_states"]
                                        if t["transactional_id"].startswith(c.prefix)]}


def config_table(c: Ctx, r: Body) -> Body:
    """DescribeConfigs: per resource, the set of config names, each with its value, source and read-only flag
    (and is_sensitive); the broker's own id as a resource name becomes <self>."""
    own = str(c.broker.node_id)
    return {"results": [{"error_code": res["error_code"], "error_message": res["error_message"],
                         "resource_type": res["resource_type"],
                         "resource_name": "<self>" if res["resource_type"] == BROKER and res["resource_name"] == own
                         else res["resource_name"],
                         "configs": {cfg["name"]: {"value": cfg["value"], "config_source": cfg["config_source"],
                                                   "read_only": cfg["read_only"],
                                                   "is_sensitive": cfg["is_sensitive"]}
                                     for cfg in res["configs"]}}
                        for res in r["results"]]}


# ----------------------------------------------------------------------------------------------- scenarios

def S(id: str, setup: tuple[Call, ...], request: Call, **kw: Any) -> Scenario:
    return Scenario(id, tuple(setup), request, **kw)


def bad_name(c: Ctx) -> str:
    return c.topic("bad name!")


def long_name(c: Ctx) -> str:
    return c.topic() + "-" + "x" * 250


def unknown_producer(c: Ctx) -> int:
    return 987_654_321


def pid_plus(n: int) -> Callable[[Ctx], int]:
    return lambda c: c.vars["pid"] + n


def bump_epoch(c: Ctx, r: Body) -> None:
    c.vars["epoch"] += 1


SCENARIOS: list[Scenario] = [
    # --- Metadata
    S("metadata-no-topics", (), Call(METADATA, {"topics": [], "allow_auto_topic_creation": False})),
    S("metadata-all-topics", create_topic(partitions=2),
      Call(METADATA, {"topics": None, "allow_auto_topic_creation": False}), project=own_topics),
    S("metadata-named-topic", create_topic(partitions=3), Call(METADATA, metadata_body(""))),
    S("metadata-unknown-topic-no-auto-create", (), Call(METADATA, metadata_body("", auto_create=False))),
    S("metadata-unknown-topic-auto-create", (), Call(METADATA, metadata_body("", auto_create=True))),
    S("metadata-auto-created-topic", (Call(METADATA, metadata_body("", auto_create=True)), wait_topic()),
      Call(METADATA, metadata_body(""))),
    S("metadata-invalid-topic-name", (),
      Call(METADATA, lambda c: {"topics": [{"name": bad_name(c)}], "allow_auto_topic_creation": True})),
    S("metadata-topic-name-too-long", (),
      Call(METADATA, lambda c: {"topics": [{"name": long_name(c)}], "allow_auto_topic_creation": True})),

    # --- CreateTopics / DeleteTopics / CreatePartitions
    S("create-topics-valid", (), Call(CREATE_TOPICS, create_topic_body(partitions=2))),
    S("create-topics-defaults", (), Call(CREATE_TOPICS, create_topic_body(partitions=-1, replication=-1))),
    S("create-topics-with-config", (),
      Call(CREATE_TOPICS, create_topic_body(configs={"cleanup.policy": "compact", "retention.ms": "3600000"}))),
    S("create-topics-invalid-name", (), Call(CREATE_TOPICS, create_topic_body(name=lambda c: c.topic("bad/name")))),
    S("create-topics-replication-factor-too-large", (), Call(CREATE_TOPICS, create_topic_body(replication=3))),
    S("create-topics-zero-partitions", (), Call(CREATE_TOPICS, create_topic_body(partitions=0))),
    S("create-topics-unknown-config", (), Call(CREATE_TOPICS, create_topic_body(configs={"no.such.config": "1"}))),
    S("create-topics-invalid-config-value", (),
      Call(CREATE_TOPICS, create_topic_body(configs={"retention.ms": "abc"}))),
    S("create-topics-validate-only", (), Call(CREATE_TOPICS, create_topic_body(validate_only=True))),
    S("create-topics-validate-only-then-metadata", (Call(CREATE_TOPICS, create_topic_body(validate_only=True)),),
      Call(METADATA, metadata_body(""))),
    S("create-topics-already-exists", create_topic(), Call(CREATE_TOPICS, create_topic_body())),
    S("create-topics-same-name-twice-in-request", (),
      Call(CREATE_TOPICS, lambda c: {"topics": [{"name": c.topic(), "num_partitions": 1, "replication_factor": 1},
                                                {"name": c.topic(), "num_partitions": 1, "replication_factor": 1}],
                                     "timeout_ms": 30000, "validate_only": False})),
    S("delete-topics-unknown", (),
      Call(DELETE_TOPICS, lambda c: {"topic_names": [c.topic()], "topics": [{"name": c.topic()}],
                                     "timeout_ms": 30000})),
    S("delete-topics-existing", create_topic(),
      Call(DELETE_TOPICS, lambda c: {"topic_names": [c.topic()], "topics": [{"name": c.topic()}],
                                     "timeout_ms": 30000})),
    S("create-partitions-fewer", create_topic(partitions=2),
      Call(CREATE_PARTITIONS, lambda c: {"topics": [{"name": c.topic(), "count": 1, "assignments": None}],
                                         "timeout_ms": 30000, "validate_only": False})),
    S("create-partitions-same-count", create_topic(),
      Call(CREATE_PARTITIONS, lambda c: {"topics": [{"name": c.topic(), "count": 1, "assignments": None}],
                                         "timeout_ms": 30000, "validate_only": False})),
    S("create-partitions-increase", create_topic(),
      Call(CREATE_PARTITIONS, lambda c: {"topics": [{"name": c.topic(), "count": 3, "assignments": None}],
                                         "timeout_ms": 30000, "validate_only": False})),
    S("create-partitions-unknown-topic", (),
      Call(CREATE_PARTITIONS, lambda c: {"topics": [{"name": c.topic(), "count": 3, "assignments": None}],
                                         "timeout_ms": 30000, "validate_only": False})),

    # --- Produce
    S("produce-unknown-topic", (), Call(PRODUCE, produce_body())),
    S("produce-unknown-partition", create_topic(), Call(PRODUCE, produce_body(partition=5))),
    S("produce-acks-1", create_topic(), Call(PRODUCE, produce_body(acks=1))),
    S("produce-acks-all", create_topic(), Call(PRODUCE, produce_body(acks=-1))),
    S("produce-acks-0-then-list-offsets", create_topic(), Call(PRODUCE, produce_body(acks=0), response=False),
      after=Call(LIST_OFFSETS, list_offsets_body(LATEST))),
    S("produce-invalid-acks", create_topic(), Call(PRODUCE, produce_body(acks=2))),
    S("produce-corrupt-crc", create_topic(), Call(PRODUCE, produce_body(corrupt_crc=True))),
    # KIP-467 (librdkafka's 0011): a compacted topic refuses records without a key, naming each in
    # record_errors, so that the client fails those records and retries the others
    S("produce-compacted-topic-null-keys", create_topic(configs={"cleanup.policy": "compact"}),
      Call(PRODUCE, produce_body(values=(b"v0", b"v1", b"v2", b"v3", b"v4"), keys=(None, b"k1", b"k2", None, b"k4")))),
    S("produce-batch-over-message-max-bytes", create_topic(),
      Call(PRODUCE, produce_body(values=(bytes(range(256)) * 4300,)))),
    S("produce-second-batch-offsets", (*create_topic(), produce()), Call(PRODUCE, produce_body(ts=10))),
    S("produce-idempotent-first-batch", (*create_topic(), *init_pid(False)),
      Call(PRODUCE, produce_body(producer_id=lambda c: c.vars["pid"], producer_epoch=lambda c: c.vars["epoch"],
                                 base_sequence=0))),
    S("produce-idempotent-duplicate", (*create_topic(), *init_pid(False),
                                       produce(producer_id=lambda c: c.vars["pid"],
                                               producer_epoch=lambda c: c.vars["epoch"], base_sequence=0)),
      Call(PRODUCE, produce_body(producer_id=lambda c: c.vars["pid"], producer_epoch=lambda c: c.vars["epoch"],
                                 base_sequence=0))),
    S("produce-idempotent-sequence-gap", (*create_topic(), *init_pid(False),
                                          produce(producer_id=lambda c: c.vars["pid"],
                                                  producer_epoch=lambda c: c.vars["epoch"], base_sequence=0)),
      Call(PRODUCE, produce_body(producer_id=lambda c: c.vars["pid"], producer_epoch=lambda c: c.vars["epoch"],
                                 base_sequence=5))),
    S("produce-idempotent-first-sequence-not-zero", (*create_topic(), *init_pid(False)),
      Call(PRODUCE, produce_body(producer_id=lambda c: c.vars["pid"], producer_epoch=lambda c: c.vars["epoch"],
                                 base_sequence=7))),
    S("produce-idempotent-stale-epoch", (*create_topic(), *init_pid(False),
                                         produce(producer_id=lambda c: c.vars["pid"],
                                                 producer_epoch=lambda c: c.vars["epoch"] + 1, base_sequence=0)),
      Call(PRODUCE, produce_body(producer_id=lambda c: c.vars["pid"], producer_epoch=lambda c: c.vars["epoch"],
                                 base_sequence=3))),
    S("produce-transactional-without-add-partitions", (*create_topic(), *init_pid(True)),
      Call(PRODUCE, txn_batch(), retry_while=transient_produce_error)),

    # --- ListOffsets
    S("list-offsets-earliest-empty", create_topic(), Call(LIST_OFFSETS, list_offsets_body(EARLIEST))),
    S("list-offsets-latest-empty", create_topic(), Call(LIST_OFFSETS, list_offsets_body(LATEST))),
    S("list-offsets-max-timestamp-empty", create_topic(), Call(LIST_OFFSETS, list_offsets_body(MAX_TIMESTAMP))),
    S("list-offsets-timestamp-empty", create_topic(), Call(LIST_OFFSETS, list_offsets_body(RUN_TS))),
    S("list-offsets-earliest-filled", filled_topic(), Call(LIST_OFFSETS, list_offsets_body(EARLIEST))),
    S("list-offsets-latest-filled", filled_topic(), Call(LIST_OFFSETS, list_offsets_body(LATEST))),
    S("list-offsets-max-timestamp-filled", filled_topic(), Call(LIST_OFFSETS, list_offsets_body(MAX_TIMESTAMP))),
    S("list-offsets-earliest-local-filled", filled_topic(), Call(LIST_OFFSETS, list_offsets_body(EARLIEST_LOCAL))),
    S("list-offsets-timestamp-filled", filled_topic(), Call(LIST_OFFSETS, list_offsets_body(RUN_TS + 5))),
    S("list-offsets-timestamp-after-last", filled_topic(), Call(LIST_OFFSETS, list_offsets_body(RUN_TS + 100))),
    S("list-offsets-unknown-partition", create_topic(), Call(LIST_OFFSETS, list_offsets_body(LATEST, partition=4))),
    S("list-offsets-unknown-topic", (), Call(LIST_OFFSETS, list_offsets_body(LATEST))),

    # --- Fetch / OffsetForLeaderEpoch / DeleteRecords
    S("fetch-empty-topic", create_topic(), Call(FETCH, fetch_body())),
    S("fetch-filled-topic", filled_topic(), Call(FETCH, fetch_body())),
    S("fetch-from-middle-of-batch", filled_topic(), Call(FETCH, fetch_body(offset=4))),
    S("fetch-offset-out-of-range", filled_topic(), Call(FETCH, fetch_body(offset=100))),
    S("fetch-unknown-partition", create_topic(), Call(FETCH, fetch_body(partition=3))),
    S("fetch-unknown-topic", (), Call(FETCH, fetch_body())),
    S("fetch-read-committed", filled_topic(), Call(FETCH, fetch_body(isolation=1))),
    S("offset-for-leader-epoch", filled_topic(),
      Call(OFFSET_FOR_LEADER_EPOCH, lambda c: {"replica_id": -1, "topics": [
          {"topic": c.topic(), "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})),
    # the answers a consumer validating its position (KIP-320) can get: the current epoch with its own current
    # epoch, an epoch above the leader's (UNDEFINED: -1, -1), and current epochs above and below the leader's
    *[S(f"offset-for-leader-epoch-{name}", filled_topic(),
        Call(OFFSET_FOR_LEADER_EPOCH, lambda c, current=current, epoch=epoch: {"replica_id": -1, "topics": [
            {"topic": c.topic(), "partitions": [{"partition": 0, "current_leader_epoch": current,
                                                 "leader_epoch": epoch}]}]}))
      for name, current, epoch in (("current", 0, 0), ("above-latest", 0, 1), ("unknown-current", 1, 0),
                                   ("undefined-epoch", 0, -1))],
    S("delete-records-below-high-watermark", filled_topic(),
      Call(DELETE_RECORDS, lambda c: {"topics": [{"name": c.topic(), "partitions": [
          {"partition_index": 0, "offset": 4}]}], "timeout_ms": 10000})),
    S("delete-records-to-high-watermark", filled_topic(),
      Call(DELETE_RECORDS, lambda c: {"topics": [{"name": c.topic(), "partitions": [
          {"partition_index": 0, "offset": -1}]}], "timeout_ms": 10000})),
    S("delete-records-out-of-range", filled_topic(),
      Call(DELETE_RECORDS, lambda c: {"topics": [{"name": c.topic(), "partitions": [
          {"partition_index": 0, "offset": 100}]}], "timeout_ms": 10000})),
    S("delete-records-unknown-topic", (),
      Call(DELETE_RECORDS, lambda c: {"topics": [{"name": c.topic(), "partitions": [
          {"partition_index": 0, "offset": 1}]}], "timeout_ms": 10000})),
    S("delete-records-then-list-offsets-earliest", (*filled_topic(), Call(DELETE_RECORDS, lambda c: {
        "topics": [{"name": c.topic(), "partitions": [{"partition_index": 0, "offset": 4}]}], "timeout_ms": 10000})),
      Call(LIST_OFFSETS, list_offsets_body(EARLIEST))),

    # --- FindCoordinator
    S("find-coordinator-group", group_ready(), Call(FIND_COORDINATOR, find_coordinator_body(group_id))),
    S("find-coordinator-transaction", (txn_ready(),), Call(FIND_COORDINATOR, find_coordinator_body(txn_id, 1))),
    S("find-coordinator-invalid-key-type", group_ready(), Call(FIND_COORDINATOR, find_coordinator_body(group_id, 7))),

    # --- JoinGroup / SyncGroup / Heartbeat / LeaveGroup
    S("join-group-member-id-required", group_ready(), Call(JOIN_GROUP, join_body(lambda c: ""))),
    S("join-group-completes", (*group_ready(), Call(JOIN_GROUP, join_body(lambda c: ""), save=save_member)),
      Call(JOIN_GROUP, join_body())),
    S("join-group-invalid-session-timeout", group_ready(),
      Call(JOIN_GROUP, join_body(lambda c: "", session_timeout=1))),
    S("join-group-unknown-member", group_ready(), Call(JOIN_GROUP, join_body(lambda c: "no-such-member"))),
    S("join-group-empty-protocol-type", group_ready(), Call(JOIN_GROUP, join_body(lambda c: "", protocol_type=""))),
    S("sync-group-unknown-group", group_ready(),
      Call(SYNC_GROUP, sync_body(generation=lambda c: 1, member=lambda c: "no-such-member"))),
    S("sync-group-leader-assigns", joined(), Call(SYNC_GROUP, sync_body())),
    S("sync-group-illegal-generation", joined(),
      Call(SYNC_GROUP, sync_body(generation=lambda c: c.vars["generation"] + 5))),
    S("sync-group-unknown-member", joined(), Call(SYNC_GROUP, sync_body(member=lambda c: "no-such-member"))),
    S("heartbeat-unknown-group", group_ready(),
      Call(HEARTBEAT, heartbeat_body(generation=lambda c: 1, member=lambda c: "no-such-member"))),
    S("heartbeat-stable", stable_group(), Call(HEARTBEAT, heartbeat_body())),
    S("heartbeat-illegal-generation", stable_group(),
      Call(HEARTBEAT, heartbeat_body(generation=lambda c: c.vars["generation"] + 1))),
    S("heartbeat-unknown-member", stable_group(), Call(HEARTBEAT, heartbeat_body(member=lambda c: "no-such-member"))),
    S("heartbeat-before-sync", joined(), Call(HEARTBEAT, heartbeat_body())),
    S("leave-group-unknown-group", group_ready(), Call(LEAVE_GROUP, leave_body(lambda c: "no-such-member"))),
    S("leave-group-member", stable_group(), Call(LEAVE_GROUP, leave_body())),
    S("leave-group-unknown-member", stable_group(), Call(LEAVE_GROUP, leave_body(lambda c: "no-such-member"))),

    # --- DescribeGroups / ListGroups / DeleteGroups
    S("describe-groups-unknown", group_ready(), Call(DESCRIBE_GROUPS, lambda c: {"groups": [group_id(c)]})),
    S("describe-groups-stable", stable_group(), Call(DESCRIBE_GROUPS, lambda c: {"groups": [group_id(c)]})),
    S("describe-groups-completing-rebalance", joined(), Call(DESCRIBE_GROUPS, lambda c: {"groups": [group_id(c)]})),
    S("list-groups", stable_group(), Call(LIST_GROUPS, {"states_filter": [], "types_filter": []}), project=own_groups),
    S("delete-groups-unknown", group_ready(), Call(DELETE_GROUPS, lambda c: {"groups_names": [group_id(c)]})),
    S("delete-groups-non-empty", stable_group(), Call(DELETE_GROUPS, lambda c: {"groups_names": [group_id(c)]})),

    # --- OffsetCommit / OffsetFetch / OffsetDelete
    S("offset-commit-unknown-group-simple", (*create_topic(), *group_ready()), Call(OFFSET_COMMIT, commit_body())),
    S("offset-commit-unknown-group-with-member", (*create_topic(), *group_ready()),
      Call(OFFSET_COMMIT, commit_body(generation=lambda c: 3, member=lambda c: "no-such-member"))),
    S("offset-commit-unknown-topic", group_ready(), Call(OFFSET_COMMIT, commit_body())),
    S("offset-commit-stable-member", (*create_topic(), *stable_group()),
      Call(OFFSET_COMMIT, commit_body(generation=lambda c: c.vars["generation"], member=lambda c: c.vars["member"]))),
    S("offset-commit-illegal-generation", (*create_topic(), *stable_group()),
      Call(OFFSET_COMMIT, commit_body(generation=lambda c: c.vars["generation"] + 1,
                                      member=lambda c: c.vars["member"]))),
    S("offset-fetch-unknown-group", (*create_topic(), *group_ready()), Call(OFFSET_FETCH, offset_fetch_body())),
    S("offset-fetch-unknown-group-all-topics", group_ready(), Call(OFFSET_FETCH, offset_fetch_body(all_topics=True))),
    S("offset-fetch-after-commit", (*create_topic(), *group_ready(),
                                    Call(OFFSET_COMMIT, commit_body(),
                                         until=lambda r: r["topics"][0]["partitions"][0]["error_code"] == 0)),
      Call(OFFSET_FETCH, offset_fetch_body())),
    S("offset-fetch-all-topics-after-commit", (*create_topic(), *group_ready(),
                                               Call(OFFSET_COMMIT, commit_body(),
                                                    until=lambda r: r["topics"][0]["partitions"][0]["error_code"] == 0)),
      Call(OFFSET_FETCH, offset_fetch_body(all_topics=True))),
    S("offset-fetch-unknown-topic-id", group_ready(), Call(OFFSET_FETCH, offset_fetch_body())),
    S("offset-commit-earlier-versions", (*create_topic(), *group_ready()), Call(OFFSET_COMMIT, commit_body(), cap=9)),
    S("offset-fetch-earlier-versions", (*create_topic(), *group_ready(),
                                        Call(OFFSET_COMMIT, commit_body(),
                                             until=lambda r: r["topics"][0]["partitions"][0]["error_code"] == 0)),
      Call(OFFSET_FETCH, offset_fetch_body(), cap=9)),
    S("offset-delete-unknown-group", (*create_topic(), *group_ready()),
      Call(OFFSET_DELETE, lambda c: {"group_id": group_id(c), "topics": [
          {"name": c.topic(), "partitions": [{"partition_index": 0}]}]})),

    # --- DescribeConfigs / AlterConfigs / IncrementalAlterConfigs
    S("describe-configs-topic", create_topic(), Call(DESCRIBE_CONFIGS, configs_body(TOPIC, lambda c: c.topic())),
      project=config_table),
    S("describe-configs-topic-with-overrides", create_topic(configs={"retention.ms": "3600000",
                                                                     "cleanup.policy": "compact"}),
      Call(DESCRIBE_CONFIGS, configs_body(TOPIC, lambda c: c.topic(), ["retention.ms", "cleanup.policy",
                                                                        "segment.bytes", "max.message.bytes"])),
      project=config_table),
    S("describe-configs-topic-unknown", (), Call(DESCRIBE_CONFIGS, configs_body(TOPIC, lambda c: c.topic())),
      project=config_table),
    S("describe-configs-broker-keys", (),
      Call(DESCRIBE_CONFIGS, lambda c: configs_body(BROKER, lambda _: str(c.broker.node_id), BROKER_KEYS)(c)),
      project=config_table),
    S("describe-configs-broker-unknown-id", (),
      Call(DESCRIBE_CONFIGS, configs_body(BROKER, lambda c: "99", ["num.partitions"])), project=config_table),
    S("alter-configs-invalid-value", create_topic(), Call(ALTER_CONFIGS, alter_body({"retention.ms": "abc"}))),
    S("alter-configs-unknown-config", create_topic(), Call(ALTER_CONFIGS, alter_body({"no.such.config": "1"}))),
    S("alter-configs-unknown-topic", (), Call(ALTER_CONFIGS, alter_body({"retention.ms": "1000"}))),
    S("alter-configs-valid", create_topic(), Call(ALTER_CONFIGS, alter_body({"retention.ms": "1000"}))),
    S("incremental-alter-configs-invalid-value", create_topic(),
      Call(INCREMENTAL_ALTER_CONFIGS, incremental_body([("retention.ms", SET, "abc")]))),
    S("incremental-alter-configs-unknown-config", create_topic(),
      Call(INCREMENTAL_ALTER_CONFIGS, incremental_body([("no.such.config", SET, "1")]))),
    S("incremental-alter-configs-append-to-non-list", create_topic(),
      Call(INCREMENTAL_ALTER_CONFIGS, incremental_body([("retention.ms", APPEND, "1000")]))),
    S("incremental-alter-configs-unknown-topic", (),
      Call(INCREMENTAL_ALTER_CONFIGS, incremental_body([("retention.ms", SET, "1000")]))),
    S("incremental-alter-configs-validate-only", create_topic(),
      Call(INCREMENTAL_ALTER_CONFIGS, incremental_body([("retention.ms", SET, "1000")], validate_only=True))),
    S("incremental-alter-configs-set-then-describe",
      (*create_topic(), Call(INCREMENTAL_ALTER_CONFIGS, incremental_body([("retention.ms", SET, "1000"),
                                                                          ("cleanup.policy", APPEND, "compact")]),
                             until=lambda r: r["responses"][0]["error_code"] == 0),
       config_applied("retention.ms", "1000")),
      Call(DESCRIBE_CONFIGS, configs_body(TOPIC, lambda c: c.topic(), ["retention.ms", "cleanup.policy"])),
      project=config_table),

    # --- InitProducerId / transactions / producers
    S("init-producer-id-idempotent", (), Call(INIT_PRODUCER_ID, init_pid_body(False))),
    S("init-producer-id-transactional", (txn_ready(),), Call(INIT_PRODUCER_ID, init_pid_body(True))),
    S("init-producer-id-invalid-transaction-timeout", (txn_ready(),),
      Call(INIT_PRODUCER_ID, init_pid_body(True, timeout_ms=1_000_000_000))),
    S("add-partitions-to-txn-unknown-transactional-id", (*create_topic(), txn_ready()),
      Call(ADD_PARTITIONS_TO_TXN, add_partitions_body(pid=unknown_producer, epoch=lambda c: 0), cap=3)),
    S("add-partitions-to-txn-wrong-producer-id", (*create_topic(), *init_pid(True)),
      Call(ADD_PARTITIONS_TO_TXN, add_partitions_body(pid=pid_plus(1000)), cap=3)),
    S("add-partitions-to-txn-stale-epoch", (*create_topic(), *init_pid(True), Call(
        INIT_PRODUCER_ID, init_pid_body(True), until=lambda r: r["error_code"] == 0)),
      Call(ADD_PARTITIONS_TO_TXN, add_partitions_body(), cap=3)),
    S("add-partitions-to-txn-ok", (*create_topic(), *init_pid(True)),
      Call(ADD_PARTITIONS_TO_TXN, add_partitions_body(), cap=3)),
    S("add-partitions-to-txn-unknown-topic", init_pid(True),
      Call(ADD_PARTITIONS_TO_TXN, add_partitions_body(), cap=3)),
    S("add-offsets-to-txn-without-init", (txn_ready(),),
      Call(ADD_OFFSETS_TO_TXN, lambda c: {"transactional_id": txn_id(c), "producer_id": unknown_producer(c),
                                          "producer_epoch": 0, "group_id": group_id(c)})),
    S("end-txn-without-transaction", init_pid(True), Call(END_TXN, end_txn_body())),
    S("end-txn-abort-without-transaction", init_pid(True), Call(END_TXN, end_txn_body(commit=False))),
    S("end-txn-unknown-transactional-id", (txn_ready(),), Call(END_TXN, end_txn_body(pid=unknown_producer))),
    S("end-txn-commit-ongoing", open_transaction(), Call(END_TXN, end_txn_body())),
    S("produce-transactional-after-add-partitions", (*create_topic(), *init_pid(True),
                                                     Call(ADD_PARTITIONS_TO_TXN, add_partitions_body(), cap=3)),
      Call(PRODUCE, txn_batch(), retry_while=transient_produce_error)),
    S("produce-transactional-fenced-epoch", (*open_transaction(), Call(
        INIT_PRODUCER_ID, init_pid_body(True), until=lambda r: r["error_code"] == 0)),
      Call(PRODUCE, txn_batch(base_sequence=3), retry_while=transient_produce_error)),
    S("list-offsets-read-committed-open-transaction", open_transaction(),
      Call(LIST_OFFSETS, list_offsets_body(LATEST, isolation=1))),
    S("fetch-read-committed-open-transaction", open_transaction(), Call(FETCH, fetch_body(isolation=1))),
    S("fetch-read-uncommitted-open-transaction", open_transaction(), Call(FETCH, fetch_body())),
    S("fetch-read-committed-after-abort", (*open_transaction(), Call(END_TXN, end_txn_body(commit=False)),
                                           Call(LIST_OFFSETS, list_offsets_body(LATEST, isolation=1),
                                                until=lambda r: r["topics"][0]["partitions"][0]["offset"] == 4)),
      Call(FETCH, fetch_body(isolation=1))),
    S("fetch-after-commit", (*open_transaction(), Call(END_TXN, end_txn_body()),
                             Call(LIST_OFFSETS, list_offsets_body(LATEST, isolation=1),
                                  until=lambda r: r["topics"][0]["partitions"][0]["offset"] == 4)),
      Call(FETCH, fetch_body(isolation=1))),
    S("describe-transactions-unknown", (txn_ready(),),
      Call(DESCRIBE_TRANSACTIONS, lambda c: {"transactional_ids": [txn_id(c)]})),
    S("describe-transactions-empty", init_pid(True),
      Call(DESCRIBE_TRANSACTIONS, lambda c: {"transactional_ids": [txn_id(c)]})),
    S("describe-transactions-ongoing", (*create_topic(), *init_pid(True),
                                        Call(ADD_PARTITIONS_TO_TXN, add_partitions_body(), cap=3)),
      Call(DESCRIBE_TRANSACTIONS, lambda c: {"transactional_ids": [txn_id(c)]})),
    S("pattern-list-transactions", init_pid(True),
      Call(LIST_TRANSACTIONS, lambda c: {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                                         "transactional_id_pattern": f"{re.escape(txn_id(c)[:-2])}.*"})),
    S("whole-id-pattern-list-transactions", init_pid(True),
      Call(LIST_TRANSACTIONS, lambda c: {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                                         "transactional_id_pattern": re.escape(txn_id(c)[1:])})),
    S("invalid-pattern-list-transactions", (),
      Call(LIST_TRANSACTIONS, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                               "transactional_id_pattern": "(unclosed"})),
    S("list-transactions", init_pid(True),
      Call(LIST_TRANSACTIONS, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}),
      project=own_transactions),
    S("describe-producers-idempotent", (*create_topic(), *init_pid(False),
                                        produce(producer_id=lambda c: c.vars["pid"],
                                                producer_epoch=lambda c: c.vars["epoch"], base_sequence=0)),
      Call(DESCRIBE_PRODUCERS, lambda c: {"topics": [{"name": c.topic(), "partition_indexes": [0]}]})),
    S("describe-producers-unknown-topic", (),
      Call(DESCRIBE_PRODUCERS, lambda c: {"topics": [{"name": c.topic(), "partition_indexes": [0]}]})),
    S("describe-producers-unknown-partition", create_topic(),
      Call(DESCRIBE_PRODUCERS, lambda c: {"topics": [{"name": c.topic(), "partition_indexes": [7]}]})),

    # --- DescribeTopicPartitions
    S("describe-topic-partitions-named", (*create_topic("b", partitions=3), *create_topic("a")),
      Call(DESCRIBE_TOPIC_PARTITIONS, dtp_body("b", "a", "unknown"))),
    S("describe-topic-partitions-paged", (*create_topic("a", partitions=3), *create_topic("b", partitions=2)),
      Call(DESCRIBE_TOPIC_PARTITIONS, dtp_body("a", "b", limit=2))),
    S("describe-topic-partitions-limit-at-topic-end", (*create_topic("a", partitions=2), *create_topic("b")),
      Call(DESCRIBE_TOPIC_PARTITIONS, dtp_body("a", "b", limit=2))),
    S("describe-topic-partitions-from-cursor", (*create_topic("a", partitions=3), *create_topic("b", partitions=2)),
      Call(DESCRIBE_TOPIC_PARTITIONS, dtp_body("a", "b", limit=3, cursor=("a", 1)))),
    S("describe-topic-partitions-cursor-not-requested", create_topic("a"),
      Call(DESCRIBE_TOPIC_PARTITIONS, dtp_body("a", limit=3, cursor=("b", 0)))),
    S("describe-topic-partitions-negative-cursor", create_topic("a"),
      Call(DESCRIBE_TOPIC_PARTITIONS, dtp_body("a", cursor=("a", -1)))),
    S("describe-topic-partitions-all-topics", (*create_topic("a", partitions=2), *create_topic("b")),
      Call(DESCRIBE_TOPIC_PARTITIONS, dtp_body(cursor=("a", 1))), project=own_topics_paged),

    # --- Transactions v2 (KIP-890): implicit partitions, the epoch bump at every end, verification
    S("txn-v2-first-write-adds-the-partition", (*create_topic(), *init_pid(True)),
      Call(PRODUCE, txn_batch(), version=12, retry_while=transient_produce_error)),
    S("txn-v2-first-write-opens-the-transaction", (*create_topic(), *init_pid(True), first_write_v2()),
      Call(DESCRIBE_TRANSACTIONS, describe_txn)),
    S("txn-v2-commit-bumps-the-epoch", (*create_topic(), *init_pid(True), first_write_v2()), end_txn_v2()),
    S("txn-v2-abort-bumps-the-epoch", (*create_topic(), *init_pid(True), first_write_v2()), end_txn_v2(False)),
    S("txn-v2-commit-retried-with-the-old-epoch", (*create_topic(), *init_pid(True), first_write_v2(), *ended_v2()),
      end_txn_v2()),
    S("txn-v2-abort-after-commit-with-the-old-epoch", (*create_topic(), *init_pid(True), first_write_v2(),
                                                       *ended_v2()), end_txn_v2(False)),
    S("describe-transactions-after-commit-v1", (*open_transaction(), Call(END_TXN, end_txn_body(), cap=4,
                                                                         until=lambda r: r["error_code"] == 0),
                                                ended_v2()[1]),
      Call(DESCRIBE_TRANSACTIONS, describe_txn)),
    S("txn-v2-after-commit", (*create_topic(), *init_pid(True), first_write_v2(), *ended_v2()),
      Call(DESCRIBE_TRANSACTIONS, describe_txn)),
    S("txn-v2-late-write-of-an-ended-transaction", (*create_topic(), *init_pid(True), first_write_v2(), *ended_v2()),
      Call(PRODUCE, txn_batch(base_sequence=3), version=12)),
    S("txn-v2-abort-without-transaction", init_pid(True), end_txn_v2(False)),
    S("txn-v2-commit-without-transaction", init_pid(True), end_txn_v2()),
    S("txn-v2-offset-commit-adds-the-group-partition", (*create_topic(), *init_pid(True), *group_ready()),
      Call(TXN_OFFSET_COMMIT, txn_offset_commit_body, version=5,
           retry_while=lambda r: r["topics"][0]["partitions"][0]["error_code"] in (*RETRIABLE_COORDINATOR, 51))),
    S("txn-verification-refuses-a-partition-not-added-v11", (*create_topic(), *init_pid(True)),
      Call(PRODUCE, txn_batch(), version=11, retry_while=transient_produce_error)),
    S("txn-verification-refuses-a-partition-not-added-v9", (*create_topic(), *init_pid(True)),
      Call(PRODUCE, txn_batch(), version=9, retry_while=transient_produce_error)),

    # --- DescribeCluster
    S("describe-cluster-with-fenced-brokers", (), Call(DESCRIBE_CLUSTER, {
        "include_cluster_authorized_operations": False, "endpoint_type": 1, "include_fenced_brokers": True})),
    S("describe-cluster", (), Call(DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False,
                                                      "endpoint_type": 1, "include_fenced_brokers": False})),
]

assert len({s.id for s in SCENARIOS}) == len(SCENARIOS), "scenario ids must be unique"
