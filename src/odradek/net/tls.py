"""TLS for the SSL and SASL_SSL listeners, and for brokers reaching each other over one: Python's `ssl` with
certificates in PEM files, under Kafka's property names (each may be set for one listener alone as
`listener.name.<listener>.<property>`):

    ssl.keystore.type=PEM                    the only keystore type (JKS and PKCS12: convert with openssl)
    ssl.keystore.location=broker.pem         the private key and the certificate chain, leaf first
    ssl.key.password=...                     if the key in it is encrypted
    ssl.truststore.location=ca.pem           the CAs client certificates (and other brokers') must chain to
    ssl.client.auth=none|requested|required  mutual TLS: ask for a client certificate / insist on one
    ssl.enabled.protocols=TLSv1.2,TLSv1.3
    ssl.cipher.suites=...                    TLS 1.2 suites, IANA (Java) or OpenSSL names; empty: Python's
                                             defaults. TLS 1.3 suites are OpenSSL's defaults.
    ssl.principal.mapping.rules=DEFAULT      how a client certificate's subject becomes the principal

The files are read again when they change (`TlsListener.reload_if_changed`, on the broker's maintenance
tick): new connections get the new certificate, open ones keep theirs, and a file that does not load keeps
the old certificate in use (and is logged). The principal of a client that presented a certificate is
`User:` + its subject in RFC 2253 form (CN=alice,OU=eng,O=Example), mapped by the rules as Kafka's
`ssl.principal.mapping.rules` does (`RULE:pattern/replacement/[LU]`, then `DEFAULT`); without a certificate
it is `User:ANONYMOUS`.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterable

from odradek.config import BrokerConfig, ConfigError

if TYPE_CHECKING:
    from odradek.net.listeners import ListenerSetup

log = logging.getLogger(__name__)

ANONYMOUS = "User:ANONYMOUS"
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


@dataclass(frozen=True)
class TlsSettings:
    keystore: str
    key_password: str | None
    truststore: str
    client_auth: str
    protocols: tuple[str, ...]
    ciphers: str  # OpenSSL cipher list, "" for the defaults
    principal_rules: tuple["MappingRule", ...]
    verify_hostname: bool

    @classmethod
    def from_config(cls, config: BrokerConfig, listener: str) -> "TlsSettings":
        def value(key: str) -> str:
            return str(config.for_listener(listener, key) or "").strip()

        for key in ("ssl.keystore.type", "ssl.truststore.type"):
            if value(key).upper() not in ("", "PEM"):
                raise ConfigError(f"{key}={value(key)} for {listener}: only PEM files are read (convert a JKS "
                                  "or PKCS12 store with keytool/openssl)")
        protocols = tuple(p.strip() for p in value("ssl.enabled.protocols").split(",") if p.strip())
        unknown = [p for p in protocols if p not in _VERSIONS]
        if unknown or not protocols:
            raise ConfigError(f"ssl.enabled.protocols for {listener}: {', '.join(unknown) or 'none given'}; "
                              "TLSv1.2 and TLSv1.3 are supported")
        return cls(value("ssl.keystore.location"), value("ssl.key.password") or None,
                   value("ssl.truststore.location"), value("ssl.client.auth") or "none", protocols,
                   openssl_ciphers(value("ssl.cipher.suites")),
                   tuple(parse_mapping_rules(value("ssl.principal.mapping.rules") or "DEFAULT")),
                   value("ssl.endpoint.identification.algorithm").lower() == "https")


def openssl_ciphers(suites: str) -> str:
    """`ssl.cipher.suites` as an OpenSSL cipher list: IANA names (what Java and Kafka's docs use, e.g.
    TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) are translated, OpenSSL names kept. TLS 1.3 suites are left to
    OpenSSL, which enables them all."""
    out = []
    for suite in (s.strip() for s in suites.split(",")):
        if not suite:
            continue
        if suite.startswith("TLS_") and "_WITH_" in suite:
            exchange, _, cipher = suite[4:].partition("_WITH_")
            cipher = re.sub(r"^AES_(\d+)_", r"AES\1_", cipher).replace("_CBC", "")
            if cipher.startswith("CHACHA20_POLY1305"):
                cipher = "CHACHA20_POLY1305"
            name = cipher.replace("_", "-")
            out.append(name if exchange == "RSA" else f"{exchange.replace('_', '-')}-{name}")
        elif suite.startswith("TLS_"):
            continue  # a TLS 1.3 suite
        else:
            out.append(suite)
    return ":".join(out)


def _apply_common(ctx: ssl.SSLContext, settings: TlsSettings) -> None:
    versions = sorted(_VERSIONS[p] for p in settings.protocols)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    if settings.ciphers:
        try:
            ctx.set_ciphers(settings.ciphers)
        except ssl.SSLError as exc:
            raise ConfigError(f"ssl.cipher.suites: none of {settings.ciphers} is available: {exc}") from None


def _load_keystore(ctx: ssl.SSLContext, settings: TlsSettings, listener: str) -> None:
    try:
        ctx.load_cert_chain(settings.keystore, password=settings.key_password)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"ssl.keystore.location for {listener}: cannot load {settings.keystore}: {exc}") from None


def _load_truststore(ctx: ssl.SSLContext, settings: TlsSettings, listener: str) -> None:
    try:
        ctx.load_verify_locations(cafile=settings.truststore)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"ssl.truststore.location for {listener}: cannot load {settings.truststore}: {exc}") \
            from None


def keystore_problem(keystore: str, key_password: str | None) -> str | None:
    """Why a keystore given at run time (a dynamic broker config) would not load, or None: Kafka refuses such a
    change rather than keep serving an old certificate it was told to drop."""
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(keystore, password=key_password)
    except (OSError, ssl.SSLError) as exc:
        return f"cannot load {keystore}: {exc.strerror or exc}" if isinstance(exc, OSError) else \
            f"cannot load {keystore}: {exc.reason or exc}"
    return None


class AlertingSSLObject(ssl.SSLObject):
    """An SSLObject whose failed handshake still sends its alert.

    asyncio's and uvloop's TLS transports close the connection as soon as the handshake fails, dropping the
    alert OpenSSL has just written (certificate_required, handshake_failure, ...): the client sees the
    connection reset and retries, where against Kafka it is told why (the Java client raises
    SslAuthenticationException). So a failure is first reported as "want read", on which both transports send
    what OpenSSL wrote; the failure itself is raised at the next step, when the client answers the alert by
    closing (or after the listener's handshake timeout).
    """

    def do_handshake(self) -> None:
        failure = self.__dict__.get("_failure")
        if failure is not None:
            raise failure
        try:
            super().do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise
        except ssl.SSLError as exc:
            log.info("TLS handshake refused: %s", exc.reason or exc)
            self._failure = exc
            raise ssl.SSLWantReadError("the alert goes out first") from None


class TlsListener:
    """The server side of one TLS listener: its context, and the files it was made from."""

    def __init__(self, config: BrokerConfig, listener: str) -> None:
        self.listener = listener
        self.settings = settings = TlsSettings.from_config(config, listener)
        if not settings.keystore:
            raise ConfigError(f"listener {listener} uses TLS: set ssl.keystore.location (a PEM file with the "
                              "private key and the certificate chain)")
        if settings.client_auth != "none" and not settings.truststore:
            raise ConfigError(f"ssl.client.auth={settings.client_auth} for {listener} needs "
                              "ssl.truststore.location (the CAs of client certificates)")
        self.context = self._build()
        self._stamps = self._file_stamps()

    def _build(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.sslobject_class = AlertingSSLObject
        _apply_common(ctx, self.settings)
        _load_keystore(ctx, self.settings, self.listener)
        ctx.verify_mode = _CLIENT_AUTH[self.settings.client_auth]
        if self.settings.truststore:
            _load_truststore(ctx, self.settings, self.listener)
        return ctx

    def _file_stamps(self) -> tuple:
        stamps = []
        for path in (self.settings.keystore, self.settings.truststore):
            try:
                st = os.stat(path) if path else None
                stamps.append((st.st_mtime_ns, st.st_size, st.st_ino) if st else None)
            except OSError:
                stamps.append(None)
        return tuple(stamps)

    def reload_if_changed(self) -> bool:
        """Load the keystore and truststore again if either file changed; True if the certificates in use
        changed. The context is changed in place, so the listener's server uses it for new handshakes."""
        stamps = self._file_stamps()
        if stamps == self._stamps:
            return False
        self._stamps = stamps
        try:
            _load_keystore(self.context, self.settings, self.listener)
            if self.settings.truststore:
                _load_truststore(self.context, self.settings, self.listener)
        except ConfigError as exc:
            log.error("keeping the certificates in use on %s: %s", self.listener, exc)
            return False
        log.info("%s: certificates reloaded from %s", self.listener,
                 ", ".join(p for p in (self.settings.keystore, self.settings.truststore) if p))
        return True

    def reconfigure(self, config: BrokerConfig) -> bool:
        """Dynamic broker configs of this listener (`listener.name.L.ssl.keystore.location` and the other
        keystore and truststore settings, as `kafka-configs --alter` sets them for a keystore rotation): when
        they name other files or passwords, the context loads them in place, so new handshakes use them and
        open connections keep theirs. Settings that do not load keep the old certificates (logged); True if
        the certificates in use changed."""
        try:
            settings = TlsSettings.from_config(config, self.listener)
        except ConfigError as exc:
            log.error("keeping the TLS settings in use on %s: %s", self.listener, exc)
            return False
        if (settings.keystore, settings.key_password, settings.truststore) == \
                (self.settings.keystore, self.settings.key_password, self.settings.truststore):
            return False
        if not settings.keystore:
            log.error("keeping the TLS settings in use on %s: no ssl.keystore.location", self.listener)
            return False
        try:
            _load_keystore(self.context, settings, self.listener)
            if settings.truststore:
                _load_truststore(self.context, settings, self.listener)
        except ConfigError as exc:
            log.error("keeping the certificates in use on %s: %s", self.listener, exc)
            return False
        # the other settings (protocols, ciphers, client auth) are fixed when the listener starts
        self.settings = replace(self.settings, keystore=settings.keystore, key_password=settings.key_password,
                                truststore=settings.truststore)
        self._stamps = self._file_stamps()
        log.info("%s: certificates loaded from %s (dynamic broker config)", self.listener, settings.keystore)
        return True

    def principal(self, ssl_object: ssl.SSLObject | None) -> str:
        """The principal of a client on this listener: from its certificate's subject, if it sent one."""
        cert = ssl_object.getpeercert() if ssl_object is not None else None
        if not cert or not cert.get("subject"):
            return ANONYMOUS
        return "User:" + map_principal(subject_rfc2253(cert["subject"]), self.settings.principal_rules)


def tls_listeners(config: BrokerConfig, listeners: "ListenerSetup") -> dict[str, TlsListener]:
    """The TLS side of every listener that uses TLS, by listener name (ConfigError if one cannot be made)."""
    return {b.name: TlsListener(config, b.name) for b in listeners.bind if b.uses_tls}


def client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """A broker's client side for another broker's TLS listener (replication, controller requests): it trusts
    ssl.truststore.location and presents its own keystore (for listeners that require client certificates)."""
    settings = TlsSettings.from_config(config, listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _apply_common(ctx, settings)
    if settings.truststore:
        _load_truststore(ctx, settings, listener)
    else:
        ctx.load_default_certs()
    ctx.check_hostname = settings.verify_hostname
    if settings.keystore:
        _load_keystore(ctx, settings, listener)
    return ctx


# -- principals --------------------------------------------------------------------------------------------

# getpeercert() names the attributes by OpenSSL's long names; RFC 2253 uses the short ones where it has them.
_SHORT_NAMES = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O", "localityName": "L",
                "stateOrProvinceName": "ST", "countryName": "C", "streetAddress": "STREET",
                "domainComponent": "DC", "userId": "UID"}


def _escape_rdn_value(value: str) -> str:
    value = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if value.startswith((" ", "#")):
        value = "\\" + value
    if value.endswith(" ") and not value.endswith("\\ "):
        value = value[:-1] + "\\ "
    return value


def subject_rfc2253(subject: tuple) -> str:
    """A certificate subject as getpeercert() gives it, in RFC 2253 form: the most specific RDN first (CN
    before O and C), as Java's X500Principal.getName() writes it and Kafka's rules expect."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_SHORT_NAMES.get(k, k)}={_escape_rdn_value(v)}" for k, v in rdn))
    return ",".join(rdns)


@dataclass(frozen=True)
class MappingRule:
    pattern: re.Pattern | None  # None: DEFAULT (the subject unchanged)
    replacement: str = ""
    case: str = ""  # "L", "U" or ""


_RULE = re.compile(r"RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?)")


def parse_mapping_rules(text: str) -> list[MappingRule]:
    """`ssl.principal.mapping.rules`: comma-separated `RULE:pattern/replacement/[LU]` and `DEFAULT` (a comma
    inside a rule's pattern belongs to the rule)."""
    rules: list[MappingRule] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        if text[pos] in ", \n\t":
            pos += 1
            continue
        if text.startswith("DEFAULT", pos):
            rules.append(MappingRule(None))
            pos += len("DEFAULT")
            continue
        match = _RULE.match(text, pos)
        if match is None:
            raise ConfigError(f"ssl.principal.mapping.rules: cannot read a rule at {text[pos:]!r}")
        try:
            pattern = re.compile(match.group(1).replace("\\/", "/"))
        except re.error as exc:
            raise ConfigError(f"ssl.principal.mapping.rules: bad pattern {match.group(1)!r}: {exc}") from None
        rules.append(MappingRule(pattern, match.group(2).replace("\\/", "/"), match.group(3)))
        pos = match.end()
    return rules or [MappingRule(None)]


def map_principal(subject: str, rules: Iterable[MappingRule]) -> str:
    """The principal name of a certificate subject: the first rule whose pattern matches the whole subject
    (Java's `$1` group references in the replacement); no rule matching keeps the subject."""
    for rule in rules:
        if rule.pattern is None:
            return subject
        match = rule.pattern.fullmatch(subject)
        if match is None:
            continue
        name = re.sub(r"\$(\d+)", lambda m: match.group(int(m.group(1))) or "", rule.replacement)
        return name.lower() if rule.case == "L" else name.upper() if rule.case == "U" else name
    return subject
