"""Batch and streaming writes through format("odradek"), verified with a plain confluent-kafka consumer."""

from __future__ import annotations

import pytest

from .util import create_topic, produce, read_all, stream_run


def test_batch_write_with_topic_option(spark, broker):
    topic = "write-batch"
    create_topic(broker.bootstrap, topic, 3)
    rows = [(f"k{i}", f"v{i}".encode(), i % 3, [("h", f"{i}".encode())] if i % 2 else None) for i in range(60)]
    df = spark.createDataFrame(rows, "key string, value binary, partition int, "
                                     "headers array<struct<key:string,value:binary>>")
    (df.write.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic)
     .mode("append").save())
    got = read_all(broker.bootstrap, topic, 3)
    assert len(got) == 60
    for m in got:
        i = int(m.key()[1:])
        assert m.value() == f"v{i}".encode()
        assert m.partition() == i % 3
        assert (m.headers() or None) == ([("h", f"{i}".encode())] if i % 2 else None)


def test_batch_write_per_row_topics(spark, broker):
    for t in ("write-rows-a", "write-rows-b"):
        create_topic(broker.bootstrap, t, 1)
    df = spark.createDataFrame([("write-rows-a" if i % 3 else "write-rows-b", f"{i}") for i in range(30)],
                               "topic string, value string")
    df.write.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()
    a = sorted(int(m.value()) for m in read_all(broker.bootstrap, "write-rows-a"))
    b = sorted(int(m.value()) for m in read_all(broker.bootstrap, "write-rows-b"))
    assert a == [i for i in range(30) if i % 3]
    assert b == [i for i in range(30) if not i % 3]


def test_write_needs_value_and_topic(spark, broker):
    df = spark.createDataFrame([("x",)], "v string")
    with pytest.raises(Exception, match="'value' column"):
        df.write.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", "x") \
            .mode("append").save()
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(Exception, match="no topic"):
        df.write.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()


def test_streaming_write_at_least_once(spark, broker, tmp_path):
    src, dst = "write-stream-src", "write-stream-dst"
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, dst, 2)
    produce(broker.bootstrap, src, [{"value": b"r%d" % i, "key": b"%d" % i, "partition": i % 2} for i in range(50)])

    def run():
        df = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", src).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "20")
              .load())
        return (df.selectExpr("key", "upper(CAST(value AS STRING)) AS value", "partition").writeStream
                .format("odradek").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", dst)
                .option("exactlyOnce", "false").option("checkpointLocation", str(tmp_path / "cp"))
                .trigger(availableNow=True).start())

    stream_run(run())
    got = read_all(broker.bootstrap, dst, 2)
    assert sorted(m.value() for m in got) == sorted(b"R%d" % i for i in range(50))
    assert all(m.partition() == int(m.key()) % 2 for m in got)
    produce(broker.bootstrap, src, [{"value": b"r%d" % i, "key": b"%d" % i, "partition": i % 2} for i in range(50, 60)])
    stream_run(run())
    got = read_all(broker.bootstrap, dst, 2)
    assert sorted(m.value() for m in got) == sorted(b"R%d" % i for i in range(60))
