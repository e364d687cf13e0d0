"""`odradek registry` with JSON Schema and Protobuf, and schema references, against confluent-kafka's own
SchemaRegistryClient, JSONSerializer/JSONDeserializer and ProtobufSerializer/ProtobufDeserializer.

Real processes only, as in test_schema_registry.py (whose fixtures this module uses): a broker, `odradek
registry` as a subprocess on a free port, and records produced and consumed through the broker. The Protobuf
message classes are made at test time: protoc (grpcio-tools) compiles a .proto into a descriptor set, and
protobuf's message_factory builds classes from it in a pool of the test's own.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jsonschema")
pytest.importorskip("google.protobuf")
grpc_protoc = pytest.importorskip("grpc_tools.protoc")
pytest.importorskip("confluent_kafka.schema_registry.protobuf")

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.schema_registry import Schema, SchemaReference  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # noqa: E402

from tests.interop import test_schema_registry as registry_tests  # noqa: E402
from tests.interop.helpers import flush_fully, producer_config  # noqa: E402

# the registry fixtures and helpers of test_schema_registry.py (a real broker, `odradek registry` processes)
cluster = registry_tests.cluster
registry_factory = registry_tests.registry_factory
consume_values = registry_tests.consume_values
error_of = registry_tests.error_of

USER_V1 = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
           "required": ["name"], "additionalProperties": False}
# a property added to a closed content model: backward compatible
USER_V2 = {**USER_V1, "properties": {**USER_V1["properties"], "email": {"type": "string"}}}
# a changed type: not
USER_BAD = {**USER_V1, "properties": {"name": {"type": "string"}, "age": {"type": "string"}}}

ADDRESS_PROTO = """syntax = "proto3";
package shop.common;
message Address { string street = 1; string zip = 2; }
"""
ORDER_PROTO = """syntax = "proto3";
package shop;
import "shop/common/address.proto";
message Order {
  int64 id = 1;
  string item = 2;
  shop.common.Address ship_to = 3;
  oneof payment { string card = 4; string voucher = 5; }
}
"""


def message_classes(tmp_path: Path, files: dict[str, str]) -> dict[str, Any]:
    """Message classes (by full name) of .proto `files` (path -> source), compiled with protoc."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    out = tmp_path / "set.pb"
    code = grpc_protoc.main(["protoc", f"-I{tmp_path}", "--include_imports", f"--descriptor_set_out={out}",
                             *files])
    assert code == 0, "protoc failed"
    pool = descriptor_pool.DescriptorPool()
    classes: dict[str, Any] = {}
    for fd in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:
        pool.Add(fd)
        for m in fd.message_type:
            name = f"{fd.package}.{m.name}" if fd.package else m.name
            classes[name] = message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    return classes


def test_schema_types_and_json_records_round_trip(cluster, topic_name: str) -> None:
    broker, registry = cluster
    assert registry.http("GET", "/schemas/types")[2] == ["JSON", "PROTOBUF", "AVRO"]
    client = registry.client()
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    producer = Producer(producer_config(broker.bootstrap))
    old = JSONSerializer(json.dumps(USER_V1), client)
    new = JSONSerializer(json.dumps(USER_V2), client)
    producer.produce(topic_name, value=old({"name": "ada", "age": 36}, ctx))
    producer.produce(topic_name, value=new({"name": "bob", "email": "bob@example.org"}, ctx))
    flush_fully(producer)

    subject = f"{topic_name}-value"
    assert client.get_versions(subject) == [1, 2]
    latest = client.get_latest_version(subject)
    assert latest.schema.schema_type == "JSON" and json.loads(latest.schema.schema_str) == USER_V2
    values = consume_values(broker.bootstrap, topic_name, 2, JSONDeserializer(None, schema_registry_client=client))
    assert values == [{"name": "ada", "age": 36}, {"name": "bob", "email": "bob@example.org"}]

    # a changed property type is refused, by the compatibility endpoint and by registration (409)
    assert not client.test_compatibility(subject, Schema(json.dumps(USER_BAD), "JSON"))
    err = error_of(client.register_schema, subject, Schema(json.dumps(USER_BAD), "JSON"))
    assert (err.http_status_code, err.error_code) == (409, 409)
    status, _, body = registry.http("POST", f"/compatibility/subjects/{subject}/versions/latest?verbose=true",
                                    {"schema": json.dumps(USER_BAD), "schemaType": "JSON"})
    assert status == 200 and body["is_compatible"] is False
    assert any("properties/age" in m for m in body["messages"])
    # closing an open model, FORWARD: the old (open) schema reads anything, so that is fine
    client.set_compatibility(subject, "FORWARD")
    assert client.register_schema(subject, Schema(json.dumps({**USER_V2, "required": ["name", "email"]}), "JSON"))
    err = error_of(client.register_schema, subject, Schema('{"type": "nonsense"}', "JSON"))
    assert (err.http_status_code, err.error_code) == (422, 42201)


def test_json_references_across_subjects(cluster, topic_name: str) -> None:
    broker, registry = cluster
    client = registry.client()
    address = {"type": "object", "properties": {"zip": {"type": "string"}}}
    address_id = client.register_schema("address", Schema(json.dumps(address), "JSON"))
    customer = {"type": "object", "properties": {"name": {"type": "string"}, "home": {"$ref": "address.json"}}}
    refs = [SchemaReference("address.json", "address", 1)]
    customer_schema = Schema(json.dumps(customer), "JSON", refs)
    customer_id = client.register_schema(f"{topic_name}-value", customer_schema)
    assert customer_id != address_id
    assert client.register_schema(f"{topic_name}-value", customer_schema) == customer_id  # identity has refs
    status, _, body = registry.http("POST", f"/subjects/{topic_name}-value/versions",
                                    {"schema": json.dumps(customer), "schemaType": "JSON"})
    assert (status, body["error_code"]) == (422, 42201)  # the $ref names no reference
    status, _, body = registry.http("POST", "/subjects/other/versions", {
        "schema": json.dumps(customer), "schemaType": "JSON",
        "references": [{"name": "address.json", "subject": "address", "version": 9}]})
    assert (status, body["error_code"]) == (422, 42201)  # a reference to a missing version

    fetched = client.get_schema(customer_id)
    assert [(r.name, r.subject, r.version) for r in fetched.references] == [("address.json", "address", 1)]
    assert registry.http("GET", "/subjects/address/versions/1/referencedby")[2] == [customer_id]
    assert registry.http("GET", f"/subjects/{topic_name}-value/versions/1")[2]["references"] == [
        {"name": "address.json", "subject": "address", "version": 1}]

    # records validated against the referenced schema on the way in and out
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    serialize = JSONSerializer(customer_schema, client, conf={"auto.register.schemas": False,
                                                              "use.latest.version": True})
    producer = Producer(producer_config(broker.bootstrap))
    producer.produce(topic_name, value=serialize({"name": "ada", "home": {"zip": "12345"}}, ctx))
    flush_fully(producer)
    with pytest.raises(Exception):  # the referenced schema makes zip a string
        serialize({"name": "bob", "home": {"zip": 12345}}, ctx)
    deserializer = JSONDeserializer(None, schema_registry_client=registry.client())
    assert consume_values(broker.bootstrap, topic_name, 1, deserializer) == [{"name": "ada", "home": {"zip": "12345"}}]

    # the referenced version cannot go while referenced (42206), and can once the referrer is gone
    err = error_of(client.delete_version, "address", 1)
    assert (err.http_status_code, err.error_code) == (422, 42206)
    assert error_of(client.delete_subject, "address").error_code == 42206
    client.delete_subject(f"{topic_name}-value")
    assert registry.http("GET", "/subjects/address/versions/1/referencedby")[2] == []
    assert client.delete_version("address", 1) == 1


def test_protobuf_records_round_trip_with_references(cluster, topic_name: str, tmp_path: Path) -> None:
    broker, registry = cluster
    client = registry.client()
    classes = message_classes(tmp_path, {"shop/common/address.proto": ADDRESS_PROTO, "shop/order.proto": ORDER_PROTO})
    Order, Address = classes["shop.Order"], classes["shop.common.Address"]
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    # the serializer registers the imported file under its own subject first, then Order with a reference
    serialize = ProtobufSerializer(Order, client, {"use.deprecated.format": False})
    producer = Producer(producer_config(broker.bootstrap))
    sent = [Order(id=i, item=f"item-{i}", ship_to=Address(zip=f"{i:05d}"), card="visa") for i in range(3)]
    for order in sent:
        producer.produce(topic_name, value=serialize(order, ctx))
    flush_fully(producer)

    subject = f"{topic_name}-value"
    assert sorted(client.get_subjects()) == sorted(["shop/common/address.proto", subject])
    registered = client.get_latest_version(subject)
    assert registered.schema.schema_type == "PROTOBUF"
    assert [(r.name, r.subject, r.version) for r in registered.schema.references] == [
        ("shop/common/address.proto", "shop/common/address.proto", 1)]
    address_id = client.get_latest_version("shop/common/address.proto").schema_id
    assert registry.http("GET", "/subjects/shop%2Fcommon%2Faddress.proto/versions/1/referencedby")[2] == [
        registered.schema_id]

    deserialize = ProtobufDeserializer(Order, {"use.deprecated.format": False}, registry.client())
    assert consume_values(broker.bootstrap, topic_name, 3, deserialize) == sent

    # the same schema as .proto text is the same schema (same id); the text comes back as registered, and
    # ?format=serialized gives the descriptor
    as_text = Schema(ORDER_PROTO, "PROTOBUF", [SchemaReference("shop/common/address.proto",
                                                               "shop/common/address.proto", 1)])
    assert client.register_schema(subject, as_text) == registered.schema_id
    text_id = client.register_schema("text-only", Schema(ADDRESS_PROTO, "PROTOBUF"))
    assert text_id == address_id
    assert registry.http("GET", f"/schemas/ids/{address_id}")[2]["schemaType"] == "PROTOBUF"
    serialized = registry.http("GET", f"/schemas/ids/{address_id}?format=serialized")[2]["schema"]
    fd = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert [m.name for m in fd.message_type] == ["Address"] and fd.package == "shop.common"

    # a field number's type changed: 409; a field added and one renamed: fine
    changed = ORDER_PROTO.replace("int64 id = 1;", "string id = 1;")
    refs = as_text.references
    err = error_of(client.register_schema, subject, Schema(changed, "PROTOBUF", refs))
    assert (err.http_status_code, err.error_code) == (409, 409)
    assert "field 1 changed type" in err.error_message
    evolved = ORDER_PROTO.replace("string item = 2;", "string product = 2; int32 quantity = 6;")
    assert client.register_schema(subject, Schema(evolved, "PROTOBUF", refs)) > registered.schema_id
    removed_message = 'syntax = "proto3";\npackage shop.common;\nmessage Street { string name = 1; }\n'
    err = error_of(client.register_schema, "shop/common/address.proto", Schema(removed_message, "PROTOBUF"))
    assert err.error_code == 409  # Address is gone
    status, _, body = registry.http("POST", "/subjects/bad/versions",
                                    {"schema": "syntax = \"proto3\"; message A { Nope n = 1; }",
                                     "schemaType": "PROTOBUF"})
    assert (status, body["error_code"]) == (422, 42201) and "Nope" in body["message"]

    # the referenced subject cannot be deleted while Order's versions reference it
    err = error_of(client.delete_subject, "shop/common/address.proto")
    assert (err.http_status_code, err.error_code) == (422, 42206)


def test_references_survive_a_restart(cluster) -> None:
    _, registry = cluster
    client = registry.client()
    client.register_schema("base", Schema(json.dumps({"type": "string"}), "JSON"))
    refs = [SchemaReference("base.json", "base", 1)]
    top = Schema(json.dumps({"type": "object", "properties": {"b": {"$ref": "base.json"}}}), "JSON", refs)
    top_id = client.register_schema("top", top)
    registry.restart()
    again = registry.client()
    assert again.register_schema("top", top) == top_id
    assert registry.http("GET", "/subjects/base/versions/1/referencedby")[2] == [top_id]
    assert error_of(again.delete_version, "base", 1).error_code == 42206
