"""kcat (librdkafka's command-line client) against a real odradek broker."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

KCAT = shutil.which("kcat") or shutil.which("kafkacat")

if KCAT is None and not os.environ.get("CI"):
    pytest.skip("kcat is not installed (run tools/install-system-deps.sh)", allow_module_level=True)

TIMEOUT_S = 30


def kcat(bootstrap: str, *args: str, stdin: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
    assert KCAT is not None, "kcat is required in CI: install it with tools/install-system-deps.sh"
    cmd = [KCAT, "-b", bootstrap, "-X", "broker.address.family=v4", *args]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, timeout=TIMEOUT_S)
    if check:
        assert proc.returncode == 0, f"{cmd} exited {proc.returncode}: {proc.stderr.decode(errors='replace')}"
    return proc


def produce_lines(bootstrap: str, topic: str, lines: list[bytes], *extra: str) -> None:
    kcat(bootstrap, "-P", "-t", topic, *extra, stdin=b"".join(line + b"\n" for line in lines))


def consume_all(bootstrap: str, topic: str, fmt: str, *extra: str) -> bytes:
    return kcat(bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", fmt, *extra).stdout


@pytest.mark.timeout(60)
def test_metadata_lists_topic(broker, topic_name):
    produce_lines(broker.bootstrap, topic_name, [b"hello"])
    out = kcat(broker.bootstrap, "-L").stdout.decode()
    assert f'topic "{topic_name}" with 1 partitions' in out, out
    assert "1 brokers:" in out, out

    md = json.loads(kcat(broker.bootstrap, "-L", "-J").stdout)
    topics = {t["topic"]: t for t in md["topics"]}
    assert topic_name in topics
    parts = topics[topic_name]["partitions"]
    assert [p["partition"] for p in parts] == [0]
    broker_ids = [b["id"] for b in md["brokers"]]
    assert len(broker_ids) == 1
    assert parts[0]["leader"] == broker_ids[0]
    assert md["brokers"][0]["name"] == broker.bootstrap


@pytest.mark.timeout(60)
def test_keyed_produce_consume(broker, topic_name):
    lines = [b"k%d:value %d" % (i, i) for i in range(20)] + [b"same:a", b"same:b", b":empty key"]
    produce_lines(broker.bootstrap, topic_name, lines, "-K:")
    out = consume_all(broker.bootstrap, topic_name, "%k=%s\n")
    expected = b"".join(line.replace(b":", b"=", 1) + b"\n" for line in lines)
    assert out == expected


@pytest.mark.timeout(60)
def test_offsets_partition_and_timestamps(broker, topic_name):
    produce_lines(broker.bootstrap, topic_name, [b"a", b"b", b"c"])
    out = consume_all(broker.bootstrap, topic_name, "%p:%o:%s\n").decode()
    assert out == "0:0:a\n0:1:b\n0:2:c\n"
    # From an absolute offset, and a count limit.
    out = kcat(broker.bootstrap, "-C", "-t", topic_name, "-p", "0", "-o", "1", "-c", "1", "-q", "-f", "%o:%s\n").stdout
    assert out == b"1:b\n"
    stamps = consume_all(broker.bootstrap, topic_name, "%T\n").split()
    assert len(stamps) == 3 and all(int(s) > 1_500_000_000_000 for s in stamps)


@pytest.mark.timeout(60)
def test_headers(broker, topic_name):
    produce_lines(broker.bootstrap, topic_name, [b"with headers"], "-H", "a=1", "-H", "a=2", "-H", "b=")
    out = consume_all(broker.bootstrap, topic_name, "%h|%s\n")
    assert out == b"a=1,a=2,b=|with headers\n"


@pytest.mark.timeout(90)
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_compressed_produce(broker, topic_name, codec):
    lines = [b"key%d:%s" % (i, b"payload-%d-" % i * 20) for i in range(200)]
    produce_lines(broker.bootstrap, topic_name, lines, "-K:", "-z", codec)
    out = consume_all(broker.bootstrap, topic_name, "%k=%s\n")
    expected = b"".join(line.replace(b":", b"=", 1) + b"\n" for line in lines)
    assert out == expected
    offsets = consume_all(broker.bootstrap, topic_name, "%o\n").split()
    assert [int(o) for o in offsets] == list(range(len(lines)))


@pytest.mark.timeout(60)
def test_api_version_request(broker, topic_name):
    produce_lines(broker.bootstrap, topic_name, [b"x:1"], "-K:", "-X", "api.version.request=true")
    out = consume_all(broker.bootstrap, topic_name, "%k=%s\n", "-X", "api.version.request=true")
    assert out == b"x=1\n"


@pytest.mark.timeout(60)
def test_consume_end_of_empty_topic(broker, topic_name):
    # Producing nothing but asking metadata auto-creates the topic; reading it with -e exits at once.
    kcat(broker.bootstrap, "-L", "-t", topic_name)
    out = consume_all(broker.bootstrap, topic_name, "%s\n")
    assert out == b""


@pytest.mark.timeout(60)
def test_query_offset_by_timestamp(broker, topic_name):
    produce_lines(broker.bootstrap, topic_name, [b"a", b"b"])
    out = kcat(broker.bootstrap, "-Q", "-t", f"{topic_name}:0:-1").stdout.decode()
    # -1 is "latest": the end offset.
    assert f"{topic_name} [0] offset 2" in out, out
    out = kcat(broker.bootstrap, "-Q", "-t", f"{topic_name}:0:-2").stdout.decode()
    assert f"{topic_name} [0] offset 0" in out, out


@pytest.mark.timeout(60)
def test_explicit_partitions(broker_factory, topic_name):
    b = broker_factory({"num.partitions": "3"})
    for p in range(3):
        produce_lines(b.bootstrap, topic_name, [b"p%d-%d" % (p, i) for i in range(p + 1)], "-p", str(p))
    md = json.loads(kcat(b.bootstrap, "-L", "-J", "-t", topic_name).stdout)
    assert len(md["topics"][0]["partitions"]) == 3
    for p in range(3):
        out = consume_all(b.bootstrap, topic_name, "%p %o %s\n", "-p", str(p))
        assert out == b"".join(b"%d %d p%d-%d\n" % (p, i, p, i) for i in range(p + 1))


@pytest.mark.timeout(60)
def test_consume_from_timestamp(broker, topic_name):
    produce_lines(broker.bootstrap, topic_name, [b"a", b"b", b"c"])
    stamps = [int(s) for s in consume_all(broker.bootstrap, topic_name, "%T\n").split()]
    out = kcat(broker.bootstrap, "-C", "-t", topic_name, "-o", f"s@{stamps[-1]}", "-e", "-q", "-f", "%s\n").stdout
    # Everything from the first record with a timestamp >= the last one's (possibly the same ms as b).
    assert out in (b"c\n", b"b\nc\n", b"a\nb\nc\n") and out.endswith(b"c\n")
    out = kcat(broker.bootstrap, "-C", "-t", topic_name, "-o", "-1", "-e", "-q", "-f", "%s\n").stdout
    assert out == b"c\n"
