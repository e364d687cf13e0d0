"""The Prometheus endpoint (`metrics.listen`, broker/metrics.py) of a real broker process, driven with
confluent-kafka: the counters move by exactly what was produced, the gauges match the partition, and nothing
listens when the property is unset."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import free_port
from tests.interop.helpers import TCP_LISTEN, process_tcp_ports

DEADLINE_S = 20.0


def get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def scrape(port: int) -> dict[str, list]:
    """name → samples (name, labels, value) of every family, by sample name (so `_total`, `_bucket` apart)."""
    status, body = get(port, "/metrics")
    assert status == 200
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def value(metrics: dict[str, list], name: str, **labels: str) -> float:
    """The sample's value; 0 when there is none yet (a counter not yet incremented)."""
    for sample in metrics.get(name, []):
        if all(sample.labels.get(k) == v for k, v in labels.items()):
            return sample.value
    return 0.0


def wait_for(condition, what: str, timeout: float = DEADLINE_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(10)


@pytest.fixture
def metered(broker_factory):
    port = free_port()
    broker = broker_factory({"metrics.listen": f"127.0.0.1:{port}", "num.partitions": "1"})
    return broker, port


def test_health_and_readiness(metered):
    _, port = metered
    assert get(port, "/healthz")[0] == 200
    assert get(port, "/readyz")[0] == 200
    assert get(port, "/nothing")[0] == 404
    metrics = scrape(port)
    # the families are there before any traffic
    for name in ("kafka_server_replicamanager_underreplicatedpartitions",
                 "kafka_network_socketserver_networkprocessoravgidlepercent",
                 "kafka_coordinator_group_groupmetadatamanager_numgroups",
                 "kafka_server_replicamanager_produceridcount", "odradek_transactions_open",
                 "kafka_log_logflushstats_logflushrateandtimems_count"):
        assert name in metrics, name
    assert 0.0 <= value(metrics, "kafka_network_socketserver_networkprocessoravgidlepercent") <= 1.0


def test_produce_consume_counters_and_log_gauges(metered, topic_name):
    broker, port = metered
    create_topic(broker.bootstrap, topic_name, **{"segment.bytes": "16384"})  # several segments
    before = scrape(port)
    n, size = 500, 100
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "compression.type": "none"})
    for i in range(n):
        producer.produce(topic_name, value=b"x" * size, partition=0)
        if i % 100 == 99:  # batches of 100 records, ~12 KB: a segment of 16 KiB rolls after each
            assert producer.flush(20) == 0
    assert producer.flush(20) == 0
    after = scrape(port)
    moved = (value(after, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic_name)
             - value(before, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic_name))
    assert moved == n
    # bytes in: the record sets as produced; at least the payload, and a record's overhead is small
    bytes_in = value(after, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic_name)
    assert n * size < bytes_in < n * (size + 80)
    assert value(after, "kafka_log_log_logendoffset", topic=topic_name, partition="0") == n
    assert value(after, "kafka_log_log_logstartoffset", topic=topic_name, partition="0") == 0
    segments = sorted((broker.data_dir / f"{topic_name}-0").glob("*.log"))
    assert len(segments) > 1
    assert value(after, "kafka_log_log_numlogsegments", topic=topic_name, partition="0") == len(segments)
    # the log holds exactly the record sets produced (stored byte for byte)
    assert value(after, "kafka_log_log_size", topic=topic_name, partition="0") == bytes_in
    assert value(after, "kafka_network_requestmetrics_requests_total", request="Produce") >= 1
    assert value(after, "kafka_network_requestmetrics_totaltimems_count", request="Produce") >= 1
    assert value(after, "kafka_network_requestmetrics_totaltimems_bucket", request="Produce", le="+Inf") >= 1
    assert value(after, "kafka_network_requestmetrics_requestqueuetimems_count", request="Produce") >= 1
    assert value(after, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") >= 1

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic_name}-g",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)
        assert (low, high) == (0, n)
        assert value(after, "kafka_log_log_logendoffset", topic=topic_name, partition="0") == high
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        got = 0
        deadline = time.monotonic() + DEADLINE_S
        while got < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got += 1
        assert got == n
    finally:
        consumer.close()
    # every byte produced went out at least once (a consumer may fetch a span twice)
    wait_for(lambda: value(scrape(port), "kafka_server_brokertopicmetrics_bytesout_total", topic=topic_name)
             >= bytes_in, "bytes out")


def test_error_counter(metered, topic_name):
    broker, port = metered
    before = value(scrape(port), "kafka_network_requestmetrics_errors_total", request="CreateTopics",
                   error="TOPIC_ALREADY_EXISTS")
    create_topic(broker.bootstrap, topic_name)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(Exception, match="already exists"):
        admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(10)
    after = scrape(port)
    errors = [s for s in after["kafka_network_requestmetrics_errors_total"]
              if s.labels["request"] == "CreateTopics" and s.labels["error"] == "TOPIC_ALREADY_EXISTS"]
    assert sum(s.value for s in errors) == before + 1
    assert all(s.labels["version"].isdigit() for s in errors)


def test_group_lag(metered, topic_name):
    broker, port = metered
    create_topic(broker.bootstrap, topic_name)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(100):
        producer.produce(topic_name, value=b"v%d" % i, partition=0)
    assert producer.flush(20) == 0
    group = f"{topic_name}-g"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic_name])
        got = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < 30 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg)
        assert len(got) >= 30
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 30)], asynchronous=False)
        def committed():
            metrics = scrape(port)
            offset = value(metrics, "kafka_consumergroup_current_offset", consumergroup=group, topic=topic_name,
                           partition="0")
            return metrics if offset == 30 else None

        metrics = wait_for(committed, "the committed offset")
        assert value(metrics, "kafka_consumergroup_lag", consumergroup=group, topic=topic_name, partition="0") == 70
        assert value(metrics, "kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1
        assert sum(s.value for s in metrics["odradek_groups"]) >= 1
    finally:
        consumer.close()


def listening_ports(pid: int) -> set[int]:
    return {local for local, _ in process_tcp_ports(pid, TCP_LISTEN)}


def test_nothing_listens_when_unset(broker_factory):
    broker = broker_factory({"num.partitions": "1"})
    assert listening_ports(broker.proc.pid) == {broker.port}


def test_metrics_port_listens_when_set(metered):
    broker, port = metered
    assert listening_ports(broker.proc.pid) == {broker.port, port}
