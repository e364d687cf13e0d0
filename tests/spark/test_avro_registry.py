"""format("odradek") with valueFormat/keyFormat=avro: Confluent-framed Avro decoded through `odradek registry`.

Real processes: the module's broker, `odradek registry` as a subprocess, records produced with
confluent-kafka's AvroSerializer, read back through the shared SparkSession (batch and availableNow).
"""

from __future__ import annotations

import datetime
import decimal
import json
import struct
from typing import Any

import pytest

pytest.importorskip("fastavro")
pytest.importorskip("confluent_kafka.schema_registry")

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402
from interop.helpers import flush_fully, producer_config  # noqa: E402

from .util import create_topic, stream_run  # noqa: E402

ORDER = json.dumps({
    "type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "total", "type": "double"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
            {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "int"]}]}},
    ]})
USER_V1 = json.dumps({"type": "record", "name": "User", "namespace": "test",
                      "fields": [{"name": "name", "type": "string"}]})
USER_V2 = json.dumps({"type": "record", "name": "User", "namespace": "test",
                      "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": -1}]})
BASE_MS = 1_700_000_000_000


def produce_avro(broker, registry, topic: str, schema: str, values: list[Any], keys: list[Any] | None = None,
                 key_schema: str | None = None) -> None:
    """Produce with confluent-kafka's AvroSerializer (registers under <topic>-value / <topic>-key); a value of
    None is a tombstone, a value of bytes is produced as it is."""
    client = SchemaRegistryClient({"url": registry.url})
    ser = AvroSerializer(client, schema)
    key_ser = AvroSerializer(client, key_schema) if key_schema else None
    producer = Producer(producer_config(broker.bootstrap))
    for i, value in enumerate(values):
        if value is not None and not isinstance(value, bytes):
            value = ser(value, SerializationContext(topic, MessageField.VALUE))
        key = keys[i] if keys else None
        if key is not None and key_ser is not None:
            key = key_ser(key, SerializationContext(topic, MessageField.KEY))
        producer.produce(topic, value=value, key=key, partition=0)
    flush_fully(producer)


def load(spark, broker, registry, **options):
    reader = (spark.read.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("schema.registry.url", registry.url).option("valueFormat", "avro"))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def order(i: int) -> dict[str, Any]:
    return {"id": i, "customer": f"c{i}", "email": None if i % 2 else f"c{i}@example.com", "total": i * 1.5,
            "tags": [f"t{j}" for j in range(i % 3)], "counts": {"a": i, "b": -i}, "status": "PAID" if i % 2 else "NEW",
            "created": datetime.datetime.fromtimestamp((BASE_MS + i) / 1000, datetime.timezone.utc),
            "price": decimal.Decimal(f"{i}.{i:02d}"), "address": {"city": f"city{i}", "zip": i if i % 2 else None}}


def as_collected(v: dict[str, Any]) -> dict[str, Any]:
    """What PySpark's collect() gives back for `v`: timestamps as naive local datetimes."""
    out = dict(v)
    out["created"] = datetime.datetime.fromtimestamp(v["created"].timestamp())
    return out


def test_batch_read_gives_typed_columns(spark, broker, registry):
    topic = "avro-orders"
    create_topic(broker.bootstrap, topic)
    values: list[Any] = [order(i) for i in range(6)] + [None]  # the last is a tombstone
    produce_avro(broker, registry, topic, ORDER, values, keys=[f"k{i}" for i in range(7)], key_schema='"string"')

    df = load(spark, broker, registry, subscribe=topic, keyFormat="avro")
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert df.schema["key"].dataType.simpleString() == "string"
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,customer:string,email:string,total:double,tags:array<string>,counts:map<string,bigint>,"
        "status:string,created:timestamp,price:decimal(10,2),address:struct<city:string,zip:int>>")
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert [r.offset for r in rows] == list(range(7))
    assert [r.key for r in rows] == [f"k{i}" for i in range(7)]
    for i, r in enumerate(rows[:6]):
        assert r.value.asDict(recursive=True) == as_collected(order(i))
    assert rows[6].value is None
    # nested fields are ordinary columns
    assert [r.city for r in df.where("value.total > 6").select("value.address.city").orderBy("offset").collect()] \
        == ["city5"]


def test_older_records_resolve_to_the_latest_schema(spark, broker, registry):
    topic = "avro-users"
    create_topic(broker.bootstrap, topic)
    produce_avro(broker, registry, topic, USER_V1, [{"name": f"old-{i}"} for i in range(3)])
    produce_avro(broker, registry, topic, USER_V2, [{"name": f"new-{i}", "age": 20 + i} for i in range(3)])
    rows = load(spark, broker, registry, subscribe=topic).select("offset", "value.*").orderBy("offset").collect()
    assert [(r.name, r.age) for r in rows] == [(f"old-{i}", -1) for i in range(3)] + [(f"new-{i}", 20 + i)
                                                                                     for i in range(3)]
    # valueSubject reads the same topic under another subject's latest schema (V1 only: no age)
    SchemaRegistryClient({"url": registry.url}).register_schema("users-v1-only", Schema(USER_V1, "AVRO"))
    df = load(spark, broker, registry, subscribe=topic, valueSubject="users-v1-only")
    assert df.schema["value"].dataType.simpleString() == "struct<name:string>"
    assert sorted(r.value.name for r in df.collect()) == sorted([f"old-{i}" for i in range(3)]
                                                                + [f"new-{i}" for i in range(3)])


def test_streaming_available_now_decodes(spark, broker, registry, tmp_path):
    topic = "avro-stream"
    create_topic(broker.bootstrap, topic)
    produce_avro(broker, registry, topic, USER_V2, [{"name": f"s{i}", "age": i} for i in range(10)])
    df = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "4")
          .option("valueFormat", "avro").option("schema.registry.url", registry.url).load())
    out = str(tmp_path / "out")
    q = (df.select("offset", "value.name", "value.age").writeStream.format("parquet").option("path", out)
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    stream_run(q)
    rows = sorted(spark.read.parquet(out).collect(), key=lambda r: r.offset)
    assert [(r.offset, r.name, r.age) for r in rows] == [(i, f"s{i}", i) for i in range(10)]


def test_bad_values_fail_fast_or_become_null(spark, broker, registry):
    topic = "avro-bad"
    create_topic(broker.bootstrap, topic)
    unknown_id = b"\x00" + struct.pack(">I", 99_999) + b"\x02x"
    produce_avro(broker, registry, topic, USER_V1, [{"name": "good"}, b"not avro", {"name": "also good"}, unknown_id])

    with pytest.raises(Exception) as exc:
        load(spark, broker, registry, subscribe=topic).collect()
    text = str(exc.value)
    assert f"cannot decode the record of {topic}-0 at offset 1" in text
    assert "not in Confluent's wire format" in text and "avro.mode=PERMISSIVE" in text

    with pytest.raises(Exception, match="schema id 99999 of the value is unknown"):
        load(spark, broker, registry, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 2}})).collect()

    rows = load(spark, broker, registry, subscribe=topic, **{"avro.mode": "PERMISSIVE"}).orderBy("offset").collect()
    assert [(r.offset, r.value.name if r.value else None) for r in rows] == [
        (0, "good"), (1, None), (2, "also good"), (3, None)]
    assert rows[1].value is None


def test_option_errors(spark, broker, registry):
    with pytest.raises(Exception, match="schema.registry.url"):
        (spark.read.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", "avro-users").option("valueFormat", "avro").load())
    with pytest.raises(Exception, match="valueSubject"):
        load(spark, broker, registry, subscribePattern="avro-.*")
    with pytest.raises(Exception, match="subject 'no-such-topic-value' not found"):
        load(spark, broker, registry, subscribe="no-such-topic")
