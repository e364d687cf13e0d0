"""Batch reads through format("odradek") with the options of Spark's Kafka source, against a real broker."""

from __future__ import annotations

import json

import pytest

from .util import create_topic, produce

PARTITIONS = 4
PER_PARTITION = 25
BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def data_topic(broker):
    """A 4-partition topic: partition p holds values "p-i" (i < 25) with timestamps BASE_TS + i s."""
    topic = "spark-read-4p"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    msgs = []
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            headers = [("n", str(i).encode()), ("p", str(p).encode())] if i % 2 == 0 else None
            msgs.append({"value": f"{p}-{i}".encode(), "key": f"k{i}".encode(), "partition": p,
                         "timestamp": BASE_TS + i * 1000, "headers": headers})
    produce(broker.bootstrap, topic, msgs)
    return topic


def load(spark, broker, **options):
    reader = spark.read.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def pairs(rows):
    return sorted((r.partition, r.offset) for r in rows)


def test_schema_and_default_offsets(spark, broker, data_topic):
    df = load(spark, broker, subscribe=data_topic)
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    rows = df.collect()
    assert pairs(rows) == [(p, i) for p in range(PARTITIONS) for i in range(PER_PARTITION)]
    for r in rows:
        assert r.value == f"{r.partition}-{r.offset}".encode()
        assert r.key == f"k{r.offset}".encode()
        assert r.topic == data_topic
        assert r.timestampType == 0
        assert int(r.timestamp.timestamp() * 1000) == BASE_TS + r.offset * 1000
    # explicit earliest/latest gives the same
    assert load(spark, broker, subscribe=data_topic, startingOffsets="earliest",
                endingOffsets="latest").count() == PARTITIONS * PER_PARTITION


def test_headers(spark, broker, data_topic):
    rows = load(spark, broker, subscribe=data_topic, includeHeaders="true").collect()
    assert len(rows) == PARTITIONS * PER_PARTITION
    for r in rows:
        if r.offset % 2 == 0:
            assert [(h.key, h.value) for h in r.headers] == [("n", str(r.offset).encode()), ("p", str(r.partition).encode())]
        else:
            assert r.headers is None


def test_per_partition_json_offsets(spark, broker, data_topic):
    start = {data_topic: {"0": 5, "1": -2, "2": -1, "3": 20}}
    end = {data_topic: {"0": 10, "1": 3, "2": -1, "3": -1}}
    rows = load(spark, broker, subscribe=data_topic, startingOffsets=json.dumps(start),
                endingOffsets=json.dumps(end)).collect()
    expected = [(0, i) for i in range(5, 10)] + [(1, i) for i in range(0, 3)] + [(3, i) for i in range(20, 25)]
    assert pairs(rows) == expected


def test_assign(spark, broker, data_topic):
    rows = load(spark, broker, assign=json.dumps({data_topic: [1, 3]}),
                endingOffsets=json.dumps({data_topic: {"1": 4, "3": -1}})).collect()
    assert pairs(rows) == [(1, i) for i in range(4)] + [(3, i) for i in range(PER_PARTITION)]


def test_starting_timestamps(spark, broker, data_topic):
    rows = load(spark, broker, subscribe=data_topic, startingTimestamp=str(BASE_TS + 20_000)).collect()
    assert pairs(rows) == [(p, i) for p in range(PARTITIONS) for i in range(20, PER_PARTITION)]
    by_ts = {data_topic: {"0": BASE_TS + 23_500, "1": BASE_TS, "2": BASE_TS + 24_000, "3": BASE_TS + 99_000}}
    rows = load(spark, broker, subscribe=data_topic, startingOffsetsByTimestamp=json.dumps(by_ts),
                startingOffsetsByTimestampStrategy="latest").collect()
    assert pairs(rows) == [(0, 24)] + [(1, i) for i in range(PER_PARTITION)] + [(2, 24)]


def test_min_partitions_splits_ranges(spark, broker, data_topic):
    df = load(spark, broker, subscribe=data_topic, minPartitions="10")
    assert df.rdd.getNumPartitions() >= 10
    assert pairs(df.collect()) == [(p, i) for p in range(PARTITIONS) for i in range(PER_PARTITION)]


def test_subscribe_pattern_and_bad_options(spark, broker, data_topic):
    assert load(spark, broker, subscribePattern="spark-read-4.").count() == PARTITIONS * PER_PARTITION
    with pytest.raises(Exception, match="startingOffsets"):
        load(spark, broker, subscribe=data_topic, startingOffsets="latest").collect()
    with pytest.raises(Exception, match="exactly one of"):
        load(spark, broker, subscribe=data_topic, assign=json.dumps({data_topic: [0]})).collect()
    with pytest.raises(Exception, match="every subscribed partition"):
        load(spark, broker, subscribe=data_topic, startingOffsets=json.dumps({data_topic: {"0": 1}})).collect()


def test_kafka_options_reach_the_client(spark, broker, data_topic):
    # isolation.level is handed to librdkafka; an unknown client property is rejected by it.
    assert load(spark, broker, subscribe=data_topic, **{"kafka.isolation.level": "read_committed"}).count() == 100
    with pytest.raises(Exception, match="no.such.property"):
        load(spark, broker, subscribe=data_topic, **{"kafka.no.such.property": "1"}).collect()
