"""format("odradek") with valueFormat=json / protobuf, and `odradek tables sync` with a JSON Schema topic.

Real processes: the module's broker, `odradek registry` as a subprocess, records produced with confluent-kafka's
own JSONSerializer and ProtobufSerializer (the Protobuf message classes are built at test time from
FileDescriptorProtos with the protobuf runtime), read back through the shared SparkSession.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

pytest.importorskip("jsonschema")
pytest.importorskip("google.protobuf")
pytest.importorskip("confluent_kafka.schema_registry")

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONSerializer  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2  # noqa: E402
from interop.helpers import flush_fully, producer_config  # noqa: E402

from .util import create_topic  # noqa: E402

BASE_S = 1_700_000_000


def load(spark, broker, registry, topic: str, value_format: str):
    return (spark.read.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic).option("schema.registry.url", registry.url)
            .option("valueFormat", value_format).load())


def produce(broker, topic: str, values: list[bytes | None], keys: list[bytes] | None = None) -> None:
    producer = Producer(producer_config(broker.bootstrap))
    for i, value in enumerate(values):
        producer.produce(topic, value=value, key=keys[i] if keys else None, partition=0)
    flush_fully(producer)


# -- JSON Schema ----------------------------------------------------------------------------------------

ADDRESS = {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}},
           "required": ["city"], "additionalProperties": False}


def customer_schema(with_email: bool) -> str:
    """A closed content model, so V2's added optional property is backward compatible with V1."""
    props: dict[str, Any] = {"id": {"type": "integer"}, "name": {"type": "string"}, "score": {"type": "number"},
                             "vip": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}},
                             "address": {"$ref": "#/definitions/Address"},
                             "extra": {"type": "object", "additionalProperties": {"type": "string"}}}
    if with_email:
        props["email"] = {"type": ["string", "null"]}
    return json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Customer", "type": "object",
                       "properties": props, "required": ["id", "name", "tags"], "additionalProperties": False,
                       "definitions": {"Address": ADDRESS}})


def customer(i: int, with_email: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": i, "name": f"c{i}", "score": i * 0.5, "vip": i % 2 == 0,
                           "tags": [f"t{j}" for j in range(i % 3)], "address": {"city": f"city{i}"},
                           "extra": {"k": str(i)}}
    if i % 2:
        doc["address"]["zip"] = 1000 + i
        del doc["vip"]  # an optional property left out
    if with_email:
        doc["email"] = None if i % 2 else f"c{i}@example.com"
    return doc


def json_values(registry, topic: str, docs: list[dict[str, Any]], with_email: bool) -> list[bytes | None]:
    ser = JSONSerializer(customer_schema(with_email), SchemaRegistryClient({"url": registry.url}))
    return [ser(d, SerializationContext(topic, MessageField.VALUE)) for d in docs]


def test_json_schema_values_read_as_typed_columns(spark, broker, registry):
    topic = "json-customers"
    create_topic(broker.bootstrap, topic)
    old = [customer(i, False) for i in range(2)]
    new = [customer(i, True) for i in range(2, 5)]
    # V1 records first, then V2 (registered by the second serializer): the read maps the latest, V2
    produce(broker, topic, json_values(registry, topic, old, False) + json_values(registry, topic, new, True) + [None])
    assert SchemaRegistryClient({"url": registry.url}).get_latest_version(f"{topic}-value").version == 2

    df = load(spark, broker, registry, topic, "json")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,name:string,score:double,vip:boolean,tags:array<string>,"
        "address:struct<city:string,zip:bigint>,extra:string,email:string>")
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert [r.offset for r in rows] == list(range(6))
    expected = []
    for d in old + new:
        e = {"email": None, "vip": None, **d, "extra": json.dumps(d["extra"], separators=(",", ":"))}
        e["address"] = {"zip": None, **d["address"]}
        expected.append(e)
    assert [r.value.asDict(recursive=True) for r in rows[:5]] == expected
    assert rows[5].value is None  # a tombstone


# -- Protobuf -------------------------------------------------------------------------------------------

F = descriptor_pb2.FieldDescriptorProto


def address_file() -> descriptor_pb2.FileDescriptorProto:
    """shop.Address in a file of its own, which order.proto imports: ProtobufSerializer registers it as a
    subject of its own and the order schema refers to it (a registry reference the connector resolves)."""
    fd = descriptor_pb2.FileDescriptorProto(name="shop/address.proto", package="shop", syntax="proto3")
    address = fd.message_type.add(name="Address")
    address.field.add(name="city", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    address.field.add(name="zip", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    return fd


def order_class(version: int) -> Any:
    """shop.Order as a generated class would be, from FileDescriptorProtos in a pool of its own (version 2
    adds `region`): an enum, a message of another file, repeated, a map, proto3 optional, a Timestamp."""
    fd = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3",
                                            dependency=["google/protobuf/timestamp.proto", "shop/address.proto"])
    status = fd.enum_type.add(name="Status")
    for number, name in enumerate(["NEW", "PAID", "SHIPPED"]):
        status.value.add(name=name, number=number)
    order = fd.message_type.add(name="Order")
    entry = order.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    order.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    order.field.add(name="customer", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    order.field.add(name="status", number=3, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL, type_name=".shop.Status")
    order.field.add(name="address", number=4, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".shop.Address")
    order.field.add(name="tags", number=5, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    order.field.add(name="counts", number=6, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                    type_name=".shop.Order.CountsEntry")
    order.field.add(name="created", number=7, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".google.protobuf.Timestamp")
    order.oneof_decl.add(name="_email")
    order.field.add(name="email", number=8, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0,
                    proto3_optional=True)
    if version >= 2:
        order.field.add(name="region", number=9, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.AddSerializedFile(address_file().SerializeToString())
    pool.AddSerializedFile(fd.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def order(cls: Any, i: int) -> Any:
    msg = cls(id=i, customer=f"c{i}", status=i % 3, tags=[f"t{j}" for j in range(i % 3)], counts={"n": i})
    if i % 2:
        msg.address.city = f"city{i}"
        msg.address.zip = 1000 + i
        msg.email = f"c{i}@example.com"
    msg.created.FromSeconds(BASE_S + i)
    if "region" in cls.DESCRIPTOR.fields_by_name:
        msg.region = f"r{i}"
    return msg


def test_protobuf_values_read_as_typed_columns(spark, broker, registry):
    topic = "proto-orders"
    create_topic(broker.bootstrap, topic)
    client = SchemaRegistryClient({"url": registry.url})
    v1, v2 = order_class(1), order_class(2)
    values = []
    for cls, numbers in ((v1, range(2)), (v2, range(2, 4))):
        ser = ProtobufSerializer(cls, client)
        values += [ser(order(cls, i), SerializationContext(topic, MessageField.VALUE)) for i in numbers]
    produce(broker, topic, values)
    latest = client.get_latest_version(f"{topic}-value")
    assert (latest.version, latest.schema.schema_type) == (2, "PROTOBUF")
    assert [(r.name, r.subject) for r in latest.schema.references] == [("shop/address.proto", "shop/address.proto")]

    df = load(spark, broker, registry, topic, "protobuf")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,customer:string,status:string,address:struct<city:string,zip:int>,tags:array<string>,"
        "counts:map<string,bigint>,created:timestamp,email:string,region:string>")
    rows = sorted(df.collect(), key=lambda r: r.offset)
    got = [r.value.asDict(recursive=True) for r in rows]
    assert got == [{"id": i, "customer": f"c{i}", "status": ["NEW", "PAID", "SHIPPED"][i % 3],
                    "address": {"city": f"city{i}", "zip": 1000 + i} if i % 2 else None,
                    "tags": [f"t{j}" for j in range(i % 3)], "counts": {"n": i},
                    # collect() gives timestamps as naive local datetimes
                    "created": datetime.datetime.fromtimestamp(BASE_S + i),
                    "email": f"c{i}@example.com" if i % 2 else None,
                    # V1 records: proto3's default for the field V2 added
                    "region": f"r{i}" if i >= 2 else ""} for i in range(4)]


# -- odradek tables sync ---------------------------------------------------------------------------------


def test_tables_sync_append_with_a_json_schema_topic(delta, spark, broker, registry, tmp_path):
    from .test_tables_sync import sync_once, table

    topic = "tables-json-customers"
    create_topic(broker.bootstrap, topic)
    docs = [customer(i, True) for i in range(3)]
    produce(broker, topic, json_values(registry, topic, docs, True), keys=[f"k{i}".encode() for i in range(3)])
    path = tmp_path / "customers"
    sync_once(spark, broker, topic, path, "append", registry)

    rows = table(spark, path)
    assert list(rows[0]) == ["key", "id", "name", "score", "vip", "tags", "address", "extra", "email", "topic",
                             "partition", "offset", "timestamp", "date"]
    assert [(r["key"], r["id"], r["name"], r["vip"], r["tags"], r["address"].asDict(), r["email"], r["offset"])
            for r in rows] == [(f"k{i}", i, f"c{i}", d.get("vip"), d["tags"], {"zip": None, **d["address"]},
                                d["email"], i) for i, d in enumerate(docs)]
