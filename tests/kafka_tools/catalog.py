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
