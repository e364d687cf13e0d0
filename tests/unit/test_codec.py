"""Tests for odradek.protocol (compiled codec vs. reference walker, headers, errors)."""
import glob
import random
import struct

import pytest

from odradek.protocol import (
    ApiKey,
    DecodeError,
    EncodeError,
    ErrorCode,
    ERROR_INFO,
    UnsupportedVersionError,
    codec,
    decode_request,
    decode_request_header,
    decode_response,
    decode_struct,
    encode_request,
    encode_response,
    encode_struct,
    has_api,
    request_versions,
)
from odradek.protocol import compiler, reference
from odradek.protocol.schema_tables import MESSAGES

INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}


def _has(r, v):
    return len(r) == 2 and r[0] <= v <= r[1]


def sample_value(fields, version, flexible, rnd, depth=0):
    """Deterministic random value for a struct (absent fields hold their default)."""
    out = {}
    for f in fields:
        name, ftype, vers, nullable, tagged, _tag, _default, _flex, sub = f
        if not _has(vers, version):
            out[name] = reference.default_of(f)
            continue
        if flexible and _has(tagged, version) and rnd.random() < 0.4:
            out[name] = reference.default_of(f)
            continue
        out[name] = sample_field(f, version, flexible, rnd, depth)
    return out


def sample_scalar(ftype, rnd):
    if ftype in INT_RANGES:
        lo, hi = INT_RANGES[ftype]
        return rnd.choice([lo, hi, 0, -1 if lo < 0 else 1, rnd.randint(lo, hi)])
    if ftype == "float64":
        return rnd.choice([0.0, 1.5, -2.25e10, rnd.random()])
    if ftype == "bool":
        return rnd.random() < 0.5
    if ftype == "uuid":
        return bytes(rnd.getrandbits(8) for _ in range(16))
    if ftype == "string":
        n = rnd.choice([0, 1, 5, 20, 200])
        return "".join(rnd.choice("abcXYZ09-_.é€") for _ in range(n))
    if ftype in ("bytes", "records"):
        n = rnd.choice([0, 3, 130])
        return bytes(rnd.getrandbits(8) for _ in range(n))
    raise AssertionError(ftype)


def sample_field(f, version, flexible, rnd, depth):
    name, ftype, vers, nullable, tagged, _tag, _default, _flex, sub = f
    if _has(nullable, version) and rnd.random() < 0.25:
        return None
    if ftype.startswith("[]"):
        n = rnd.randint(0, 2) if depth < 4 else 0
        if sub is not None:
            return [sample_value(sub, version, flexible, rnd, depth + 1) for _ in range(n)]
        return [sample_scalar(ftype[2:], rnd) for _ in range(n)]
    if sub is not None:
        return sample_value(sub, version, flexible, rnd, depth + 1)
    return sample_scalar(ftype, rnd)


def norm(x):
    if isinstance(x, memoryview):
        return bytes(x)
    if isinstance(x, dict):
        return {k: norm(v) for k, v in x.items()}
    if isinstance(x, list):
        return [norm(v) for v in x]
    return x


ALL_CASES = [
    (name, v)
    for name, m in MESSAGES.items()
    for v in range(m[2][0], m[2][1] + 1)
]


@pytest.mark.parametrize("name,version", ALL_CASES, ids=[f"{n}-v{v}" for n, v in ALL_CASES])
def test_roundtrip_and_parity(name, version):
    m = MESSAGES[name]
    flexible = m[3] is not None and version >= m[3]
    enc = codec.get_encoder(name, version)
    dec = codec.get_decoder(name, version)
    for seed in range(6):
        rnd = random.Random(f"{name}/{version}/{seed}")
        value = sample_value(m[4], version, flexible, rnd)
        chunks = []
        enc(value, chunks)
        data = b"".join(chunks)
        ref_data = reference.encode(name, version, value)
        assert data == ref_data, f"encoder parity failure for {name} v{version} seed {seed}"
        got, pos = dec(memoryview(data), 0)
        assert pos == len(data)
        assert norm(got) == value
        ref_got, ref_pos = reference.decode(name, version, data)
        assert ref_pos == len(data)
        assert norm(ref_got) == value
        # public struct API gives the same bytes
        assert encode_struct(name, version, value) == data
        assert norm(decode_struct(name, version, data)) == value


@pytest.mark.parametrize("name,version", ALL_CASES, ids=[f"{n}-v{v}" for n, v in ALL_CASES])
def test_empty_value_decodes_to_defaults(name, version):
    m = MESSAGES[name]
    data = encode_struct(name, version, {})
    assert data == reference.encode(name, version, {})
    got = decode_struct(name, version, data)
    expected = {f[0]: reference.default_of(f) for f in m[4]}
    assert norm(got) == expected


def test_api_roundtrip_via_frames():
    rnd = random.Random(7)
    for name, m in MESSAGES.items():
        if m[1] != "request":
            continue
        key = m[0]
        resp = name[: -len("Request")] + "Response"
        for v in range(m[2][0], m[2][1] + 1):
            flexible = m[3] is not None and v >= m[3]
            body = sample_value(m[4], v, flexible, rnd)
            frame = encode_request(key, v, 1234, "cli", body)
            assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
            hdr, off = decode_request_header(frame[4:])
            assert hdr["request_api_key"] == key
            assert hdr["request_api_version"] == v
            assert hdr["correlation_id"] == 1234
            assert hdr["client_id"] == ("cli" if not (key == 7 and v == 0) else "")
            assert norm(decode_request(key, v, frame[4:], off)) == body
            rm = MESSAGES[resp]
            rflex = rm[3] is not None and v >= rm[3]
            rbody = sample_value(rm[4], v, rflex, rnd)
            rframe = encode_response(key, v, 99, rbody)
            assert struct.unpack(">i", rframe[:4])[0] == len(rframe) - 4
            corr, got = decode_response(key, v, rframe[4:])
            assert corr == 99
            assert norm(got) == rbody


# ---------------------------------------------------------------- headers
def test_api_versions_v3_response_uses_header_v0():
    body = {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 0, "max_version": 11}],
            "throttle_time_ms": 0}
    frame = encode_response(18, 3, 7, body)
    # size, correlation id, then directly the body (error_code int16) -- no tag byte
    assert frame[4:8] == b"\x00\x00\x00\x07"
    assert frame[8:10] == b"\x00\x00"          # error_code
    assert frame[10:11] == b"\x02"             # compact array of 1
    assert frame[11:17] == b"\x00\x00\x00\x00\x00\x0b"
    assert frame[17:18] == b"\x00"             # element tags
    assert frame[18:22] == b"\x00\x00\x00\x00"  # throttle
    assert frame[22:] == b"\x00"               # body tags
    assert codec.response_header_version(18, 3) == 0
    assert codec.response_header_version(3, 9) == 1
    corr, got = decode_response(18, 3, frame[4:])
    assert corr == 7 and got["api_keys"][0]["max_version"] == 11


def test_produce_v9_request_header_v2_noncompact_client_id():
    frame = encode_request(0, 9, 5, "abc", {"acks": -1, "timeout_ms": 1000, "topic_data": []})
    assert codec.request_header_version(0, 9) == 2
    assert frame[4:14] == b"\x00\x00\x00\x09\x00\x00\x00\x05\x00\x03"
    assert frame[14:17] == b"abc"
    assert frame[17:18] == b"\x00"  # header tagged fields
    hdr, off = decode_request_header(frame[4:])
    assert hdr == {"request_api_key": 0, "request_api_version": 9, "correlation_id": 5,
                   "client_id": "abc"}
    assert off == 14
    # body: transactional_id null (compact 0), acks, timeout, empty array, tags
    assert frame[18:] == b"\x00" + b"\xff\xff" + b"\x00\x00\x03\xe8" + b"\x01" + b"\x00"
    req = decode_request(0, 9, frame[4:], off)
    assert req["transactional_id"] is None and req["acks"] == -1 and req["timeout_ms"] == 1000


def test_null_client_id_and_header_v0():
    frame = encode_request(3, 1, 1, None, {"topics": None})
    hdr, off = decode_request_header(frame[4:])
    assert hdr["client_id"] is None
    assert codec.request_header_version(7, 0) == 0
    frame = encode_request(7, 0, 3, "x", {"broker_id": 4})
    assert frame == b"\x00\x00\x00\x0c" + b"\x00\x07\x00\x00\x00\x00\x00\x03" + b"\x00\x00\x00\x04"
    hdr, off = decode_request_header(frame[4:])
    assert off == 8 and hdr["correlation_id"] == 3
    assert decode_request(7, 0, frame[4:], off)["broker_id"] == 4


def test_hand_written_api_versions_v0_request():
    raw = (b"\x00\x12"          # api key 18
           b"\x00\x00"          # version 0
           b"\x00\x00\x00\x2a"  # correlation id 42
           b"\x00\x04kcat")     # client id
    hdr, off = decode_request_header(raw)
    assert hdr == {"request_api_key": 18, "request_api_version": 0, "correlation_id": 42,
                   "client_id": "kcat"}
    assert off == len(raw)
    body = decode_request(18, 0, raw, off)
    # v3+ fields get their defaults
    assert body == {"client_software_name": "", "client_software_version": ""}
    assert encode_request(18, 0, 42, "kcat", {}) == struct.pack(">i", len(raw)) + raw


def test_hand_written_metadata_v0_response():
    body = {
        "brokers": [{"node_id": 1, "host": "h", "port": 9092}],
        "topics": [{"error_code": 0, "name": "t",
                    "partitions": [{"error_code": 0, "partition_index": 0, "leader_id": 1,
                                    "replica_nodes": [1], "isr_nodes": [1]}]}],
    }
    expected_body = (
        b"\x00\x00\x00\x01"                          # brokers: 1
        b"\x00\x00\x00\x01" b"\x00\x01h" b"\x00\x00\x23\x84"
        b"\x00\x00\x00\x01"                          # topics: 1
        b"\x00\x00" b"\x00\x01t"
        b"\x00\x00\x00\x01"                          # partitions: 1
        b"\x00\x00" b"\x00\x00\x00\x00" b"\x00\x00\x00\x01"
        b"\x00\x00\x00\x01\x00\x00\x00\x01"          # replicas [1]
        b"\x00\x00\x00\x01\x00\x00\x00\x01"          # isr [1]
    )
    frame = encode_response(3, 0, 17, body)
    assert frame == struct.pack(">ii", 4 + len(expected_body), 17) + expected_body
    corr, got = decode_response(3, 0, frame[4:])
    assert corr == 17
    assert got["brokers"][0] == {"node_id": 1, "host": "h", "port": 9092, "rack": None}
    assert got["controller_id"] == -1 and got["cluster_id"] is None
    assert got["topics"][0]["partitions"][0]["leader_epoch"] == -1
    assert got["topics"][0]["topic_id"] == bytes(16)


# ---------------------------------------------------------------- tagged fields
def test_default_tagged_fields_not_emitted():
    base = {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}
    plain = encode_response(18, 3, 1, base)
    explicit = encode_response(18, 3, 1, dict(base, supported_features=[],
                                               finalized_features_epoch=-1,
                                               finalized_features=[], zk_migration_ready=False))
    assert plain == explicit
    assert plain.endswith(b"\x00\x00\x00\x00\x00")  # throttle + empty tag section
    tagged = encode_response(18, 3, 1, dict(base, finalized_features_epoch=5))
    # 1 tag: tag=1, size=8, int64 5
    assert tagged.endswith(b"\x01\x01\x08" + struct.pack(">q", 5))
    corr, got = decode_response(18, 3, tagged[4:])
    assert got["finalized_features_epoch"] == 5
    assert got["zk_migration_ready"] is False and got["supported_features"] == []
    # tags written in ascending order
    two = encode_response(18, 3, 1, dict(base, zk_migration_ready=True, finalized_features_epoch=5))
    assert two.endswith(b"\x02\x01\x08" + struct.pack(">q", 5) + b"\x03\x01\x01")


def test_default_tagged_struct_not_emitted():
    # ProduceResponse v10: current_leader is a tagged struct (default leader -1/-1)
    part = {"index": 0, "error_code": 0, "base_offset": 0}
    a = encode_response(0, 10, 1, {"responses": [{"name": "t", "partition_responses": [part]}]})
    b = encode_response(0, 10, 1, {"responses": [{"name": "t", "partition_responses": [
        dict(part, current_leader={"leader_id": -1, "leader_epoch": -1})]}]})
    assert a == b
    c = encode_response(0, 10, 1, {"responses": [{"name": "t", "partition_responses": [
        dict(part, current_leader={"leader_id": 3, "leader_epoch": 7})]}]})
    assert len(c) > len(a)
    _, got = decode_response(0, 10, c[4:])
    assert got["responses"][0]["partition_responses"][0]["current_leader"] == {
        "leader_id": 3, "leader_epoch": 7}


def test_unknown_tags_skipped():
    # ApiVersions v3 request with an unknown tag 9 in the body
    body = encode_struct("ApiVersionsRequest", 3, {"client_software_name": "a",
                                                   "client_software_version": "b"})
    assert body.endswith(b"\x00")
    body = body[:-1] + b"\x01\x09\x03xyz"
    got = decode_struct("ApiVersionsRequest", 3, body)
    assert got == {"client_software_name": "a", "client_software_version": "b"}


# ---------------------------------------------------------------- records
def test_records_memoryview_and_chunks():
    recs = bytes(range(256)) * 4
    body = {"acks": 1, "timeout_ms": 5, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": [recs[:100], memoryview(recs[100:])]}]}]}
    frame = encode_request(0, 9, 1, "c", body)
    same = encode_request(0, 9, 1, "c", {"acks": 1, "timeout_ms": 5, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": bytearray(recs)}]}]})
    assert frame == same
    hdr, off = decode_request_header(frame[4:])
    req = decode_request(0, 9, frame[4:], off)
    r = req["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(r, memoryview) and bytes(r) == recs
    # non-flexible version (int32 length)
    frame = encode_request(0, 3, 1, "c", body)
    hdr, off = decode_request_header(frame[4:])
    assert bytes(decode_request(0, 3, frame[4:], off)["topic_data"][0]["partition_data"][0]["records"]) == recs


def test_decode_fills_all_versions_fields():
    frame = encode_request(1, 4, 1, "c", {"max_wait_ms": 5, "isolation_level": 1, "topics": []})
    hdr, off = decode_request_header(frame[4:])
    req = decode_request(1, 4, frame[4:], off)
    assert req["isolation_level"] == 1
    assert req["session_epoch"] == -1          # v7+ field, default -1
    assert req["rack_id"] == ""                 # v11+
    assert req["replica_state"] == {"replica_id": -1, "replica_epoch": -1}  # tagged struct v15+
    assert "forgotten_topics_data" in req


def test_produce_versions_merged():
    assert request_versions(0) == (0, 13)
    assert request_versions(1) == (0, 18)
    assert has_api(0) and not has_api(999)
    # v13 uses topic_id instead of name
    body = {"acks": 1, "timeout_ms": 1, "topic_data": [{"topic_id": b"\x01" * 16, "partition_data": []}]}
    frame = encode_request(0, 13, 1, "c", body)
    hdr, off = decode_request_header(frame[4:])
    req = decode_request(0, 13, frame[4:], off)
    assert req["topic_data"][0]["topic_id"] == b"\x01" * 16
    assert req["topic_data"][0]["name"] == ""


# ---------------------------------------------------------------- errors
def test_truncated_input_raises_decode_error():
    rnd = random.Random(3)
    checked = 0
    for key, v in [(0, 3), (0, 9), (1, 12), (1, 4), (3, 12), (18, 3), (11, 9), (2, 9)]:
        for kind in ("request", "response"):
            name = compiler.message_name(key, kind, v)
            m = MESSAGES[name]
            flexible = m[3] is not None and v >= m[3]
            for seed in range(3):
                value = sample_value(m[4], v, flexible, rnd)
                data = encode_struct(name, v, value)
                for cut in range(len(data)):
                    with pytest.raises(DecodeError):
                        decode_struct(name, v, data[:cut])
                    checked += 1
    assert checked > 100


def test_truncated_frames():
    frame = encode_request(3, 12, 1, "client", {"topics": [{"name": "x"}]})[4:]
    for cut in range(len(frame)):
        with pytest.raises(DecodeError):
            hdr, off = decode_request_header(frame[:cut])
            decode_request(3, 12, frame[:cut], off)
    rframe = encode_response(1, 12, 1, {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "records": b"x" * 50}]}]})[4:]
    for cut in range(len(rframe)):
        with pytest.raises(DecodeError):
            decode_response(1, 12, rframe[:cut])


def test_garbage_raises_decode_error():
    rnd = random.Random(11)
    for _ in range(300):
        data = bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 60)))
        for key, v in [(0, 9), (3, 12), (1, 12), (18, 3), (0, 3)]:
            try:
                decode_request(key, v, data, 0)
            except DecodeError:
                pass


def test_unknown_api_key_and_version():
    with pytest.raises(UnsupportedVersionError) as ei:
        decode_request(999, 0, b"", 0)
    assert ei.value.api_key == 999
    with pytest.raises(UnsupportedVersionError) as ei:
        decode_request(18, 99, b"", 0)
    assert ei.value.api_version == 99
    with pytest.raises(UnsupportedVersionError):
        encode_response(999, 0, 1, {})
    with pytest.raises(UnsupportedVersionError):
        request_versions(999)
    # header decoding still works for unknown versions (read as header v1)
    raw = struct.pack(">hhih", 18, 99, 5, 2) + b"ab" + b"\x01\x02"
    hdr, off = decode_request_header(raw)
    assert hdr == {"request_api_key": 18, "request_api_version": 99, "correlation_id": 5,
                   "client_id": "ab"}
    assert off == 10 + 2
    raw = struct.pack(">hhih", 1234, 0, 5, -1)
    hdr, off = decode_request_header(raw)
    assert hdr["client_id"] is None and off == 10


def test_encode_errors():
    with pytest.raises(EncodeError):
        encode_response(3, 0, 1, {"brokers": [{"host": None}]})
    with pytest.raises(EncodeError):
        encode_response(3, 0, 1, {"brokers": [{"node_id": "x"}]})


def test_enums():
    assert ApiKey.PRODUCE == 0 and ApiKey.FETCH == 1 and ApiKey.LIST_OFFSETS == 2
    assert ApiKey.METADATA == 3 and ApiKey.API_VERSIONS == 18
    assert ApiKey.DESCRIBE_TOPIC_PARTITIONS == 75
    assert ErrorCode.NONE == 0 and ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.OFFSET_OUT_OF_RANGE == 1 and ErrorCode.CORRUPT_MESSAGE == 2
    assert ErrorCode.UNSUPPORTED_VERSION == 35
    assert max(ErrorCode) == 133
    assert ERROR_INFO[2][0] is True and ERROR_INFO[1][0] is False
    assert ERROR_INFO[1][1].startswith("The requested offset")


def test_compiled_pseudo_filename():
    fn = codec.get_decoder("ProduceRequest", 9)
    assert fn.__code__.co_filename == "<odradek codec ProduceRequest v9 decode>"


def test_import_is_lazy_and_fast():
    import os
    import subprocess
    import sys
    code = ("import time, sys; t = time.perf_counter(); import odradek.protocol; "
            "dt = time.perf_counter() - t; "
            "assert 'odradek.protocol.schema_tables' not in sys.modules; print(dt)")
    env = dict(os.environ)
    src = os.path.join(os.path.dirname(__file__), "..", "..", "src")
    env["PYTHONPATH"] = os.path.abspath(src) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) < 0.5  # generous; typically ~3 ms with bytecode, ~15 ms without


def _reference_dir() -> str:
    import os
    return os.environ.get("ODRADEK_REFERENCE_DIR") or os.path.expanduser("~/.cache/odradek/reference")


def test_generated_tables_up_to_date(tmp_path):
    """Regenerate from the shared facts (when available) and compare with the checked-in files."""
    import importlib.util
    import os
    src = "/work/shared/kafka-protocol"
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    tool = os.path.join(root, "tools", "gen_schema.py")
    if not os.path.isdir(src) or not os.path.exists(tool):
        pytest.skip("shared protocol facts not available")
    spec = importlib.util.spec_from_file_location("gen_schema", tool)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # ConsumerGroupHeartbeat/Describe's 4.x forms come from Kafka's client jar (make reference)
    jars = sorted(glob.glob(os.path.join(_reference_dir(), "kafka-*", "libs", "kafka-clients-*.jar")))
    if not jars:
        pytest.skip("Apache Kafka's client jar not installed (make reference)")
    mod.main(["--src", src, "--out", str(tmp_path), "--jar", jars[-1]])
    pkg = os.path.join(root, "src", "odradek", "protocol")
    for fn in ("schema_tables.py", "api_keys.py", "errors.py"):
        with open(os.path.join(pkg, fn), encoding="utf-8") as a, \
                open(tmp_path / fn, encoding="utf-8") as b:
            assert a.read() == b.read(), f"{fn} is stale: run tools/gen_schema.py"
