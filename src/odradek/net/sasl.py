"""SASL on the SASL_PLAINTEXT and SASL_SSL listeners: the exchange, the mechanisms, and a connection's state.

The exchange (handlers k17 SaslHandshake and k36 SaslAuthenticate drive it; the connection gates on it):

    ApiVersions (any number, optional)
    SaslHandshake(mechanism)          v0: then raw SASL tokens, each a size-prefixed frame with no header
                                      v1: then SaslAuthenticate requests carrying the tokens
    SaslAuthenticate(token) ...       until the mechanism is done: the principal is User:<name>
    everything else

Before authentication only those three APIs are accepted; any other request closes the connection, as do an
unknown mechanism (UNSUPPORTED_SASL_MECHANISM, answered first), a failed login (SASL_AUTHENTICATION_FAILED,
answered first on v1; logged with the client's address and user, never the password) and a request out of
order (ILLEGAL_SASL_STATE). With `connections.max.reauth.ms` > 0, SaslAuthenticate v1+ tells the client its
session lifetime; the client re-authenticates (a new SaslHandshake) before it ends (KIP-368), and a
connection whose session has ended is closed at its next other request.

Mechanisms, per listener in `listener.name.<listener>.sasl.enabled.mechanisms` (or `sasl.enabled.mechanisms`,
default GSSAPI as in Kafka, which odradek does not offer; set it):

- PLAIN (RFC 4616): users and passwords from the JAAS-style `listener.name.<listener>.plain.sasl.jaas.config`
  (or `plain.sasl.jaas.config`), `user_<name>="<password>"` entries, as Kafka's PlainLoginModule reads them.
- SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): the server's side of the exchange against salted,
  iterated credentials (`ScramCredential`), which AlterUserScramCredentials manages (security/scram_store.py).
- OAUTHBEARER (RFC 7628) with signed-JWT validation, as Kafka's OAuthBearerValidatorCallbackHandler:
  the token's signature against the keys of `sasl.oauthbearer.jwks.endpoint.url` (a JWKS file:// or
  http(s):// URL, read again every `sasl.oauthbearer.jwks.endpoint.refresh.ms` and for an unknown key id),
  its expiry (with `sasl.oauthbearer.clock.skew.seconds`), `sasl.oauthbearer.expected.audience` and
  `.issuer` when set; the principal is the `sasl.oauthbearer.sub.claim.name` claim (`sub`). With
  `connections.max.reauth.ms` set, the session ends when the token does, if that is sooner.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import re
import secrets
import time
from dataclasses import dataclass
from typing import Callable, Protocol

from odradek.config import BrokerConfig, ConfigError

log = logging.getLogger(__name__)

SCRAM_MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# AlterUserScramCredentials / DescribeUserScramCredentials name the mechanisms by number
SCRAM_MECHANISM_IDS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, "OAUTHBEARER")
JWT_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"]
# The ones each kind of JWK (its `kty`) can check: a token whose `alg` needs another kind of key is then refused
# as a bad algorithm, before PyJWT's key check, which raises TypeError for such a pair.
JWT_KEY_ALGORITHMS = {"RSA": [a for a in JWT_ALGORITHMS if a[:2] in ("RS", "PS")],
                      "EC": [a for a in JWT_ALGORITHMS if a[:2] == "ES"]}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka's bounds for SCRAM iterations


class AuthenticationFailed(Exception):
    """The client's credentials are wrong (or its token unreadable): SASL_AUTHENTICATION_FAILED."""


# -- SCRAM credentials ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScramCredential:
    """What the server keeps of a SCRAM password (never the password): salt, StoredKey = H(ClientKey),
    ServerKey, iterations. In text, Kafka's form: `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=N`."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: str, salted_password: bytes, salt: bytes,
                             iterations: int) -> "ScramCredential":
        digest = SCRAM_MECHANISMS[mechanism]
        client_key = hmac.new(salted_password, b"Client Key", digest).digest()
        server_key = hmac.new(salted_password, b"Server Key", digest).digest()
        return cls(salt, hashlib.new(digest, client_key).digest(), server_key, iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                      salt: bytes | None = None) -> "ScramCredential":
        salt = salt or secrets.token_bytes(32)
        salted = hashlib.pbkdf2_hmac(SCRAM_MECHANISMS[mechanism], password.encode(), salt, iterations)
        return cls.from_salted_password(mechanism, salted, salt, iterations)

    def to_text(self) -> str:
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},server_key={b64(self.server_key)},"
                f"iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> "ScramCredential":
        fields = dict(part.split("=", 1) for part in text.split(","))
        return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                   base64.b64decode(fields["server_key"]), int(fields["iterations"]))


# -- mechanisms -------------------------------------------------------------------------------------------


class Mechanism(Protocol):
    complete: bool
    user: str

    def step(self, token: bytes) -> bytes:
        """The server's answer to the client's next token; AuthenticationFailed if it must stop."""
        ...


class PlainMechanism:
    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.complete = False
        self.user = ""

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected authzid, username and password")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        self.user = user
        if not user or not password:
            raise AuthenticationFailed("Authentication failed: username or password not given")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: the authorization id must be the username")
        expected = self._users.get(user)
        # compared in constant time, and the same work whether or not the user exists
        if not hmac.compare_digest((expected or "\0").encode(), password.encode()) or expected is None:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        self.complete = True
        return b""


def _scram_name(name: str) -> str:
    """A SCRAM `n=` value decoded: `=2C` is a comma and `=3D` an equals sign (RFC 5802 5.1)."""
    if re.search(r"=(?!2C|3D)", name):
        raise AuthenticationFailed("Invalid SCRAM username encoding")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramMechanism:
    """The server side of SCRAM: client-first, server-first, client-final, server-final."""

    def __init__(self, mechanism: str, credentials: Callable[[str, str], ScramCredential | None],
                 server_nonce: str | None = None) -> None:
        self.mechanism = mechanism
        # alphanumeric, as Kafka makes it: older librdkafka mangles a nonce with '+' or '/' in it
        self._server_nonce = server_nonce or secrets.token_hex(16)
        self._digest = SCRAM_MECHANISMS[mechanism]
        self._credentials = credentials
        self.complete = False
        self.user = ""
        self._state = "first"
        self._credential: ScramCredential | None = None
        self._nonce = ""
        self._client_first_bare = ""
        self._server_first = ""

    def step(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SCRAM message: not UTF-8") from None
        if self._state == "first":
            return self._client_first(message)
        if self._state == "final":
            return self._client_final(message)
        raise AuthenticationFailed("SCRAM exchange already finished")

    def _client_first(self, message: str) -> bytes:
        # gs2-header "n,," (or "y,,"; "p=" channel binding is not offered), then n=user,r=nonce[,extensions]
        match = re.fullmatch(r"([ny]),(?:a=([^,]*))?,(n=([^,]*),r=([^,]+)(?:,(.*))?)", message)
        if match is None:
            raise AuthenticationFailed("Invalid SCRAM client-first message")
        _, authzid, bare, name, client_nonce, extensions = match.groups()
        self.user = _scram_name(name)
        if authzid and _scram_name(authzid) != self.user:
            raise AuthenticationFailed("Authentication failed: the authorization id must be the username")
        if extensions and any(e.split("=", 1)[0] == "tokenauth" for e in extensions.split(",")):
            raise AuthenticationFailed("Authentication failed: delegation tokens are not supported")
        credential = self._credentials(self.user, self.mechanism)
        if credential is None:
            # go on with made-up values, so an unknown user looks like a wrong password (no user enumeration)
            credential = ScramCredential(hashlib.sha256(self.user.encode()).digest(), b"", b"", MIN_ITERATIONS)
        self._credential = credential
        self._nonce = client_nonce + self._server_nonce
        self._client_first_bare = bare
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "final"
        return self._server_first.encode()

    def _client_final(self, message: str) -> bytes:
        self._state = "done"
        match = re.fullmatch(r"(c=([^,]*),r=([^,]*)(?:,[^p][^,]*)*),p=([^,]+)", message)
        if match is None:
            raise AuthenticationFailed("Invalid SCRAM client-final message")
        without_proof, _, nonce, proof_b64 = match.groups()
        # librdkafka before 2.6.1 sends its own nonce again in front of the combined one; Kafka 3.8.1-3.9
        # accept that (the nonce must end with the server's), and so does odradek, for kcat and older clients
        if not nonce.endswith(self._nonce):
            raise AuthenticationFailed("Invalid SCRAM nonce")
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise AuthenticationFailed("Invalid SCRAM client proof") from None
        signature = hmac.new(credential.stored_key, auth_message, self._digest).digest()
        if len(proof) != len(signature) or not credential.stored_key:
            raise AuthenticationFailed(f"Authentication failed during authentication due to invalid credentials "
                                       f"with SASL mechanism {self.mechanism}")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self._digest, client_key).digest(), credential.stored_key):
            raise AuthenticationFailed(f"Authentication failed during authentication due to invalid credentials "
                                       f"with SASL mechanism {self.mechanism}")
        self.complete = True
        server_signature = hmac.new(credential.server_key, auth_message, self._digest).digest()
        return b"v=" + base64.b64encode(server_signature)


class JwtValidator:
    """Validates OAUTHBEARER tokens (JWTs) against a JWKS (see the module docstring); PyJWT does the work."""

    def __init__(self, config: BrokerConfig, listener: str) -> None:
        def value(key: str) -> str:
            return str(config.for_listener(listener, key) or "").strip()

        self.url = value("sasl.oauthbearer.jwks.endpoint.url")
        if not self.url:
            raise ConfigError(f"listener {listener} offers OAUTHBEARER: set sasl.oauthbearer.jwks.endpoint.url "
                              "(the JWKS, file:// or http(s)://, whose keys sign the tokens)")
        self.audience = [a.strip() for a in value("sasl.oauthbearer.expected.audience").split(",") if a.strip()]
        self.issuer = value("sasl.oauthbearer.expected.issuer") or None
        self.sub_claim = value("sasl.oauthbearer.sub.claim.name") or "sub"
        self.leeway_s = int(value("sasl.oauthbearer.clock.skew.seconds") or 30)
        self._refresh_s = int(value("sasl.oauthbearer.jwks.endpoint.refresh.ms") or 3600000) / 1000.0
        self._path: str | None = None  # a JWKS file, read here; a URL is PyJWKClient's to fetch and cache
        self._file_keys: dict[str, object] = {}
        self._file_read_s = 0.0
        if self.url.startswith("file:"):
            from urllib.parse import unquote, urlparse

            self._path = unquote(urlparse(self.url).path)
            self._read_file()
        else:
            from jwt import PyJWKClient

            self._client = PyJWKClient(self.url, cache_keys=True, lifespan=max(int(self._refresh_s), 1), timeout=5)

    def _read_file(self) -> None:
        from jwt import PyJWKSet

        try:
            with open(self._path or "") as f:
                keys = PyJWKSet.from_json(f.read()).keys
        except Exception as exc:  # OSError, or any of PyJWT's errors about the contents
            raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url: cannot read {self._path}: {exc}") from None
        self._file_keys = {k.key_id or "": k for k in keys}
        self._file_read_s = time.monotonic()

    def _key(self, token: str):
        import jwt

        if self._path is None:
            return self._client.get_signing_key_from_jwt(token)
        kid = jwt.get_unverified_header(token).get("kid") or ""
        if kid not in self._file_keys or time.monotonic() - self._file_read_s > self._refresh_s:
            try:
                self._read_file()
            except ConfigError as exc:
                raise jwt.PyJWKClientError(str(exc)) from None
        if kid not in self._file_keys:
            raise jwt.PyJWKClientError(f'Unable to find a signing key that matches: "{kid}"')
        return self._file_keys[kid]

    def validate(self, token: str) -> dict:
        """The token's claims; AuthenticationFailed (with the reason) if it is not valid."""
        import jwt

        try:
            key = self._key(token)
            claims = jwt.decode(token, key.key, algorithms=JWT_KEY_ALGORITHMS.get(key.key_type, []),
                                audience=self.audience or None, issuer=self.issuer, leeway=self.leeway_s,
                                options={"require": ["exp", self.sub_claim], "verify_aud": bool(self.audience)})
        except jwt.PyJWKClientError as exc:
            raise AuthenticationFailed(f"Authentication failed: no key to check the token with: {exc}") from None
        except jwt.PyJWTError as exc:  # InvalidTokenError, or InvalidKeyError: an EC key of another curve
            raise AuthenticationFailed(f"Authentication failed: invalid token: {exc}") from None
        if not isinstance(claims.get(self.sub_claim), str) or not claims[self.sub_claim]:
            raise AuthenticationFailed(f"Authentication failed: the {self.sub_claim} claim is not a name")
        return claims


class OAuthBearerMechanism:
    """RFC 7628's client response, `n,,<0x01>auth=Bearer <token><0x01><0x01>`, checked by a JwtValidator."""

    def __init__(self, validator: JwtValidator) -> None:
        self._validator = validator
        self.complete = False
        self.user = ""
        self.expires_s: float | None = None  # the token's expiry (epoch seconds)

    def step(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid OAUTHBEARER message: not UTF-8") from None
        header, sep, rest = text.partition("\x01")
        if not sep or not re.fullmatch(r"[ny],(a=[^,]*)?,", header) or not rest.endswith("\x01\x01"):
            raise AuthenticationFailed("Invalid OAUTHBEARER client message")
        pairs = dict(kv.split("=", 1) for kv in rest.split("\x01") if "=" in kv)
        scheme, _, jwt_token = pairs.get("auth", "").partition(" ")
        if scheme.lower() != "bearer" or not jwt_token.strip():
            raise AuthenticationFailed("Invalid OAUTHBEARER client message: no bearer token")
        claims = self._validator.validate(jwt_token.strip())
        self.user = claims[self._validator.sub_claim]
        try:
            self.expires_s = float(claims["exp"])
        except OverflowError:  # an integer to PyJWT, but past any date a float holds
            raise AuthenticationFailed("Authentication failed: the exp claim is not a time") from None
        self.complete = True
        return b""


# -- a listener's settings ---------------------------------------------------------------------------------

_JAAS_ENTRY = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def parse_jaas_users(text: str) -> dict[str, str]:
    """The `user_<name>="<password>"` entries of a PlainLoginModule JAAS config."""
    return {key[5:]: value.replace('\\"', '"') for key, value in _JAAS_ENTRY.findall(text) if key.startswith("user_")}


@dataclass
class SaslListener:
    """What one SASL listener offers: its mechanisms, PLAIN's users, where SCRAM credentials come from, and
    the longest session before re-authentication (0: sessions do not end)."""

    listener: str
    mechanisms: tuple[str, ...]
    plain_users: dict[str, str]
    scram_credentials: Callable[[str, str], ScramCredential | None]
    max_reauth_ms: int
    failed_delay_ms: int = 100  # connection.failed.authentication.delay.ms
    max_receive_size: int = 524288  # sasl.server.max.receive.size: the frame limit before a login completes
    jwt: JwtValidator | None = None  # OAUTHBEARER's

    @classmethod
    def from_config(cls, config: BrokerConfig, listener: str,
                    scram_credentials: Callable[[str, str], ScramCredential | None]) -> "SaslListener":
        enabled = str(config.for_listener(listener, "sasl.enabled.mechanisms") or "")
        mechanisms = tuple(m.strip().upper() for m in enabled.split(",") if m.strip())
        unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
        if unsupported or not mechanisms:
            raise ConfigError(f"sasl.enabled.mechanisms for {listener}: {', '.join(unsupported) or 'none'}; "
                              f"odradek offers {', '.join(SUPPORTED_MECHANISMS)}")
        users: dict[str, str] = {}
        if "PLAIN" in mechanisms:
            jaas = str(config.for_listener(listener, "plain.sasl.jaas.config") or "")
            users = parse_jaas_users(jaas)
            if not users:
                raise ConfigError(f"listener {listener} offers PLAIN but listener.name.{listener.lower()}"
                                  '.plain.sasl.jaas.config names no user_<name>="<password>"')
        jwt = JwtValidator(config, listener) if "OAUTHBEARER" in mechanisms else None
        return cls(listener, mechanisms, users, scram_credentials, config.int("connections.max.reauth.ms"),
                   config.int("connection.failed.authentication.delay.ms"),
                   int(config.for_listener(listener, "sasl.server.max.receive.size")), jwt)

    def mechanism(self, name: str) -> Mechanism:
        if name == "PLAIN":
            return PlainMechanism(self.plain_users)
        if name == "OAUTHBEARER":
            assert self.jwt is not None
            return OAuthBearerMechanism(self.jwt)
        return ScramMechanism(name, self.scram_credentials)


class SaslSession:
    """One connection's SASL state: HANDSHAKE (nothing yet, or re-authenticating), then AUTHENTICATE
    (tokens in SaslAuthenticate, handshake v1) or RAW (tokens as bare frames, handshake v0), then
    AUTHENTICATED; FAILED closes the connection once its answer is out."""

    HANDSHAKE, AUTHENTICATE, RAW, AUTHENTICATED, FAILED = "handshake", "authenticate", "raw", "authenticated", "failed"

    def __init__(self, listener: SaslListener, peer: str) -> None:
        self.listener = listener
        self.peer = peer
        self.state = self.HANDSHAKE
        self.principal: str | None = None
        self._mechanism: Mechanism | None = None
        self._mechanism_name = ""
        self.session_expires_s: float | None = None  # time.monotonic() at which the session ends

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def expired(self) -> bool:
        return self.session_expires_s is not None and time.monotonic() >= self.session_expires_s

    def handshake(self, mechanism: str, raw_tokens: bool) -> bool:
        """A SaslHandshake for ``mechanism``; False if the listener does not offer it."""
        if mechanism not in self.listener.mechanisms:
            log.info("SASL: client %s asked for mechanism %r, not enabled on %s", self.peer, mechanism,
                     self.listener.listener)
            self.state = self.FAILED
            return False
        self._mechanism = self.listener.mechanism(mechanism)
        self._mechanism_name = mechanism
        self.state = self.RAW if raw_tokens else self.AUTHENTICATE
        return True

    def authenticate(self, token: bytes) -> bytes:
        """The client's next token; the answer to send. AuthenticationFailed (state FAILED) if refused."""
        mechanism = self._mechanism
        assert mechanism is not None
        try:
            answer = mechanism.step(token)
        except AuthenticationFailed as exc:
            self.state = self.FAILED
            log.warning("SASL: failed %s login from %s (user %r) on %s: %s", self._mechanism_name, self.peer,
                        mechanism.user, self.listener.listener, exc)
            raise
        if mechanism.complete:
            principal = f"User:{mechanism.user}"
            if self.principal is not None and principal != self.principal:
                self.state = self.FAILED
                log.warning("SASL: %s re-authenticated from %s as %s, not %s", self.peer, self._mechanism_name,
                            principal, self.principal)
                raise AuthenticationFailed("Cannot change principals during re-authentication")
            self.principal = principal
            self.state = self.AUTHENTICATED
            reauth = self.listener.max_reauth_ms
            self.session_expires_s = time.monotonic() + reauth / 1000.0 if reauth > 0 else None
            token_expires = getattr(mechanism, "expires_s", None)
            if self.session_expires_s is not None and token_expires is not None:  # ends with the token
                self.session_expires_s = min(self.session_expires_s,
                                             time.monotonic() + max(token_expires - time.time(), 0.0))
        return answer
