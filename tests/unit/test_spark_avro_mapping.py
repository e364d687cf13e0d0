"""The Avro schema -> Spark type mapping of format("odradek") with valueFormat=avro (no Spark session)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("fastavro")

from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from odradek.spark.avro import AvroSchemaError, avro_to_spark  # noqa: E402


def record(*fields: dict, name: str = "R") -> dict:
    return {"type": "record", "name": name, "namespace": "test", "fields": list(fields)}


def field_type(avro_type: object) -> tuple:
    dt, _ = avro_to_spark(record({"name": "f", "type": avro_type}))
    assert isinstance(dt, StructType)
    return dt.fields[0].dataType, dt.fields[0].nullable


@pytest.mark.parametrize("avro, spark", [
    ("boolean", BooleanType()), ("int", IntegerType()), ("long", LongType()), ("float", FloatType()),
    ("double", DoubleType()), ("string", StringType()), ("bytes", BinaryType()),
    ({"type": "string"}, StringType()),
])
def test_primitives_are_required(avro, spark):
    assert field_type(avro) == (spark, False)


def test_null_and_nullable_unions():
    assert field_type("null") == (NullType(), True)
    assert field_type(["null", "long"]) == (LongType(), True)
    assert field_type(["string", "null"]) == (StringType(), True)
    assert field_type(["double"]) == (DoubleType(), False)


def test_other_unions_are_refused_with_the_place():
    with pytest.raises(AvroSchemaError, match=r"\$\.f: a union of several non-null types.*only \[\"null\", T\]"):
        field_type(["null", "int", "string"])


def test_records_arrays_maps_enums_fixed():
    inner = record({"name": "x", "type": "int"}, {"name": "y", "type": ["null", "string"]}, name="Inner")
    dt, nullable = avro_to_spark(record(
        {"name": "inner", "type": inner},
        {"name": "again", "type": "test.Inner"},  # a reference to a named type defined earlier
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "maybe", "type": {"type": "array", "items": ["null", "long"]}},
        {"name": "attrs", "type": {"type": "map", "values": ["null", "double"]}},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
        {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 16}},
    ))
    inner_type = StructType([StructField("x", IntegerType(), False), StructField("y", StringType(), True)])
    assert nullable is False
    assert dt == StructType([
        StructField("inner", inner_type, False),
        StructField("again", inner_type, False),
        StructField("tags", ArrayType(StringType(), False), False),
        StructField("maybe", ArrayType(LongType(), True), False),
        StructField("attrs", MapType(StringType(), DoubleType(), True), False),
        StructField("color", StringType(), False),
        StructField("hash", BinaryType(), False),
    ])


@pytest.mark.parametrize("avro, spark", [
    ({"type": "int", "logicalType": "date"}, DateType()),
    ({"type": "long", "logicalType": "timestamp-millis"}, TimestampType()),
    ({"type": "long", "logicalType": "timestamp-micros"}, TimestampType()),
    ({"type": "long", "logicalType": "local-timestamp-millis"}, TimestampNTZType()),
    ({"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}, DecimalType(12, 3)),
    ({"type": "fixed", "name": "Money", "size": 8, "logicalType": "decimal", "precision": 18, "scale": 2},
     DecimalType(18, 2)),
    ({"type": "string", "logicalType": "uuid"}, StringType()),
    # a logical type Spark has nothing for is read as its underlying type, as the Avro spec says
    ({"type": "long", "logicalType": "something-else"}, LongType()),
])
def test_logical_types(avro, spark):
    assert field_type(avro) == (spark, False)


def test_decimal_beyond_sparks_precision_is_refused():
    with pytest.raises(AvroSchemaError, match=r"decimal\(40, 2\)"):
        field_type({"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2})


def test_recursive_types_are_refused():
    node = record({"name": "value", "type": "int"}, {"name": "next", "type": ["null", "test.Node"]}, name="Node")
    with pytest.raises(AvroSchemaError, match="recursive type 'test.Node'"):
        avro_to_spark(node)


def test_json_text_and_invalid_schemas():
    dt, _ = avro_to_spark(json.dumps(record({"name": "a", "type": "long"})))
    assert dt == StructType([StructField("a", LongType(), False)])
    with pytest.raises(AvroSchemaError, match="not a valid Avro schema"):
        avro_to_spark(json.dumps({"type": "record", "name": "X", "fields": [{"name": "a", "type": "nope"}]}))


def test_avro_options():
    from odradek.spark.options import OptionError, parse_read_options

    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "orders"}
    assert parse_read_options(base, streaming=False).registry is None
    opts = parse_read_options({**base, "valueFormat": "avro", "keyFormat": "AVRO",
                               "schema.registry.url": "http://r:8081/"}, streaming=True).registry
    assert opts is not None
    assert (opts.registry_url, opts.value_subject, opts.key_subject, opts.mode) == (
        "http://r:8081", "orders-value", "orders-key", "FAILFAST")
    with pytest.raises(OptionError, match="schema.registry.url"):
        parse_read_options({**base, "valueFormat": "avro"}, streaming=False)
    with pytest.raises(OptionError, match="'valueSubject' is required"):
        parse_read_options({**base, "subscribe": "a,b", "valueFormat": "avro", "schema.registry.url": "http://r"},
                           streaming=False)
    with pytest.raises(OptionError, match="avro.mode"):
        parse_read_options({**base, "valueFormat": "avro", "schema.registry.url": "http://r", "avro.mode": "drop"},
                           streaming=False)
    with pytest.raises(OptionError, match="'binary', 'avro', 'json' or 'protobuf'"):
        parse_read_options({**base, "valueFormat": "xml"}, streaming=False)
