"""The differential harness: the same request to Apache Kafka and to odradek, the answers compared.

A `Scenario` is a few setup calls and one compared call. It runs on each broker in turn over a raw socket
of its own, with requests built by odradek's codec at the highest version both brokers advertise (and the
codec knows). The compared responses are decoded, projected (a scenario may narrow a response to what it is
about), normalised and diffed field by field.

Normalising removes what legitimately differs between two brokers:

* fields the version does not have (the codec fills them with defaults): removed;
* throttle times; cluster ids; hosts and ports;
* node ids: the broker's own id becomes `<self>` (Kafka runs as node 1, odradek as 0);
* topic ids: a UUID becomes `<id of NAME>` when a response of this scenario paired it with NAME, else
  `<uuid>`; the zero UUID stays `<zero uuid>`;
* generated identities: member ids, producer ids and fetch session ids become `<member 1>`, `<pid 1>`, ...
  in order of first appearance in the scenario, so equalities between them still count;
* wall-clock times the broker takes itself (`transaction_start_time_ms` when positive);
* the order of arrays of structs: items are matched by their identity field (name, partition index, ...);
* record batches: shown as their decoded header fields plus a digest of the records (the CRC as valid or
  not, a transaction marker's timestamps as `<time>`);
* error messages: compared separately, as notes (codes count, texts are only reported; an empty message
  and a null one count as the same).

Versions: each side uses the same version, so a field absent from it is absent (at its default) on both.
No pytest here: tests/reference/test_differential.py and report.py drive it.
"""

from __future__ import annotations

import hashlib
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from crc32c import crc32c

from odradek.protocol import codec
from odradek.protocol.errors import ErrorCode
from odradek.protocol.schema_tables import MESSAGES

from .known import deliberate

Body = dict[str, Any]
CLIENT_ID = "odradek-differential"
DEADLINE_S = 30.0  # for a setup call repeated until its condition holds

API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
    15: "DescribeGroups", 16: "ListGroups", 17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics",
    20: "DeleteTopics", 21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 28: "TxnOffsetCommit", 32: "DescribeConfigs",
    33: "AlterConfigs", 37: "CreatePartitions", 42: "DeleteGroups", 44: "IncrementalAlterConfigs",
    47: "OffsetDelete", 60: "DescribeCluster", 61: "DescribeProducers", 65: "DescribeTransactions",
    66: "ListTransactions",
}

NO_RESPONSE = "<no response>"
CLOSED = "<connection closed>"


class ConnectionClosed(Exception):
    pass


# ------------------------------------------------------------------------------------------- connection

class Connection:
    """One raw socket to a broker; requests and responses in order."""

    def __init__(self, bootstrap: str, timeout: float = 30.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation_id = 0

    def send(self, api_key: int, version: int, body: Body) -> int:
        self.correlation_id += 1
        try:
            self.sock.sendall(codec.encode_request(api_key, version, self.correlation_id, CLIENT_ID, body))
        except OSError as exc:
            raise ConnectionClosed(str(exc)) from None
        return self.correlation_id

    def receive(self, api_key: int, version: int, correlation_id: int) -> Body:
        size = struct.unpack(">i", self._recv(4))[0]
        corr, body = codec.decode_response(api_key, version, self._recv(size))
        if corr != correlation_id:
            raise ConnectionClosed(f"correlation id {corr}, expected {correlation_id}")
        return body

    def request(self, api_key: int, version: int, body: Body) -> Body:
        return self.receive(api_key, version, self.send(api_key, version, body))

    def _recv(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except OSError as exc:
                raise ConnectionClosed(str(exc)) from None
            if not chunk:
                raise ConnectionClosed("closed by the broker")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()


@dataclass
class Broker:
    """One side of the comparison: its address, the versions it advertises and its own node id."""

    name: str
    bootstrap: str
    versions: dict[int, tuple[int, int]]
    node_id: int

    @classmethod
    def probe(cls, name: str, bootstrap: str) -> "Broker":
        conn = Connection(bootstrap)
        try:
            av = conn.request(18, 3, {"client_software_name": "odradek-differential",
                                      "client_software_version": "1"})
            if av["error_code"]:
                raise RuntimeError(f"{name}: ApiVersions v3 error {av['error_code']}")
            versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in av["api_keys"]}
            md = conn.request(3, 1, {"topics": []})
        finally:
            conn.close()
        if len(md["brokers"]) != 1:
            raise RuntimeError(f"{name}: expected one broker, Metadata lists {md['brokers']}")
        return cls(name, bootstrap, versions, md["brokers"][0]["node_id"])


def common_version(api_key: int, a: Broker, b: Broker, cap: int | None = None) -> int | None:
    """The highest version both brokers advertise and the codec knows (at most `cap`); None if none."""
    if api_key not in a.versions or api_key not in b.versions:
        return None
    lo = max(a.versions[api_key][0], b.versions[api_key][0], codec.request_versions(api_key)[0])
    hi = min(a.versions[api_key][1], b.versions[api_key][1], codec.request_versions(api_key)[1])
    if cap is not None:
        hi = min(hi, cap)
    return hi if hi >= lo else None


def version_ranges(api_key: int, a: Broker, b: Broker) -> str:
    def one(x: Broker) -> str:
        r = x.versions.get(api_key)
        return f"{x.name} {r[0]}-{r[1]}" if r else f"{x.name} none"
    return f"{one(a)}, {one(b)}"


# ------------------------------------------------------------------------------------------- scenarios

@dataclass
class Ctx:
    """One scenario's run on one broker: names, values saved from responses, and the normaliser's aliases."""

    broker: Broker
    prefix: str  # unique to the scenario and the run; the same on both brokers
    vars: dict[str, Any] = field(default_factory=dict)
    topic_names: dict[bytes, str] = field(default_factory=dict)  # topic id -> name
    aliases: dict[tuple[str, Any], str] = field(default_factory=dict)

    def topic(self, suffix: str = "") -> str:
        return self.prefix + (f"-{suffix}" if suffix else "")

    def topic_id(self, name: str) -> bytes:
        for tid, n in self.topic_names.items():
            if n == name:
                return tid
        return bytes(16)

    def alias(self, kind: str, value: Any) -> str:
        key = (kind, value)
        if key not in self.aliases:
            self.aliases[key] = f"<{kind} {sum(1 for k in self.aliases if k[0] == kind) + 1}>"
        return self.aliases[key]


BodySpec = Body | Callable[[Ctx], Body]


@dataclass(frozen=True)
class Call:
    """One request. `until`: repeat it (a setup call) until the response satisfies it, up to DEADLINE_S,
    else the setup fails; `retry_while`: repeat it while the response shows a transient error, up to
    DEADLINE_S, then take the last response (for a compared call: what a client would retry, only where a
    repeat cannot change the outcome); `save`: keep values from the response in ctx.vars; `cap`: use at most
    this version; `version`: exactly this one (when both brokers support it); `response=False`: the broker
    sends none (acks=0)."""

    api: int
    body: BodySpec
    until: Callable[[Body], bool] | None = None
    retry_while: Callable[[Body], bool] | None = None
    save: Callable[[Ctx, Body], None] | None = None
    cap: int | None = None
    version: int | None = None
    response: bool = True

    def build(self, ctx: Ctx) -> Body:
        return self.body(ctx) if callable(self.body) else self.body


@dataclass(frozen=True)
class Scenario:
    id: str
    setup: tuple[Call, ...]
    request: Call
    project: Callable[[Ctx, Body], Any] | None = None  # narrows the compared response
    after: Call | None = None  # a request whose response replaces the compared one's (acks=0 produce)
    about: str = ""


class SetupFailed(Exception):
    pass


def pick_version(call: Call, kafka: Broker, odradek: Broker) -> int | None:
    v = common_version(call.api, kafka, odradek, call.cap)
    if v is not None and call.version is not None:
        lo = max(kafka.versions[call.api][0], odradek.versions[call.api][0])
        return call.version if lo <= call.version <= v else None
    return v


def run_on(broker: Broker, scenario: Scenario, versions: dict[int, int], prefix: str) -> tuple[Ctx, Any]:
    """Run the scenario on one broker: the setup calls, then the compared one. Returns the context and the
    compared response (decoded, projected, not yet normalised), or a marker string."""
    ctx = Ctx(broker, prefix)
    conn = Connection(broker.bootstrap)
    try:
        for i, call in enumerate(scenario.setup):
            try:
                run_call(conn, ctx, call, versions[id(call)])
            except ConnectionClosed as exc:
                raise SetupFailed(f"setup step {i + 1} ({API_NAMES.get(call.api, call.api)}): "
                                  f"connection closed: {exc}") from None
            except SetupFailed as exc:
                raise SetupFailed(f"setup step {i + 1} ({API_NAMES.get(call.api, call.api)}): {exc}") from None
        try:
            response = run_call(conn, ctx, scenario.request, versions[id(scenario.request)])
            if scenario.after is not None:
                response = run_call(conn, ctx, scenario.after, versions[id(scenario.after)])
        except ConnectionClosed:
            return ctx, CLOSED
    finally:
        conn.close()
    if response is None:
        return ctx, NO_RESPONSE
    last = scenario.after or scenario.request
    response = prune(response_fields(last.api), response, versions[id(last)])
    learn_topic_ids(ctx, response)
    if scenario.project is not None:
        response = scenario.project(ctx, response)
    return ctx, response


def run_call(conn: Connection, ctx: Ctx, call: Call, version: int) -> Body | None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        body = call.build(ctx)
        if not call.response:
            conn.send(call.api, version, body)
            return None
        response = conn.request(call.api, version, body)
        learn_topic_ids(ctx, response)
        if call.retry_while is not None and call.retry_while(response) and time.monotonic() < deadline:
            time.sleep(0.1)
            continue
        if call.until is None or call.until(response):
            break
        if time.monotonic() > deadline:
            raise SetupFailed(f"condition not met within {DEADLINE_S:.0f} s; last response "
                              f"{short(normalise(ctx, response))}")
        time.sleep(0.1)
    if call.save is not None:
        call.save(ctx, response)
    return response


def learn_topic_ids(ctx: Ctx, obj: Any) -> None:
    """Remember every (topic id, name) pair a response shows, for the normaliser."""
    if isinstance(obj, dict):
        tid = obj.get("topic_id")
        name = obj.get("name", obj.get("topic"))
        if isinstance(tid, bytes) and tid != bytes(16) and isinstance(name, str) and name:
            ctx.topic_names[tid] = name
        for v in obj.values():
            if isinstance(v, (dict, list)):
                learn_topic_ids(ctx, v)
    elif isinstance(obj, list):
        for v in obj:
            learn_topic_ids(ctx, v)


# ------------------------------------------------------------------------------------------ normalising

_RESPONSE_FIELDS = {spec[0]: spec[4] for spec in MESSAGES.values() if spec[0] is not None and spec[1] == "response"}


def response_fields(api_key: int) -> tuple:
    return _RESPONSE_FIELDS[api_key]


def prune(fields: tuple, obj: Any, version: int) -> Any:
    """Only the fields that exist in `version` (the decoder also fills in those of other versions)."""
    if isinstance(obj, list):
        return [prune(fields, v, version) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    for name, _type, versions, _n, _t, _tag, _d, _f, sub in fields:
        if name in obj and versions and versions[0] <= version <= versions[1]:
            out[name] = prune(sub, obj[name], version) if sub else obj[name]
    return out


DROP = {"throttle_time_ms"}
NODE_FIELDS = {"node_id", "leader_id", "controller_id", "broker_id", "replica_nodes", "isr_nodes",
               "offline_replicas", "eligible_leader_replicas", "last_known_elr", "coordinator_id"}
ALIASED = {"member_id": "member", "leader": "member", "producer_id": "pid", "session_id": "session"}
WALL_CLOCK = {"transaction_start_time_ms"}
UUID_FIELDS = {"topic_id", "incarnation_id", "directory_id"}
IDENTITY = ("name", "topic", "topic_id", "topic_name", "partition_index", "partition", "index", "node_id", "group_id",
            "member_id", "resource_name", "config_name", "key", "transactional_id", "api_key", "producer_id",
            "partition_id")
UNORDERED_SCALARS = {"replica_nodes", "isr_nodes", "offline_replicas", "partitions", "partition_indexes"}


@dataclass(frozen=True)
class Text:
    """An error message: compared apart from the rest (a difference in text is a note, not a failure)."""

    value: str | None

    def __repr__(self) -> str:
        return repr(self.value)


def normalise(ctx: Ctx, obj: Any, key: str = "") -> Any:
    if isinstance(obj, dict):
        return {k: normalise(ctx, v, k) for k, v in obj.items() if k not in DROP}
    if isinstance(obj, list):
        items = [normalise(ctx, v, key) for v in obj]
        if items and all(isinstance(v, dict) for v in items):
            return sorted(items, key=identity_sort_key)
        if key in UNORDERED_SCALARS and all(isinstance(v, (int, str)) for v in items):
            return sorted(items, key=repr)
        return items
    if key == "error_message" or key.endswith("_error_message"):
        return Text(obj)
    if key == "cluster_id" and isinstance(obj, str):
        return "<cluster id>"
    if key == "host":
        return "<host>"
    if key == "port":
        return "<port>"
    if key in NODE_FIELDS and isinstance(obj, int):
        return "<self>" if obj == ctx.broker.node_id else obj
    if key in ALIASED and obj not in ("", None, -1, 0):
        return ctx.alias(ALIASED[key], obj)
    if key in WALL_CLOCK and isinstance(obj, int) and obj > 0:
        return "<time>"
    if key in UUID_FIELDS and isinstance(obj, bytes) and len(obj) == 16:
        if obj == bytes(16):
            return "<zero uuid>"
        return f"<id of {ctx.topic_names[obj]}>" if obj in ctx.topic_names else "<uuid>"
    if key == "records" and isinstance(obj, (bytes, bytearray, memoryview)):
        batches = describe_records(bytes(obj))
        return [normalise(ctx, b) for b in batches] if isinstance(batches, list) else batches
    if isinstance(obj, (bytes, bytearray, memoryview)):
        b = bytes(obj)
        return f"<{len(b)} bytes {b[:24].hex()}{'...' if len(b) > 24 else ''}>"
    return obj


def identity_sort_key(item: dict) -> tuple:
    label = identity(item)
    return (label is None, str(label), repr(sorted(item.items(), key=lambda kv: kv[0])))


def identity(item: dict) -> str | None:
    for k in IDENTITY:
        if k in item and item[k] not in ("", None) and not isinstance(item[k], (dict, list)):
            return f"{k}={item[k]}"
    return None


BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # RecordBatch v2, 61 bytes


def describe_records(data: bytes) -> list[dict] | str:
    """Record batches as their header fields plus a digest of each batch's records. The CRC shows as valid
    or not (it covers the producer id, which differs); a control batch's timestamps are the broker's clock."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        base_offset, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        if end > len(data):
            out.append({"partial batch": len(data) - pos})
            break
        magic = data[pos + 16]
        if magic != 2 or length < BATCH_HEADER.size - 12:
            out.append({"base_offset": base_offset, "magic": magic, "length": length,
                        "digest": hashlib.sha1(data[pos:end]).hexdigest()[:12]})
        else:
            (_, _, epoch, _, crc, attributes, last_delta, first_ts, max_ts, pid, pepoch, base_seq,
             count) = BATCH_HEADER.unpack_from(data, pos)
            if attributes & 0x20:  # a control batch (transaction marker): the broker's clock
                first_ts = max_ts = "<time>"
            out.append({"base_offset": base_offset, "length": length, "partition_leader_epoch": epoch,
                        "crc": "valid" if crc32c(data[pos + 21:end]) == crc else f"invalid {crc:08x}",
                        "attributes": attributes, "last_offset_delta": last_delta,
                        "base_timestamp": first_ts, "max_timestamp": max_ts, "producer_id": pid,
                        "producer_epoch": pepoch, "base_sequence": base_seq, "record_count": count,
                        "records_digest": hashlib.sha1(data[pos + BATCH_HEADER.size:end]).hexdigest()[:12]})
        pos = end
    return out if data else "<no records>"


# ---------------------------------------------------------------------------------------------- diffing

@dataclass(frozen=True)
class Difference:
    path: str
    kafka: Any
    odradek: Any

    def __str__(self) -> str:
        return f"{self.path}: kafka {show(self.path, self.kafka)} vs odradek {show(self.path, self.odradek)}"


def show(path: str, value: Any) -> str:
    """A value for a reader: error codes with their names."""
    if path.endswith("error_code") and isinstance(value, int):
        try:
            return f"{value} {ErrorCode(value).name}"
        except ValueError:
            return str(value)
    return short(value)


ABSENT = "<absent>"


def diff(a: Any, b: Any, path: str = "") -> Iterator[tuple[bool, Difference]]:
    """(is_text_only, difference) for each place the two normalised values differ."""
    if isinstance(a, Text) or isinstance(b, Text):
        ta = a.value if isinstance(a, Text) else a
        tb = b.value if isinstance(b, Text) else b
        if (ta or None) != (tb or None):
            yield True, Difference(path or ".", ta, tb)
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            yield from diff(a.get(k, ABSENT), b.get(k, ABSENT), f"{path}.{k}" if path else k)
        return
    if isinstance(a, list) and isinstance(b, list):
        if all(isinstance(v, dict) for v in a + b) and (a or b):
            la, lb = labelled(a), labelled(b)
            if la is not None and lb is not None:
                for k in list(la) + [k for k in lb if k not in la]:
                    yield from diff(la.get(k, ABSENT), lb.get(k, ABSENT), f"{path}[{k}]")
                return
        if len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                yield from diff(x, y, f"{path}[{i}]")
            return
    if a != b:
        yield False, Difference(path or ".", a, b)


def labelled(items: list[dict]) -> dict[str, dict] | None:
    out: dict[str, dict] = {}
    for item in items:
        label = identity(item)
        if label is None:
            return None
        n, unique = 2, label
        while unique in out:
            unique, n = f"{label}#{n}", n + 1
        out[unique] = item
    return out


def short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "...]"


# --------------------------------------------------------------------------------------------- outcome

@dataclass
class Outcome:
    scenario: str
    api: str
    version: int | None
    differences: list[Difference]
    texts: list[Difference]  # error messages that differ (not failures)
    kafka: Any = None
    odradek: Any = None
    prefix: str = ""  # the scenario's names start with it; shown as T
    known: list[tuple[Difference, str]] = field(default_factory=list)  # deliberate ones (known.py), with reasons

    def t(self, text: str) -> str:
        return text.replace(self.prefix, "T") if self.prefix else text

    @property
    def identical(self) -> bool:
        return not self.differences

    def explain(self) -> str:
        lines = [f"{self.scenario} ({self.api} v{self.version}): "
                 + ("identical" if self.identical else f"{len(self.differences)} difference(s)")]
        lines += [f"  {self.t(str(d))}" for d in self.differences]
        lines += [f"  (message) {self.t(str(d))}" for d in self.texts]
        lines += [f"  (deliberate) {self.t(str(d))}" for d, _ in self.known]
        if self.prefix:
            lines.append(f"  (T is {self.prefix})")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {"scenario": self.scenario, "api": self.api, "version": self.version,
                "differences": [[self.t(d.path), self.t(show(d.path, d.kafka)), self.t(show(d.path, d.odradek))]
                                for d in self.differences],
                "texts": [[self.t(d.path), d.kafka, d.odradek] for d in self.texts],
                "known": [[self.t(d.path), self.t(show(d.path, d.kafka)), self.t(show(d.path, d.odradek)), reason]
                          for d, reason in self.known],
                "kafka": self.t(short(self.kafka, 4000)), "odradek": self.t(short(self.odradek, 4000))}


def compare(scenario: Scenario, kafka: Broker, odradek: Broker, run_token: str) -> Outcome:
    """Run one scenario on both brokers and compare the normalised responses."""
    api = API_NAMES.get(scenario.request.api, str(scenario.request.api))
    calls = [*scenario.setup, scenario.request] + ([scenario.after] if scenario.after else [])
    versions: dict[int, int] = {}
    for call in calls:
        v = pick_version(call, kafka, odradek)
        if v is None:
            wanted = f" v{call.version}" if call.version is not None else ""
            return Outcome(scenario.id, api, None, [Difference(
                f"no common version of {API_NAMES.get(call.api, call.api)}{wanted}",
                version_ranges(call.api, kafka, odradek).split(", ")[0],
                version_ranges(call.api, kafka, odradek).split(", ")[1])], [])
        versions[id(call)] = v
    version = versions[id(scenario.request)]
    prefix = f"d{run_token}-{scenario.id}"[:200]
    results = {}
    for broker in (kafka, odradek):
        try:
            ctx, response = run_on(broker, scenario, versions, prefix)
            results[broker.name] = normalise(ctx, response)
        except SetupFailed as exc:
            results[broker.name] = f"<setup failed: {exc}>"
    k, o = results[kafka.name], results[odradek.name]
    if any(isinstance(r, str) and r.startswith("<setup failed") for r in (k, o)):
        return Outcome(scenario.id, api, version, [Difference("setup", k, o)], [], k, o, prefix)
    differences, texts, known = [], [], []
    for text_only, d in diff(k, o):
        reason = None if text_only else deliberate(scenario.id, d.path.replace(prefix, "T"))
        if reason is not None:
            known.append((d, reason))
        else:
            (texts if text_only else differences).append(d)
    return Outcome(scenario.id, api, version, differences, texts, k, o, prefix, known)


# ------------------------------------------------------------------------------------------ record data

def zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def record_batch(values: Sequence[bytes], timestamp: int, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, attributes: int = 0, corrupt_crc: bool = False,
                 keys: Sequence[bytes | None] | None = None) -> bytes:
    """A RecordBatch v2 of uncompressed records without headers, all at `timestamp`; no keys unless `keys`
    (one per value, None for a null key)."""
    records = bytearray()
    for i, value in enumerate(values):
        key = keys[i] if keys is not None else None
        key_field = zigzag(-1) if key is None else zigzag(len(key)) + key
        body = b"\x00" + zigzag(0) + zigzag(i) + key_field + zigzag(len(value)) + value + zigzag(0)
        records += zigzag(len(body)) + body
    n = len(values)
    after_crc = struct.pack(">hiqqqhii", attributes, n - 1, timestamp, timestamp, producer_id, producer_epoch,
                            base_sequence, n) + bytes(records)
    crc = crc32c(after_crc) ^ (0xFFFFFFFF if corrupt_crc else 0)
    body = struct.pack(">ibI", 0, 2, crc) + after_crc  # partition leader epoch, magic, crc
    return struct.pack(">qi", 0, len(body)) + body
