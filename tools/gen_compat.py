"""Regenerate docs/compatibility.md from the handler registry and, optionally, a pytest JUnit report.

    make test      # writes build/junit.xml
    make compat    # = .venv/bin/python tools/gen_compat.py --junit build/junit.xml

The API table comes from the registered handlers themselves (their version ranges and module docstrings),
so the document cannot drift from what ApiVersions advertises. The suite table counts the results of every
test module (unit, interop, Spark) from the JUnit report that `make test` writes.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from odradek.broker.handlers import load_handlers  # noqa: E402
from odradek.broker.registry import HANDLERS  # noqa: E402
from odradek.protocol.api_keys import ApiKey  # noqa: E402

# Test module, or "folder/module" where two folders hold a module of the same name -> (what it exercises,
# the PyPI distribution whose version is shown). Modules not listed here still get a row, labelled with
# their name.
SUITES = {
    "test_confluent": ("confluent-kafka (librdkafka): produce/consume/admin", "confluent-kafka"),
    "test_kafka_python": ("kafka-python, v0/v1/v2 message formats", "kafka-python"),
    "test_aiokafka": ("aiokafka", "aiokafka"),
    "test_kcat": ("kcat (Debian, librdkafka)", None),
    "test_java": ("Java kafka-clients 3.9 (PyPI wheel)", None),
    "test_streams_word_count": ("Kafka Streams 4.4 (Maven Central) word count, both group protocols, on odradek "
                                "and Apache Kafka 4.4: two instances sharing tasks, one closed, exact counts", None),
    "test_streams_groups_cluster": ("streams groups on three brokers: internal topics through ZooKeeper, the "
                                    "group carried on by the next coordinator after a kill -9", None),
    "test_streams_groups": ("KIP-1071 streams groups in virtual time: topology configuration, task assignor, "
                            "reconciliation, timeouts, stored state", None),
    "test_streams_group_protocol": ("the streams group protocol (KIP-1071) by raw requests: standby tasks, "
                                    "revocation, coordinator restart, hostile input", None),
    "test_java4": ("Java kafka-clients 4.4 (Maven Central): producer, consumer, admin, transactions, groups", None),
    "test_franz": ("franz-go (kgo, kadm): produce/consume, cooperative-sticky groups, GroupTransactSession, admin", None),
    "test_compaction": ("log compaction: latest value per key, tombstones, keyless records, transactions, kill -9", "confluent-kafka"),
    "test_log_cleaner": ("the log cleaner: offset map, dirty ratio and lags, crash points of the segment swap", None),
    "test_builtin_kafka": ("Spark's own Kafka connector (spark-sql-kafka-0-10) beside format(\"odradek\")", "pyspark"),
    "test_admin": ("admin APIs via confluent-kafka", "confluent-kafka"),
    "test_describe_configs_docs": ("DescribeConfigs documentation strings: raw v0-4, kafka-python's protocol",
                                   "kafka-python"),
    "test_broker_semantics": ("broker semantics: retention, rolls, timestamps, long poll", None),
    "test_crash_safety": ("crash safety: kill -9, damaged segments", None),
    "test_hostile_input": ("hostile input over raw sockets", None),
    "test_groups_confluent": ("consumer groups: confluent-kafka", "confluent-kafka"),
    "test_consumer_protocol": ("KIP-848 consumer groups: librdkafka and Java 4.4 with group.protocol=consumer, "
                               "rebalances under load, kill -9, offsets across both protocols", "confluent-kafka"),
    "test_consumer_group_restart": ("KIP-848 groups across a coordinator restart: members keep their epochs",
                                    "confluent-kafka"),
    "test_telemetry": ("client telemetry (KIP-714) answered without a plugin, not advertised", None),
    "test_admin_cli": ("admin commands: odradek topics, configs, produce, consume, records (odradek and Kafka 4.4)",
                       "confluent-kafka"),
    "test_console": ("odradek console in headless chromium (Playwright): topics, messages, produce, group lag",
                     "playwright"),
    "test_metrics": ("Prometheus metrics: counters against what clients did, /healthz, /readyz", "prometheus-client"),
    "test_schema_registry": ("odradek registry with confluent-kafka's SchemaRegistryClient and Avro serdes",
                             "fastavro"),
    "test_registry_avro": ("the registry's Avro resolution rules and compatibility levels", None),
    "test_registry_json": ("the registry's JSON Schema compatibility rules", "jsonschema"),
    "test_registry_protobuf": ("the registry's Protobuf parsing (protoc) and compatibility rules", "grpcio-tools"),
    "test_schema_registry_formats": ("odradek registry with confluent-kafka's JSON and Protobuf serdes, references",
                                     "confluent-kafka"),
    "test_tables_sync": ("odradek tables sync: Delta tables in append and upsert mode, evolution, kill -9",
                         "delta-spark"),
    "test_avro_registry": ("format(\"odradek\") decoding Avro through odradek registry: batch, streaming, evolution",
                           "fastavro"),
    "test_spark_avro_mapping": ("Avro to Spark types", None),
    "test_standalone_cluster": ("the clickstream pipeline on a Spark standalone cluster: a worker, a broker killed",
                                "pyspark"),
    "test_cluster_metrics": ("Prometheus metrics on a cluster: under-replicated partitions after a kill", None),
    "test_broker_metrics": ("Prometheus metrics: the request-path counters and collectors", None),
    "test_consumer_groups": ("KIP-848 consumer groups in virtual time: assignors, epochs, revocation, timeouts", None),
    "test_cluster_compaction": ("log compaction on a three-broker cluster: every replica cleans, leader kill -9",
                                None),
    "test_groups_clients": ("consumer groups: kafka-python, aiokafka, kcat -G, Java", None),
    "test_groups_durability": ("group offsets across kill -9", None),
    "test_groups_cli": ("odradek groups CLI", None),
    "test_idempotence": ("idempotent producers: confluent, Java default, kafka-python, raw", None),
    "test_transactions": ("transactions: Java, confluent, kafka-python", None),
    "test_cluster_clients": ("three-broker cluster: confluent-kafka, kcat, kafka-python, Java", None),
    "test_failover": ("cluster faults: leader kill -9, controlled shutdown, controller and ZooKeeper restarts", None),
    "test_coordinator_failover": ("cluster faults: group and transaction coordinators killed", None),
    "test_partition_errors": ("cluster partition errors: leader hints (KIP-951), leader epochs, offline partitions", None),
    "test_cluster_admin": ("cluster admin: topics, partitions, configs, elections", None),
    "test_differential": ("the same requests to Apache Kafka 4.4 and odradek, answers compared (docs/reference.md)", None),
    "test_quotas": ("client quotas: Java Admin, odradek quotas, throttled producer and consumer", None),
    "kafka_tools/test_topic_tools": ("Kafka 4.4's kafka-topics, -configs, -acls, -get-offsets, -delete-records, "
                                     "-log-dirs, -features, -cluster on three odradek brokers and on Kafka 4.4", None),
    "kafka_tools/test_admin_tools": ("Kafka 4.4's kafka-consumer-groups, -transactions, -leader-election, "
                                     "-reassign-partitions, verifiable producer/consumer on three odradek brokers "
                                     "and on Kafka 4.4", None),
    "kafka_tools/test_connect": ("Kafka Connect 4.3.1 (distributed worker, FileStream connectors across a restart) "
                                 "and MirrorMaker 2 both ways, on three odradek brokers and on Kafka 4.4", None),
    "unit/test_quotas": ("client quotas: precedence, sampled rates, throttle times", None),
    "test_client_matrix": ("confluent-kafka, kafka-python, aiokafka, kcat, Java over SCRAM-SHA-512, PLAIN, mTLS", None),
    "test_acl_every_api": ("every protected API as an unauthorised principal and as a super user", None),
    "test_java_security": ("Java client: mutual TLS, OAUTHBEARER (OIDC client credentials)", None),
    "test_cluster_quotas": ("client quotas in ZooKeeper, on every broker", None),
    "test_cluster_sasl_inter_broker": ("brokers logging in to each other: PLAIN, SCRAM-SHA-512 over SASL_SSL", None),
    "test_controller_store": ("controller state writes fenced by epoch, on a real ZooKeeper", None),
    "test_zookeeper_server": ("ZooKeeper server tooling", None),
    "test_cluster_describe": ("odradek cluster describe", None),
    "test_tls": ("TLS listeners: confluent-kafka, kafka-python, aiokafka, kcat; mutual TLS", None),
    "test_sasl": ("SASL PLAIN and SCRAM: the mechanisms; confluent-kafka, kafka-python, aiokafka, kcat, Java", None),
    "test_oauthbearer": ("SASL OAUTHBEARER (JWT): confluent-kafka", "confluent-kafka"),
    "test_acls": ("ACLs: confluent-kafka users under the authorizer", "confluent-kafka"),
    "test_cluster_tls": ("three-broker cluster replicating over TLS", None),
    "test_cluster_sasl": ("SCRAM credentials in ZooKeeper, every broker", None),
    "test_cluster_acls": ("ACLs in ZooKeeper, every broker (kafka-python)", None),
    "test_codec_properties": ("property tests (hypothesis): codec round trips, hostile bytes", None),
    "kafka07/test_clients": ("Kafka 0.7 clients from npm: prozess 0.7.0 and node-kafka (`kafka` 0.2.3), both ways "
                             "with confluent-kafka", None),
    "kafka07/test_protocol": ("the 0.7 protocol's edge cases with our own client: MULTIFETCH, OFFSETS by time, "
                              "positions inside a message, corrupt CRC, broken frames, gzip/snappy, retention", None),
    "kafka07/test_zookeeper": ("the 0.7 ZooKeeper registry under legacy.zookeeper.chroot", None),
    "kafka07/test_acls07": ("the 0.7 listener under ACLs, each outcome compared with the current protocol's for the "
                            "same principal", None),
    "test_kafka07_codec": ("the 0.7 codec and byte-position index", None),
    "test_share_groups": ("share groups (KIP-932): confluent-kafka's ShareConsumer and the Java KafkaShareConsumer 4.4; "
                          "release, reject, lock timeouts, delivery limit, kill -9, read_committed, group configs",
                          "confluent-kafka"),
    "test_share_partition": ("the share-partition state machine: in-flight window, locks, delivery counts", None),
    "test_share_fetch_v2": ("ShareFetch and ShareAcknowledge v2 over raw sockets: acquire modes (KIP-1206), renew "
                            "acknowledgements (KIP-1222), malformed v2 requests", None),
    "test_franz_share": ("franz-go v1.22.3's own share-group integration tests (pkg/kgo, ShareFetch v2) on one "
                         "broker and on three", None),
    "spark/test_registry_formats": ("Spark reads JSON Schema and Protobuf values (confluent-kafka's serializers) "
                                    "through the registry; tables sync of a JSON Schema topic", "pyspark"),
    "test_spark_registry_formats": ("the connector's JSON Schema and Protobuf type mappings and decoding", None),
}

# Requests brokers send each other (cluster mode); clients never send them.
INTER_BROKER = {4, 5, 6, 7, 27, 83, 84, 85, 86, 87}


def suite_of(classname: str) -> tuple[str, str] | None:
    """(folder, module) of a JUnit classname such as tests.interop.test_confluent.TestX."""
    parts = classname.split(".")
    for i, part in enumerate(parts):
        if part.startswith("test_") and i > 0:
            return parts[i - 1], part
    return None


# Client-facing and admin APIs (keys) that are on the roadmap, shown as "not yet" when unregistered.
ROADMAP = [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 21, 22, 23, 24, 25, 26, 28, 32, 33, 36, 37, 42, 44, 47, 60, 61, 65, 66,
           76, 77, 78, 79, 90, 91, 92]


def summary_and_gaps(doc: str) -> tuple[str, str]:
    paragraphs = [" ".join(p.split()) for p in doc.strip().split("\n\n") if p.strip()]
    summary = paragraphs[1] if len(paragraphs) > 1 else ""
    gaps = " ".join(p for p in paragraphs if p.startswith("Gaps:"))
    return summary, gaps.removeprefix("Gaps:").strip()


def junit_counts(path: Path) -> dict[tuple[str, str], Counter]:
    counts: dict[tuple[str, str], Counter] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        suite = suite_of(case.get("classname", ""))
        if suite is None:
            continue
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped":
                outcome = "skipped"
        counts.setdefault(suite, Counter())[outcome] += 1
    return counts


def version_of(dist: str | None) -> str:
    if dist is None:
        return ""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def known_differences() -> list:
    sys.path.insert(0, str(ROOT))
    from tests.reference.known import KNOWN

    return KNOWN


def kafka_tools_section() -> list[str]:
    """Kafka's command-line tools as tests/kafka_tools runs them (tests/kafka_tools/catalog.py)."""
    sys.path.insert(0, str(ROOT))
    from tests.kafka_tools.catalog import TOOLS_COMPARED

    lines = ["## Kafka's command-line tools", "",
             "`tests/kafka_tools` runs Apache Kafka 4.4's own tools (by main class, from the jars `make reference`",
             "installs) against a three-broker odradek cluster and against Kafka 4.4 in the same run, and compares",
             "exit codes and normalised output.", "",
             "| tool | what runs | test (tests/kafka_tools/) | odradek against Kafka 4.4 |", "|---|---|---|---|"]
    lines += [f"| {t.script} | {t.commands} | `{t.test}` | {t.comparison} |" for t in TOOLS_COMPARED]
    return lines + [""]


def connect_section() -> list[str]:
    """Kafka Connect and MirrorMaker 2 as tests/kafka_tools/test_connect.py runs them (tests/kafka_tools/catalog.py)."""
    sys.path.insert(0, str(ROOT))
    from tests.kafka_tools.catalog import CONNECT_COMPARED

    lines = ["## Kafka Connect and MirrorMaker 2", "",
             "`tests/kafka_tools/test_connect.py` runs a Kafka Connect distributed worker and MirrorMaker 2 (by main",
             "class; Connect 4.3.1, resolved from Maven Central by the test: connect-mirror and connect-file have no",
             "4.4.0 there, and their 4.3.1 jars do not run on 4.4.0's clients) against a three-broker odradek cluster",
             "and against Kafka 4.4 in the same run, and checks every record arrives once.", "",
             "| component | what runs | test (tests/kafka_tools/) | odradek against Kafka 4.4 |", "|---|---|---|---|"]
    lines += [f"| {c.component} | {c.what_runs} | `{c.test}` | {c.comparison} |" for c in CONNECT_COMPARED]
    return lines + [""]


def kafka07_section() -> list[str]:
    """The Kafka 0.7 requests a KAFKA07 listener serves (legacy07/), each with the paragraph of
    legacy07/service.py's docstring that names it."""
    from odradek.legacy07 import service
    from odradek.legacy07.codec import ErrorCode07, RequestType

    paragraphs = [" ".join(p.split()) for p in (service.__doc__ or "").split("\n\n") if p.strip()]
    lines = ["## Kafka 0.7 protocol (a KAFKA07 listener; docs/kafka07.md)", "",
             "Requests without API versions or correlation ids, byte positions as offsets, over the same partition",
             "logs. Error codes: " + ", ".join(f"{e.name} ({e.value})" for e in ErrorCode07) + ".", "",
             "| id | request | behaviour | proven by |", "|---|---|---|---|"]
    for request in RequestType:
        text = next((p for p in paragraphs if request.name in p.split(":", 1)[0].replace("/", " ").split()), "")
        lines.append(f"| {request.value} | {request.name} | {text.split(':', 1)[-1].strip()} | tests/kafka07 |")
    return lines + [""]


def render(junit: Path | None) -> str:
    load_handlers()
    lines = [
        "# Compatibility",
        "",
        "Generated by `tools/gen_compat.py` — do not edit by hand. What ApiVersions advertises is exactly the",
        "version range of each registered handler below.",
        "",
    ]
    sections = [("APIs", [k for k in sorted(HANDLERS) if k not in INTER_BROKER], "interop and cluster suites"),
                ("Inter-broker APIs (cluster mode)", [k for k in sorted(HANDLERS) if k in INTER_BROKER],
                 "cluster suites")]
    for title, keys, default_tests in sections:
        lines += [f"## {title}", "", "| key | API | versions | behaviour | gaps | proven by |",
                  "|---|---|---|---|---|---|"]
        for key in keys:
            spec = HANDLERS[key]
            module = sys.modules[spec.fn.__module__]
            summary, gaps = summary_and_gaps(module.__doc__ or "")
            tests = module.__dict__.get("PROVEN_BY", default_tests)
            lines.append(f"| {key} | {ApiKey(key).name} | {spec.min_version}-{spec.max_version} | {summary} | "
                         f"{gaps or '—'} | {tests} |")
        lines.append("")
    lines += kafka07_section()
    missing = [k for k in ROADMAP if k not in HANDLERS]
    if missing:
        lines += ["Not implemented yet (not advertised): " + ", ".join(f"{ApiKey(k).name} ({k})" for k in missing) + "."]
    lines += ["", *kafka_tools_section(), *connect_section()]
    lines += ["## Apache Kafka as the reference", "",
              "`tests/reference` sends the same requests to Apache Kafka 4.4 (installed by `make reference`) and to",
              "odradek and compares the answers field by field (docs/reference.md). Deliberate differences, each",
              "with its reason (tests/reference/known.py):", ""]
    lines += [f"- {'every scenario' if k.scenarios == '*' else k.scenarios}: {k.reason}" for k in known_differences()]
    lines += ["", "## Test suites", ""]
    if junit is None or not junit.exists():
        lines.append("No test report given; run with `--junit` to fill this table.")
    else:
        counts = junit_counts(junit)
        lines += ["| suite | exercises | version | passed | failed | skipped |", "|---|---|---|---|---|---|"]
        for (folder, module), c in sorted(counts.items()):
            label, dist = SUITES.get(f"{folder}/{module}") or SUITES.get(
                module, (module.removeprefix("test_").replace("_", " "), None))
            lines.append(f"| `tests/{folder}/{module}.py` | {label} | {version_of(dist)} | "
                         f"{c['passed']} | {c['failed']} | {c['skipped']} |")
        total = sum(counts.values(), Counter())
        lines.append(f"| **all** | | | **{total['passed']}** | **{total['failed']}** | **{total['skipped']}** |")
        lines += ["", f"From a run on {datetime.date.today().isoformat()}."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--junit", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "compatibility.md")
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(args.junit))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
