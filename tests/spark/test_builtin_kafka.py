"""Spark's own Kafka connector, format("kafka") (the spark-sql-kafka-0-10 package), against odradek: batch and
streaming reads and writes, checked with plain confluent-kafka clients, and crossed with format("odradek")
(one connector writes, the other reads the same records back).

The connector shares the suite's SparkSession (tests/spark/conftest.py puts its cached jars on the
classpath); the `kafka_connector` fixture skips these tests where it could not be resolved.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from .util import create_topic, end_offsets, produce, read_all, stream_run

BASE_TS = 1_700_000_000_000
ROW_SCHEMA = "key string, value binary, partition int, headers array<struct<key:string,value:binary>>"


def reader(spark, fmt, broker, **options):
    r = spark.read.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def as_tuples(rows):
    """Rows of the Kafka schema as comparable tuples (headers as a tuple of pairs; none as None)."""
    return sorted((r.topic, r.partition, r.offset, r.key, r.value, r.timestamp, r.timestampType,
                   tuple((h.key, bytes(h.value)) for h in r.headers or ()) or None) for r in rows)


def sample_rows(n=30, partitions=3):
    return [(f"k{i}", f"v{i}".encode(), i % partitions, [("i", str(i).encode()), ("src", b"spark")] if i % 3 else None)
            for i in range(n)]


def check_delivered(messages, n=30, partitions=3):
    assert len(messages) == n
    for m in messages:
        i = int(m.key()[1:])
        assert m.value() == f"v{i}".encode()
        assert m.partition() == i % partitions
        assert (m.headers() or None) == ([("i", str(i).encode()), ("src", b"spark")] if i % 3 else None)


def test_session_has_the_package(kafka_connector, spark):
    assert kafka_connector.coordinate.startswith("org.apache.spark:spark-sql-kafka-0-10_")
    assert any(j.name.startswith("kafka-clients-") for j in kafka_connector.jars)
    assert set(spark.sparkContext.getConf().get("spark.jars").split(",")) >= {str(j) for j in kafka_connector.jars}


def test_batch_read_every_column(kafka_connector, spark, broker):
    topic = "builtin-read"
    create_topic(broker.bootstrap, topic, 2)
    msgs = [{"value": f"{p}-{i}".encode(), "key": f"k{i}".encode() if i % 4 else None, "partition": p,
             "timestamp": BASE_TS + i * 1000, "headers": [("n", str(i).encode()), ("n", b"again")] if i % 2 else None}
            for p in range(2) for i in range(20)]
    produce(broker.bootstrap, topic, msgs)

    df = reader(spark, "kafka", broker, subscribe=topic, includeHeaders="true")
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    rows = df.collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(p, i) for p in range(2) for i in range(20)]
    for r in rows:
        i = r.offset
        assert r.topic == topic
        assert r.value == f"{r.partition}-{i}".encode()
        assert r.key == (f"k{i}".encode() if i % 4 else None)
        assert r.timestamp.replace(tzinfo=timezone.utc) == datetime.fromtimestamp((BASE_TS + i * 1000) / 1000, timezone.utc)
        assert r.timestampType == 0
        if i % 2:
            assert [(h.key, h.value) for h in r.headers] == [("n", str(i).encode()), ("n", b"again")]
        else:
            assert not r.headers
    # the same records, row for row, through format("odradek")
    ours = reader(spark, "odradek", broker, subscribe=topic, includeHeaders="true").collect()
    assert as_tuples(ours) == as_tuples(rows)
    # offset ranges as JSON
    part = reader(spark, "kafka", broker, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 5, "1": -2}}),
                  endingOffsets=json.dumps({topic: {"0": 8, "1": 2}})).collect()
    assert sorted((r.partition, r.offset) for r in part) == [(0, 5), (0, 6), (0, 7), (1, 0), (1, 1)]


def test_batch_write_key_headers_partition(kafka_connector, spark, broker):
    topic = "builtin-write"
    create_topic(broker.bootstrap, topic, 3)
    df = spark.createDataFrame(sample_rows(), ROW_SCHEMA)
    (df.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic)
     .mode("append").save())
    check_delivered(read_all(broker.bootstrap, topic, 3))


@pytest.mark.parametrize("writer_fmt,reader_fmt", [("kafka", "odradek"), ("odradek", "kafka")])
def test_cross_connector(kafka_connector, spark, broker, writer_fmt, reader_fmt):
    """Written by one connector, read back by the other: the same keys, values, partitions and headers."""
    topic = f"builtin-cross-{writer_fmt}-to-{reader_fmt}"
    create_topic(broker.bootstrap, topic, 3)
    df = spark.createDataFrame(sample_rows(), ROW_SCHEMA)
    (df.write.format(writer_fmt).option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic)
     .mode("append").save())
    got = reader(spark, reader_fmt, broker, subscribe=topic, includeHeaders="true").collect()
    assert sorted((r.key.decode(), r.value, r.partition, [(h.key, h.value) for h in r.headers] if r.headers else None)
                  for r in got) == sorted((k, v, p, [tuple(h) for h in hs] if hs else None)
                                          for k, v, p, hs in sample_rows())
    assert {r.topic for r in got} == {topic}
    assert sorted((r.partition, r.offset) for r in got) == [(p, o) for p in range(3) for o in range(10)]


def source_end_offsets(query):
    """{partition: end offset} of the last micro-batch with data, from the query's progress."""
    progress = [p for p in query.recentProgress if p["numInputRows"]][-1]
    end = progress["sources"][0]["endOffset"]
    end = json.loads(end) if isinstance(end, str) else end
    (topic_offsets,) = end.values()
    return {int(p): o for p, o in topic_offsets.items()}


def test_streaming_read_available_now_then_once(kafka_connector, spark, broker, tmp_path):
    topic = "builtin-stream-read"
    create_topic(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, topic, [{"value": f"{i}".encode(), "partition": i % 3} for i in range(90)])
    out = str(tmp_path / "out")

    def run(**trigger):
        df = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "30")
              .load())
        return (df.selectExpr("CAST(value AS STRING) AS v", "partition", "offset").writeStream.format("parquet")
                .option("path", out).option("checkpointLocation", str(tmp_path / "cp")).trigger(**trigger).start())

    q = run(availableNow=True)
    stream_run(q)
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [30, 30, 30]
    assert source_end_offsets(q) == {p: hw for p, (_lo, hw) in enumerate(end_offsets(broker.bootstrap, topic, 3))}
    rows = spark.read.parquet(out).collect()
    assert sorted(int(r.v) for r in rows) == list(range(90))
    assert all(int(r.v) % 3 == r.partition and int(r.v) // 3 == r.offset for r in rows)

    # more data, same checkpoint, trigger once: only the new records, ending at the new end offsets
    produce(broker.bootstrap, topic, [{"value": f"{i}".encode(), "partition": i % 3} for i in range(90, 99)])
    q = run(once=True)
    stream_run(q)
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [9]
    assert source_end_offsets(q) == {0: 33, 1: 33, 2: 33}
    assert sorted(int(r.v) for r in spark.read.parquet(out).collect()) == list(range(99))


def test_streaming_write(kafka_connector, spark, broker, tmp_path):
    """format("kafka") source to format("kafka") sink, availableNow; the sink keeps key and partition."""
    src, dst = "builtin-stream-src", "builtin-stream-dst"
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, dst, 2)
    produce(broker.bootstrap, src, [{"value": b"r%d" % i, "key": b"%d" % i, "partition": i % 2} for i in range(40)])

    def run():
        df = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", src).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "16")
              .load())
        return (df.selectExpr("key", "upper(CAST(value AS STRING)) AS value", "partition",
                              "array(named_struct('key', 'from', 'value', CAST(CAST(offset AS STRING) AS BINARY))) AS headers")
                .writeStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", dst)
                .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())

    stream_run(run())
    got = read_all(broker.bootstrap, dst, 2)
    assert sorted(m.value() for m in got) == sorted(b"R%d" % i for i in range(40))
    for m in got:
        i = int(m.key())
        assert m.partition() == i % 2
        assert m.headers() == [("from", str(i // 2).encode())]
    produce(broker.bootstrap, src, [{"value": b"r%d" % i, "key": b"%d" % i, "partition": i % 2} for i in range(40, 46)])
    stream_run(run())
    assert sorted(m.value() for m in read_all(broker.bootstrap, dst, 2)) == sorted(b"R%d" % i for i in range(46))
