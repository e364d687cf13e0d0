"""A small blocking Kafka client for the admin commands: the requests confluent-kafka cannot send (share groups,
KIP-932: ShareGroupDescribe, DescribeShareGroupOffsets, ListGroups with a type filter), encoded and decoded with
odradek's own codec over a plain socket.

It honours the same client properties as the librdkafka clients of the tools (`--command-config`):

- `security.protocol` PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL;
- TLS: `ssl.ca.location` (a file or a directory), `ssl.ca.pem`, `ssl.certificate.location`, `ssl.key.location`,
  `ssl.key.password`, `enable.ssl.certificate.verification`, `ssl.endpoint.identification.algorithm`
  (`https`, librdkafka's default, checks the broker's host name; `none` does not);
- SASL: `sasl.mechanism` (or `sasl.mechanisms`) PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with `sasl.username` and
  `sasl.password`. GSSAPI and OAUTHBEARER are not offered here: `Unsupported` says so.

Every connection asks ApiVersions first, so requests go out in the highest version both sides know (any
Kafka 4.x broker as well as odradek). One connection per broker; requests are sent one at a time.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
from typing import Any

from odradek.protocol import codec
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import error_name
from odradek.tools.common import ToolError

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
MAX_RESPONSE_BYTES = 256 * 1024 * 1024  # a larger size prefix is not a Kafka response: fail instead of allocating
MAX_SASL_STEPS = 8  # PLAIN takes one token, SCRAM two
COORDINATOR_GROUP = 0  # FindCoordinator key_type of a group


class Unsupported(ToolError):
    """The broker lacks the API (in every version this client knows), or the connection settings ask for what
    this client cannot do (a SASL mechanism other than PLAIN/SCRAM, a keystore)."""


def parse_address(address: str) -> tuple[str, int]:
    """`host:port` (an IPv6 host in brackets) as (host, port); ToolError if it is not one."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ToolError(f"bad broker address {address!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def tls_context(config: dict[str, Any]) -> ssl.SSLContext:
    """An SSLContext from librdkafka's ssl.* properties (ToolError for those it cannot express)."""
    for key in ("ssl.keystore.location", "ssl.certificate.pem", "ssl.key.pem", "ssl.engine.location"):
        if config.get(key):
            raise Unsupported(f"{key} is not supported for share-group details: use ssl.certificate.location "
                              "and ssl.key.location (PEM files)")
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    verify = str(config.get("enable.ssl.certificate.verification", "true")).lower() not in ("false", "0")
    check_host = str(config.get("ssl.endpoint.identification.algorithm", "https")).lower() == "https"
    try:
        ca = config.get("ssl.ca.location")
        if ca:
            if os.path.isdir(ca):
                context.load_verify_locations(capath=ca)
            else:
                context.load_verify_locations(cafile=ca)
        if config.get("ssl.ca.pem"):
            context.load_verify_locations(cadata=config["ssl.ca.pem"])
        if config.get("ssl.certificate.location"):
            context.load_cert_chain(config["ssl.certificate.location"], config.get("ssl.key.location"),
                                    config.get("ssl.key.password"))
    except (OSError, ssl.SSLError) as exc:
        raise ToolError(f"bad TLS settings: {exc}") from None
    context.check_hostname = verify and check_host
    if not verify:
        context.verify_mode = ssl.CERT_NONE
    return context


class BrokerConnection:
    """One connection to one broker, ready for requests: TLS handshake, ApiVersions and SASL login done."""

    def __init__(self, host: str, port: int, config: dict[str, Any], timeout: float,
                 client_id: str = "odradek-tools") -> None:
        self.host, self.port = host, port
        self.timeout = timeout
        self.client_id = str(config.get("client.id") or client_id)
        self._correlation = 0
        protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
        if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ToolError(f"unknown security.protocol {protocol}")
        mechanism = str(config.get("sasl.mechanism") or config.get("sasl.mechanisms") or "GSSAPI").upper()
        if protocol.startswith("SASL") and mechanism not in SASL_MECHANISMS:
            # checked before connecting: nothing is sent that could not be finished
            raise Unsupported(f"share-group details cannot log in with SASL {mechanism}: they need PLAINTEXT, "
                              f"SSL or SASL {'/'.join(SASL_MECHANISMS)}")
        try:
            raw = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ToolError(f"cannot reach {host}:{port}: {exc}") from None
        self.sock: socket.socket = raw
        try:
            if protocol in ("SSL", "SASL_SSL"):
                self.sock = tls_context(config).wrap_socket(raw, server_hostname=host)
            self.versions = self._api_versions()
            if protocol.startswith("SASL"):
                self._login(mechanism, str(config.get("sasl.username") or ""), str(config.get("sasl.password") or ""))
        except ssl.SSLError as exc:
            self.close()
            raise ToolError(f"TLS handshake with {host}:{port} failed: {exc}") from None
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "BrokerConnection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def highest(self, api_key: int, lowest: int = 0) -> int | None:
        """The highest version of `api_key` that the broker and the codec both know, at least `lowest`; None
        if there is none."""
        ours = codec.request_versions(api_key)
        theirs = self.versions.get(api_key)
        if theirs is None:
            return None
        top = min(ours[1], theirs[1])
        return top if top >= max(ours[0], theirs[0], lowest) else None

    def version(self, api_key: int, lowest: int = 0) -> int:
        """`highest`, or Unsupported if there is none."""
        top = self.highest(api_key, lowest)
        if top is not None:
            return top
        raise Unsupported(f"the broker at {self.host}:{self.port} does not serve {ApiKey(api_key).name} "
                          f"(version {lowest} or later)")

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        """Send one request and wait for its response body (ToolError if the connection fails)."""
        self._correlation += 1
        try:
            self.sock.sendall(codec.encode_request(api_key, version, self._correlation, self.client_id, body))
            (size,) = struct.unpack(">i", self._read(4))
            if not 0 < size <= MAX_RESPONSE_BYTES:
                raise ToolError(f"{self.host}:{self.port} sent a bad response size {size}")
            correlation, response = codec.decode_response(api_key, version, self._read(size))
        except (OSError, ssl.SSLError) as exc:
            raise ToolError(f"{ApiKey(api_key).name} to {self.host}:{self.port} failed: {exc or 'timed out'}") \
                from None
        except codec.ProtocolError as exc:
            raise ToolError(f"{ApiKey(api_key).name} to {self.host}:{self.port}: unreadable response: {exc}") \
                from None
        if correlation != self._correlation:
            raise ToolError(f"{self.host}:{self.port} answered request {correlation}, not {self._correlation}")
        return response

    def _read(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self.sock.recv(min(left, 1 << 20))
            if not chunk:
                raise ToolError(f"{self.host}:{self.port} closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _api_versions(self) -> dict[int, tuple[int, int]]:
        # v0: every broker since 0.10 answers it, and its response carries all we need
        answer = self.request(ApiKey.API_VERSIONS, 0, {})
        if answer["error_code"]:
            raise ToolError(f"ApiVersions to {self.host}:{self.port}: {error_name(answer['error_code'])}")
        return {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]}

    def _login(self, mechanism: str, username: str, password: str) -> None:
        from odradek.net.sasl_client import SaslClientSettings, SaslLoginFailed

        if not username:
            raise ToolError(f"SASL {mechanism} needs sasl.username and sasl.password (--command-config)")
        # v1 handshake: the tokens then travel in SaslAuthenticate requests
        answer = self.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
        if answer["error_code"]:
            offered = ", ".join(answer.get("mechanisms") or []) or "none"
            raise ToolError(f"SASL {mechanism} refused by {self.host}:{self.port} "
                            f"({error_name(answer['error_code'])}; it offers {offered})")
        exchange = SaslClientSettings(mechanism, username, password).start()
        version = self.version(ApiKey.SASL_AUTHENTICATE)
        token: bytes | None = exchange.first()
        for _ in range(MAX_SASL_STEPS):
            if token is None:
                return
            answer = self.request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token})
            if answer["error_code"]:
                raise ToolError(f"SASL {mechanism} login as {username!r} to {self.host}:{self.port} failed: "
                                f"{answer.get('error_message') or error_name(answer['error_code'])}")
            try:
                token = exchange.step(bytes(answer.get("auth_bytes") or b""))
            except SaslLoginFailed as exc:
                raise ToolError(f"SASL login to {self.host}:{self.port} failed: {exc}") from None
        raise ToolError(f"SASL {mechanism} with {self.host}:{self.port} did not complete")


def connect_bootstrap(bootstrap: str, config: dict[str, Any], timeout: float) -> BrokerConnection:
    """A connection to the first broker of a comma-separated bootstrap list that answers."""
    failures = []
    for address in filter(None, (a.strip() for a in bootstrap.split(","))):
        host, port = parse_address(address)
        try:
            return BrokerConnection(host, port, config, timeout)
        except Unsupported:
            raise
        except ToolError as exc:
            failures.append(str(exc))
    raise ToolError("; ".join(failures) or f"no broker address in {bootstrap!r}")


def find_group_coordinator(conn: BrokerConnection, group: str) -> tuple[str, int]:
    """The (host, port) of `group`'s coordinator, asked of `conn`'s broker with FindCoordinator."""
    version = conn.version(ApiKey.FIND_COORDINATOR)
    if version >= 4:  # batched form (KIP-699)
        answer = conn.request(ApiKey.FIND_COORDINATOR, version,
                              {"key_type": COORDINATOR_GROUP, "coordinator_keys": [group]})
        found = answer["coordinators"][0] if answer["coordinators"] else {"error_code": -1, "error_message": None}
    else:
        found = conn.request(ApiKey.FIND_COORDINATOR, version, {"key": group, "key_type": COORDINATOR_GROUP})
    if found["error_code"]:
        raise ToolError(f"no coordinator for group {group}: {error_name(found['error_code'])}"
                        + (f" ({found['error_message']})" if found.get("error_message") else ""))
    return found["host"], found["port"]


def coordinator_connection(bootstrap: str, config: dict[str, Any], group: str, timeout: float) -> BrokerConnection:
    """A connection to `group`'s coordinator (the bootstrap connection itself when it is the one)."""
    conn = connect_bootstrap(bootstrap, config, timeout)
    try:
        host, port = find_group_coordinator(conn, group)
    except BaseException:
        conn.close()
        raise
    if (host, port) == (conn.host, conn.port):
        return conn
    conn.close()
    return BrokerConnection(host, port, config, timeout)


def raw_request(host: str, port: int, api_key: int, version: int, body: dict[str, Any],
                timeout: float = 30.0) -> dict[str, Any]:
    """One request in ``version`` over a plain socket, without ApiVersions first or any security (the
    cluster tools' requests to a PLAINTEXT listener: KIP-455's reassignments, DescribeLogDirs)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(codec.encode_request(api_key, version, 1, "odradek-tools", body))
        (size,) = struct.unpack(">i", _read_exactly(sock, 4))
        _, response = codec.decode_response(api_key, version, _read_exactly(sock, size))
        return response


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
