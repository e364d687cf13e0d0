"""Inputs that bench/fuzz/fuzz.py found raising something other than our own errors, kept as tests."""

from __future__ import annotations

import base64
import json
import resource
import struct

import cramjam
import jwt
import pytest
from crc32c import crc32c
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from odradek.broker.handlers import k00_produce
from odradek.config import BrokerConfig
from odradek.net.sasl import AuthenticationFailed, JwtValidator, OAuthBearerMechanism
from odradek.records import legacy
from odradek.records.batch import HEADER, HEADER_SIZE, InvalidRecordError
from odradek.records.codec import Record, build_batch, decode_batch, encode_varint, validate_produced

CLAIMS = {"sub": "svc", "exp": 4102444800}
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _b64url(value: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def oauthbearer(tmp_path_factory):
    """An OAUTHBEARER mechanism whose JWKS holds an RSA key (kid rsa1) and a P-256 EC key (kid ec1)."""
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps({"keys": [
        {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key())), "kid": "rsa1"},
        {**json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ec_key.public_key())), "kid": "ec1"},
    ]}))
    validator = JwtValidator(BrokerConfig({"sasl.oauthbearer.jwks.endpoint.url": path.as_uri()}), "SASL_PLAINTEXT")
    return (lambda: OAuthBearerMechanism(validator)), rsa_key, ec_key


def _message(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


@pytest.mark.parametrize("alg, kid", [
    ("ES256", "rsa1"),  # an EC algorithm for an RSA key: PyJWT's key check raised TypeError
    ("RS256", "ec1"),  # and the other way round
    ("ES512", "ec1"),  # an EC algorithm of another curve: InvalidKeyError, not an InvalidTokenError
])
def test_a_token_whose_algorithm_does_not_fit_its_key_is_refused(oauthbearer, alg, kid):
    mechanism, _, _ = oauthbearer
    token = f"{_b64url({'alg': alg, 'kid': kid, 'typ': 'JWT'})}.{_b64url(CLAIMS)}.{'A' * 86}"
    with pytest.raises(AuthenticationFailed, match="invalid token"):
        mechanism().step(_message(token))


@pytest.mark.parametrize("alg, kid", [("RS256", "rsa1"), ("PS512", "rsa1"), ("ES256", "ec1")])
def test_tokens_that_fit_their_key_still_pass(oauthbearer, alg, kid):
    mechanism, rsa_key, ec_key = oauthbearer
    token = jwt.encode(CLAIMS, ec_key if kid == "ec1" else rsa_key, algorithm=alg, headers={"kid": kid})
    server = mechanism()
    assert server.step(_message(token)) == b"" and server.complete and server.user == "svc"


def test_a_signed_token_expiring_past_any_float_is_refused(oauthbearer):
    mechanism, _, ec_key = oauthbearer
    header = _b64url({"alg": "ES256", "kid": "ec1", "typ": "JWT"})
    payload = base64.urlsafe_b64encode(b'{"sub": "svc", "exp": 1' + b"0" * 400 + b"}").rstrip(b"=").decode()
    es256 = jwt.algorithms.ECAlgorithm(jwt.algorithms.ECAlgorithm.SHA256)
    signature = es256.sign(f"{header}.{payload}".encode(), ec_key)
    token = f"{header}.{payload}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"
    with pytest.raises(AuthenticationFailed, match="exp claim"):  # was OverflowError
        mechanism().step(_message(token))


def test_timestamps_a_long_apart_decode_and_down_convert():
    """A batch whose timestamp delta does not fit a long: base + delta wraps as in Java, where it was a
    timestamp past int64 that down-conversion (Fetch v0-3) could not write (struct.error)."""
    batch = build_batch([(b"k", b"first", [], INT64_MAX), (b"k", b"second", [], INT64_MIN)])
    validate_produced(batch)
    _, records = decode_batch(batch)
    assert [r.timestamp for r in records] == [INT64_MAX, INT64_MIN]
    assert legacy.downconvert(batch, 1).count(b"second") == 1


def test_legacy_timestamps_a_long_apart_survive_up_conversion():
    out = bytearray()
    for offset, timestamp in enumerate((INT64_MIN, INT64_MAX)):
        legacy._encode_message(out, 1, Record(offset, timestamp, None, b"v", []), False)
    batch = legacy.upconvert(out, now_ms=0)
    _, records = decode_batch(batch)
    assert [r.timestamp for r in records] == [INT64_MIN, INT64_MAX]
    assert len(legacy.downconvert(batch, 1)) == len(out)


def _with_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
    return bytes(batch)


@pytest.mark.parametrize("field, value", [
    (4, 0x03),  # key length -2 (the record: length, attributes, timestamp delta, offset delta, key length...)
    (4, 0x7E),  # key length 63, past the record
    (8, 0x01),  # header count -1
])
def test_a_record_whose_fields_decode_refuses_is_refused_by_produce(field, value):
    """The Produce check read only each record's length, so it took records whose fields decode_batch (and
    with it ListOffsets by timestamp and Fetch v0-3 down-conversion) then refused; 44% of what the fuzzer
    got accepted. More cases in test_produce_validation.py."""
    batch = bytearray(build_batch([(b"k", b"v", [], 1000)]))
    assert batch[HEADER_SIZE + field] == {4: 0x02, 8: 0x00}[field]
    batch[HEADER_SIZE + field] = value
    checked = k00_produce._check_or_error(memoryview(bytearray(_with_crc(batch))), 9, 1048588)
    assert isinstance(checked, InvalidRecordError) and checked.error_code == 2  # CORRUPT_MESSAGE
    with pytest.raises(InvalidRecordError):
        decode_batch(_with_crc(batch))


def test_a_16_kib_zstd_bomb_is_refused_without_decompressing_it():
    """A compressed batch was decompressed whole to be checked: zstd packs zeros about 32,000:1, so 16 KiB
    took 1 GiB. Now it decompresses into at most max(64 x its size, max.message.bytes)."""
    value = 256 << 20
    fields = b"\x00\x00\x00\x01" + _varint(value)
    compressor = cramjam.zstd.Compressor(level=3)
    compressor.compress(_varint(len(fields) + value + 1) + fields)
    for _ in range(value >> 24):
        compressor.compress(bytes(1 << 24))
    compressor.compress(b"\x00")  # no headers
    batch = bytearray(HEADER_SIZE) + bytes(compressor.finish())
    HEADER.pack_into(batch, 0, 0, len(batch) - 12, -1, 2, 0, 4, 0, 1000, 1000, -1, -1, -1, 1)
    assert len(batch) < 16 << 10
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    checked = k00_produce._check_or_error(memoryview(bytearray(_with_crc(batch))), 9, 1048588)
    assert isinstance(checked, InvalidRecordError) and checked.error_code == 10  # MESSAGE_TOO_LARGE
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 32 << 10  # KiB


def _varint(n: int) -> bytes:
    out = bytearray()
    encode_varint(n, out)
    return bytes(out)
