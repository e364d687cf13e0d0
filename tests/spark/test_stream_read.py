"""Streaming reads: micro-batches bounded by maxOffsetsPerTrigger, subscribePattern discovery, and
failOnDataLoss after DeleteRecords."""

from __future__ import annotations

import json

import pytest

from .util import create_topic, produce, stream_run, wait_until


def stream(spark, broker, **options):
    reader = spark.readStream.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_three_micro_batches_with_max_offsets_per_trigger(spark, broker, tmp_path):
    topic = "stream-max-offsets"
    create_topic(broker.bootstrap, topic, 4)
    produce(broker.bootstrap, topic, [{"value": f"{i}".encode(), "partition": i % 4} for i in range(120)])
    df = stream(spark, broker, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="40")
    out = str(tmp_path / "out")

    def run():
        return (df.selectExpr("CAST(value AS STRING) AS v", "partition", "offset").writeStream.format("parquet")
                .option("path", out).option("checkpointLocation", str(tmp_path / "cp"))
                .trigger(availableNow=True).start())

    q = run()
    stream_run(q)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sizes == [40, 40, 40]
    assert sorted(int(r.v) for r in spark.read.parquet(out).collect()) == list(range(120))
    # More data, same checkpoint: the restarted query continues where it stopped.
    produce(broker.bootstrap, topic, [{"value": f"{i}".encode(), "partition": i % 4} for i in range(120, 130)])
    q = run()
    stream_run(q)
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [10]
    assert sorted(int(r.v) for r in spark.read.parquet(out).collect()) == list(range(130))


def test_subscribe_pattern_picks_up_new_topic(spark, broker, tmp_path):
    create_topic(broker.bootstrap, "pattern-a", 2)
    produce(broker.bootstrap, "pattern-a", [{"value": b"a%d" % i, "partition": i % 2} for i in range(10)])
    df = stream(spark, broker, subscribePattern="pattern-.*", startingOffsets="earliest")
    q = (df.selectExpr("topic", "CAST(value AS STRING) AS v").writeStream.format("memory").queryName("pattern")
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="500 milliseconds").start())
    try:
        wait_until(lambda: spark.table("pattern").count() == 10, timeout=60, message="rows of pattern-a")
        create_topic(broker.bootstrap, "pattern-b", 3)
        produce(broker.bootstrap, "pattern-b", [{"value": b"b%d" % i, "partition": i % 3} for i in range(9)])
        wait_until(lambda: spark.table("pattern").count() == 19, timeout=60, message="rows of pattern-b")
        assert q.exception() is None
    finally:
        q.stop()
    rows = spark.table("pattern").collect()
    assert sorted(r.v for r in rows if r.topic == "pattern-b") == sorted(f"b{i}" for i in range(9))
    assert sorted(r.v for r in rows if r.topic == "pattern-a") == sorted(f"a{i}" for i in range(10))


def _delete_records(bootstrap, topic, partition, before):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.delete_records([TopicPartition(topic, partition, before)])
    [f.result(30) for f in fut.values()]


@pytest.mark.parametrize("fail", [True, False])
def test_fail_on_data_loss_streaming(spark, broker, tmp_path, fail):
    topic = f"stream-data-loss-{str(fail).lower()}"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, [{"value": b"%d" % i} for i in range(50)])
    out = tmp_path / "out"
    cp = tmp_path / "cp"

    def run():
        df = stream(spark, broker, subscribe=topic, startingOffsets="earliest", failOnDataLoss=str(fail).lower())
        return (df.selectExpr("CAST(value AS STRING) AS v", "offset").writeStream.format("parquet")
                .option("path", str(out)).option("checkpointLocation", str(cp)).trigger(availableNow=True).start())

    stream_run(run())
    assert spark.read.parquet(str(out)).count() == 50
    produce(broker.bootstrap, topic, [{"value": b"%d" % i} for i in range(50, 100)])
    _delete_records(broker.bootstrap, topic, 0, 80)  # offsets 50..79 go before the query sees them
    q = run()
    if fail:
        with pytest.raises(Exception, match="failOnDataLoss"):
            stream_run(q)
    else:
        stream_run(q)
        offsets = sorted(r.offset for r in spark.read.parquet(str(out)).collect())
        assert offsets == list(range(50)) + list(range(80, 100))


@pytest.mark.parametrize("fail", [True, False])
def test_fail_on_data_loss_batch(spark, broker, fail):
    topic = f"batch-data-loss-{str(fail).lower()}"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, [{"value": b"%d" % i} for i in range(30)])
    _delete_records(broker.bootstrap, topic, 0, 10)
    df = (spark.read.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", topic)
          .option("startingOffsets", json.dumps({topic: {"0": 5}})).option("failOnDataLoss", str(fail).lower()).load())
    if fail:
        with pytest.raises(Exception, match="failOnDataLoss"):
            df.collect()
    else:
        assert sorted(r.offset for r in df.collect()) == list(range(10, 30))
