"""The JSON Schema and Protobuf -> Spark type mappings of format("odradek") with valueFormat=json/protobuf, the
conversion of decoded values, Confluent's Protobuf message indexes and the registry options (no Spark session)."""

from __future__ import annotations

import base64
import datetime
import decimal
import json

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("google.protobuf")

from google.protobuf import descriptor_pb2, message_factory  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    BinaryType,
    BooleanType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from odradek.spark.jsonschema_format import JsonValueError, json_schema_to_spark  # noqa: E402
from odradek.spark.protobuf_format import (  # noqa: E402
    ProtobufReader,
    ProtobufValueError,
    _well_known_file,
    message_name_at,
    message_to_spark,
    read_message_indexes,
    reader_descriptor,
)
from odradek.spark.registry_schemas import SchemaMappingError  # noqa: E402

# -- JSON Schema ----------------------------------------------------------------------------------------

ORDER = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "customer": {"type": "string"},
        "email": {"type": ["string", "null"]},
        "total": {"type": "number"},
        "paid": {"type": "boolean"},
        "created": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "address": {"$ref": "#/definitions/Address"},
        "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}},
        "note": {"oneOf": [{"type": "null"}, {"type": "string"}]},
        "extra": {"type": "object", "additionalProperties": {"type": "string"}},
        "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        "anything": {},
    },
    "required": ["id", "customer", "email", "tags", "address"],
    "definitions": {"Address": {"type": "object", "properties": {"city": {"type": "string"},
                                                                    "zip": {"type": "integer"}},
                                "required": ["city"]}},
    "$defs": {"Line": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                       "required": ["sku", "qty"]}},
}


def test_json_schema_object_maps_to_a_struct_in_declaration_order():
    m = json_schema_to_spark(json.dumps(ORDER))
    assert m.data_type == StructType([
        StructField("id", LongType(), False),
        StructField("customer", StringType(), False),
        StructField("email", StringType(), True),
        StructField("total", DoubleType(), True),
        StructField("paid", BooleanType(), True),
        StructField("created", StringType(), True),
        StructField("tags", ArrayType(StringType(), False), False),
        StructField("address", StructType([StructField("city", StringType(), False),
                                           StructField("zip", LongType(), True)]), False),
        StructField("lines", ArrayType(StructType([StructField("sku", StringType(), False),
                                                   StructField("qty", LongType(), False)]), False), True),
        StructField("note", StringType(), True),
        StructField("extra", StringType(), True),    # a map: JSON text
        StructField("either", StringType(), True),   # several types: JSON text
        StructField("anything", StringType(), True),
    ])
    assert not m.nullable


def test_json_values_convert_to_the_row_shape():
    convert = json_schema_to_spark(ORDER).convert
    doc = {"id": 7, "customer": "c7", "total": 3, "tags": ["a"], "address": {"city": "x", "unknown": 1},
           "lines": [{"sku": "s", "qty": 2.0}], "extra": {"k": "v"}, "either": 5, "anything": [1, {"a": None}],
           "not in the schema": True}
    row = convert(doc, "$")
    assert row == {"id": 7, "customer": "c7", "email": None, "total": 3.0, "paid": None, "created": None,
                   "tags": ["a"], "address": {"city": "x", "zip": None}, "lines": [{"sku": "s", "qty": 2}],
                   "note": None, "extra": '{"k":"v"}', "either": "5", "anything": '[1,{"a":null}]'}
    assert isinstance(row["total"], float) and isinstance(row["lines"][0]["qty"], int)
    with pytest.raises(JsonValueError, match=r"\$\.id: expected an integer"):
        convert({"id": "7"}, "$")
    with pytest.raises(JsonValueError, match=r"\$\.id: expected an integer of bigint's range"):
        convert({"id": 2**63}, "$")
    with pytest.raises(JsonValueError, match=r"\$\.paid: expected a boolean"):
        convert({"paid": 1}, "$")
    with pytest.raises(JsonValueError, match=r"\$\.tags\[1\]: expected a string"):
        convert({"tags": ["a", 2]}, "$")
    with pytest.raises(JsonValueError, match="expected an object"):
        convert([1], "$")


def test_json_schema_edge_cases():
    # recursion stops at the recurring reference, which is JSON text
    tree = {"$ref": "#/definitions/Node", "definitions": {"Node": {
        "type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/definitions/Node"}}}}}
    m = json_schema_to_spark(tree)
    assert m.data_type == StructType([StructField("v", LongType(), True), StructField("next", StringType(), True)])
    assert m.convert({"v": 1, "next": {"v": 2}}, "$") == {"v": 1, "next": '{"v":2}'}
    # a top-level scalar, enums, allOf of one schema, a reference to another document
    assert json_schema_to_spark({"type": "string"}).data_type == StringType()
    assert json_schema_to_spark({"enum": ["A", "B"]}).data_type == StringType()
    assert json_schema_to_spark({"allOf": [{"type": "integer"}]}).data_type == LongType()
    assert json_schema_to_spark({"$ref": "other.json#/X"}).data_type == StringType()
    with pytest.raises(SchemaMappingError, match="not valid JSON"):
        json_schema_to_spark("{")


# -- Protobuf -------------------------------------------------------------------------------------------

F = descriptor_pb2.FieldDescriptorProto


def order_file() -> descriptor_pb2.FileDescriptorProto:
    """shop.Order: scalars, an enum, a nested message, repeated, a map, optional, a Timestamp."""
    fd = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop", syntax="proto3",
                                            dependency=["google/protobuf/timestamp.proto"])
    status = fd.enum_type.add(name="Status")
    status.value.add(name="NEW", number=0)
    status.value.add(name="PAID", number=1)
    order = fd.message_type.add(name="Order")
    address = order.nested_type.add(name="Address")
    address.field.add(name="city", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry = order.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    fields = [("id", F.TYPE_INT64, None), ("customer", F.TYPE_STRING, None), ("total", F.TYPE_DOUBLE, None),
              ("ratio", F.TYPE_FLOAT, None), ("small", F.TYPE_SINT32, None), ("big", F.TYPE_UINT64, None),
              ("mid", F.TYPE_UINT32, None), ("ok", F.TYPE_BOOL, None), ("raw", F.TYPE_BYTES, None),
              ("status", F.TYPE_ENUM, ".shop.Status"), ("address", F.TYPE_MESSAGE, ".shop.Order.Address"),
              ("created", F.TYPE_MESSAGE, ".google.protobuf.Timestamp")]
    for number, (name, kind, type_name) in enumerate(fields, start=1):
        f = order.field.add(name=name, number=number, type=kind, label=F.LABEL_OPTIONAL)
        if type_name:
            f.type_name = type_name
    order.field.add(name="tags", number=20, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    order.field.add(name="counts", number=21, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                    type_name=".shop.Order.CountsEntry")
    # proto3 `optional string email = 22;`: a synthetic oneof gives it presence
    order.oneof_decl.add(name="_email")
    order.field.add(name="email", number=22, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0,
                    proto3_optional=True)
    fd.message_type.add(name="Other").field.add(name="x", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    return fd


def reader_of(fd: descriptor_pb2.FileDescriptorProto, message: str = "shop.Order") -> ProtobufReader:
    b64 = base64.b64encode(fd.SerializeToString()).decode()
    timestamp = "google/protobuf/timestamp.proto"
    return ProtobufReader(((timestamp, _well_known_file(timestamp)), (fd.name, b64)), message)


def test_protobuf_message_maps_to_a_struct():
    struct, _ = message_to_spark(reader_descriptor(reader_of(order_file())))
    assert struct == StructType([
        StructField("id", LongType(), False), StructField("customer", StringType(), False),
        StructField("total", DoubleType(), False), StructField("ratio", FloatType(), False),
        StructField("small", IntegerType(), False), StructField("big", DecimalType(20, 0), False),
        StructField("mid", LongType(), False), StructField("ok", BooleanType(), False),
        StructField("raw", BinaryType(), False), StructField("status", StringType(), False),
        StructField("address", StructType([StructField("city", StringType(), False)]), True),
        StructField("created", TimestampType(), True),
        StructField("tags", ArrayType(StringType(), False), False),
        StructField("counts", MapType(StringType(), LongType(), False), False),
        StructField("email", StringType(), True),
    ])


def test_protobuf_messages_convert_to_the_row_shape():
    descriptor = reader_descriptor(reader_of(order_file()))
    cls = message_factory.GetMessageClass(descriptor)
    _, convert = message_to_spark(descriptor)
    msg = cls(id=5, customer="c5", big=2**64 - 1, status=1, tags=["a", "b"], counts={"x": 3})
    msg.created.FromDatetime(datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc))
    row = convert(cls.FromString(msg.SerializeToString()))
    assert row == {"id": 5, "customer": "c5", "total": 0.0, "ratio": 0.0, "small": 0,
                   "big": decimal.Decimal(2**64 - 1), "mid": 0, "ok": False, "raw": b"", "status": "PAID",
                   "address": None, "created": datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
                   "tags": ["a", "b"], "counts": [("x", 3)], "email": None}
    msg.address.city = "x"
    msg.email = ""
    msg.status = 9  # a number the enum does not name (open enum)
    row = convert(cls.FromString(msg.SerializeToString()))
    assert (row["address"], row["email"], row["status"]) == ({"city": "x"}, "", "9")


def test_protobuf_refusals():
    fd = descriptor_pb2.FileDescriptorProto(name="node.proto", package="t", syntax="proto3")
    node = fd.message_type.add(name="Node")
    node.field.add(name="next", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".t.Node")
    with pytest.raises(SchemaMappingError, match="recursive message 't.Node'"):
        message_to_spark(reader_descriptor(reader_of(fd, "t.Node")))
    with pytest.raises(SchemaMappingError, match="no message 'shop.Nope'"):
        reader_descriptor(reader_of(order_file(), "shop.Nope"))
    with pytest.raises(SchemaMappingError, match="neither a reference"):
        _well_known_file("google/protobuf/nope.proto")


def test_message_indexes():
    fd = order_file()
    assert read_message_indexes(memoryview(b"\x00rest")) == ([0], 1)
    # count 2 (zigzag 4), then 0 and 1 (zigzag 0, 2): the second message nested in the first
    assert read_message_indexes(memoryview(b"\x04\x00\x02rest")) == ([0, 1], 3)
    assert message_name_at(fd, [0]) == "shop.Order"
    assert message_name_at(fd, [1]) == "shop.Other"
    assert message_name_at(fd, [0, 1]) == "shop.Order.CountsEntry"
    with pytest.raises(ProtobufValueError, match="point to no message"):
        message_name_at(fd, [2])
    with pytest.raises(ProtobufValueError, match="end early"):
        read_message_indexes(memoryview(b"\x04\x00"))


# -- options --------------------------------------------------------------------------------------------


def test_registry_options():
    from odradek.spark.options import OptionError, parse_read_options

    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "orders", "schema.registry.url": "http://r"}
    opts = parse_read_options({**base, "valueFormat": "protobuf", "keyFormat": "json", "valueMessage": "shop.Order",
                               "registry.mode": "permissive"}, streaming=False).registry
    assert opts is not None and opts.mode == "PERMISSIVE"
    assert [(c.column, c.format, c.subject, c.message) for c in opts.columns] == [
        ("value", "protobuf", "orders-value", "shop.Order"), ("key", "json", "orders-key", None)]
    # the option's old name still works, and two names must agree
    assert parse_read_options({**base, "valueFormat": "json", "avro.mode": "PERMISSIVE"},
                              streaming=False).registry.mode == "PERMISSIVE"
    with pytest.raises(OptionError, match="disagree"):
        parse_read_options({**base, "valueFormat": "json", "avro.mode": "PERMISSIVE", "registry.mode": "FAILFAST"},
                           streaming=False)
    with pytest.raises(OptionError, match="'valueMessage' applies to valueFormat protobuf only"):
        parse_read_options({**base, "valueFormat": "json", "valueMessage": "x"}, streaming=False)


# -- decoding records (the registry's answers by id stubbed) --------------------------------------------


@pytest.fixture
def registry_by_id(monkeypatch):
    """Schemas by id, as fetch_by_id would answer them; the per-process writer cache is emptied around."""
    from odradek.spark import registry_schemas

    known: dict[int, registry_schemas.RegisteredSchema] = {}
    monkeypatch.setattr(registry_schemas, "fetch_by_id", lambda url, schema_id, serialized=False: known.get(schema_id))
    monkeypatch.setattr(registry_schemas, "_WRITERS", registry_schemas.ProcessCache())
    return known


def column(fmt: str, schema: str, data_type: object) -> object:
    from odradek.spark.registry_schemas import RegistryColumn

    return RegistryColumn("value", fmt, "t-value", 1, schema, data_type.json())


def test_json_records_decode_or_say_why(registry_by_id):
    from odradek.spark.registry_formats import RegistryDecoder, RegistryPlan
    from odradek.spark.registry_schemas import DecodeError, RegisteredSchema

    schema = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})
    registry_by_id[1] = RegisteredSchema(1, "JSON", schema)
    registry_by_id[2] = RegisteredSchema(2, "AVRO", '"string"')
    plan = RegistryPlan("http://r", "FAILFAST", (column("json", schema, json_schema_to_spark(schema).data_type),))
    dec = RegistryDecoder(plan, None).columns["value"]
    assert dec.decode(b"\x00\x00\x00\x00\x01" + b'{"a": 3, "b": 4}') == {"a": 3}
    assert dec.decode(None) is None
    for raw, message in [(b"{}", "not in Confluent's wire format"),
                         (b"\x00\x00\x00\x00\x07{}", "schema id 7 of the value is unknown"),
                         (b"\x00\x00\x00\x00\x02{}", "schema id 2 is registered as AVRO, not JSON"),
                         (b"\x00\x00\x00\x00\x01{", "is not UTF-8 JSON"),
                         (b'\x00\x00\x00\x00\x01{"a": "x"}', r"\$\.a: expected an integer")]:
        with pytest.raises(DecodeError, match=message):
            dec.decode(raw)


def test_protobuf_records_decode_or_say_why(registry_by_id):
    from odradek.spark.protobuf_format import PROTOBUF
    from odradek.spark.registry_schemas import DecodeError, RegisteredSchema

    fd = order_file()
    reader = reader_of(fd)
    descriptor = reader_descriptor(reader)
    registry_by_id[1] = RegisteredSchema(1, "PROTOBUF", reader.files[-1][1])
    decode = PROTOBUF.record_decoder("http://r", column("protobuf", reader.to_text(),
                                                       message_to_spark(descriptor)[0]))
    body = message_factory.GetMessageClass(descriptor)(id=9, status=1).SerializeToString()
    row = decode(1, memoryview(b"\x00" + body))
    assert (row["id"], row["status"], row["tags"]) == (9, "PAID", [])
    # indexes [1]: count 1 (zigzag 2), index 1 (zigzag 2) -> shop.Other
    with pytest.raises(DecodeError, match="holds message 'shop.Other'; the column reads 'shop.Order'"):
        decode(1, memoryview(b"\x02\x02" + body))
    with pytest.raises(DecodeError, match="schema id 5 of the value is unknown"):
        decode(5, memoryview(b"\x00" + body))
    with pytest.raises(DecodeError, match="cannot be read as the latest schema"):
        decode(1, memoryview(b"\x00\xff\xff"))
