"""Real Kafka 0.7 clients from npm (prozess@0.7.0, node-kafka kafka@0.2.3) against odradek, and confluent-kafka
reading what they wrote and writing what they read."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer

from tests.kafka07.conftest import Broker07, Node07

HOST = "127.0.0.1"
TIMEOUT_S = 15.0


def _confluent_read(broker: Broker07, topic: str, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got.append(message)
        return got
    finally:
        consumer.close()


def _confluent_write(broker: Broker07, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i, value in enumerate(values):
        producer.produce(topic, value, key=b"key-%d" % i, headers=[("h", b"x")])
    assert producer.flush(TIMEOUT_S) == 0


def _consume(node07: Node07, driver: str, port: int, topic: str, count: int) -> dict:
    return node07.run(driver, "consume", HOST, port, topic, 0, 0, count, int(TIMEOUT_S * 1000))


def test_prozess_produces_for_confluent_and_itself(node07: Node07, broker07: Broker07) -> None:
    result = node07.run("prozess_driver.js", "produce", HOST, broker07.kafka07_port, "pz", 0, "alpha", "beta", "gamma")
    assert result == {"produced": 3}
    got = _confluent_read(broker07, "pz", 3)
    assert [m.value() for m in got] == [b"alpha", b"beta", b"gamma"]
    assert all(m.key() is None for m in got)
    consumed = _consume(node07, "prozess_driver.js", broker07.kafka07_port, "pz", 3)
    assert [m["payload"] for m in consumed["messages"]] == ["alpha", "beta", "gamma"]
    assert int(consumed["offset"]) == (10 + 5) + (10 + 4) + (10 + 5)  # its byte offset after them


def test_prozess_reads_what_confluent_wrote(node07: Node07, broker07: Broker07) -> None:
    _confluent_write(broker07, "from-confluent-pz", [b"one", b"two"])
    consumed = _consume(node07, "prozess_driver.js", broker07.kafka07_port, "from-confluent-pz", 2)
    assert [m["payload"] for m in consumed["messages"]] == ["one", "two"]  # values only


def test_node_kafka_produces_for_confluent_and_itself(node07: Node07, broker07: Broker07) -> None:
    result = node07.run("node_kafka_driver.js", "produce", HOST, broker07.kafka06_port, "nk", 0, "red", "green")
    assert result == {"produced": 2}
    got = _confluent_read(broker07, "nk", 2)
    assert [m.value() for m in got] == [b"red", b"green"]
    consumed = _consume(node07, "node_kafka_driver.js", broker07.kafka06_port, "nk", 2)
    assert [m["payload"] for m in consumed["messages"]] == ["red", "green"]
    assert consumed["offset"] == (9 + 3) + (9 + 5)  # magic-0 byte offsets


def test_node_kafka_reads_what_confluent_and_prozess_wrote(node07: Node07, broker07: Broker07) -> None:
    _confluent_write(broker07, "mixed", [b"from-confluent"])
    node07.run("prozess_driver.js", "produce", HOST, broker07.kafka07_port, "mixed", 0, "from-prozess")
    consumed = _consume(node07, "node_kafka_driver.js", broker07.kafka06_port, "mixed", 2)
    assert [m["payload"] for m in consumed["messages"]] == ["from-confluent", "from-prozess"]
    consumed = _consume(node07, "prozess_driver.js", broker07.kafka07_port, "mixed", 2)
    assert [m["payload"] for m in consumed["messages"]] == ["from-confluent", "from-prozess"]
