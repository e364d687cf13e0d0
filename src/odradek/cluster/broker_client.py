"""BrokerClient: the requests one broker makes of another, over the other's Kafka listener.

The controller sends LeaderAndIsr, UpdateMetadata and StopReplica; a follower fetches; a transaction
coordinator writes markers; a broker shutting down asks the controller to move its leaders. All of them
speak the same protocol and codec as clients do, so this is a small client: one TCP connection, requests
pipelined and matched to responses by correlation id (a broker answers a connection's requests in order),
responses framed by the broker's own FrameReader (net/framing.py).

On a SASL inter-broker listener (SASL_PLAINTEXT, SASL_SSL) the client logs in right after connecting (and
after the TLS handshake), before any other request, with the mechanism and credentials of `SaslClientSettings`
(net/sasl_client.py):

    SaslHandshake v1 {mechanism}                  error_code 33 UNSUPPORTED_SASL_MECHANISM: not offered there
    SaslAuthenticate v2 {auth_bytes: token} ...   until the mechanism is done; error_code 58
                                                  SASL_AUTHENTICATION_FAILED with the broker's message
    everything else

A refused login is a `BrokerUnavailable` carrying the broker's error message, logged once while it lasts
(the user, never the password). When the broker gives the session a lifetime (`connections.max.reauth.ms`,
KIP-368), the client logs in again on the same connection at 85-95 % of it, as Kafka's clients do: new
requests wait, the ones in flight are answered first (the broker refuses anything but the SASL exchange until
it completes).

A connection that fails, or a request that gets no answer within its timeout, closes the connection and
fails every request waiting on it with `BrokerUnavailable`; the next request connects again. Callers
decide whether and when to retry. A connection unused for CLIENT_IDLE_S is closed by this side before the
next request, as Kafka's clients do (540 s against the broker's 600 s `connections.max.idle.ms`), so a
request never races the other broker's idle close.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import ssl
import struct
from typing import Any

from odradek.net.framing import FrameReader, FrameTooLarge
from odradek.net.sasl_client import SaslClientSettings, SaslLoginFailed
from odradek.protocol import codec
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, error_name

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 512 * 1024 * 1024
SASL_HANDSHAKE_VERSION = 1  # v1: the tokens travel in SaslAuthenticate requests (v0: bare frames)
SASL_AUTHENTICATE_VERSION = 2  # v1+ answers with the session lifetime; v2 is the flexible encoding
MAX_SASL_STEPS = 8  # PLAIN takes one token, SCRAM two: a server asking for more is not a SASL server
REAUTH_DRAIN_TIMEOUT_S = 30.0  # re-authentication waits this long at most for the requests in flight
CLIENT_IDLE_S = 540.0  # Kafka clients' connections.max.idle.ms: under the broker's 600 s, so this side closes first


class BrokerUnavailable(ConnectionError):
    """The other broker could not be reached, or did not answer in time."""


class _ResponseReader(asyncio.BufferedProtocol):
    """Reads response frames with a FrameReader (a large Fetch response lands in a buffer of its own, read
    into by the kernel: the records reach the follower's segment file with no copy in Python) and hands
    each to its client."""

    def __init__(self, client: "BrokerClient") -> None:
        self._client = client
        self._frames = FrameReader(MAX_RESPONSE_BYTES)
        self.transport: asyncio.Transport | None = None
        self.ready = False  # connected, and logged in on a SASL listener: requests may go out

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._frames.buffer_updated(nbytes)
        while True:
            try:
                frame = self._frames.next_frame()
            except FrameTooLarge as exc:
                self._client._lost(self, BrokerUnavailable(f"broker {self._client.node_id}: {exc}"))
                return
            if frame is None:
                return
            self._client._answered(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        self._frames.clear()
        self._client._lost(self, BrokerUnavailable(f"connection to broker {self._client.node_id} closed"))


class BrokerClient:
    def __init__(self, node_id: int, host: str, port: int, client_id: str,
                 connect_timeout_s: float = 5.0, tls: ssl.SSLContext | None = None,
                 sasl: SaslClientSettings | None = None) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.client_id = client_id
        self.tls = tls  # the inter-broker listener uses TLS
        self._tls_error = ""
        self.sasl = sasl  # the inter-broker listener uses SASL: log in with these
        self._login_error = ""  # the last failed login's message, logged once while it lasts
        self._reauthenticate_at: float | None = None  # loop time to log in again (the session has a lifetime)
        self.connect_timeout_s = connect_timeout_s
        self._protocol: _ResponseReader | None = None
        self._connecting: asyncio.Future | None = None
        self._pending: dict[int, tuple[int, int, asyncio.Future]] = {}
        self._next_correlation_id = 0
        self._last_request_at = 0.0  # loop time of the latest request (CLIENT_IDLE_S)
        self._closed = False

    def __repr__(self) -> str:
        return f"BrokerClient({self.node_id}@{self.host}:{self.port})"

    def retarget(self, host: str, port: int) -> None:
        """The broker moved to another address (it re-registered): reconnect there."""
        if (host, port) != (self.host, self.port):
            self.host, self.port = host, port
            self._disconnect(BrokerUnavailable(f"broker {self.node_id} moved to {host}:{port}"))

    async def request(self, api_key: int, version: int, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one request and return the decoded response body; raises BrokerUnavailable."""
        if self._closed:
            raise BrokerUnavailable(f"client of broker {self.node_id} is closed")
        loop_time = asyncio.get_running_loop().time()
        if loop_time - self._last_request_at > CLIENT_IDLE_S and not self._pending and self._connecting is None:
            self._disconnect(BrokerUnavailable(f"connection to broker {self.node_id} idle"))  # nothing waits on it
        self._last_request_at = loop_time
        transport = await self._connected()
        return await self._exchange(transport, api_key, version, body, timeout_s)

    async def _exchange(self, transport: asyncio.Transport, api_key: int, version: int, body: dict[str, Any],
                        timeout_s: float) -> dict[str, Any]:
        correlation_id = self._next_correlation_id = (self._next_correlation_id + 1) & 0x7FFFFFFF
        frame = codec.encode_request(api_key, version, correlation_id, self.client_id, body)
        # the connection may have closed since it was handed out (the peer went away while this request
        # waited for the connect or the login): uvloop's write then raises RuntimeError, asyncio's drops the
        # bytes; either way the caller gets BrokerUnavailable, which it answers with a retriable error
        if transport.is_closing():
            self._drop(transport, BrokerUnavailable(f"broker {self.node_id}: connection closed"))
            raise BrokerUnavailable(f"broker {self.node_id}: connection closed before the request was sent")
        future = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (api_key, version, future)
        try:
            transport.write(frame)
        except (RuntimeError, OSError) as exc:
            self._pending.pop(correlation_id, None)
            self._drop(transport, BrokerUnavailable(f"broker {self.node_id}: connection lost: {exc}"))
            raise BrokerUnavailable(f"broker {self.node_id}: connection lost while sending: {exc}") from None
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except asyncio.TimeoutError:
            self._disconnect(BrokerUnavailable(f"broker {self.node_id} did not answer within {timeout_s:.1f} s"))
            raise BrokerUnavailable(f"broker {self.node_id}: request timed out") from None
        finally:
            self._pending.pop(correlation_id, None)

    async def _connected(self) -> asyncio.Transport:
        protocol = self._protocol
        if protocol is not None and protocol.ready and protocol.transport is not None \
                and not protocol.transport.is_closing():
            if self._reauthenticate_at is None or asyncio.get_running_loop().time() < self._reauthenticate_at:
                return protocol.transport
            if self._connecting is None:
                self._connecting = asyncio.ensure_future(self._reauthenticate(protocol))
        elif self._connecting is None:
            self._connecting = asyncio.ensure_future(self._connect())
        try:
            return await asyncio.shield(self._connecting)
        finally:
            if self._connecting is not None and self._connecting.done():
                self._connecting = None

    async def _connect(self) -> asyncio.Transport:
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await asyncio.wait_for(
                loop.create_connection(lambda: _ResponseReader(self), self.host, self.port, ssl=self.tls,
                                       server_hostname=self.host if self.tls is not None else None),
                self.connect_timeout_s)
        except ssl.SSLError as exc:
            # a certificate or protocol mismatch is the operator's to fix: logged, once while it lasts
            if str(exc) != self._tls_error:
                self._tls_error = str(exc)
                log.warning("TLS handshake with broker %d at %s:%d failed: %s", self.node_id, self.host, self.port,
                            exc)
            raise BrokerUnavailable(f"TLS handshake with broker {self.node_id} failed: {exc}") from None
        except (OSError, asyncio.TimeoutError) as exc:
            raise BrokerUnavailable(f"cannot connect to broker {self.node_id} at {self.host}:{self.port}: {exc}") from None
        # current before the login, so that losing the connection fails the login's requests at once; not
        # ready until logged in, so no other request goes out before
        self._protocol = protocol
        if self.sasl is not None:
            await self._login(protocol)
        protocol.ready = True
        return transport

    async def _reauthenticate(self, protocol: _ResponseReader) -> asyncio.Transport:
        """Log in again on the same connection before the session ends (KIP-368), once the requests in
        flight are answered: the broker takes nothing but the SASL exchange until it is done."""
        in_flight = [future for _, _, future in self._pending.values() if not future.done()]
        if in_flight:
            await asyncio.wait(in_flight, timeout=REAUTH_DRAIN_TIMEOUT_S)
        transport = protocol.transport
        if self._protocol is not protocol or transport is None or transport.is_closing():
            return await self._connect()  # lost meanwhile
        if any(not future.done() for _, _, future in self._pending.values()):
            self._disconnect(BrokerUnavailable(f"broker {self.node_id}: requests unanswered for "
                                               f"{REAUTH_DRAIN_TIMEOUT_S:.0f} s before re-authentication"))
            return await self._connect()
        protocol.ready = False  # nothing else goes out until the exchange is done
        await self._login(protocol)
        protocol.ready = True
        return transport

    async def _login(self, protocol: _ResponseReader) -> None:
        """SaslHandshake, then SaslAuthenticate until the mechanism is done; BrokerUnavailable (logged, the
        connection closed) if the broker refuses or its answers do not check out."""
        sasl = self.sasl
        transport = protocol.transport
        assert sasl is not None and transport is not None
        self._reauthenticate_at = None
        timeout_s = self.connect_timeout_s
        answer = await self._exchange(transport, ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION,
                                      {"mechanism": sasl.mechanism}, timeout_s)
        if answer["error_code"] != ErrorCode.NONE:
            offered = ", ".join(answer.get("mechanisms") or []) or "none"
            raise self._login_failed(f"{error_name(answer['error_code'])}: the listener offers {offered}")
        mechanism = sasl.start()
        token: bytes | None = mechanism.first()
        steps = 0
        while token is not None:
            steps += 1
            if steps > MAX_SASL_STEPS:
                raise self._login_failed(f"{sasl.mechanism} did not complete in {MAX_SASL_STEPS} steps")
            answer = await self._exchange(transport, ApiKey.SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION,
                                          {"auth_bytes": token}, timeout_s)
            if answer["error_code"] != ErrorCode.NONE:
                raise self._login_failed(f"{error_name(answer['error_code'])}: "
                                         f"{answer.get('error_message') or 'no message'}")
            try:
                token = mechanism.step(bytes(answer.get("auth_bytes") or b""))
            except SaslLoginFailed as exc:
                raise self._login_failed(str(exc)) from None
        lifetime_ms = answer.get("session_lifetime_ms") or 0
        if lifetime_ms > 0:
            # Kafka's clients re-authenticate at a random 85-95 % of the lifetime, so connections opened
            # together do not all log in again at the same moment
            self._reauthenticate_at = (asyncio.get_running_loop().time()
                                       + lifetime_ms / 1000.0 * random.uniform(0.85, 0.95))
        if self._login_error:
            log.info("SASL %s login as %r to broker %d at %s:%d succeeds again", sasl.mechanism, sasl.username,
                     self.node_id, self.host, self.port)
            self._login_error = ""

    def _login_failed(self, message: str) -> BrokerUnavailable:
        """Close the connection (the broker closes it too) and make the error; log it once while it lasts."""
        sasl = self.sasl
        assert sasl is not None
        if message != self._login_error:
            self._login_error = message
            log.warning("SASL %s login as %r to broker %d at %s:%d failed: %s", sasl.mechanism, sasl.username,
                        self.node_id, self.host, self.port, message)
        error = BrokerUnavailable(f"SASL login to broker {self.node_id} failed: {message}")
        self._disconnect(error)
        return error

    def _answered(self, frame: bytes | bytearray) -> None:
        (correlation_id,) = _SIZE.unpack_from(frame)
        entry = self._pending.get(correlation_id)
        if entry is None:
            return  # the request timed out or its caller went away
        api_key, version, future = entry
        if not future.done():
            try:
                future.set_result(codec.decode_response(api_key, version, frame)[1])
            except codec.ProtocolError as exc:
                future.set_exception(BrokerUnavailable(f"unreadable response from broker {self.node_id}: {exc}"))

    def _lost(self, protocol: _ResponseReader, error: BaseException) -> None:
        if self._protocol is protocol:
            self._disconnect(error)

    def _drop(self, transport: asyncio.Transport, error: BaseException) -> None:
        """Disconnect when ``transport`` is still the current connection (a newer one is left alone)."""
        protocol = self._protocol
        if protocol is not None and protocol.transport is transport:
            self._disconnect(error)

    def _disconnect(self, error: BaseException) -> None:
        protocol, self._protocol = self._protocol, None
        if protocol is not None and protocol.transport is not None:
            transport, protocol.transport = protocol.transport, None
            transport.close()
        pending, self._pending = self._pending, {}
        for _, _, future in pending.values():
            if not future.done():
                future.set_exception(error)
                future.exception()  # retrieved: a caller may have gone away

    def close(self) -> None:
        self._closed = True
        self._disconnect(BrokerUnavailable(f"client of broker {self.node_id} closed"))
