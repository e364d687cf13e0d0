"""`odradek registry` against confluent-kafka's own schema registry client and Avro serdes.

Real processes only: a broker from broker_factory, `odradek registry` as a subprocess on a free port, and
confluent-kafka's SchemaRegistryClient, AvroSerializer and AvroDeserializer producing and consuming Avro
records through the broker.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from odradek.tools.zookeeper import end_process
from tests.conftest import free_port
from tests.interop.helpers import consumer_config, flush_fully, producer_config, wait_until

pytest.importorskip("fastavro")
schema_registry = pytest.importorskip("confluent_kafka.schema_registry")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource  # noqa: E402
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

READY_MARKER = "odradek registry: listening on "
START_TIMEOUT_S = 30.0


def record_schema(*fields: dict, name: str = "User") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "test", "fields": list(fields)})


V1 = record_schema({"name": "name", "type": "string"})
V2 = record_schema({"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": -1})
NO_DEFAULT = record_schema({"name": "name", "type": "string"}, {"name": "email", "type": "string"})


class RegistryProcess:
    """One `odradek registry` process; restartable on the same port."""

    def __init__(self, bootstrap: str, log_path: Path, extra_args: tuple[str, ...] = ()) -> None:
        self.bootstrap = bootstrap
        self.extra_args = extra_args
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> "RegistryProcess":
        cmd = [sys.executable, "-m", "odradek", "registry", "--bootstrap", self.bootstrap,
               "--listen", f"127.0.0.1:{self.port}", *self.extra_args]
        # the log is appended to across restarts: wait for one more ready line than it already has
        seen = self.log_path.read_text().count(READY_MARKER) if self.log_path.exists() else 0
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
        wait_until(lambda: self.log_path.read_text().count(READY_MARKER) > seen or self.proc.poll() is not None,
                   timeout=START_TIMEOUT_S, message="odradek registry to listen")
        if self.proc.poll() is not None:
            raise RuntimeError(f"odradek registry exited: {self.log_path.read_text()[-3000:]}")
        return self

    def stop(self) -> None:
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        end_process(proc, grace=15)

    def restart(self) -> "RegistryProcess":
        self.stop()
        return self.start()

    def client(self) -> SchemaRegistryClient:
        return SchemaRegistryClient({"url": self.url})

    def http(self, method: str, path: str, body: Any = None) -> tuple[int, str, Any]:
        """(status, content type, JSON body) of a raw request."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as res:
                return res.status, res.headers["Content-Type"], json.loads(res.read())
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers["Content-Type"], json.loads(exc.read())


@pytest.fixture
def registry_factory(tmp_path: Path) -> Iterator:
    started: list[RegistryProcess] = []

    def make(bootstrap: str) -> RegistryProcess:
        r = RegistryProcess(bootstrap, tmp_path / f"registry-{len(started)}.log")
        started.append(r)
        return r.start()

    yield make
    for r in started:
        r.stop()


@pytest.fixture
def cluster(broker_factory, registry_factory) -> tuple[Any, RegistryProcess]:
    broker = broker_factory()
    return broker, registry_factory(broker.bootstrap)


def error_of(call: Any, *args: Any, **kwargs: Any) -> SchemaRegistryError:
    with pytest.raises(SchemaRegistryError) as exc:
        call(*args, **kwargs)
    return exc.value


def consume_values(bootstrap: str, topic: str, n: int, deserializer: AvroDeserializer) -> list[Any]:
    consumer = Consumer(consumer_config(bootstrap, **{"group.id": f"g-{topic}"}))
    consumer.subscribe([topic])
    out: list[Any] = []
    deadline = time.monotonic() + 30
    try:
        while len(out) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append(deserializer(msg.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    assert len(out) == n, f"consumed {len(out)} of {n} records of {topic}"
    return out


def test_avro_records_round_trip_through_odradek(cluster, topic_name: str) -> None:
    broker, registry = cluster
    client = registry.client()
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    producer = Producer(producer_config(broker.bootstrap))
    old = AvroSerializer(client, V1)  # registers V1 under <topic>-value on first use
    for i in range(3):
        producer.produce(topic_name, value=old({"name": f"old-{i}"}, ctx))
    new = AvroSerializer(client, V2)  # an evolution under the default BACKWARD level
    for i in range(3):
        producer.produce(topic_name, value=new({"name": f"new-{i}", "age": i}, ctx))
    flush_fully(producer)

    subject = f"{topic_name}-value"
    assert client.get_subjects() == [subject]
    assert client.get_versions(subject) == [1, 2]
    assert [client.get_version(subject, v).schema_id for v in (1, 2)] == [1, 2]

    # the writer's schema by the id in each record (the deserializer asks /schemas/ids/{id})
    values = consume_values(broker.bootstrap, topic_name, 6, AvroDeserializer(registry.client()))
    assert values == [{"name": f"old-{i}"} for i in range(3)] + [{"name": f"new-{i}", "age": i} for i in range(3)]
    # a reader on V2 resolves V1's records with the default
    as_v2 = consume_values(broker.bootstrap, topic_name, 6, AvroDeserializer(registry.client(), V2))
    assert as_v2[:3] == [{"name": f"old-{i}", "age": -1} for i in range(3)]

    # the state is in a compacted topic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "_schemas")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["cleanup.policy"].value == "compact"


def test_evolution_under_backward(cluster) -> None:
    _, registry = cluster
    client = registry.client()
    assert client.get_compatibility() == "BACKWARD"
    first = client.register_schema("users-value", Schema(V1, "AVRO"))
    assert client.register_schema("users-value", Schema(V1, "AVRO")) == first  # same schema, same id
    assert client.test_compatibility("users-value", Schema(V2, "AVRO"))
    assert not client.test_compatibility("users-value", Schema(NO_DEFAULT, "AVRO"))
    second = client.register_schema("users-value", Schema(V2, "AVRO"))
    assert second == first + 1

    err = error_of(client.register_schema, "users-value", Schema(NO_DEFAULT, "AVRO"))
    assert (err.http_status_code, err.error_code) == (409, 409)
    assert client.get_versions("users-value") == [1, 2]

    found = client.lookup_schema("users-value", Schema(V1, "AVRO"))
    assert (found.schema_id, found.version) == (first, 1)
    assert client.get_latest_version("users-value").version == 2

    # the same schema in another subject keeps its id
    assert client.register_schema("other-value", Schema(V2, "AVRO")) == second
    err = error_of(client.register_schema, "users-value", Schema("{not json", "AVRO"))
    assert (err.http_status_code, err.error_code) == (422, 42201)


def test_config_per_subject(cluster) -> None:
    _, registry = cluster
    client = registry.client()
    client.register_schema("loose-value", Schema(V1, "AVRO"))
    client.register_schema("strict-value", Schema(V1, "AVRO"))
    client.set_compatibility("loose-value", "NONE")
    assert client.get_compatibility("loose-value") == "NONE"
    assert client.get_compatibility() == "BACKWARD"
    assert client.register_schema("loose-value", Schema(NO_DEFAULT, "AVRO")) > 0
    assert error_of(client.register_schema, "strict-value", Schema(NO_DEFAULT, "AVRO")).error_code == 409

    # FORWARD: old readers must read the new data; adding a field without a default is fine then
    client.set_compatibility("strict-value", "FORWARD")
    assert client.register_schema("strict-value", Schema(NO_DEFAULT, "AVRO")) > 0
    status, _, body = registry.http("DELETE", "/config/strict-value")
    assert (status, body) == (200, {"compatibilityLevel": "FORWARD"})
    status, _, body = registry.http("GET", "/config/strict-value")
    assert (status, body["error_code"]) == (404, 40408)
    assert registry.http("GET", "/config/strict-value?defaultToGlobal=true")[2] == {"compatibilityLevel": "BACKWARD"}

    status, _, body = registry.http("PUT", "/config", {"compatibility": "SIDEWAYS"})
    assert (status, body["error_code"]) == (422, 42203)
    client.set_compatibility(level="FULL")
    assert client.get_compatibility() == "FULL"


def test_soft_then_hard_delete(cluster) -> None:
    _, registry = cluster
    client = registry.client()
    id1 = client.register_schema("gone-value", Schema(V1, "AVRO"))
    id2 = client.register_schema("gone-value", Schema(V2, "AVRO"))

    err = error_of(client.delete_subject, "gone-value", permanent=True)
    assert (err.http_status_code, err.error_code) == (404, 40405)  # soft first, as Confluent's registry
    assert client.delete_subject("gone-value") == [1, 2]
    assert client.get_subjects() == []
    assert client.get_subjects(deleted=True) == ["gone-value"]
    assert error_of(client.get_versions, "gone-value").error_code == 40401
    assert registry.http("GET", "/subjects/gone-value/versions?deleted=true")[2] == [1, 2]
    assert error_of(client.delete_subject, "gone-value").error_code == 40404
    assert registry.client().get_schema(id2).schema_str == V2  # soft-deleted schemas are still readable by id

    assert client.delete_subject("gone-value", permanent=True) == [1, 2]
    assert client.get_subjects(deleted=True) == []
    for schema_id in (id1, id2):
        assert error_of(registry.client().get_schema, schema_id).error_code == 40403

    # one version: soft, then hard; a new registration never reuses a purged id
    id3 = client.register_schema("one-value", Schema(V1, "AVRO"))
    assert id3 > id2
    err = error_of(client.delete_version, "one-value", 1, permanent=True)
    assert err.error_code == 40407
    assert client.delete_version("one-value", 1) == 1
    assert client.delete_version("one-value", 1, permanent=True) == 1
    assert error_of(client.get_version, "one-value", 1).error_code == 40401


def test_restart_keeps_subjects_versions_and_ids(cluster) -> None:
    broker, registry = cluster
    client = registry.client()
    client.register_schema("a-value", Schema(V1, "AVRO"))
    client.register_schema("a-value", Schema(V2, "AVRO"))
    client.register_schema("b-value", Schema(record_schema({"name": "x", "type": "long"}, name="B"), "AVRO"))
    client.set_compatibility("b-value", "NONE")
    client.delete_version("a-value", 1)

    def snapshot(c: SchemaRegistryClient) -> dict:
        return {s: [(v, c.get_version(s, v).schema_id, c.get_version(s, v).schema.schema_str)
                    for v in c.get_versions(s)]
                for s in c.get_subjects()}

    before = snapshot(client)
    assert before["a-value"][0][0] == 2 and len(before["b-value"]) == 1
    registry.restart()
    after_client = registry.client()
    assert snapshot(after_client) == before
    assert after_client.get_compatibility("b-value") == "NONE"
    assert registry.http("GET", "/subjects/a-value/versions?deleted=true")[2] == [1, 2]
    # ids continue from the log's max
    assert after_client.register_schema("c-value", Schema('"string"', "AVRO")) == 4


def test_two_instances_agree(cluster, registry_factory) -> None:
    broker, first = cluster
    second = registry_factory(broker.bootstrap)
    schema_id = first.client().register_schema("shared-value", Schema(V1, "AVRO"))
    # the second instance tails _schemas: it learns of the registration without a restart
    wait_until(lambda: second.http("GET", "/subjects")[2] == ["shared-value"], timeout=15,
               message="the second registry to see the registration")
    assert second.client().get_schema(schema_id).schema_str == V1


def test_mode_and_raw_errors(cluster) -> None:
    _, registry = cluster
    client = registry.client()
    client.register_schema("m-value", Schema(V1, "AVRO"))
    assert registry.http("PUT", "/mode", {"mode": "READONLY"})[2] == {"mode": "READONLY"}
    assert client.get_global_mode() == "READONLY"
    err = error_of(client.register_schema, "m-value", Schema(V2, "AVRO"))
    assert (err.http_status_code, err.error_code) == (422, 42205)
    assert registry.http("PUT", "/mode", {"mode": "SIDEWAYS"})[2]["error_code"] == 42204
    assert registry.http("PUT", "/mode", {"mode": "READWRITE"})[2] == {"mode": "READWRITE"}
    assert client.register_schema("m-value", Schema(V2, "AVRO")) == 2

    status, content_type, body = registry.http("GET", "/subjects/nope/versions")
    assert (status, content_type, body["error_code"]) == (404, "application/vnd.schemaregistry.v1+json", 40401)
    assert registry.http("GET", "/subjects/m-value/versions/9")[2]["error_code"] == 40402
    assert registry.http("GET", "/subjects/m-value/versions/zero")[2]["error_code"] == 42202
    assert registry.http("GET", "/schemas/ids/99")[2]["error_code"] == 40403
    assert registry.http("GET", "/schemas/types")[2] == ["JSON", "PROTOBUF", "AVRO"]
    assert registry.http("GET", "/schemas/ids/1/schema")[2] == json.loads(V1)
    assert registry.http("GET", "/subjects/m-value/versions/latest/schema")[2] == json.loads(V2)
    status, _, body = registry.http("POST", "/subjects/m-value", {"schema": NO_DEFAULT})
    assert (status, body["error_code"]) == (404, 40403)
    status, _, body = registry.http("POST", "/compatibility/subjects/m-value/versions/1?verbose=true",
                                    {"schema": NO_DEFAULT})
    assert status == 200 and body["is_compatible"] is False and body["messages"]
    status, _, body = registry.http("POST", "/subjects/m-value/versions", {"schema": "{}", "schemaType": "PROTOBUF"})  # not .proto text
    assert (status, body["error_code"]) == (422, 42201)


def test_subject_names_with_a_slash(cluster) -> None:
    # the client sends "team/orders-value" as team%2Forders-value
    _, registry = cluster
    client = registry.client()
    schema_id = client.register_schema("team/orders-value", Schema(V1, "AVRO"))
    assert client.get_subjects() == ["team/orders-value"]
    assert client.get_latest_version("team/orders-value").schema_id == schema_id
    client.set_compatibility("team/orders-value", "NONE")
    assert client.get_compatibility("team/orders-value") == "NONE"
    assert client.delete_subject("team/orders-value") == [1]
