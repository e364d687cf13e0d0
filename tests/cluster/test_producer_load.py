"""Kafka's producer performance tool (`kafka-producer-perf-test`, main class ProducerPerformance) at full
speed with acks=all against a three-broker cluster, and against Apache Kafka 4.4 in the same run (issue 40).

With a transactional id the tool is a transactions v2 producer (Kafka 4.x clients, Produce v12): its first
write to each partition in each transaction makes that partition's leader add the partition to the
transaction at the coordinator, and with several partitions those adds reach the coordinator at once. Until
the leader's add waited for another change of the id in flight (coordinator/transactions.py ADD_WAIT_S, as
Kafka's brokers retry it), all but one came back CONCURRENT_TRANSACTIONS, which the produce answers as
NOT_ENOUGH_REPLICAS; the producer's next batch in flight to that partition then met a producer state
without its predecessor (OUT_OF_ORDER_SEQUENCE_NUMBER, "sequence 148 does not follow -1"). 200,000 records
over 6 partitions met 234 NOT_ENOUGH_REPLICAS and 61 OUT_OF_ORDER_SEQUENCE_NUMBER. Kafka 4.4 retries the
busy add for 100 ms, then answers a v12 produce CONCURRENT_TRANSACTIONS (never NOT_ENOUGH_REPLICAS), so it
meets a few of those and of the out-of-order batches after them; odradek, waiting longer, meets none.

Each run is bounded by its record count and a subprocess timeout. The outcome compared with Kafka's: the tool
exits 0, its client log (WARN and up) names no refusal, and a read_committed consumer reads every record.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterator

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka.admin import NewTopic  # noqa: E402

from odradek.tools.common import bootstrap_admin  # noqa: E402
from tests.cluster.checker import read_partitions  # noqa: E402
from tests.cluster.common import REPLICATED, create_topic  # noqa: E402
from tests.interop.conftest import LOG4J2_STDERR  # noqa: E402
from tests.reference.conftest import _unavailable, installed_launcher  # noqa: E402

PERF_MAIN = "org.apache.kafka.tools.ProducerPerformance"
RECORDS = 50_000
RECORD_SIZE = 100
PARTITIONS = 6
TOOL_TIMEOUT_S = 240
REFUSALS = ("NOT_ENOUGH_REPLICAS", "CONCURRENT_TRANSACTIONS", "OUT_OF_ORDER_SEQUENCE_NUMBER")
# transactional: commits every 100 ms (transactions v2, one epoch bump per commit); idempotent: acks=all with
# the client's default enable.idempotence=true
MODES = {"transactional": ["--transactional-id", "perf-txn", "--transaction-duration-ms", "100"],
         "idempotent": []}


@pytest.fixture(scope="module")
def kafka_tools(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path, Path]:
    """(reference/kafka.py, the reference install's libs, a log4j2 file sending WARN and up to stderr); skips
    (fails under CI) when the install has no kafka-tools jar (reference/pom.xml lists it)."""
    ref, libs = installed_launcher()
    if not list(libs.glob("kafka-tools-[0-9]*.jar")):
        _unavailable(f"no kafka-tools jar in {libs}: run `make reference` again")
    log_config = tmp_path_factory.mktemp("perf-log") / "log4j2.properties"
    log_config.write_text(LOG4J2_STDERR)
    return ref, libs, log_config


@pytest.fixture(scope="module")
def kafka(kafka_tools) -> Iterator[object]:
    """Apache Kafka 4.4, one KRaft node (replication factor 1: the outcome, not the replication, is compared)."""
    ref, libs, _ = kafka_tools
    with ref.KafkaReference(libs) as broker:
        yield broker


def run_perf_test(kafka_tools, bootstrap: str, topic: str, mode: str) -> subprocess.CompletedProcess:
    _, libs, log_config = kafka_tools
    argv = ["java", "-Xmx256m", f"-Dlog4j2.configurationFile={log_config}", "-cp", f"{libs}/*", PERF_MAIN,
            "--topic", topic, "--num-records", str(RECORDS), "--record-size", str(RECORD_SIZE),
            "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all",
            *MODES[mode]]
    return subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)


def outcome(run: subprocess.CompletedProcess, bootstrap: str, topic: str) -> dict:
    """What is compared: exit code, how often the client logged each refusal, records a read_committed
    consumer reads."""
    read = read_partitions(bootstrap, topic, PARTITIONS, timeout=120, **{"isolation.level": "read_committed"})
    return {"exit": run.returncode, **{code: run.stderr.count(code) for code in REFUSALS},
            "records": sum(len(records) for records in read.values())}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_perf_producer_meets_no_refusal_on_a_healthy_cluster(cluster_factory, kafka_tools, kafka, mode: str) -> None:
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    topic = f"perf-{mode}"
    create_topic(cluster, topic, partitions=PARTITIONS, replication=3)
    ran = run_perf_test(kafka_tools, cluster.bootstrap, topic, mode)
    ours = outcome(ran, cluster.bootstrap, topic)

    admin = bootstrap_admin(kafka.bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    kafka_ran = run_perf_test(kafka_tools, kafka.bootstrap, topic, mode)
    theirs = outcome(kafka_ran, kafka.bootstrap, topic)

    expected = {"exit": 0, **dict.fromkeys(REFUSALS, 0), "records": RECORDS}
    # Kafka retries a busy add for 100 ms only: now and then a first write of a transaction still meets
    # CONCURRENT_TRANSACTIONS there, and the producer's next batches in flight OUT_OF_ORDER_SEQUENCE_NUMBER
    # (retried, nothing lost); never NOT_ENOUGH_REPLICAS, and every record is read
    assert {k: theirs[k] for k in ("exit", "NOT_ENOUGH_REPLICAS", "records")} == \
        {"exit": 0, "NOT_ENOUGH_REPLICAS": 0, "records": RECORDS}, f"Kafka 4.4: {theirs}\n{kafka_ran.stderr[-3000:]}"
    assert ours == expected, f"odradek {ours}, Kafka 4.4 {theirs}\n{ran.stderr[-3000:]}\n{cluster.logs()}"
