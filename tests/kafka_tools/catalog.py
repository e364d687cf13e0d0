"""What tests/kafka_tools runs of Apache Kafka 4.4's command-line tools, and how odradek compares with Kafka 4.4
there: one row per tool, read by tools/gen_compat.py for docs/compatibility.md ("Kafka's command-line tools").

Each row: the script a Kafka distribution names it by, what the suite runs, the test that runs it against the
three-broker odradek cluster and against Kafka 4.4 in the same run, and the outcome of the comparison.
"""

from __future__ import annotations

from typing import NamedTuple


class ToolRow(NamedTuple):
    script: str
    commands: str
    test: str
    comparison: str


SAME = "same exit codes and output (normalised: addresses, ids, three replicas against one)"

TOOLS_COMPARED = (
    ToolRow("kafka-topics.sh", "--create (with --config), --describe, --alter --partitions (up, and down: refused), "
            "--list, --delete, an existing and an unknown topic",
            "test_topic_tools.py::test_kafka_topics_create_describe_alter_delete", SAME),
    ToolRow("kafka-configs.sh", "topics --alter --add-config/--delete-config, --describe, a refused value; brokers "
            "--entity-default and --entity-name N: throttle rates added, described, deleted",
            "test_topic_tools.py::test_kafka_configs_topic_and_broker",
            SAME + "; the reference also lists the cluster-wide min.insync.replicas=1 KRaft sets for ELR"),
    ToolRow("kafka-acls.sh", "--add, --list (by topic, by principal, all), --remove --force",
            "test_topic_tools.py::test_kafka_acls_add_list_remove", SAME + " (both with an ACL authorizer)"),
    ToolRow("kafka-get-offsets.sh", "--topic, --time earliest (after a deletion)",
            "test_topic_tools.py::test_kafka_get_offsets_and_delete_records", SAME),
    ToolRow("kafka-delete-records.sh", "--offset-json-file (an offset, -1 for the high watermark, one past it)",
            "test_topic_tools.py::test_kafka_get_offsets_and_delete_records", SAME),
    ToolRow("kafka-log-dirs.sh", "--describe --topic-list",
            "test_topic_tools.py::test_kafka_log_dirs",
            "each of odradek's three brokers reports every partition with the size, lag and flags Kafka's one reports"),
    ToolRow("kafka-features.sh", "describe", "test_topic_tools.py::test_kafka_features_describe",
            "group.version 1, streams.version 1 and transaction.version 2 alike; odradek: share.version 1 (Kafka 2: share groups' "
            "dead-letter queue), metadata.version at the level of the request versions it serves; no kraft.version or "
            "eligible.leader.replicas.version"),
    ToolRow("kafka-cluster.sh", "cluster-id", "test_topic_tools.py::test_kafka_cluster_cluster_id", SAME),
    ToolRow("kafka-consumer-groups.sh", "--list, --describe (plain, --state, --offsets), --reset-offsets "
            "(--dry-run, --to-earliest, --to-offset on one partition, --shift-by), --delete-offsets, --delete "
            "(twice), a deleted group described",
            "test_admin_tools.py::test_kafka_consumer_groups_describe_reset_delete", SAME),
    ToolRow("kafka-transactions.sh", "list, describe, describe-producers on a follower, find-hanging --broker-id "
            "(with and without --topic), after an abort, an unknown id",
            "test_admin_tools.py::test_kafka_transactions_list_describe_find_hanging",
            "same rows (ids and times aside); find-hanging same output"),
    ToolRow("kafka-leader-election.sh", "preferred for all partitions and for one, unclean, an unknown topic; "
            "on odradek also a real preferred election after a replica reorder",
            "test_admin_tools.py::test_kafka_leader_election", SAME),
    ToolRow("kafka-reassign-partitions.sh", "--generate, --execute --throttle, --verify until complete (exit 0, "
            "throttles cleared)", "test_admin_tools.py::test_kafka_reassign_partitions_generate_execute_verify",
            "same --verify output and exit 0 (odradek clears three brokers' throttles, Kafka one's); odradek "
            "moves real replicas"),
    ToolRow("kafka-verifiable-producer.sh / kafka-verifiable-consumer.sh", "200 records acks=all, then consumed "
            "in a group with commits", "test_admin_tools.py::test_verifiable_producer_and_consumer",
            "every record sent acknowledged and consumed on both"),
)


class ConnectRow(NamedTuple):
    component: str
    what_runs: str
    test: str
    comparison: str


# Kafka Connect and MirrorMaker 2 (tests/kafka_tools/test_connect.py), 4.3.1: connect-mirror and connect-file have
# no 4.4.0 on Maven Central and their 4.3.1 jars do not run on 4.4.0's clients (tests/kafka_tools/connect-pom.xml).
CONNECT_COMPARED = (
    ConnectRow("Connect distributed worker (ConnectDistributed)",
               "config, offset and status topics created by the worker (compacted; 1, 3 and 2 partitions; "
               "replication 3 on odradek, 1 on Kafka); connectors created through the REST API; a restart that "
               "reads its connectors back from the config topic",
               "test_connect.py::test_connect_distributed_file_source_and_sink",
               "the same on both: topics with the configured partitions, replication and cleanup.policy=compact; "
               "connectors RUNNING again after the restart"),
    ConnectRow("FileStreamSource / FileStreamSink connectors",
               "65 lines from a file into a topic the source connector creates (topic.creation.default.*) and "
               "back out to a file; 40 before a worker restart, 25 after it",
               "test_connect.py::test_connect_distributed_file_source_and_sink",
               "every line once, in order, in the sink file and in the topic on both; the source offset stored "
               "(GET /connectors/NAME/offsets) at the file's end before and after the restart"),
    ConnectRow("MirrorMaker 2 (connect-mirror-maker, dedicated mode)",
               "odradek->kafka and kafka->odradek in one process: a two-partition topic of 60 records with keys "
               "and headers each way, with a retention.ms to sync; checkpoints, heartbeats, offset syncs "
               "(offset.lag.max=0) and sync.group.offsets",
               "test_connect.py::test_mirror_maker_2_both_ways",
               "every record once in its partition and order with key, value and headers, both ways; the copy "
               "created with the source's partitions and retention.ms; checkpoint, "
               "heartbeat, offset-sync and MirrorMaker's Connect topics where Kafka puts them, with the configured "
               "partitions, replication and compaction; a group's committed offsets translated exactly onto the "
               "other cluster"),
)
