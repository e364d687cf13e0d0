"""The client half of SASL, for brokers logging in to each other on a SASL inter-broker listener.

In cluster mode a broker whose `inter.broker.listener.name` is a SASL_PLAINTEXT or SASL_SSL listener logs in
to the other brokers' listener of that name before its first request (cluster/broker_client.py: the
replica fetchers, the controller's requests, transaction markers, ControlledShutdown), as Kafka does:

    sasl.mechanism.inter.broker.protocol=PLAIN            (Kafka's default is GSSAPI, which odradek lacks: set it)
    listener.name.<listener>.<mechanism>.sasl.jaas.config=<LoginModule> required username="broker" password="...";

The JAAS entries `username` and `password` are what this broker sends as a client; the same property also
carries the users a PLAIN listener accepts (`user_<name>="<password>"`, net/sasl.py reads those), so the
inter-broker user must be among them on every broker. For SCRAM-SHA-256/512 the user's credential must exist
in the cluster (ZooKeeper /config/users, Kafka's format) before the brokers need it: created through a
PLAINTEXT listener with AlterUserScramCredentials, or written to ZooKeeper before the brokers start, which is
what Kafka's `kafka-configs --zookeeper` does. Under an authorizer, the inter-broker principal
(`User:<username>`) needs CLUSTER_ACTION and the rest of what brokers do: list it in `super.users`, as in Kafka.

The mechanisms here are sans-io: `first()` gives the client's first token, `step(challenge)` the answer to
the server's next one, or None once the exchange is complete.

- PLAIN (RFC 4616): one token, `authzid NUL username NUL password` with an empty authzid; the server answers
  nothing.
- SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), without channel binding (gs2 header `n,,`):

      client-first   n,,n=<user, "," as =2C and "=" as =3D>,r=<client nonce>
      server-first   r=<client nonce + server nonce>,s=<salt, base64>,i=<iterations>
      client-final   c=biws,r=<the combined nonce>,p=<ClientKey XOR HMAC(StoredKey, AuthMessage), base64>
      server-final   v=<HMAC(ServerKey, AuthMessage), base64>    (or e=<error>)

  AuthMessage is client-first (without `n,,`), server-first and client-final (without `,p=...`), joined by
  commas. The server's nonce must start with ours, its iteration count lie within Kafka's bounds (4096 to
  16384: fewer would weaken the proof, more would stall the event loop) and its signature check out, which
  proves it knows the credential: a broker only replicates from a broker that has it.

Passwords never appear in log lines, exceptions or reprs.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, field
from typing import Protocol

from odradek.config import BrokerConfig, ConfigError
# the entry syntax (key="value", \" escaping) is the one the server side reads its JAAS users with
from odradek.net.sasl import _JAAS_ENTRY, MAX_ITERATIONS, MIN_ITERATIONS, SCRAM_MECHANISMS, ScramCredential


class SaslListener(Protocol):
    """What the inter-broker login needs of a listener (net/listeners.py's Listener is one)."""

    name: str

    @property
    def uses_sasl(self) -> bool: ...


# what brokers can log in to each other with (OAUTHBEARER would need a token of the broker's own to send)
INTER_BROKER_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)


class SaslLoginFailed(Exception):
    """The server's answer does not check out (a wrong nonce, iteration count or signature, or an e=
    error), so the exchange stops. Its message never contains the password."""


class ClientMechanism(Protocol):
    complete: bool

    def first(self) -> bytes:
        """The client's first token."""
        ...

    def step(self, challenge: bytes) -> bytes | None:
        """The answer to the server's next token; None when the exchange is done. SaslLoginFailed if the
        server's token does not check out."""
        ...


@dataclass(frozen=True)
class SaslClientSettings:
    """How this broker logs in to the others: the mechanism and its own user and password (kept out of the
    repr, so a logged settings object shows no secret)."""

    mechanism: str
    username: str
    password: str = field(repr=False)

    def start(self) -> ClientMechanism:
        """A new exchange, for one connection (or one re-authentication of it)."""
        if self.mechanism == "PLAIN":
            return PlainClient(self.username, self.password)
        return ScramClient(self.mechanism, self.username, self.password)


def parse_jaas_options(text: str) -> dict[str, str]:
    """Every `key="value"` entry of a JAAS config (`username`, `password`, `user_<name>`, ...)."""
    return {key: value.replace('\\"', '"') for key, value in _JAAS_ENTRY.findall(text)}


def inter_broker_sasl(config: BrokerConfig, listener: SaslListener) -> SaslClientSettings | None:
    """This broker's login to the other brokers' ``listener`` (the inter-broker one); None if it does not use
    SASL. ConfigError, at start, for a mechanism odradek cannot log in with, one the listener does not
    enable, or a JAAS config without the broker's own username and password."""
    if not listener.uses_sasl:
        return None
    mechanism = str(config.get("sasl.mechanism.inter.broker.protocol") or "").strip().upper()
    if mechanism not in INTER_BROKER_MECHANISMS:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol: brokers cannot log in to each other with "
                          f"{mechanism or 'no mechanism'} (on listener {listener.name}, "
                          f"inter.broker.listener.name); odradek's brokers use "
                          f"{', '.join(INTER_BROKER_MECHANISMS)} (Kafka's default, GSSAPI, is not offered: set it)")
    enabled = str(config.for_listener(listener.name, "sasl.enabled.mechanisms") or "")
    if mechanism not in (m.strip().upper() for m in enabled.split(",")):
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol: {mechanism} is not among the mechanisms listener "
                          f"{listener.name} enables (sasl.enabled.mechanisms: {enabled}); brokers log in to "
                          "each other there")
    key = f"{mechanism.lower()}.sasl.jaas.config"
    options = parse_jaas_options(str(config.for_listener(listener.name, key) or ""))
    if not options.get("username") or not options.get("password"):
        raise ConfigError(f'listener.name.{listener.name.lower()}.{key} must give username="..." and '
                          f'password="...": the broker logs in to the other brokers\' {listener.name} listener '
                          f"with them ({mechanism}, sasl.mechanism.inter.broker.protocol)")
    return SaslClientSettings(mechanism, options["username"], options["password"])


# -- mechanisms -----------------------------------------------------------------------------------------------


class PlainClient:
    def __init__(self, username: str, password: str) -> None:
        self._username = username
        self._password = password
        self.complete = False

    def first(self) -> bytes:
        return b"\0" + self._username.encode() + b"\0" + self._password.encode()

    def step(self, challenge: bytes) -> bytes | None:
        self.complete = True  # the server answers PLAIN with nothing; a refusal comes as an error code
        return None


@functools.lru_cache(maxsize=16)
def _salted_password(digest: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802, PBKDF2 with HMAC: a few milliseconds in the event loop, so kept for
    the logins that follow (every reconnection and re-authentication asks it again with the same salt)."""
    return hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)


def _scram_escape(name: str) -> str:
    """A user name as a SCRAM `n=` value: `=` as `=3D` and `,` as `=2C` (RFC 5802 5.1)."""
    return name.replace("=", "=3D").replace(",", "=2C")


_SERVER_FIRST = re.compile(r"r=([^,]+),s=([^,]+),i=([0-9]+)(?:,.*)?", re.DOTALL)


class ScramClient:
    """The client side of SCRAM-SHA-256/512: client-first, then client-final once the server's salt and
    iteration count are known, then the server's signature checked. One exchange per object."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._digest = SCRAM_MECHANISMS[mechanism]
        self._password = password
        # alphanumeric, as Kafka's clients make it (printable and comma-free, as RFC 5802 asks)
        self._nonce = nonce or secrets.token_hex(16)
        self._client_first_bare = f"n={_scram_escape(username)},r={self._nonce}"
        self._auth_message = b""
        self._server_key = b""
        self._state = "first"
        self.complete = False

    def first(self) -> bytes:
        self._state = "server-first"
        return f"n,,{self._client_first_bare}".encode()

    def step(self, challenge: bytes) -> bytes | None:
        try:
            message = challenge.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslLoginFailed(f"{self.mechanism}: the server's message is not UTF-8") from None
        if message.startswith("e="):
            raise SaslLoginFailed(f"{self.mechanism}: the server refused: {message[2:]}")
        if self._state == "server-first":
            return self._client_final(message)
        if self._state == "server-final":
            self._check_server_final(message)
            return None
        raise SaslLoginFailed(f"{self.mechanism}: the server sent more after the exchange ended")

    def _client_final(self, server_first: str) -> bytes:
        self._state = "server-final"
        match = _SERVER_FIRST.fullmatch(server_first)
        if match is None:
            raise SaslLoginFailed(f"{self.mechanism}: unreadable server-first message")
        nonce, salt_b64, iterations_text = match.groups()
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslLoginFailed(f"{self.mechanism}: the server's nonce does not extend ours")
        iterations = int(iterations_text)
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise SaslLoginFailed(f"{self.mechanism}: the server asks for {iterations} iterations, outside "
                                  f"{MIN_ITERATIONS}..{MAX_ITERATIONS}")
        try:
            salt = base64.b64decode(salt_b64, validate=True)
        except ValueError:
            raise SaslLoginFailed(f"{self.mechanism}: the server's salt is not base64") from None
        salted = _salted_password(self._digest, self._password, salt, iterations)
        credential = ScramCredential.from_salted_password(self.mechanism, salted, salt, iterations)
        without_proof = f"c=biws,r={nonce}"  # biws: base64 of the gs2 header "n,,"
        self._auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        # the client key is the one thing the server never keeps (it has only its hash, the stored key)
        client_key = hmac.new(salted, b"Client Key", self._digest).digest()
        signature = hmac.new(credential.stored_key, self._auth_message, self._digest).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_key = credential.server_key
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _check_server_final(self, server_final: str) -> None:
        self._state = "done"
        if not server_final.startswith("v="):
            raise SaslLoginFailed(f"{self.mechanism}: unreadable server-final message")
        try:
            verifier = base64.b64decode(server_final[2:].split(",", 1)[0], validate=True)
        except ValueError:
            raise SaslLoginFailed(f"{self.mechanism}: the server's signature is not base64") from None
        expected = hmac.new(self._server_key, self._auth_message, self._digest).digest()
        if not hmac.compare_digest(verifier, expected):
            raise SaslLoginFailed(f"{self.mechanism}: the server's signature is wrong (it does not know the "
                                  "credential)")
        self.complete = True
