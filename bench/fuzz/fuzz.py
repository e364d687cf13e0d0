"""Coverage-guided fuzzing (atheris/libFuzzer) of the code that reads what clients send: run on demand.

    .venv/bin/python bench/fuzz/fuzz.py --target request -runs=1000000 -timeout=10 -rss_limit_mb=2048

Targets (README.md beside this file says more):

- ``request``: a request frame (no size prefix) through ``codec.decode_request_header`` then
  ``codec.decode_request``, as net/connection.py does. Allowed: ``ProtocolError`` and its subclasses.
  Oracle: the decoded arrays hold no more elements in all than the frame has bytes (a declared length is
  never believed beyond the buffer).
- ``records``: a produced record set through ``k00_produce._check_or_error`` (legacy detection and
  up-conversion, ``validate_produced``: headers, CRCs, record framing, decompression), with the Produce
  version and the topic's max.message.bytes taken from the first two bytes. It returns, never raises,
  ``InvalidRecordError``. What it accepts is then read as the broker reads stored data: ``decode_batch``
  (ListOffsets by timestamp) and ``legacy.downconvert`` (Fetch v0-3), where ``InvalidRecordError`` is allowed.
- ``sasl``: a ``SaslSession`` of a listener offering PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER (a JWKS
  file with an RSA and an EC key), driven by a script of handshakes and tokens, gated as the broker gates
  them (k17, k36, raw v0 tokens). Allowed: ``AuthenticationFailed``. Oracles: a refused login leaves the
  session FAILED; a session that authenticates has the principal of a real credential (never one the
  input made up, unless the harness signed its token).

Input layouts (what the seeds are written in):

- request: the frame itself.
- records: ``version_byte, options_byte, record set``; version = byte % 12, options bits 0-1 choose
  max.message.bytes, bit 2 passes bytes instead of a writable memoryview of the frame, bit 3 has the
  harness set the CRCs right first (else nearly every mutation stops at the CRC check), bit 4 too after
  compressing the body of each v2 batch with its codec (the fuzzer then mutates records, not compressed
  bytes), bit 7 down-converts what is accepted to magic 1 instead of 0.
- sasl: a list of steps. A byte < 0x80 is a handshake: mechanism ``MECHANISMS[(b & 0x3F) % 6]``, v0
  (raw tokens) when bit 6 is set. A byte >= 0x80 is a token of the next ``u16`` bytes (cut at the input's end); with
  bit 6 set the token is ``header JSON \\0 payload JSON \\0 signature`` made into an OAUTHBEARER message
  with a JWT (base64url done here, so the fuzzer works on the JSON); with bits 6 and 5 the harness signs it
  (ES256, the listener's EC key), so the claims checks after the signature are reached as well.

Not thread-safe, one process: libFuzzer runs one input at a time. The corpus goes to bench/fuzz/.corpus/,
crashes to bench/fuzz/.crashes/ (both ignored by git); seeds are written afresh at every start.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import logging
import os
import struct
import sys
import types
import zlib
from pathlib import Path

import atheris
from crc32c import crc32c
# before the RegEx hook below, which fails on cryptography's bytes patterns
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

HERE = Path(__file__).resolve().parent
CORPUS = HERE / ".corpus"
CRASHES = HERE / ".crashes"
TARGETS = ("request", "records", "sasl")

atheris.enabled_hooks.add("RegEx")
atheris.enabled_hooks.add("str")

with atheris.instrument_imports(include=["odradek", "jwt"]):  # PyJWT reads the OAUTHBEARER tokens
    import jwt
    from odradek.broker.handlers import k00_produce
    from odradek.net import sasl
    from odradek.protocol import codec, compiler
    from odradek.records import compression, legacy
    from odradek.records.batch import InvalidRecordError
    from odradek.records.codec import Record, build_batch, build_control_batch, decode_batch

logging.disable(logging.CRITICAL)  # a failed login logs a warning per input otherwise


def _write_seeds(directory: Path, seeds: list[bytes]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        (directory / hashlib.sha1(seed).hexdigest()).write_bytes(seed)


def _write_dict(path: Path, tokens: list[bytes]) -> None:
    lines = ['"' + "".join(f"\\x{b:02x}" for b in t) + '"' for t in tokens]
    path.write_text("\n".join(lines) + "\n")


# =========================================================================================== request

REQUESTS = sorted({(api_key, version) for api_key, kind, (lo, hi), _, _ in compiler.load_tables().values()
                   if kind == "request" and api_key is not None and codec.has_api(api_key)
                   for version in range(lo, min(hi, codec.request_versions(api_key)[1]) + 1)})


def _instrument_codec() -> None:
    """Compile every request decoder now and instrument the generated functions (made by ``compile()``, so
    ``instrument_imports`` never sees them): coverage then follows the fields, not only the wrapper."""
    for api_key, version in REQUESTS:
        compiler.compiled_api(compiler.request_decoders, api_key, version, "request", "decode")
    seen: set[int] = set()
    for fn in list(compiler.compiled.values()):
        ns = fn.__globals__
        if id(ns) in seen:
            continue
        seen.add(id(ns))
        for value in list(ns.values()):
            if isinstance(value, types.FunctionType) and value.__code__.co_filename.startswith("<odradek codec"):
                atheris.instrument_func(value)


def _filled(fields: tuple, version: int) -> dict:
    """A value for every field present at ``version``, tagged ones too; arrays get two elements."""
    scalars = {"int8": 1, "int16": 1, "uint16": 1, "int32": 1, "uint32": 1, "int64": 1, "float64": 1.5,
               "bool": True, "string": "x", "bytes": b"ab", "uuid": bytes(range(16))}
    body = {}
    for f in fields:
        name, kind, versions, _, _, _, _, _, sub = f
        if not compiler.in_versions(versions, version):
            continue
        if kind.startswith("[]"):
            elem = kind[2:]
            one = _filled(sub, version) if sub else scalars[elem]
            body[name] = [one, one]
        elif sub:
            body[name] = _filled(sub, version)
        elif kind == "records":
            body[name] = build_batch([(b"k", b"v", [("h", b"1")], 1000)])
        else:
            body[name] = scalars[kind]
    return body


def request_seeds() -> list[bytes]:
    tables = compiler.load_tables()
    seeds = []
    for api_key, version in REQUESTS:
        name = compiler.message_name(api_key, "request", version)
        for body in ({}, _filled(tables[name][4], version)):
            seeds.append(codec.encode_request(api_key, version, 7, "fuzz", body)[4:])
    return seeds


def _elements(value) -> int:
    if isinstance(value, list):
        return len(value) + sum(_elements(v) for v in value if isinstance(v, (list, dict)))
    if isinstance(value, dict):
        return sum(_elements(v) for v in value.values() if isinstance(v, (list, dict)))
    return 0


def request_one(data: bytes) -> None:
    try:
        header, offset = codec.decode_request_header(data)
        body = codec.decode_request(header["request_api_key"], header["request_api_version"], data, offset)
    except codec.ProtocolError:
        return
    n = _elements(body)
    if n > len(data):
        raise AssertionError(f"{n} decoded array elements from a {len(data)}-byte frame")


# =========================================================================================== records

MAX_BYTES = (1048588, 4096, 200, 61)  # message.max.bytes: Kafka's default, and some small ones
STATS = {"inputs": 0, "accepted": 0, "accepted_not_decodable": 0}


def _message_set(magic: int, records: list[tuple], codec_id: int = 0) -> bytes:
    out = bytearray()
    for i, (key, value) in enumerate(records):
        legacy._encode_message(out, magic, Record(i, 1000 + i, key, value, []), False)
    if not codec_id:
        return bytes(out)
    wrapper = bytearray()
    legacy._encode_message(wrapper, magic, Record(len(records) - 1, 1000, None,
                                                  compression.compress(codec_id, bytes(out)), []), False)
    wrapper[17] |= codec_id  # attributes, then the CRC again (it covers them)
    struct.pack_into(">I", wrapper, 12, zlib.crc32(memoryview(wrapper)[16:]))
    return bytes(wrapper)


def records_seeds() -> list[bytes]:
    small = [(b"k", b"v", [], 1000)]
    many = [(None if i % 3 == 0 else b"key%d" % i, b"value" * (i % 4), [("h", b"x"), ("n", None)] if i % 2 else [],
             1000 + i) for i in range(20)]
    fixed = [(b"k%03d" % i, b"v" * 8, [], 1000) for i in range(100)]
    sets = []
    for codec_id in range(5):
        for records in (small, many, fixed):
            sets.append(build_batch(records, compression=codec_id))
        sets.append(build_batch(many, compression=codec_id, producer_id=7, producer_epoch=0, base_sequence=0,
                                transactional=True))
    sets.append(build_batch(small) + build_batch(many, compression=4))
    sets.append(build_control_batch(1, 7, 0, 3, 1000))
    sets.append(build_batch([(None, None, [], None)], timestamp_type=1))
    legacy_sets = []
    for magic in (0, 1):
        for codec_id in range(4):
            legacy_sets.append(_message_set(magic, [(b"k", b"v"), (None, b"value"), (b"key", None)], codec_id))
    seeds = [bytes((version, opt)) + s for s in sets for version in (3, 9) for opt in (0, 8)]
    seeds += [bytes((version, opt)) + s for s in legacy_sets for version in (0, 2) for opt in (0, 4, 8)]
    for codec_id in range(1, 5):  # bodies the harness compresses (options bit 4)
        for records in (small, many, fixed):
            batch = bytearray(build_batch(records))
            batch[22] |= codec_id
            seeds.append(bytes((9, 0x18)) + batch)
    return seeds


def _repaired(data: bytes, compress: bool) -> bytes:
    """``data`` with the CRC of each v2 batch and legacy message made right, so that mutations get past it;
    with ``compress``, a v2 batch with a codec has its body compressed here first (and its length fixed)."""
    out = bytearray()
    pos, total = 0, len(data)
    while total - pos >= 17:
        end = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
        if end < pos + 17 or end > total:
            break
        entry = bytearray(data[pos:end])
        if entry[16] == 2 and len(entry) >= 61:
            codec_id = entry[22] & 7
            if compress and 1 <= codec_id <= 4:
                entry[61:] = compression.compress(codec_id, bytes(entry[61:]))
                struct.pack_into(">i", entry, 8, len(entry) - 12)
            struct.pack_into(">I", entry, 17, crc32c(entry[21:]))
        elif entry[16] in (0, 1) and len(entry) >= 16:
            struct.pack_into(">I", entry, 12, zlib.crc32(entry[16:]))
        out += entry
        pos = end
    return bytes(out + data[pos:])


def records_dict() -> list[bytes]:
    return [b"\x82SNAPPY\x00", b"\x04\x22\x4d\x18", b"\x28\xb5\x2f\xfd", b"\x1f\x8b\x08", b"\xff\xff\xff\xff",
            b"\x7f\xff\xff\xff", b"\x00\x00\x00\x00", b"\x02", b"\x01"]


def records_one(data: bytes) -> None:
    STATS["inputs"] += 1
    if STATS["inputs"] % 100000 == 0:  # libFuzzer ends the process without running atexit hooks
        print(f"#records {STATS}", file=sys.stderr)
    if len(data) < 3:
        return
    version, options, rest = data[0] % 12, data[1], data[2:]
    if options & 0x18:
        rest = _repaired(rest, bool(options & 0x10))
    records = rest if options & 4 else memoryview(bytearray(rest))
    checked = k00_produce._check_or_error(records, version, MAX_BYTES[options & 3])
    if isinstance(checked, InvalidRecordError):
        return
    STATS["accepted"] += 1
    buf, batches = checked
    try:
        for pos, _ in batches:
            decode_batch(buf, pos)
        legacy.downconvert(buf, options >> 7)
    except InvalidRecordError:
        STATS["accepted_not_decodable"] += 1


# ============================================================================================== sasl

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI", "scram-sha-256")
PLAIN_USER, PLAIN_PASSWORD = "alice", "alice-secret"
SCRAM_USER, SCRAM_PASSWORD = "bob", "bob-secret"
SCRAM_SALT, SCRAM_ITERATIONS = b"odradek-fuzz-salt", 4096
SERVER_NONCE = "f" * 32
JWT_SUBJECT, JWT_AUDIENCE, JWT_ISSUER = "svc-fuzz", "odradek", "https://issuer.fuzz"
JWT_EXP = 4102444800  # 2100-01-01: the seeds' tokens stay valid
PRINCIPALS = {f"User:{PLAIN_USER}", f"User:{SCRAM_USER}", f"User:{JWT_SUBJECT}"}
SASL = {}


def _keys() -> tuple:
    """The RSA and EC signing keys, made once and kept beside the corpus (its seeds' tokens are signed)."""
    out = []
    for name, make in (("rsa", lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)),
                       ("ec", lambda: ec.generate_private_key(ec.SECP256R1()))):
        path = CORPUS / f"sasl-{name}-key.pem"
        if not path.exists():
            CORPUS.mkdir(parents=True, exist_ok=True)
            path.write_bytes(make().private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))
        out.append(serialization.load_pem_private_key(path.read_bytes(), None))
    return tuple(out)


def sasl_setup() -> None:
    from odradek.config import BrokerConfig

    rsa_key, ec_key = _keys()
    jwks = {"keys": [{**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key())), "kid": "rsa1"},
                     {**json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ec_key.public_key())), "kid": "ec1"}]}
    path = CORPUS / "sasl-jwks.json"
    path.write_text(json.dumps(jwks))
    credentials = {(SCRAM_USER, m): sasl.ScramCredential.from_password(m, SCRAM_PASSWORD, SCRAM_ITERATIONS, SCRAM_SALT)
                   for m in sasl.SCRAM_MECHANISMS}
    config = BrokerConfig({
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "plain.sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                  f'user_{PLAIN_USER}="{PLAIN_PASSWORD}";',
        "sasl.oauthbearer.jwks.endpoint.url": path.as_uri(),
        "sasl.oauthbearer.expected.audience": JWT_AUDIENCE,
        "sasl.oauthbearer.expected.issuer": JWT_ISSUER,
        "connections.max.reauth.ms": "60000",
    })
    # a fixed server nonce, so that a run is deterministic and the seeds' client-final proofs are right
    sasl.secrets = types.SimpleNamespace(token_hex=lambda n=16: SERVER_NONCE[:2 * n], token_bytes=os.urandom)
    SASL["listener"] = sasl.SaslListener.from_config(config, "SASL_PLAINTEXT",
                                                     lambda user, mechanism: credentials.get((user, mechanism)))
    SASL["keys"] = (rsa_key, ec_key)
    SASL["es256"] = jwt.algorithms.ECAlgorithm(jwt.algorithms.ECAlgorithm.SHA256)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _bearer(header: bytes, payload: bytes, signature: bytes) -> bytes:
    jwt_text = f"{_b64url(header)}.{_b64url(payload)}.{_b64url(signature)}"
    return f"n,,\x01auth=Bearer {jwt_text}\x01\x01".encode()


def _scram_final(mechanism: str, client_nonce: str, password: str) -> bytes:
    digest = sasl.SCRAM_MECHANISMS[mechanism]
    nonce = client_nonce + SERVER_NONCE
    bare = f"n={SCRAM_USER},r={client_nonce}"
    server_first = f"r={nonce},s={base64.b64encode(SCRAM_SALT).decode()},i={SCRAM_ITERATIONS}"
    without_proof = f"c=biws,r={nonce}"
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), SCRAM_SALT, SCRAM_ITERATIONS)
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    signature = hmac.new(hashlib.new(digest, client_key).digest(),
                         f"{bare},{server_first},{without_proof}".encode(), digest).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def _token(data: bytes, op: int = 0x80) -> bytes:
    return bytes((op,)) + struct.pack(">H", len(data)) + data


def sasl_seeds() -> list[bytes]:
    rsa_key, ec_key = SASL["keys"]
    claims = {"sub": JWT_SUBJECT, "aud": JWT_AUDIENCE, "iss": JWT_ISSUER, "iat": 1700000000, "exp": JWT_EXP}
    seeds = []
    for raw in (0, 0x40):
        seeds.append(bytes((0 | raw,)) + _token(f"\0{PLAIN_USER}\0{PLAIN_PASSWORD}".encode()))
        seeds.append(bytes((0 | raw,)) + _token(f"{PLAIN_USER}\0{PLAIN_USER}\0wrong".encode()))
        for index, mechanism in ((1, "SCRAM-SHA-256"), (2, "SCRAM-SHA-512")):
            first = f"n,,n={SCRAM_USER},r=clientnonce".encode()
            seeds.append(bytes((index | raw,)) + _token(first) + _token(_scram_final(mechanism, "clientnonce",
                                                                                      SCRAM_PASSWORD)))
            seeds.append(bytes((index | raw,)) + _token(first) + _token(_scram_final(mechanism, "clientnonce", "x")))
            seeds.append(bytes((index | raw,)) + _token(b"y,a=bob,n=b=2Cob,r=abc,ext=1"))
        for key, alg, kid in ((rsa_key, "RS256", "rsa1"), (ec_key, "ES256", "ec1"), (rsa_key, "PS384", "rsa1")):
            token = jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})
            seeds.append(bytes((3 | raw,)) + _token(f"n,,\x01auth=Bearer {token}\x01\x01".encode()))
            header, payload, signature = token.split(".")
            pad = lambda s: base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))  # noqa: E731
            parts = pad(header) + b"\0" + pad(payload) + b"\0" + pad(signature)
            seeds.append(bytes((3 | raw,)) + _token(parts, 0xC0))
            if kid == "ec1":
                seeds.append(bytes((3 | raw,)) + _token(parts, 0xE0))
    # re-authentication: PLAIN, then SCRAM as the other user (refused), then an unknown mechanism
    scram = _token(f"n,,n={SCRAM_USER},r=n".encode()) + _token(_scram_final("SCRAM-SHA-256", "n", SCRAM_PASSWORD))
    seeds.append(bytes((0,)) + _token(f"\0{PLAIN_USER}\0{PLAIN_PASSWORD}".encode()) + bytes((1,)) + scram)
    seeds.append(bytes((4,)) + _token(b"x"))
    return seeds


def sasl_dict() -> list[bytes]:
    words = ["n,,", "y,,", "n=", "r=", "c=biws", ",p=", "=2C", "=3D", "a=", "tokenauth=true", "\x01auth=Bearer ",
             "\x01\x01", '"alg":', '"kid":', '"RS256"', '"ES256"', '"ES384"', '"ES512"', '"PS256"', '"RS512"',
             '"rsa1"', '"ec1"', '"exp":', '"sub":', '"aud":', '"iss":', "null", "[]", "{}", SERVER_NONCE,
             PLAIN_USER, SCRAM_USER]
    return [w.encode() for w in words]


def sasl_one(data: bytes) -> None:
    session = sasl.SaslSession(SASL["listener"], "fuzz")
    i, end = 0, len(data)
    signed = False  # a token the harness signed names whom it likes
    while i < end and session.state != session.FAILED:
        op = data[i]
        i += 1
        if op < 0x80:
            raw = bool(op & 0x40)
            # k17: a handshake first, or again once authenticated (re-authentication, v1 only)
            if session.state != session.HANDSHAKE and not (session.state == session.AUTHENTICATED and not raw):
                return
            session.handshake(MECHANISMS[(op & 0x3F) % len(MECHANISMS)], raw)
            continue
        size = int.from_bytes(data[i:i + 2], "big")
        token, i = data[i + 2:i + 2 + size], i + 2 + size
        if op & 0x40:
            header, payload, signature = (token.split(b"\0", 2) + [b"", b""])[:3]
            if op & 0x20:  # signed here: what follows the signature check (claims) is reached too
                signed = True
                signature = SASL["es256"].sign(f"{_b64url(header)}.{_b64url(payload)}".encode(), SASL["keys"][1])
            token = _bearer(header, payload, signature)
        if session.state not in (session.AUTHENTICATE, session.RAW):  # k36: ILLEGAL_SASL_STATE, closed
            return
        try:
            session.authenticate(token)
        except sasl.AuthenticationFailed:
            if session.state != session.FAILED:
                raise AssertionError(f"a refused login left the session {session.state}") from None
            return
        if session.principal is not None and session.principal not in PRINCIPALS and not signed:
            raise AssertionError(f"authenticated as {session.principal!r}, which has no credential")


# ============================================================================================== main

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], add_help=True)
    parser.add_argument("--target", choices=TARGETS, required=True)
    args, rest = parser.parse_known_args()
    target = args.target
    if target == "request":
        _instrument_codec()
        seeds, words, one = request_seeds(), [], request_one
    elif target == "records":
        seeds, words, one = records_seeds(), records_dict(), records_one
    else:
        sasl_setup()
        seeds, words, one = sasl_seeds(), sasl_dict(), sasl_one
    corpus, seed_dir = CORPUS / target, CORPUS / f"{target}-seeds"
    corpus.mkdir(parents=True, exist_ok=True)
    _write_seeds(seed_dir, seeds)
    CRASHES.mkdir(parents=True, exist_ok=True)
    libfuzzer = [sys.argv[0]]
    if not any(a.startswith("-artifact_prefix=") for a in rest):
        libfuzzer.append(f"-artifact_prefix={CRASHES}/{target}-")
    if words and not any(a.startswith("-dict=") for a in rest):
        _write_dict(CORPUS / f"{target}.dict", words)
        libfuzzer.append(f"-dict={CORPUS / f'{target}.dict'}")
    libfuzzer += ["-print_final_stats=1", *rest]
    if not any(not a.startswith("-") for a in rest):  # no corpus given: ours (new inputs go to the first)
        libfuzzer += [str(corpus), str(seed_dir)]
    atheris.Setup(libfuzzer, one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
