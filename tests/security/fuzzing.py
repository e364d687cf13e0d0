"""A seeded mutation fuzzer of what a stranger can send over the network: the SASL exchange before login
(a SASL_PLAINTEXT listener) and the KAFKA07 listener, which has no login at all.

Shared by tests/security/test_fuzz_preauth.py (a short run in `make test`) and bench/fuzz_preauth.py (long
runs). It attacks a running broker from outside, one short connection per case, where bench/fuzz/fuzz.py
(atheris) drives the decoders in-process: this one also finds what only the event loop, the framing, the
back-pressure and the failed-login delay can get wrong (a hang, a task exception, memory kept).

A case is a function of (seed, index) alone (``make_case``), so any finding is replayed with the same two
numbers. It picks a valid frame from the corpus (``corpus()``): ApiVersions v0-v4, SaslHandshake v0/v1,
SaslAuthenticate v0-v2 with PLAIN and SCRAM first messages and SCRAM client-final messages (made from the
broker's server-first answer, with a right or a wrong proof), raw v0 SASL tokens, and 0.7 PRODUCE,
MULTIPRODUCE, FETCH, MULTIFETCH and OFFSETS requests. A corpus frame is a list of typed fields, so that the
mutations can lie where a parser trusts: a length prefix (int16, int32, a compact field's uvarint, a tag
count) negative, huge, off by one; a count or integer set to an edge value; a field repeated or dropped; a
0.7 message rewritten with its CRC made right again (so the broker reads past the CRC check: bad magic,
unknown codec, a corrupt or very compressible gzip payload). Then the encoded bytes may be mutated: bits
flipped, bytes set to 0x00/0xff/0x7f/0x80, truncated, extended, spliced with another corpus frame, a slice
repeated, the frame's own size prefix made a lie. Frames that the corpus sends first (a SaslHandshake before
a SaslAuthenticate, a v0 handshake before a raw token) are sent unmutated and must each be answered.

The oracle, per connection (``run_case``):
- a frame that is complete on the wire (its size prefix covers bytes that were sent) gets an answer or a
  close within ``deadline_s``, before the client closes anything: the broker must not sit on a whole
  request. Exception: a 0.7 PRODUCE or MULTIPRODUCE that parses has no response in 0.7.
- then the client half-closes (shutdown(SHUT_WR)); the broker, seeing end of file, must close within
  ``deadline_s``. This is also how a frame that announces more bytes than it sends ends: it legitimately
  waits for them, until the end of file says they will never come.
Between cases a probe checks the broker still answers a legitimate ApiVersions (SASL listener) and OFFSETS
(0.7 listener), and that its process is alive; its RSS is sampled for the peak.

Not thread-safe: one event loop runs a whole fuzz.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import gzip
import hashlib
import hmac
import random
import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable, Iterable

from odradek.legacy07 import codec as codec07
from odradek.protocol import codec
from odradek.protocol.compiler import encode_uvarint

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
SASL, KAFKA07 = "sasl", "kafka07"
FUZZ_TOPIC = "fuzz07"  # the 0.7 topic the corpus reads and writes (prepare() puts messages in it)
PLAIN_USER, PLAIN_PASSWORD = "alice", "alice-secret"
SCRAM_USER, SCRAM_PASSWORD = "bob", "bob-secret"  # a SCRAM-SHA-256 credential the broker must have

INTERESTING_BYTES = (0x00, 0xFF, 0x7F, 0x80)
INT_EDGES = {2: (0, 1, -1, 0x7FFF, -0x8000, 0x7FFE, 0x100),
             4: (0, 1, -1, 0x7FFFFFFF, -0x80000000, 0x7FFFFFFE, 100 << 20, 512 * 1024 + 1),
             8: (0, 1, -1, -2, 0x7FFFFFFFFFFFFFFF, -0x8000000000000000)}
# the frame's own size prefix: negative, zero, tiny, huge, just past sasl.server.max.receive.size (512 KiB)
SIZE_LIES = (-1, -2, -0x80000000, 0, 1, 2, 0x7FFFFFFF, 100 << 20, 512 * 1024, 512 * 1024 + 1)
# a compact field's uvarint (length + 1): null, 2^32 - 1, and varints that never end or run too long
UVARINT_LIES = (b"\x00", b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x80\x80", b"\xff" * 10 + b"\x01",
                b"\xff\xff\xff\xff\x7f", b"\x80")
MAX_READ = 16 << 20  # bytes read back from one case at most (a FETCH answer from the fuzz topic is far less)


# -- the corpus: frames as typed fields -------------------------------------------------------------------

@dataclass(frozen=True)
class Field:
    """One field of a frame. ``kind`` says how ``data`` goes on the wire:
    fixed (as it is: integers, or a field whose prefix a mutation already rewrote), str16 (int16 length
    first), bytes32 and messages07 (int32 length first; messages07 holds a 0.7 message set), compact (uvarint
    length + 1 first), tags (an empty tagged-field section: the uvarint count 0)."""

    kind: str
    data: bytes = b""

    def encode(self) -> bytes:
        if self.kind == "fixed":
            return self.data
        if self.kind == "str16":
            return struct.pack(">h", len(self.data)) + self.data
        if self.kind in ("bytes32", "messages07"):
            return struct.pack(">i", len(self.data)) + self.data
        if self.kind == "compact":
            return encode_uvarint(len(self.data) + 1) + self.data
        if self.kind == "tags":
            return b"\x00" + self.data
        raise ValueError(f"unknown field kind {self.kind}")


def fixed(fmt: str, value: int) -> Field:
    return Field("fixed", struct.pack(fmt, value))


def encode_fields(fields: Iterable[Field]) -> bytes:
    """The frame: int32 size, then the fields."""
    body = b"".join(f.encode() for f in fields)
    return struct.pack(">i", len(body)) + body


@dataclass(frozen=True)
class Seed:
    """A valid frame of the corpus, on ``listener`` (SASL or KAFKA07), after the ``prefix`` frames."""

    name: str
    listener: str
    fields: tuple[Field, ...]
    prefix: tuple[bytes, ...] = ()
    # the fields made from the prefix frames' answers (a SCRAM client-final needs the server's nonce); then
    # ``fields`` is only a stand-in of the same shape, for splicing
    respond: Callable[[list[bytes]], tuple[Field, ...]] | None = None

    @property
    def frame(self) -> bytes:
        return encode_fields(self.fields)


def kafka_request(api_key: int, version: int, body: list[Field], correlation_id: int = 7) -> tuple[Field, ...]:
    """Request header (v1, or v2 with its tags for a flexible version) and ``body``."""
    header = [fixed(">h", api_key), fixed(">h", version), fixed(">i", correlation_id), Field("str16", b"fuzz")]
    if codec.request_header_version(api_key, version) == 2:
        header.append(Field("tags"))
    return tuple(header + body)


def handshake(mechanism: str, version: int) -> tuple[Field, ...]:
    return kafka_request(SASL_HANDSHAKE, version, [Field("str16", mechanism.encode())])


def authenticate(token: bytes, version: int) -> tuple[Field, ...]:
    if version >= 2:
        return kafka_request(SASL_AUTHENTICATE, version, [Field("compact", token), Field("tags")])
    return kafka_request(SASL_AUTHENTICATE, version, [Field("bytes32", token)])


SCRAM_CLIENT_NONCE = "fyko+d2lbbFgONRv9qkxdawL"


def scram_first(user: str) -> bytes:
    return f"n,,n={user},r={SCRAM_CLIENT_NONCE}".encode()


def scram_final(version: int, password: str) -> Callable[[list[bytes]], tuple[Field, ...]]:
    """The SaslAuthenticate carrying SCRAM-SHA-256's client-final message (RFC 5802) for SCRAM_USER, made from
    the server-first message in the last prefix answer (a SaslAuthenticate v1 response); with a wrong
    ``password`` its proof is wrong."""
    def build(answers: list[bytes]) -> tuple[Field, ...]:
        payload = answers[-1]  # correlation id, error, message (int16 length), auth bytes (int32 length), ...
        (error, n) = struct.unpack_from(">hh", payload, 4)
        pos = 8 + max(n, 0)
        (size,) = struct.unpack_from(">i", payload, pos)
        server_first = bytes(payload[pos + 4:pos + 4 + size]).decode()
        if error or not server_first:
            raise ValueError(f"no server-first message (error {error})")
        attributes = dict(part.split("=", 1) for part in server_first.split(","))
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attributes["s"]),
                                     int(attributes["i"]))
        without_proof = f"c=biws,r={attributes['r']}"
        auth_message = f"n={SCRAM_USER},r={SCRAM_CLIENT_NONCE},{server_first},{without_proof}".encode()
        client_key = hmac.new(salted, b"Client Key", "sha256").digest()
        signature = hmac.new(hashlib.sha256(client_key).digest(), auth_message, "sha256").digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
        return authenticate(f"{without_proof},p={proof}".encode(), version)
    return build


def message07(payload: bytes, magic: int = 1, attributes: int = 0) -> bytes:
    """A 0.7 message with its CRC right, whatever its magic and attributes."""
    crc = zlib.crc32(payload)
    if magic == 0:
        return struct.pack(">ibI", len(payload) + 5, 0, crc) + payload
    return struct.pack(">iBBI", len(payload) + 6, magic & 0xFF, attributes & 0xFF, crc) + payload


def partition07(topic: str, partition: int) -> list[Field]:
    return [Field("str16", topic.encode()), fixed(">i", partition)]


def corpus() -> tuple[Seed, ...]:
    """Every valid frame the mutations start from."""
    seeds: list[Seed] = []
    for version in range(0, 5):
        body = [Field("compact", b"fuzz"), Field("compact", b"1.0"), Field("tags")] if version >= 3 else []
        seeds.append(Seed(f"ApiVersions v{version}", SASL, kafka_request(API_VERSIONS, version, body)))
    for version in (0, 1):
        for mechanism in ("PLAIN", "SCRAM-SHA-256"):
            seeds.append(Seed(f"SaslHandshake v{version} {mechanism}", SASL, handshake(mechanism, version)))
    tokens = {"PLAIN": (f"\0{PLAIN_USER}\0{PLAIN_PASSWORD}".encode(), f"{PLAIN_USER}\0{PLAIN_USER}\0x".encode()),
              "SCRAM-SHA-256": (scram_first(SCRAM_USER), scram_first("nobody"))}
    for version in (0, 1, 2):
        for mechanism, (good, bad) in tokens.items():
            prefix = (encode_fields(handshake(mechanism, 1)),)
            seeds.append(Seed(f"SaslAuthenticate v{version} {mechanism}", SASL, authenticate(good, version), prefix))
            seeds.append(Seed(f"SaslAuthenticate v{version} {mechanism} (refused)", SASL,
                              authenticate(bad, version), prefix))
    seeds.append(Seed("SaslAuthenticate v1 before any handshake", SASL, authenticate(tokens["PLAIN"][0], 1)))
    scram_prefix = (encode_fields(handshake("SCRAM-SHA-256", 1)),
                    encode_fields(authenticate(tokens["SCRAM-SHA-256"][0], 1)))
    stand_in = b"c=biws,r=" + SCRAM_CLIENT_NONCE.encode() * 2 + b",p=" + bytes(44)
    for version in (0, 1, 2):
        for password, note in ((SCRAM_PASSWORD, ""), ("not-" + SCRAM_PASSWORD, " (wrong proof)")):
            seeds.append(Seed(f"SaslAuthenticate v{version} SCRAM-SHA-256 client-final{note}", SASL,
                              authenticate(stand_in, version), scram_prefix, scram_final(version, password)))
    for mechanism, (good, _) in tokens.items():  # v0 handshake: the token is a bare frame
        seeds.append(Seed(f"raw v0 token {mechanism}", SASL, (Field("fixed", good),),
                          (encode_fields(handshake(mechanism, 0)),)))

    plain_set = b"".join(message07(p) for p in (b"one", b"two", b"three" * 20))
    gzip_set = message07(gzip.compress(b"".join(message07(p) for p in (b"a", b"b" * 100))), attributes=1)
    seeds += [
        Seed("0.7 PRODUCE", KAFKA07, (fixed(">h", 0), *partition07(FUZZ_TOPIC, 0), Field("messages07", plain_set))),
        Seed("0.7 PRODUCE gzip", KAFKA07, (fixed(">h", 0), *partition07(FUZZ_TOPIC, 0),
                                           Field("messages07", gzip_set))),
        Seed("0.7 PRODUCE magic 0", KAFKA07, (fixed(">h", 0), *partition07(FUZZ_TOPIC, 0),
                                              Field("messages07", message07(b"zero", magic=0)))),
        Seed("0.7 MULTIPRODUCE", KAFKA07, (fixed(">h", 3), fixed(">h", 2),
                                           *partition07(FUZZ_TOPIC, 0), Field("messages07", plain_set),
                                           *partition07(FUZZ_TOPIC, 0), Field("messages07", gzip_set))),
        Seed("0.7 FETCH", KAFKA07, (fixed(">h", 1), *partition07(FUZZ_TOPIC, 0), fixed(">q", 0),
                                    fixed(">i", 1 << 20))),
        Seed("0.7 MULTIFETCH", KAFKA07, (fixed(">h", 2), fixed(">h", 2),
                                         *partition07(FUZZ_TOPIC, 0), fixed(">q", 0), fixed(">i", 4096),
                                         *partition07("fuzz07-none", 0), fixed(">q", 0), fixed(">i", 4096))),
        Seed("0.7 OFFSETS latest", KAFKA07, (fixed(">h", 4), *partition07(FUZZ_TOPIC, 0),
                                             fixed(">q", codec07.LATEST_TIME), fixed(">i", 10))),
        Seed("0.7 OFFSETS earliest", KAFKA07, (fixed(">h", 4), *partition07(FUZZ_TOPIC, 0),
                                               fixed(">q", codec07.EARLIEST_TIME), fixed(">i", 10))),
    ]
    return tuple(seeds)


# -- mutations ----------------------------------------------------------------------------------------------

def _length_lie(rng: random.Random, f: Field) -> tuple[Field, str]:
    n = len(f.data)
    if f.kind == "str16":
        value = rng.choice((-1, -2, -0x8000, 0x7FFF, n + 1, max(n - 1, 0), 0))
        return Field("fixed", struct.pack(">h", value) + f.data), f"int16 length {value} (is {n})"
    if f.kind in ("bytes32", "messages07"):
        value = rng.choice((-1, -2, -0x80000000, 0x7FFFFFFF, 100 << 20, n + 1, max(n - 1, 0), 0))
        return Field("fixed", struct.pack(">i", value) + f.data), f"int32 length {value} (is {n})"
    if f.kind == "compact":
        lie = rng.choice(UVARINT_LIES + (encode_uvarint(n + 2), encode_uvarint(n), encode_uvarint(1)))
        return Field("fixed", lie + f.data), f"compact length varint {lie.hex()} (is {encode_uvarint(n + 1).hex()})"
    lie = rng.choice(UVARINT_LIES[1:] + (b"\x01", b"\x02\x00\x05"))  # tags
    return Field("fixed", lie), f"tag count varint {lie.hex()}"


def _int_edge(rng: random.Random, f: Field) -> tuple[Field, str]:
    size = len(f.data)
    value = rng.choice(INT_EDGES[size])
    fmt = {2: ">h", 4: ">i", 8: ">q"}[size]
    return Field("fixed", struct.pack(fmt, value)), f"int{size * 8} {struct.unpack(fmt, f.data)[0]} -> {value}"


@functools.lru_cache(maxsize=None)
def _gzipped_zeros(megabytes: int) -> bytes:
    return gzip.compress(bytes(megabytes << 20), 9)


def _rewrite_message(rng: random.Random, f: Field) -> tuple[Field, str]:
    """A 0.7 message set changed where its CRC does not protect it, the CRC then made right again."""
    try:
        messages = codec07.decode_message_set(f.data)
    except codec07.InvalidMessage:
        messages = []
    if not messages:
        return f, "message rewrite skipped (set already broken)"
    i = rng.randrange(len(messages))
    m = messages[i]
    payload, magic, attributes = bytearray(m.payload), m.magic, m.codec
    what = rng.randrange(5)
    if what == 0:
        magic = rng.choice((0, 2, 0x7F, 0xFF))
        note = f"magic {magic}"
    elif what == 1:
        attributes = rng.choice((1, 2, 3, 0x04, 0x80, 0xFF))
        note = f"attributes {attributes:#x}"
    elif what == 2 and payload:
        for _ in range(rng.randint(1, 4)):
            payload[rng.randrange(len(payload))] ^= 1 << rng.randrange(8)
        note = "payload bits flipped"
    elif what == 3:
        payload = payload[:rng.randrange(len(payload) + 1)]
        note = f"payload cut to {len(payload)} bytes"
    else:  # a small gzip of many zeros: the decompression bound must hold
        megabytes = rng.choice((1, 4, 16))
        payload, attributes, magic = bytearray(_gzipped_zeros(megabytes)), 1, 1
        note = f"payload: gzip of {megabytes} MiB of zeros"
    rebuilt = b"".join(message07(bytes(payload), magic, attributes) if j == i
                       else message07(o.payload, o.magic, o.codec) for j, o in enumerate(messages))
    return Field(f.kind, rebuilt), f"message {i}: {note}, CRC made right"


def mutate_fields(rng: random.Random, fields: list[Field]) -> str:
    """One structural mutation of ``fields`` in place; returns what it did."""
    prefixed = [i for i, f in enumerate(fields) if f.kind in ("str16", "bytes32", "messages07", "compact", "tags")]
    integers = [i for i, f in enumerate(fields) if f.kind == "fixed" and len(f.data) in INT_EDGES]
    sets07 = [i for i, f in enumerate(fields) if f.kind == "messages07"]
    choices = ["repeat", "drop"] + ["length"] * 3 * bool(prefixed) + ["int"] * 2 * bool(integers) \
        + ["message"] * 3 * bool(sets07)
    op = rng.choice(choices)
    if op == "length":
        i = rng.choice(prefixed)
        fields[i], note = _length_lie(rng, fields[i])
        return f"field {i}: {note}"
    if op == "int":
        i = rng.choice(integers)
        fields[i], note = _int_edge(rng, fields[i])
        return f"field {i}: {note}"
    if op == "message":
        i = rng.choice(sets07)
        fields[i], note = _rewrite_message(rng, fields[i])
        return f"field {i}: {note}"
    i = rng.randrange(len(fields))
    if op == "drop" and len(fields) > 1:
        del fields[i]
        return f"field {i} dropped"
    times = rng.choice((1, 2, 15, 200))
    fields[i + 1:i + 1] = [fields[i]] * times
    return f"field {i} repeated {times} more times"


def _fix_size(buf: bytearray) -> None:
    if len(buf) >= 4:
        buf[:4] = struct.pack(">i", len(buf) - 4)


def mutate_bytes(rng: random.Random, buf: bytearray, others: tuple[bytes, ...]) -> str:
    """One byte-level mutation of an encoded frame in place; returns what it did."""
    op = rng.choice(("flip", "flip", "interesting", "interesting", "truncate", "truncate-body", "extend",
                     "insert", "size", "size", "splice", "repeat-slice"))
    honest = rng.random() < 0.5  # whether the size prefix is set right afterwards
    if not buf:
        buf += b"\0\0\0\0"
    if op == "flip":
        spots = [rng.randrange(len(buf) * 8) for _ in range(rng.randint(1, 4))]
        for bit in spots:
            buf[bit // 8] ^= 1 << (bit % 8)
        return f"bits {spots} flipped"
    if op == "interesting":
        spots = [(rng.randrange(len(buf)), rng.choice(INTERESTING_BYTES)) for _ in range(rng.randint(1, 4))]
        for pos, value in spots:
            buf[pos] = value
        return "bytes set " + ", ".join(f"[{p}]={v:#04x}" for p, v in spots)
    if op == "truncate":  # the size prefix now announces more than is sent
        keep = rng.randrange(len(buf))
        del buf[keep:]
        return f"truncated to {keep} bytes"
    if op == "truncate-body":
        keep = rng.randrange(4, max(len(buf), 5))
        del buf[keep:]
        _fix_size(buf)
        return f"body cut to {keep - 4} bytes, size set right"
    if op == "extend":
        if rng.random() < 0.5:
            extra = rng.randbytes(rng.randint(1, 64))
        else:
            extra = bytes([rng.choice(INTERESTING_BYTES)]) * rng.choice((16, 1024, 4096, 65536))
        buf += extra
        if honest:
            _fix_size(buf)
        return f"{len(extra)} bytes appended" + (", size set right" if honest else "")
    if op == "insert":
        pos = rng.randrange(4, len(buf) + 1) if len(buf) >= 4 else len(buf)
        extra = rng.randbytes(rng.randint(1, 16))
        buf[pos:pos] = extra
        if honest:
            _fix_size(buf)
        return f"{len(extra)} bytes inserted at {pos}" + (", size set right" if honest else "")
    if op == "size":
        n = len(buf) - 4
        value = rng.choice(SIZE_LIES + (n + 1, n - 1, n * 2))
        buf[:4] = struct.pack(">i", value)
        return f"size prefix {value} (is {n})"
    if op == "splice":
        other = rng.choice(others)
        cut, at = rng.randrange(len(buf) + 1), rng.randrange(len(other) + 1)
        buf[cut:] = other[at:]
        if honest:
            _fix_size(buf)
        return f"bytes from {cut} replaced by another frame's from {at}" + (", size set right" if honest else "")
    start = rng.randrange(len(buf))
    end = rng.randint(start + 1, min(len(buf), start + 64))
    times = rng.choice((2, 16, 1000))
    buf[end:end] = bytes(buf[start:end]) * (times - 1)
    if honest:
        _fix_size(buf)
    return f"bytes {start}:{end} repeated {times} times" + (", size set right" if honest else "")


@dataclass(frozen=True)
class Case:
    """One connection's worth of fuzz: the corpus prefix frames, then ``frame`` (mutated)."""

    index: int
    seed: Seed
    ops: tuple[str, ...]
    frame: bytes
    pending: tuple | None = None  # for a seed with ``respond``: the PRNG state the mutations start from

    def describe(self) -> str:
        if self.pending is not None:
            return f"case {self.index} ({self.seed.name}; mutated once the prefix is answered)"
        return f"case {self.index} ({self.seed.name}; {'; '.join(self.ops)}): {len(self.frame)} bytes"

    def resolved(self, answers: list[bytes], seeds: tuple[Seed, ...]) -> "Case":
        """The case of a ``respond`` seed, its frame made from the prefix answers, then mutated."""
        if self.pending is None or self.seed.respond is None:
            return self
        rng = random.Random()
        rng.setstate(self.pending)
        ops, frame = _mutated(rng, list(self.seed.respond(answers)), seeds)
        return Case(self.index, self.seed, ops, frame)


def _mutated(rng: random.Random, fields: list[Field], seeds: tuple[Seed, ...]) -> tuple[tuple[str, ...], bytes]:
    ops: list[str] = []
    structural, byte_level = rng.choice(((1, 0), (0, 1), (1, 1), (2, 0), (0, 2), (2, 1), (1, 2)))
    for _ in range(structural):
        ops.append(mutate_fields(rng, fields))
    buf = bytearray(encode_fields(fields))
    others = tuple(s.frame for s in seeds)
    for _ in range(byte_level):
        ops.append(mutate_bytes(rng, buf, others))
    return tuple(ops), bytes(buf)


def make_case(seed: int, index: int, seeds: tuple[Seed, ...]) -> Case:
    """The case ``index`` of the run with ``seed``: the same two numbers always make the same mutations (and
    the same bytes, but for a SCRAM client-final, whose nonce the broker draws)."""
    rng = random.Random(f"odradek-fuzz/{seed}/{index}")
    listener = rng.choice((SASL, KAFKA07))  # half each, though the SASL corpus is the larger
    base = rng.choice([s for s in seeds if s.listener == listener])
    if base.respond is not None:
        return Case(index, base, (), base.frame, rng.getstate())
    ops, frame = _mutated(rng, list(base.fields), seeds)
    return Case(index, base, ops, frame)


def must_answer(listener: str, data: bytes) -> bool:
    """Whether the first frame of ``data`` is complete and must be answered or end the connection before the
    client closes anything (see the module docstring)."""
    if len(data) < 4:
        return False
    (size,) = struct.unpack_from(">i", data)
    if size < 0:
        return True  # refused at once: closed
    if 4 + size > len(data):
        return False  # waits for bytes that will never come, until end of file
    if listener == KAFKA07 and size >= 2:
        try:
            request = codec07.decode_request(data[4:4 + size])
        except codec07.MalformedRequest:
            return True
        return not isinstance(request, (codec07.ProduceRequest, codec07.MultiProduceRequest))
    return True


# -- running cases against a broker ------------------------------------------------------------------------

@dataclass
class Target:
    """The broker under attack: its address, its two fuzzed listeners, and its pid (for liveness and RSS)."""

    host: str
    sasl_port: int
    kafka07_port: int
    pid: int | None = None

    def port(self, listener: str) -> int:
        return self.sasl_port if listener == SASL else self.kafka07_port


@dataclass
class Finding:
    kind: str  # unanswered | open-after-eof | prefix-refused | connect-failed | probe-failed | broker-died
    detail: str
    case: Case | None = None

    def describe(self, seed: int) -> str:
        if self.case is None:
            return f"{self.kind}: {self.detail}"
        shown = self.case.frame[:512].hex()
        return (f"{self.kind}: {self.detail}\n    seed {seed}, {self.case.describe()}\n"
                f"    frame (hex{', first 512 bytes' if len(self.case.frame) > 512 else ''}): {shown}")


@dataclass
class Report:
    seed: int
    cases: int = 0
    frames: int = 0  # every frame sent, corpus prefixes included
    seconds: float = 0.0
    outcomes: dict[str, int] = field(default_factory=dict)  # "<listener> answered" / "... closed silently"
    findings: list[Finding] = field(default_factory=list)
    probes: int = 0
    rss_before: int | None = None
    rss_peak: int | None = None
    rss_after: int | None = None

    def count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def summary(self) -> str:
        mib = (lambda b: "n/a" if b is None else f"{b / (1 << 20):.0f} MiB")
        rate = self.cases / self.seconds if self.seconds else 0.0
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items()))
        return (f"seed {self.seed}: {self.cases} cases ({self.frames} frames) in {self.seconds:.1f} s, "
                f"{rate:.0f} cases/s; {self.probes} probes; {outcomes}; RSS before {mib(self.rss_before)}, "
                f"peak {mib(self.rss_peak)}, after {mib(self.rss_after)}; {len(self.findings)} findings")


def rss_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


async def _read_frame(reader: asyncio.StreamReader, deadline_s: float) -> bytes:
    (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), deadline_s))
    return await asyncio.wait_for(reader.readexactly(size), deadline_s)


async def run_case(target: Target, case: Case, report: Report, deadline_s: float,
                   seeds: tuple[Seed, ...] | None = None) -> None:
    """Send one case on a connection of its own and judge what comes back (the module docstring's oracle)."""
    seeds = seeds or corpus()
    listener = case.seed.listener
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(target.host, target.port(listener)),
                                                deadline_s)
    except (OSError, asyncio.TimeoutError) as exc:
        report.findings.append(Finding("connect-failed", repr(exc), case))
        return
    try:
        answers: list[bytes] = []
        for frame in case.seed.prefix:
            writer.write(frame)
            report.frames += 1
            try:
                answers.append(await _read_frame(reader, deadline_s))
            except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
                report.findings.append(Finding("prefix-refused", f"a valid corpus frame got {exc!r}", case))
                return
        try:
            case = case.resolved(answers, seeds)
        except (ValueError, KeyError, struct.error) as exc:
            report.findings.append(Finding("prefix-refused", f"the answers to the corpus frames: {exc!r}", case))
            return
        writer.write(case.frame)
        report.frames += 1
        got = 0
        closed = False
        if must_answer(listener, case.frame):
            try:
                data = await asyncio.wait_for(reader.read(65536), deadline_s)
                got, closed = len(data), not data
            except asyncio.TimeoutError:  # before OSError: TimeoutError is one
                report.findings.append(Finding(
                    "unanswered", f"a complete frame got neither an answer nor a close in {deadline_s} s", case))
                return
            except OSError:  # reset
                closed = True
        if not closed:
            try:
                writer.write_eof()
            except (OSError, RuntimeError):  # noqa: B014 - RuntimeError: uvloop's closed transport
                pass  # already closed by the broker
            end = time.monotonic() + deadline_s
            while got <= MAX_READ:
                left = end - time.monotonic()
                try:
                    data = await asyncio.wait_for(reader.read(1 << 20), max(left, 0.001))
                except asyncio.TimeoutError:
                    report.findings.append(Finding(
                        "open-after-eof", f"still open {deadline_s} s after the client's end of file "
                        f"({got} bytes answered)", case))
                    return
                except OSError:
                    break
                if not data:
                    break
                got += len(data)
        report.count(f"{listener} {'answered' if got else 'closed silently'}")
    finally:
        writer.transport.abort()


async def probe(target: Target, report: Report, deadline_s: float) -> None:
    """A legitimate client on each fuzzed listener must still be answered; the process must be alive."""
    report.probes += 1
    if target.pid is not None:
        if not alive(target.pid):
            report.findings.append(Finding("broker-died", f"process {target.pid} is gone"))
            return
        rss = rss_bytes(target.pid)
        if rss is not None:
            report.rss_peak = max(report.rss_peak or 0, rss)
    checks = ((SASL, encode_fields(kafka_request(API_VERSIONS, 3, [Field("compact", b"probe"), Field("compact", b"1"),
                                                                  Field("tags")]))),
              (KAFKA07, codec07.encode_offsets(FUZZ_TOPIC, 0, codec07.LATEST_TIME, 1)))
    for listener, request in checks:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(target.host, target.port(listener)), deadline_s)
            try:
                writer.write(request)
                answer = await _read_frame(reader, deadline_s)
            finally:
                writer.transport.abort()
            ok = (struct.unpack_from(">h", answer, 4)[0] == 0 if listener == SASL
                  else codec07.decode_response(answer)[0] == codec07.ErrorCode07.NONE)
            if not ok:
                report.findings.append(Finding("probe-failed", f"{listener}: error in {answer[:16].hex()}"))
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
            report.findings.append(Finding("probe-failed", f"{listener}: {exc!r}"))


async def prepare(target: Target, deadline_s: float = 10.0) -> None:
    """Put a few 0.7 messages into the fuzz topic, so that FETCH and OFFSETS cases read real positions."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(target.host, target.kafka07_port), deadline_s)
    try:
        writer.write(codec07.encode_produce(FUZZ_TOPIC, 0, b"".join(codec07.encode_message(b"m%d" % i)
                                                                     for i in range(20))))
        # PRODUCE has no answer: wait until a FETCH sees the messages
        end = time.monotonic() + deadline_s
        while True:
            writer.write(codec07.encode_fetch(FUZZ_TOPIC, 0, 0, 1 << 16))
            error, body = codec07.decode_response(await _read_frame(reader, deadline_s))
            if error == 0 and codec07.decode_message_set(body, partial_tail=True):
                return
            if time.monotonic() > end:
                raise AssertionError(f"the 0.7 listener did not take the fuzz topic's messages (error {error})")
            await asyncio.sleep(0.05)
    finally:
        writer.transport.abort()


async def fuzz(target: Target, seed: int, max_cases: int, max_seconds: float, *, concurrency: int = 8,
               deadline_s: float = 10.0, probe_every_s: float = 2.0, only: Iterable[int] | None = None,
               progress: Callable[[Report], None] | None = None) -> Report:
    """Run cases 0, 1, 2, ... of ``seed`` (or just ``only``) until ``max_cases`` or ``max_seconds``."""
    seeds = corpus()
    report = Report(seed)
    if target.pid is not None:
        report.rss_before = rss_bytes(target.pid)
    indexes = iter(only) if only is not None else iter(range(max_cases))
    start = time.monotonic()
    stop_at = start + max_seconds
    fatal = ("broker-died", "connect-failed")

    def stopped() -> bool:
        return time.monotonic() >= stop_at or any(f.kind in fatal for f in report.findings)

    async def worker() -> None:
        for index in indexes:
            if stopped():
                return
            await run_case(target, make_case(seed, index, seeds), report, deadline_s, seeds)
            report.cases += 1

    workers_done = asyncio.Event()

    async def prober() -> None:
        # ends on an event, not by cancel(): a cancel that lands as a wait_for completes is lost on Python 3.11
        last_progress = time.monotonic()
        while not stopped() and not workers_done.is_set():
            await probe(target, report, deadline_s)
            if progress is not None and time.monotonic() - last_progress >= 10:
                last_progress = time.monotonic()
                report.seconds = last_progress - start
                progress(report)
            try:
                await asyncio.wait_for(workers_done.wait(), probe_every_s)
            except asyncio.TimeoutError:
                pass

    probing = asyncio.ensure_future(prober())
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    workers_done.set()
    await probing
    report.seconds = time.monotonic() - start
    await probe(target, report, deadline_s)  # the last word: still serving after the last case
    if target.pid is not None:
        report.rss_after = rss_bytes(target.pid)
        report.rss_peak = max(report.rss_peak or 0, report.rss_after or 0)
    return report


ADMIN_USER, ADMIN_PASSWORD = "admin", "admin-secret"  # a super user of the secured broker, for its setup
SECURED = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": f"User:{ADMIN_USER}",
           "allow.everyone.if.no.acl.found": "false"}


def broker_settings(plain_port: int, sasl_port: int, kafka07_port: int, secured: bool = False) -> dict[str, str]:
    """The broker the fuzz attacks: PLAINTEXT, SASL_PLAINTEXT with PLAIN and SCRAM-SHA-256, and KAFKA07.
    ``secured``: under the authorizer, as issue 36's audit had it (ADMIN_USER the super user, nothing open
    that no ACL opens); setup() then grants the 0.7 principal the fuzz topic only."""
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'user_{PLAIN_USER}="{PLAIN_PASSWORD}" user_{ADMIN_USER}="{ADMIN_PASSWORD}";')
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port},"
                     f"KAFKA07://127.0.0.1:{kafka07_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,KAFKA07:KAFKA07",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        **(SECURED if secured else {}),
    }


def admin_config(sasl_port: int, user: str = ADMIN_USER, password: str = ADMIN_PASSWORD) -> dict[str, str]:
    """A confluent-kafka client logging in with PLAIN on the SASL listener."""
    return {"bootstrap.servers": f"127.0.0.1:{sasl_port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password,
            "broker.address.family": "v4"}


def setup(sasl_port: int, secured: bool = False) -> None:
    """SCRAM_USER's SCRAM-SHA-256 credential, so that SCRAM first messages reach the server-first answer; on a
    secured broker, READ, WRITE, DESCRIBE and CREATE on the fuzz topic for the 0.7 principal (User:ANONYMOUS),
    and nothing else: a mutated topic name is refused."""
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)

    admin = AdminClient(admin_config(sasl_port))
    upsert = UserScramCredentialUpsertion(SCRAM_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          SCRAM_PASSWORD.encode())
    futures = list(admin.alter_user_scram_credentials([upsert]).values())
    if secured:
        futures += admin.create_acls([
            AclBinding(ResourceType.TOPIC, FUZZ_TOPIC, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*", operation,
                       AclPermissionType.ALLOW)
            for operation in (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)
        ]).values()
    for future in futures:
        future.result(20)


def log_problems(text: str) -> list[str]:
    """The lines of a broker log that show an unhandled error: a traceback, a task exception nobody read."""
    markers = ("Traceback", "exception was never retrieved", "Task was destroyed but it is pending")
    return [line for line in text.splitlines() if any(m in line for m in markers)]

