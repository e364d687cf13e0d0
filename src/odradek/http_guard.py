"""The checks every request to odradek's HTTP services (`odradek console`, `odradek registry`) passes before
the application sees it: one ASGI middleware, `HttpGuard`, configured by the same command-line flags in both.

In order, on every request:

1. **Host.** The Host header must name the service (DNS rebinding: a page on attacker.example whose name
   the attacker re-points at 127.0.0.1 is same-origin with the service for the browser, and only the Host
   header, which still says attacker.example, tells it apart). Accepted: `localhost`, the bind address, the
   loopback addresses when bound to loopback or to every interface, the machine's own names and any IP
   address when bound to every interface (an IP literal cannot be re-pointed), and the names listed with
   `--allowed-hosts` (a leading dot matches subdomains; `*` turns the check off). Otherwise 400.
2. **Authentication**, when `--users-file` (HTTP basic) or `--token-file` (bearer) is given: 401 with a
   WWW-Authenticate challenge otherwise. Secrets are compared in constant time.
3. **Cross-site writes.** A state-changing request (POST, PUT, PATCH, DELETE) is refused with 403 when it
   carries an Origin other than the service's own (the Host it was sent to, or a listed host), and with 415
   when its body is not JSON (`application/json`, and for the registry Confluent's
   `application/vnd.schemaregistry[.v1]+json`). Browsers send text/plain, form and multipart bodies
   cross-site without asking first; a JSON body from another origin always needs a CORS pre-flight, which
   these services never grant. A DELETE without a body carries no Content-Type and is not refused for it.
4. **Body size.** A Content-Length over `--max-request-bytes` is answered 413 before anything is read; a
   body without one (chunked) is read up to the limit and answered 413 the moment it passes it. The
   application gets the body the guard read, so a request never holds more than the limit in memory.

Errors are JSON in each service's own shape (`error_body`). Not thread-safe; runs on the server's loop.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import getpass
import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

HOST_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789.-_"
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
JSON_TYPES = frozenset({"application/json"})
HASH_SCHEME = "pbkdf2_sha256"
HASH_ITERATIONS = 200_000
# successful basic logins remembered (a browser sends the header with every request; PBKDF2 on each
# would cost a tenth of a second a request)
VERIFIED_CACHE_SIZE = 256

# (status, message) -> (body, content type)
ErrorBody = Callable[[int, str], tuple[bytes, str]]


def json_error(status: int, message: str) -> tuple[bytes, str]:
    """The console's error shape, {"error": message}."""
    return json.dumps({"error": message}).encode(), "application/json"


def hash_password(password: str, iterations: int = HASH_ITERATIONS) -> str:
    """A users-file password entry: pbkdf2_sha256$ITERATIONS$SALT$HASH (salt hex, hash base64)."""
    salt = secrets.token_hex(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), iterations)
    return f"{HASH_SCHEME}${iterations}${salt}${base64.b64encode(digest).decode()}"


def password_matches(stored: str, password: str) -> bool:
    """Whether `password` is the one `stored` (a hash_password entry, or the password itself) stands for."""
    if stored.startswith(HASH_SCHEME + "$"):
        try:
            _, iterations, salt, expected = stored.split("$", 3)
            digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), int(iterations))
            return hmac.compare_digest(base64.b64encode(digest).decode(), expected)
        except ValueError:
            return False
    return hmac.compare_digest(hashlib.sha256(stored.encode()).digest(), hashlib.sha256(password.encode()).digest())


def read_users(path: Path) -> dict[str, str]:
    """`user:password-or-hash` lines (blank lines and # comments skipped); ValueError says what is wrong."""
    users: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, stored = line.partition(":")
        if not sep or not user or not stored:
            raise ValueError(f"{path}:{number}: expected user:password or user:{HASH_SCHEME}$...")
        users[user] = stored
    if not users:
        raise ValueError(f"{path}: no users")
    return users


def host_name(value: str) -> str | None:
    """The name or address of a Host (or Origin netloc) value, lower case, without port or brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        rest = value[end + 1:] if end >= 0 else "?"
        if not (rest == "" or rest.startswith(":") and rest[1:].isdigit()) or _ip(value[1:end]) is None:
            return None
        return value[1:end]
    name, sep, port = value.rpartition(":")
    if sep:
        if not port.isdigit() or ":" in name:
            return None
        value = name
    value = value.rstrip(".")
    if not value or value.strip(HOST_CHARS):
        return None
    return value


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


@dataclass
class HostRule:
    """Which Host names a service bound to `bind_host` answers to (module docstring, step 1)."""

    bind_host: str
    listed: tuple[str, ...] = ()  # --allowed-hosts, lower case; "*" turns the check off
    names: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        bind = _ip(self.bind_host)
        self.every_interface = bind is not None and bind.is_unspecified
        loopback = bind is None and self.bind_host.lower() == "localhost" or bind is not None and bind.is_loopback
        names = {"localhost", self.bind_host.lower()}
        if loopback or self.every_interface:
            names |= {"127.0.0.1", "::1"}
        if self.every_interface:
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        self.names = frozenset(names)

    @property
    def off(self) -> bool:
        return "*" in self.listed

    def is_listed(self, name: str) -> bool:
        return any(name == h or h.startswith(".") and (name.endswith(h) or name == h[1:]) for h in self.listed)

    def accepts(self, name: str) -> bool:
        if self.off or name in self.names or self.is_listed(name):
            return True
        return self.every_interface and _ip(name) is not None


@dataclass
class GuardPolicy:
    service: str  # "console" or "registry": the authentication realm and the messages
    hosts: HostRule
    max_body_bytes: int
    error_body: ErrorBody = json_error
    json_types: frozenset[str] = JSON_TYPES
    users: dict[str, str] = field(default_factory=dict)
    token: str | None = None


class HttpGuard:
    """ASGI middleware applying a GuardPolicy in front of `app` (module docstring)."""

    def __init__(self, app: Any, policy: GuardPolicy) -> None:
        self.app = app
        self.policy = policy
        self._verified: dict[bytes, None] = {}  # digests of basic credentials that matched, oldest first
        self._cache_key = secrets.token_bytes(32)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[str, list[str]] = {}
        for raw_name, raw_value in scope.get("headers", []):
            headers.setdefault(raw_name.decode("latin-1").lower(), []).append(raw_value.decode("latin-1"))
        refusal = await self._refusal(scope["method"].upper(), headers)
        if refusal is not None:
            await self._answer(send, *refusal)
            return
        if "content-length" in headers or "transfer-encoding" in headers:
            body = await self._read_body(receive)
            if body is None:
                await self._answer(send, 413, f"Request body larger than {self.policy.max_body_bytes} bytes "
                                              f"(--max-request-bytes)")
                return
            receive = _replay(body, receive)
        await self.app(scope, receive, send)

    async def _refusal(self, method: str, headers: dict[str, list[str]]) -> tuple[int, str, list] | None:
        """(status, message, extra headers) of a refused request; None for one that may go on."""
        policy = self.policy
        hosts = headers.get("host", [])
        if len(hosts) != 1 or host_name(hosts[0]) is None:
            return 400, "Invalid Host header: exactly one Host header naming the service is required", []
        host = hosts[0].strip().lower()
        if not policy.hosts.accepts(host_name(host) or ""):
            return 400, (f"Invalid Host header {hosts[0]!r}: odradek {policy.service} answers only to its own "
                         "address, localhost and the names given with --allowed-hosts"), []
        if (policy.users or policy.token) and not await self._authenticated(headers.get("authorization", [""])[0]):
            challenges = []
            if policy.users:
                challenges.append((b"www-authenticate", f'Basic realm="odradek {policy.service}", '
                                                        'charset="UTF-8"'.encode()))
            if policy.token:
                challenges.append((b"www-authenticate", f'Bearer realm="odradek {policy.service}"'.encode()))
            return 401, "Authentication required", challenges
        length = headers.get("content-length", [None])[0]
        if length is not None:
            if not length.strip().isdigit():
                return 400, f"Invalid Content-Length {length!r}", []
            if int(length) > policy.max_body_bytes:
                return 413, f"Request body larger than {policy.max_body_bytes} bytes (--max-request-bytes)", []
        if method not in STATE_CHANGING:
            return None
        origin = headers.get("origin", [None])[0]
        if origin is not None and not self._own_origin(origin, host):
            return 403, (f"Cross-origin request refused: Origin {origin!r} is not this service's "
                         f"(http://{host}) nor a host given with --allowed-hosts"), []
        content_type = headers.get("content-type", [""])[0].split(";", 1)[0].strip().lower()
        has_body = headers.get("content-length", ["0"])[0].strip() not in ("", "0") or "transfer-encoding" in headers
        if (method != "DELETE" or has_body or content_type) and content_type not in policy.json_types:
            return 415, (f"Unsupported Content-Type {content_type or '(none)'!r}: a {method} takes "
                         f"{' or '.join(sorted(policy.json_types))}"), []
        return None

    def _own_origin(self, origin: str, host: str) -> bool:
        try:
            parts = urlsplit(origin.strip())
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False
        netloc = parts.netloc.lower()
        return netloc == host or self.policy.hosts.is_listed(host_name(netloc) or "")

    async def _authenticated(self, authorization: str) -> bool:
        scheme, _, credentials = authorization.strip().partition(" ")
        scheme, credentials = scheme.lower(), credentials.strip()
        if scheme == "bearer" and self.policy.token is not None:
            return hmac.compare_digest(hashlib.sha256(credentials.encode()).digest(),
                                       hashlib.sha256(self.policy.token.encode()).digest())
        if scheme != "basic" or not self.policy.users:
            return False
        try:
            user, sep, password = base64.b64decode(credentials, validate=True).decode("utf-8").partition(":")
        except ValueError:
            return False
        stored = self.policy.users.get(user)
        if not sep or stored is None:
            return False
        key = hmac.new(self._cache_key, f"{user}\0{password}\0{stored}".encode(), hashlib.sha256).digest()
        if key in self._verified:
            return True
        # PBKDF2 takes a tenth of a second: off the event loop
        if not await asyncio.to_thread(password_matches, stored, password):
            return False
        self._verified[key] = None
        while len(self._verified) > VERIFIED_CACHE_SIZE:
            del self._verified[next(iter(self._verified))]
        return True

    async def _read_body(self, receive: Any) -> bytes | None:
        """The whole body, or None as soon as it passes the limit (the rest is never read)."""
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.policy.max_body_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _answer(self, send: Any, status: int, message: str, extra: list | None = None) -> None:
        body, content_type = self.policy.error_body(status, message)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode()),
                                *(extra or [])]})
        await send({"type": "http.response.body", "body": body})


def _replay(body: bytes, receive: Any) -> Any:
    sent = False

    async def replayed() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return replayed


# -- the command-line flags both services share -------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser, default_max_bytes: int) -> None:
    parser.add_argument("--allowed-hosts", default="", metavar="HOST,...",
                        help="more Host names to answer to (besides localhost and the bind address); .example.com "
                             "matches its subdomains; '*' turns the Host check off")
    parser.add_argument("--users-file", type=Path, default=None, metavar="PATH",
                        help="require HTTP basic authentication: lines user:password or user:pbkdf2_sha256$... "
                             "(see --hash-password)")
    parser.add_argument("--token-file", type=Path, default=None, metavar="PATH",
                        help="require (or, with --users-file, also accept) Authorization: Bearer with the token "
                             "in this file")
    parser.add_argument("--max-request-bytes", type=int, default=default_max_bytes, metavar="N",
                        help=f"largest request body accepted (default {default_max_bytes})")
    parser.add_argument("--hash-password", default=None, metavar="USER",
                        help="print a --users-file line for USER with the password read from stdin, and exit")


def print_users_line(user: str) -> int:
    """`--hash-password USER`: read a password (prompting on a terminal) and print the users-file line."""
    if ":" in user or not user:
        print("--hash-password: a user name cannot be empty or contain ':'", file=sys.stderr)
        return 2
    password = getpass.getpass("password: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\r\n")
    if not password:
        print("--hash-password: empty password", file=sys.stderr)
        return 2
    print(f"{user}:{hash_password(password)}")
    return 0


def policy_from_args(prog: str, args: argparse.Namespace, bind_host: str, error_body: ErrorBody = json_error,
                     json_types: frozenset[str] = JSON_TYPES) -> GuardPolicy | None:
    """The policy of the flags add_arguments added; None after printing why they are wrong."""
    listed = []
    for entry in (h.strip().lower() for h in args.allowed_hosts.split(",") if h.strip()):
        name = entry if entry in ("*",) or entry.startswith(".") else host_name(entry)  # a port given is dropped
        if name is None:
            print(f"odradek {prog}: --allowed-hosts: {entry!r} is not a host name", file=sys.stderr)
            return None
        listed.append(name.rstrip("."))
    policy = GuardPolicy(prog, HostRule(bind_host, tuple(listed)), args.max_request_bytes, error_body, json_types)
    if args.max_request_bytes <= 0:
        print(f"odradek {prog}: --max-request-bytes must be positive", file=sys.stderr)
        return None
    try:
        if args.users_file is not None:
            policy.users = read_users(args.users_file)
        if args.token_file is not None:
            policy.token = args.token_file.read_text().strip()
            if not policy.token:
                raise ValueError(f"{args.token_file} is empty")
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        print(f"odradek {prog}: {exc}", file=sys.stderr)
        return None
    if args.users_file is not None and os.stat(args.users_file).st_mode & 0o077:
        print(f"odradek {prog}: warning: {args.users_file} is readable by other users", file=sys.stderr)
    return policy
