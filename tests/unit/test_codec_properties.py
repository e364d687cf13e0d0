"""Property tests (hypothesis) of the I/O-free parts that read what clients send: the request codec, for every
request of every version in the schema tables, and the SASL mechanisms.

- decode(encode(x)) == x for requests built from the schema (every field of that version, tagged ones too);
- any byte string given to the request decoder or to a SASL mechanism raises our own error, or nothing:
  never an IndexError, a struct.error or a crash.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.net.sasl import AuthenticationFailed, PlainMechanism, ScramCredential, ScramMechanism
from odradek.protocol import codec
from odradek.protocol.schema_tables import MAXV, MESSAGES

INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
QUICK = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def _in(versions: tuple, version: int) -> bool:
    return bool(versions) and versions[0] <= version <= (versions[1] if versions[1] != MAXV else 1 << 15)


def _scalar(kind: str) -> st.SearchStrategy:
    if kind in INTS:
        bits = INTS[kind]
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return {
        "uint16": st.integers(0, 0xFFFF),
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "string": st.text(max_size=12),
        "bytes": st.binary(max_size=24),
        "records": st.binary(max_size=24),
        "uuid": st.binary(min_size=16, max_size=16),
    }[kind]


def _value(field: tuple, version: int) -> st.SearchStrategy:
    name, kind, _, nullable, _, _, _, _, sub = field
    if kind.startswith("[]"):
        element = _struct(sub, version) if sub else _scalar(kind[2:])
        strategy = st.lists(element, max_size=3)
    elif sub:
        strategy = _struct(sub, version)
    else:
        strategy = _scalar(kind)
    return st.one_of(st.none(), strategy) if _in(nullable, version) else strategy


def _struct(fields: tuple, version: int) -> st.SearchStrategy:
    return st.fixed_dictionaries({f[0]: _value(f, version) for f in fields if _in(f[2], version)})


def _comparable(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items()}
    return value


def _project(decoded, generated):
    """The decoded value restricted to what was generated (a decoder may add the other versions' defaults)."""
    if isinstance(generated, dict) and isinstance(decoded, dict):
        return {k: _project(decoded.get(k), v) for k, v in generated.items()}
    if isinstance(generated, list) and isinstance(decoded, list):
        return [_project(d, g) for d, g in zip(decoded, generated)] + decoded[len(generated):]
    return _comparable(decoded)


REQUESTS = [(name, api_key, version) for name, (api_key, kind, (lo, hi), _, _) in sorted(MESSAGES.items())
            if kind == "request" and api_key is not None and codec.has_api(api_key)
            for version in range(lo, min(hi, codec.request_versions(api_key)[1]) + 1)]


@pytest.mark.parametrize("name, api_key, version", REQUESTS, ids=[f"{n}-v{v}" for n, _, v in REQUESTS])
def test_requests_survive_a_round_trip(name, api_key, version):
    fields = MESSAGES[name][4]

    @QUICK
    @given(_struct(fields, version))
    def round_trip(body: dict) -> None:
        frame = codec.encode_request(api_key, version, 7, "client", body)
        header, offset = codec.decode_request_header(memoryview(frame)[4:])
        assert (header["request_api_key"], header["request_api_version"]) == (api_key, version)
        decoded = codec.decode_request(api_key, version, memoryview(frame)[4:], offset)
        assert _project(decoded, _comparable(body)) == _comparable(body)

    round_trip()


API_MAX = sorted({(api_key, codec.request_versions(api_key)[1]) for _, api_key, _ in REQUESTS})


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.sampled_from(API_MAX), st.binary(max_size=64))
def test_any_bytes_give_a_request_or_a_protocol_error(api, data):
    api_key, version = api
    try:
        codec.decode_request(api_key, version, data, 0)
    except codec.ProtocolError:
        pass


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.binary(max_size=80))
def test_any_bytes_give_a_request_header_or_a_protocol_error(data):
    try:
        codec.decode_request_header(data)
    except codec.ProtocolError:
        pass


CREDENTIAL = ScramCredential.from_password("SCRAM-SHA-256", "pw", 4096, b"salt")


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.binary(max_size=64), min_size=1, max_size=3), st.sampled_from(["PLAIN", "SCRAM-SHA-256"]))
def test_any_sasl_tokens_authenticate_or_fail_cleanly(tokens, mechanism):
    server = PlainMechanism({"u": "pw"}) if mechanism == "PLAIN" else \
        ScramMechanism("SCRAM-SHA-256", lambda user, _: CREDENTIAL if user == "u" else None)
    for token in tokens:
        try:
            server.step(token)
        except AuthenticationFailed:
            return
