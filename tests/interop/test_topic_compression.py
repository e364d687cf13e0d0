"""A topic's compression.type: "producer" stores batches as sent; a codec stores every batch in it, the broker
recompressing those produced otherwise, with records, keys, headers, timestamps and idempotent producers'
sequences intact. The broker's compression.type is the default of its topics."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from odradek.records.batch import iter_batches
from odradek.records.codec import decode_batch
from odradek.records.compression import GZIP, LZ4, NONE, ZSTD
from tests.interop.helpers import consume_messages
from tests.interop.test_broker_semantics import create_topic, request

COUNT = 60


def produce(bootstrap: str, topic: str, compression: str, idempotent: bool = False) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": compression, "linger.ms": 20,
                         "enable.idempotence": idempotent, "broker.address.family": "v4"})
    for i in range(COUNT):
        producer.produce(topic, key=f"k{i}".encode(), value=(f"value-{i}-" + "x" * (i % 50)).encode(),
                         headers=[("h", str(i).encode())], timestamp=1_700_000_000_000 + i)
    assert producer.flush(30) == 0


def stored_codecs(bootstrap: str, topic: str) -> list[int]:
    """The codec of every stored batch, read with a raw Fetch."""
    body = request(bootstrap, 1, 12, {"replica_id": -1, "max_wait_ms": 0, "max_bytes": 10 << 20, "topics": [
        {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 10 << 20}]}]})
    records = body["responses"][0]["partitions"][0]["records"]
    data = bytes(records)
    return [header.compression for _, header in iter_batches(data)]


def consumed(bootstrap: str, topic: str) -> list[tuple]:
    return [(m.key(), m.value(), m.headers(), m.timestamp()[1])
            for m in consume_messages(bootstrap, topic, COUNT * 2)]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("stored, codec", [("gzip", GZIP), ("zstd", ZSTD), ("uncompressed", NONE)])
def test_batches_are_stored_in_the_topics_codec(broker, topic_name, stored, codec):
    create_topic(broker.bootstrap, topic_name, config={"compression.type": stored})
    produce(broker.bootstrap, topic_name, "none")
    produce(broker.bootstrap, topic_name, "lz4", idempotent=True)
    codecs = stored_codecs(broker.bootstrap, topic_name)
    assert codecs and set(codecs) == {codec}
    expected = [(f"k{i}".encode(), (f"value-{i}-" + "x" * (i % 50)).encode(), [("h", str(i).encode())],
                 1_700_000_000_000 + i) for i in range(COUNT)]
    assert consumed(broker.bootstrap, topic_name) == expected * 2


@pytest.mark.timeout(90)
def test_producer_keeps_batches_as_sent_and_the_broker_default_applies(broker_factory, topic_name):
    b = broker_factory({"compression.type": "lz4"})
    create_topic(b.bootstrap, topic_name)  # no override: the broker's lz4
    produce(b.bootstrap, topic_name, "gzip")
    assert set(stored_codecs(b.bootstrap, topic_name)) == {LZ4}
    kept = topic_name + "-as-sent"
    create_topic(b.bootstrap, kept, config={"compression.type": "producer"})
    produce(b.bootstrap, kept, "gzip")
    produce(b.bootstrap, kept, "zstd")
    assert set(stored_codecs(b.bootstrap, kept)) == {GZIP, ZSTD}


def test_an_unknown_codec_is_refused(broker, topic_name):
    body = request(broker.bootstrap, 19, 5, {"topics": [{"name": topic_name, "num_partitions": 1,
                                                           "replication_factor": 1, "configs": [
                                                               {"name": "compression.type", "value": "brotli"}]}],
                                                "timeout_ms": 10000})
    assert body["topics"][0]["error_code"] == 40  # INVALID_CONFIG


def test_recompressed_batches_decode_with_their_producer_fields(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, config={"compression.type": "zstd"})
    produce(broker.bootstrap, topic_name, "snappy", idempotent=True)
    body = request(broker.bootstrap, 1, 12, {"replica_id": -1, "max_wait_ms": 0, "max_bytes": 10 << 20, "topics": [
        {"topic": topic_name, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 10 << 20}]}]})
    records = body["responses"][0]["partitions"][0]["records"]
    data = bytes(records)
    sequences = []
    for pos, _ in iter_batches(data):
        header, recs = decode_batch(data, pos)
        assert header.producer_id >= 0 and header.compression == ZSTD
        sequences.append((header.base_sequence, len(recs)))
    assert sum(n for _, n in sequences) == COUNT
    # the sequences run on from batch to batch, as the producer numbered them
    assert [s for s, _ in sequences] == [sum(n for _, n in sequences[:i]) for i in range(len(sequences))]
