"""The HTTP services (`odradek console`, `odradek registry`) against a hostile web page and a hostile client.

Real processes only: a broker, the console and the registry as subprocesses on free loopback ports, raw
HTTP (http.client and sockets, to send the Host, Origin and bodies a browser or an attacker would). Every
refused write is followed by a look at the cluster (topic, records, committed offsets, subjects) to show
that nothing changed, and the same write done properly succeeds, so each refusal is the guard's.

The checks are odradek.http_guard's (docs/console.md, docs/schema-registry.md). Confluent's registry is not
run here, so its answers to the same bad inputs are not compared (docs/schema-registry.md says what is
known of them).
"""

from __future__ import annotations

import base64
import http.client
import json
import select
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.console.conftest import ConsoleProcess
from tests.interop.helpers import consumer_config, wait_until

pytest.importorskip("fastavro")
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from tests.interop.test_schema_registry import RegistryProcess  # noqa: E402

EVIL = "http://evil.example"
USER, PASSWORD, TOKEN = "alice", "wonder land", "t0ken-for-tests"
REGISTRY_JSON = "application/vnd.schemaregistry.v1+json"
AVRO_STRING = json.dumps({"schema": json.dumps({"type": "string"})})
MIB = 1 << 20


def call(port: int, method: str, path: str, body: bytes | str | None = None, headers: dict[str, str] | None = None,
         host: str | None = None) -> tuple[int, dict[str, str], Any]:
    """(status, headers, JSON body or text) of one request with exactly these headers (Host defaults to the
    service's own address)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    sent = {"Host": f"127.0.0.1:{port}" if host is None else host, **(headers or {})}
    try:
        conn.request(method, path, body=body, headers=sent)
        res = conn.getresponse()
        raw = res.read()
        try:
            payload = json.loads(raw)
        except ValueError:
            payload = raw.decode("latin-1")
        joined: dict[str, str] = {}
        for name, value in res.getheaders():
            joined[name.lower()] = f"{joined[name.lower()]}, {value}" if name.lower() in joined else value
        return res.status, joined, payload
    finally:
        conn.close()


def send_large_body(port: int, path: str, total: int, chunked: bool, content_type: str) -> int:
    """Stream a `total`-byte body (Content-Length announced, or chunked) and stop as soon as the server
    answers; the status of its answer (0 if it closed without one)."""
    head = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", f"Content-Type: {content_type}"]
    head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}")
    chunk = b"[" * (256 * 1024)
    framed = b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        sent = 0
        while sent < total:
            if select.select([sock], [], [], 0)[0]:
                break  # the answer is there: stop sending
            try:
                sock.sendall(framed)
            except OSError:
                break
            sent += len(chunk)
        answer = b""
        sock.settimeout(30)
        try:
            while b"\r\n" not in answer:
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
        except OSError:
            pass
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


def proc_status_bytes(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture(scope="module")
def secrets_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("http-secrets")
    # alice's line as `--hash-password` prints it, bob's password in the clear (accepted, not recommended)
    hashed = subprocess.run([sys.executable, "-m", "odradek", "registry", "--hash-password", USER],
                            input=PASSWORD + "\n", capture_output=True, text=True, timeout=60, check=True).stdout
    assert hashed.startswith(f"{USER}:pbkdf2_sha256$") and PASSWORD not in hashed
    (d / "users").write_text(f"# test users\n{hashed.strip()}\nbob:plain-pass\n")
    (d / "token").write_text(TOKEN + "\n")
    for f in d.iterdir():
        f.chmod(0o600)
    return d


@pytest.fixture(scope="module")
def console(broker, tmp_path_factory) -> Iterator[ConsoleProcess]:
    c = ConsoleProcess(broker.bootstrap, tmp_path_factory.mktemp("console") / "console.log")
    yield c
    c.stop()


@pytest.fixture(scope="module")
def registry(broker, tmp_path_factory) -> Iterator[RegistryProcess]:
    r = RegistryProcess(broker.bootstrap, tmp_path_factory.mktemp("registry") / "registry.log",
                        ("--topic", "_schemas_open")).start()
    yield r
    r.stop()


def guarded_args(secrets_dir: Path) -> tuple[str, ...]:
    return ("--users-file", str(secrets_dir / "users"), "--token-file", str(secrets_dir / "token"),
            "--allowed-hosts", "kafka.test,.corp.test")


@pytest.fixture(scope="module")
def locked_console(broker, secrets_dir, tmp_path_factory) -> Iterator[ConsoleProcess]:
    c = ConsoleProcess(broker.bootstrap, tmp_path_factory.mktemp("console") / "locked.log",
                       guarded_args(secrets_dir))
    yield c
    c.stop()


@pytest.fixture(scope="module")
def locked_registry(broker, secrets_dir, tmp_path_factory) -> Iterator[RegistryProcess]:
    r = RegistryProcess(broker.bootstrap, tmp_path_factory.mktemp("registry") / "locked.log",
                        ("--topic", "_schemas_locked", *guarded_args(secrets_dir))).start()
    yield r
    r.stop()


def topic_names(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15).topics)


def end_offset(bootstrap: str, topic: str) -> int:
    c = Consumer(consumer_config(bootstrap, **{"group.id": "http-hostile-probe"}))
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)[1]
    finally:
        c.close()


def committed(bootstrap: str, group: str, topic: str) -> int:
    c = Consumer(consumer_config(bootstrap, **{"group.id": group}))
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=15)[0].offset
    finally:
        c.close()


# -- the console ----------------------------------------------------------------------------------------------

def test_console_refuses_cross_site_writes_and_nothing_changes(broker, console, topic_name) -> None:
    port, bootstrap = console.port, broker.bootstrap
    json_type = {"Content-Type": "application/json"}
    assert call(port, "POST", "/api/topics", json.dumps({"name": topic_name, "partitions": 1}), json_type)[0] == 201
    wait_until(lambda: topic_name in topic_names(bootstrap), timeout=30, message="the topic to exist")
    produced = json.dumps({"value": "v"})
    assert call(port, "POST", f"/api/topics/{topic_name}/messages", produced, json_type)[0] == 200
    c = Consumer(consumer_config(bootstrap, **{"group.id": f"{topic_name}-g", "enable.auto.commit": False}))
    c.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
    c.close()
    victim = f"{topic_name}-new"

    # what a page on another origin can send without a pre-flight: text/plain, forms, multipart
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        for path, body in (("/api/topics", {"name": victim, "partitions": 1}),
                           (f"/api/topics/{topic_name}/messages", {"value": "evil"}),
                           (f"/api/groups/{topic_name}-g/reset", {"to": "earliest"})):
            status, _, answer = call(port, "POST", path, json.dumps(body),
                                     {"Content-Type": content_type, "Origin": EVIL})
            assert status in (403, 415) and "error" in answer, (content_type, path, status, answer)
            # the same without an Origin (a form from a file: page, a client): still refused for its type
            status, _, answer = call(port, "POST", path, json.dumps(body), {"Content-Type": content_type})
            assert status == 415 and "Content-Type" in answer["error"], (content_type, path, status, answer)
    # JSON from another origin (only possible after a pre-flight the console never grants)
    status, _, answer = call(port, "POST", "/api/topics", json.dumps({"name": victim}),
                             {"Content-Type": "application/json", "Origin": EVIL})
    assert status == 403 and "Origin" in answer["error"]
    assert call(port, "DELETE", f"/api/topics/{topic_name}", headers={"Origin": EVIL})[0] == 403
    assert call(port, "POST", "/api/topics", json.dumps({"name": victim}),
                {"Content-Type": "application/json", "Origin": "null"})[0] == 403

    assert victim not in topic_names(bootstrap) and topic_name in topic_names(bootstrap)
    assert end_offset(bootstrap, topic_name) == 1
    assert committed(bootstrap, f"{topic_name}-g", topic_name) == 1

    # its own origin, as the console's page sends it: accepted
    own = {"Content-Type": "application/json; charset=utf-8", "Origin": f"http://127.0.0.1:{port}"}
    status, _, answer = call(port, "POST", f"/api/groups/{topic_name}-g/reset", json.dumps({"to": "earliest"}), own)
    assert status == 200, answer
    assert committed(bootstrap, f"{topic_name}-g", topic_name) == 0


def test_console_answers_only_its_own_host_names(broker, console, topic_name) -> None:
    port = console.port
    json_type = {"Content-Type": "application/json"}
    assert call(port, "POST", "/api/topics", json.dumps({"name": topic_name}), json_type)[0] == 201
    wait_until(lambda: topic_name in topic_names(broker.bootstrap), timeout=30, message="the topic to exist")
    for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.1.nip.io", "", "bad host"):
        for method, path in (("GET", "/api/topics"), ("GET", "/"), ("DELETE", f"/api/topics/{topic_name}")):
            status, _, answer = call(port, method, path, host=host)
            assert status == 400 and "Host" in answer["error"], (host, method, status, answer)
    assert topic_name in topic_names(broker.bootstrap)
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost"):
        assert call(port, "GET", "/api/health", host=host)[0] == 200, host


def test_console_body_limit(console) -> None:
    port = console.port
    status, _, answer = call(port, "POST", "/api/topics", b"{" + b" " * (5 * MIB) + b"}",
                             {"Content-Type": "application/json"})
    assert status == 413 and "--max-request-bytes" in answer["error"]
    assert send_large_body(port, "/api/topics", 64 * MIB, chunked=True, content_type="application/json") == 413
    # JSON nested past Python's recursion limit: a 400 with a reason, not a 500
    status, _, answer = call(port, "POST", "/api/topics", b"[" * 100_000, {"Content-Type": "application/json"})
    assert status == 400 and "error" in answer


def test_console_authentication(broker, locked_console, topic_name) -> None:
    port = locked_console.port
    status, headers, _ = call(port, "GET", "/api/topics")
    assert status == 401 and headers["www-authenticate"].startswith('Basic realm="odradek console"')
    assert 'Bearer realm="odradek console"' in headers["www-authenticate"]
    for wrong in (basic(USER, "wrong"), basic("mallory", PASSWORD), basic("bob", "plain-pas"), "Bearer nope",
                  "Basic !!!", f"Bearer {TOKEN}x", f"Token {TOKEN}"):
        assert call(port, "GET", "/api/topics", headers={"Authorization": wrong})[0] == 401, wrong
    for right in (basic(USER, PASSWORD), basic(USER, PASSWORD), basic("bob", "plain-pass"), f"Bearer {TOKEN}"):
        assert call(port, "GET", "/api/health", headers={"Authorization": right})[0] == 200, right
    # listed hosts, and subdomains of a listed ".corp.test"
    auth = {"Authorization": basic(USER, PASSWORD)}
    for host in ("kafka.test", f"kafka.test:{port}", "a.corp.test", "corp.test"):
        assert call(port, "GET", "/api/health", headers=auth, host=host)[0] == 200, host
    assert call(port, "GET", "/api/health", headers=auth, host="corp.test.evil.example")[0] == 400
    # authentication does not make cross-site writes acceptable (a browser sends basic credentials with them)
    status, _, _ = call(port, "POST", "/api/topics", json.dumps({"name": topic_name}),
                        {**auth, "Content-Type": "text/plain", "Origin": EVIL})
    assert status in (403, 415)
    # an Origin on a listed host is the operator's (a reverse proxy's name, say)
    status, _, answer = call(port, "POST", "/api/topics", json.dumps({"name": topic_name}),
                             {**auth, "Content-Type": "application/json", "Origin": "https://kafka.test"})
    assert status == 201, answer
    wait_until(lambda: topic_name in topic_names(broker.bootstrap), timeout=30, message="the topic to exist")


# -- the registry ---------------------------------------------------------------------------------------------

def test_registry_refuses_cross_site_registration(registry) -> None:
    port, subject = registry.port, "cross-site-value"
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                         "application/octet-stream"):
        status, headers, answer = call(port, "POST", f"/subjects/{subject}/versions", AVRO_STRING,
                                       {"Content-Type": content_type, "Origin": EVIL})
        assert status in (403, 415) and answer["error_code"] == status, (content_type, status, answer)
        assert headers["content-type"] == REGISTRY_JSON
        status, _, answer = call(port, "POST", f"/subjects/{subject}/versions", AVRO_STRING,
                                 {"Content-Type": content_type})
        assert status == 415 and answer["error_code"] == 415, (content_type, status, answer)
    assert call(port, "PUT", "/config", json.dumps({"compatibility": "NONE"}), {"Content-Type": "text/plain"})[0] == 415
    assert call(port, "PUT", "/mode", json.dumps({"mode": "READONLY"}),
                {"Content-Type": REGISTRY_JSON, "Origin": EVIL})[0] == 403
    assert subject not in call(port, "GET", "/subjects")[2]
    assert call(port, "GET", "/mode")[2] == {"mode": "READWRITE"}
    assert call(port, "GET", "/config")[2] == {"compatibilityLevel": "BACKWARD"}
    # each of the JSON types Confluent's registry takes
    for i, content_type in enumerate((REGISTRY_JSON, "application/vnd.schemaregistry+json", "application/json")):
        symbols = [f"S{j}" for j in range(i + 1)]  # each adds a symbol: compatible under BACKWARD
        schema = json.dumps({"schema": json.dumps({"type": "enum", "name": "E", "symbols": symbols})})
        status, _, answer = call(port, "POST", f"/subjects/{subject}/versions", schema,
                                 {"Content-Type": content_type, "Origin": f"http://127.0.0.1:{port}"})
        assert status == 200 and answer["id"] > 0, (content_type, answer)
    assert call(port, "GET", f"/subjects/{subject}/versions")[2] == [1, 2, 3]


def test_registry_answers_only_its_own_host_names(registry) -> None:
    port, subject = registry.port, "rebinding-value"
    json_type = {"Content-Type": REGISTRY_JSON}
    assert call(port, "POST", f"/subjects/{subject}/versions", AVRO_STRING, json_type)[0] == 200
    for host in ("attacker.example", f"attacker.example:{port}"):
        for method, path, body in (("GET", "/subjects", None), ("GET", "/schemas/ids/1", None),
                                   ("DELETE", f"/subjects/{subject}", None),
                                   ("POST", "/subjects/x/versions", AVRO_STRING)):
            status, _, answer = call(port, method, path, body, json_type, host=host)
            assert status == 400 and answer["error_code"] == 400 and "Host" in answer["message"], (host, method, path)
    assert call(port, "GET", f"/subjects/{subject}/versions")[2] == [1]
    assert "x" not in call(port, "GET", "/subjects", host=f"localhost:{port}")[2]


def test_registry_authentication(locked_registry) -> None:
    port = locked_registry.port
    status, headers, answer = call(port, "GET", "/subjects")
    assert status == 401 and answer["error_code"] == 401
    assert "Basic" in headers["www-authenticate"] or "Bearer" in headers["www-authenticate"]
    assert call(port, "GET", "/subjects", headers={"Authorization": basic(USER, "x")})[0] == 401
    assert call(port, "GET", "/subjects", headers={"Authorization": "Bearer x"})[0] == 401
    assert call(port, "GET", "/subjects", headers={"Authorization": basic(USER, PASSWORD)})[2] == []
    assert call(port, "GET", "/subjects", headers={"Authorization": f"Bearer {TOKEN}"})[2] == []
    # confluent-kafka's own client with basic credentials and with a bearer token
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    with_basic = SchemaRegistryClient({"url": locked_registry.url, "basic.auth.user.info": f"{USER}:{PASSWORD}"})
    assert with_basic.register_schema("auth-value", Schema(json.dumps({"type": "string"}), "AVRO")) > 0
    with_token = SchemaRegistryClient({"url": locked_registry.url, "bearer.auth.credentials.source": "STATIC_TOKEN",
                                       "bearer.auth.token": TOKEN, "bearer.auth.logical.cluster": "lsrc-1",
                                       "bearer.auth.identity.pool.id": "pool-1"})
    assert with_token.get_subjects() == ["auth-value"]


def test_registry_body_limit_keeps_memory_bounded(registry) -> None:
    port, pid = registry.port, registry.proc.pid
    baseline = proc_status_bytes(pid, "VmRSS")
    assert send_large_body(port, "/subjects/big-value/versions", 200 * MIB, chunked=False,
                           content_type=REGISTRY_JSON) == 413
    assert send_large_body(port, "/subjects/big-value/versions", 200 * MIB, chunked=True,
                           content_type=REGISTRY_JSON) == 413
    status, _, answer = call(port, "POST", "/subjects/big-value/versions", b" " * (5 * MIB),
                             {"Content-Type": REGISTRY_JSON})
    assert status == 413 and answer["error_code"] == 413
    # peak resident memory: a 200 MB body once cost the registry 400 MB; the limit is 4 MiB
    peak = proc_status_bytes(pid, "VmHWM")
    assert peak - baseline < 48 * MIB, f"RSS {baseline >> 20} MiB before, peak {peak >> 20} MiB"
    assert "big-value" not in call(port, "GET", "/subjects")[2]
    assert call(port, "POST", "/subjects/big-value/versions", AVRO_STRING, {"Content-Type": REGISTRY_JSON})[0] == 200


def nested_avro(depth: int) -> str:
    """A record holding a record ... `depth` deep, written as text (json.dumps itself recurses)."""
    head = "".join(f'{{"type":"record","name":"R{i}","fields":[{{"name":"f","type":' for i in range(depth))
    return head + '"int"' + "}]}" * depth


def nested_json_schema(depth: int) -> str:
    return '{"type":"object","properties":{"a":' * depth + '{"type":"string"}' + "}}" * depth


def nested_proto(depth: int) -> str:
    body = "message M%d { string x = 1; }" % depth
    for i in range(depth - 1, -1, -1):
        body = "message M%d { %s M%d y = 1; }" % (i, body, i + 1)
    return 'syntax = "proto3";\n' + body


@pytest.mark.parametrize("case", ["avro-records", "avro-arrays", "avro-unions", "json-schema", "json-brackets",
                                  "protobuf", "enum-200000", "record-fields-20000", "schema-text-2MB"])
def test_registry_refuses_schemas_too_deep_or_too_large(registry, case: str) -> None:
    port = registry.port
    schema_type = "PROTOBUF" if case == "protobuf" else "JSON" if case.startswith("json") else "AVRO"
    schema = {
        "avro-records": lambda: nested_avro(2000),
        "avro-arrays": lambda: '{"type":"array","items":' * 5000 + '"int"' + "}" * 5000,
        "avro-unions": lambda: "[" * 50_000 + '"int"' + "]" * 50_000,
        "json-schema": lambda: nested_json_schema(3000),
        "json-brackets": lambda: "[" * 200_000 + "]" * 200_000,
        "protobuf": lambda: nested_proto(500),
        "enum-200000": lambda: json.dumps({"type": "enum", "name": "E", "symbols": [f"S{i}" for i in range(200_000)]}),
        "record-fields-20000": lambda: json.dumps({"type": "record", "name": "R", "fields": [
            {"name": f"f{i}", "type": "int"} for i in range(20_000)]}),
        "schema-text-2MB": lambda: json.dumps({"type": "record", "name": "R", "doc": "x" * (2 * MIB), "fields": []}),
    }[case]()
    body = json.dumps({"schema": schema, "schemaType": schema_type})
    subject = f"hostile-{case}-value"
    for path in (f"/subjects/{subject}/versions", f"/subjects/{subject}",
                 f"/compatibility/subjects/{subject}/versions"):
        status, _, answer = call(port, "POST", path, body, {"Content-Type": REGISTRY_JSON})
        if path.startswith("/subjects/") and not path.endswith("versions") and status == 404:
            continue  # lookup under a subject that does not exist: Confluent answers 40401 before parsing
        assert status == 422 and answer["error_code"] == 42201, (path, status, answer)
        assert answer["message"].startswith("Invalid schema"), answer
    assert subject not in call(port, "GET", "/subjects")[2]


def test_registry_takes_schemas_within_the_limits(registry) -> None:
    port = registry.port
    cases = [("AVRO", nested_avro(30)), ("JSON", nested_json_schema(45)),
             ("AVRO", json.dumps({"type": "enum", "name": "E", "symbols": [f"S{i}" for i in range(10_000)]}))]
    for i, (schema_type, schema) in enumerate(cases):
        body = json.dumps({"schema": schema, "schemaType": schema_type})
        status, _, answer = call(port, "POST", f"/subjects/within-{i}-value/versions", body,
                                 {"Content-Type": REGISTRY_JSON})
        assert status == 200 and answer["id"] > 0, (i, status, answer)


def test_registry_never_answers_500_to_nested_bodies(registry) -> None:
    """A request body (not a schema) nested past the recursion limit: 400, the registry's unparsable-body
    answer."""
    status, _, answer = call(registry.port, "POST", "/subjects/x/versions", b"[" * 200_000,
                             {"Content-Type": REGISTRY_JSON})
    assert status == 400 and answer["error_code"] == 400, (status, answer)


def test_registry_on_every_interface_and_with_the_host_check_off(broker, tmp_path) -> None:
    """Bound to 0.0.0.0 the registry answers to the machine's names and to IP addresses (an address cannot
    be re-pointed by DNS), still not to other names; `--allowed-hosts '*'` answers to any."""
    import socket as sockets

    wildcard = RegistryProcess(broker.bootstrap, tmp_path / "wildcard.log")
    wildcard.extra_args = ("--listen", f"0.0.0.0:{wildcard.port}", "--topic", "_schemas_wildcard")
    anything = RegistryProcess(broker.bootstrap, tmp_path / "any.log", ("--allowed-hosts", "*", "--topic",
                                                                          "_schemas_any"))
    try:
        wildcard.start()
        anything.start()
        for host in (sockets.gethostname(), f"{sockets.gethostname()}:{wildcard.port}", "localhost", "10.9.8.7",
                     f"[::1]:{wildcard.port}"):
            assert call(wildcard.port, "GET", "/subjects", host=host)[0] == 200, host
        assert call(wildcard.port, "GET", "/subjects", host="attacker.example")[0] == 400
        assert call(anything.port, "GET", "/subjects", host="attacker.example")[0] == 200
        # the Origin check stays on without the Host check
        status, _, _ = call(anything.port, "POST", "/subjects/s-value/versions", AVRO_STRING,
                            {"Content-Type": REGISTRY_JSON, "Origin": EVIL}, host="attacker.example")
        assert status == 403
    finally:
        wildcard.stop()
        anything.stop()


@pytest.mark.parametrize("command", ["console", "registry"])
def test_bad_protection_flags_stop_the_command(tmp_path, command: str) -> None:
    """A users file that cannot be read, one without users, an empty token, a bad host name: exit 2 with the
    reason, before anything listens (no broker is needed to get there)."""
    no_users, no_token = tmp_path / "no-users", tmp_path / "no-token"
    no_users.write_text("# nobody\n")
    no_token.write_text("\n")
    for flags, reason in ((["--users-file", str(tmp_path / "missing")], "missing"),
                          (["--users-file", str(no_users)], "no users"),
                          (["--token-file", str(no_token)], "is empty"),
                          (["--allowed-hosts", "bad host"], "--allowed-hosts"),
                          (["--max-request-bytes", "0"], "--max-request-bytes")):
        done = subprocess.run([sys.executable, "-m", "odradek", command, "--bootstrap", "127.0.0.1:1", "--listen",
                               "127.0.0.1:1", *flags], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and reason in done.stderr, (flags, done.returncode, done.stderr)
