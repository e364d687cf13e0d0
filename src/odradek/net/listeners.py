"""Listeners: the named endpoints a broker serves, with Kafka's properties.

    listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093          what the broker binds
    advertised.listeners=PLAINTEXT://broker1:9092,SSL://broker1:9093    what clients and brokers are told
    listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SSL      a listener name's security protocol
    inter.broker.listener.name=INTERNAL                                 the one brokers replicate over

In cluster mode the inter-broker listener may use SASL (SASL_PLAINTEXT, SASL_SSL): brokers then log in to each
other with `sasl.mechanism.inter.broker.protocol` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512) and the username and
password of the listener's `listener.name.<listener>.<mechanism>.sasl.jaas.config` (net/sasl_client.py); a
mechanism they cannot use, or credentials not given, refuse the start.

A listener's name is its own (the map gives its protocol) or, without an entry in the map, must itself be a
security protocol. Every broker registers each advertised listener (ZooKeeper `/brokers/ids/ID` carries
them all), and a client is told the endpoints of the listener it came in on: a client on SSL learns the
other brokers' SSL addresses, one inside on PLAINTEXT their PLAINTEXT ones. A port of 0 binds a free port,
and an advertised port of 0 (or a listener without an advertised entry) advertises the bound one.

Without `listeners`, the broker serves one PLAINTEXT listener at `odradek serve --listen` (and
`--advertise`), as before listeners were configurable.

KAFKA07 is a protocol of its own, not a security protocol: a listener of it speaks the Kafka 0.7 wire
protocol (legacy07/, docs/kafka07.md). Such listeners are kept apart in ``ListenerSetup.legacy07``: they are
never advertised in metadata or the cluster's registration, never inter-broker, and take no TLS or SASL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from odradek.config import BrokerConfig, ConfigError
from odradek.net.sasl_client import inter_broker_sasl

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's SecurityProtocol ids, as UpdateMetadata carries them.
SECURITY_PROTOCOL_IDS = {name: i for i, name in enumerate(SECURITY_PROTOCOLS)}
# `listener.security.protocol.map` unset: each protocol name is a listener name of that protocol.
DEFAULT_PROTOCOL_MAP = {name: name for name in SECURITY_PROTOCOLS}
# The Kafka 0.7 wire protocol (plaintext): served by legacy07/server.py, not by net/connection.py. A listener
# named KAFKA07 speaks it unless the map says otherwise.
KAFKA07 = "KAFKA07"

_LISTENER = re.compile(r"^([A-Za-z0-9_.-]+)://(\[[^\]]*\]|[^:\[\]]*):(\d+)$")


@dataclass(frozen=True)
class Listener:
    name: str  # upper case, as Kafka normalises it
    security_protocol: str
    host: str  # empty: every interface
    port: int

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True)
class ListenerSetup:
    bind: tuple[Listener, ...]  # what the broker listens on, in the order given
    advertised: tuple[Listener, ...]  # one per bound listener, same order
    inter_broker: str  # the name of the listener brokers reach each other on
    legacy07: tuple[Listener, ...] = ()  # the KAFKA07 listeners, outside ``bind`` and ``advertised``
    # which of `listeners` / `advertised.listeners` the operator gave (as properties, or --listen / --advertise):
    # DescribeConfigs lists those as static broker configs, the others as defaults
    given: frozenset[str] = frozenset()

    def advertised_listener(self, name: str) -> Listener:
        return next(a for a in self.advertised if a.name == name)

    def with_bound_ports(self, ports: dict[str, int]) -> "ListenerSetup":
        """The setup once bound: port 0 (bound or advertised) replaced by the port each listener got."""
        bind = tuple(replace(b, port=ports.get(b.name, b.port)) for b in self.bind)
        advertised = tuple(replace(a, port=ports.get(a.name, a.port)) if a.port == 0 else a for a in self.advertised)
        return ListenerSetup(bind, advertised, self.inter_broker, self.legacy07, self.given)


def parse_protocol_map(text: str) -> dict[str, str]:
    """`listener.security.protocol.map`: NAME:PROTOCOL,... (empty or unset: Kafka's default)."""
    if not text.strip():
        return dict(DEFAULT_PROTOCOL_MAP)
    out: dict[str, str] = {}
    for entry in text.split(","):
        name, sep, protocol = entry.strip().partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in (*SECURITY_PROTOCOLS, KAFKA07):
            raise ConfigError(f"listener.security.protocol.map: {entry.strip()!r} is not NAME:PROTOCOL with a "
                              f"protocol among {', '.join(SECURITY_PROTOCOLS)} or {KAFKA07}")
        out[name] = protocol
    return out


def parse_listeners(text: str, protocols: dict[str, str], key: str = "listeners") -> list[Listener]:
    """`listeners` or `advertised.listeners`: NAME://HOST:PORT,... (HOST empty or 0.0.0.0: every interface;
    IPv6 in brackets)."""
    out: list[Listener] = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        match = _LISTENER.match(entry)
        if match is None:
            raise ConfigError(f"{key}: {entry!r} is not NAME://HOST:PORT")
        name = match.group(1).upper()
        if name not in protocols:
            raise ConfigError(f"{key}: listener {name} has no security protocol: add it to "
                              "listener.security.protocol.map (or name it after one: PLAINTEXT, SSL, ...)")
        port = int(match.group(3))
        if port > 65535:
            raise ConfigError(f"{key}: port {port} of {name} is out of range")
        if any(listener.name == name for listener in out):
            raise ConfigError(f"{key}: listener {name} is given twice")
        out.append(Listener(name, protocols[name], match.group(2).strip("[]"), port))
    return out


def _client_host(host: str) -> str:
    """The address to advertise for a listener bound to ``host`` without an advertised entry."""
    return "127.0.0.1" if host in ("", "0.0.0.0") else "::1" if host == "::" else host


def listener_setup(config: BrokerConfig, listen: tuple[str, int] | None = None,
                   advertise: tuple[str, int] | None = None) -> ListenerSetup:
    """The listeners from the broker's properties; without `listeners`, one PLAINTEXT listener at ``listen``
    (default 127.0.0.1:9092) advertised at ``advertise``."""
    protocols = {KAFKA07: KAFKA07, **parse_protocol_map(str(config.get("listener.security.protocol.map") or ""))}
    text = str(config.get("listeners") or "")
    if text.strip():
        if listen is not None:
            raise ConfigError("give either --listen or the listeners property, not both")
        given_bind = parse_listeners(text, protocols)
        legacy07 = [b for b in given_bind if b.security_protocol == KAFKA07]
        bind = [b for b in given_bind if b.security_protocol != KAFKA07]
        if not bind:
            raise ConfigError("listeners: no listener given (a KAFKA07 one needs another beside it)")
    else:
        host, port = listen or ("127.0.0.1", 9092)
        if "PLAINTEXT" not in protocols:
            raise ConfigError("listener.security.protocol.map has no PLAINTEXT for --listen; set listeners")
        bind = [Listener("PLAINTEXT", protocols["PLAINTEXT"], host, port)]
        legacy07 = []
    advertised_text = str(config.get("advertised.listeners") or "")
    if advertised_text.strip():
        if advertise is not None:
            raise ConfigError("give either --advertise or the advertised.listeners property, not both")
        given = {a.name: a for a in parse_listeners(advertised_text, protocols, "advertised.listeners")
                 if a.security_protocol != KAFKA07}
        unknown = set(given) - {b.name for b in bind}
        if unknown:
            raise ConfigError(f"advertised.listeners: {', '.join(sorted(unknown))} not among the listeners")
    elif advertise is not None:
        given = {bind[0].name: replace(bind[0], host=advertise[0], port=advertise[1])}
    else:
        given = {}
    advertised = tuple(given.get(b.name) or replace(b, host=_client_host(b.host)) for b in bind)
    for a in advertised:
        if a.host in ("", "0.0.0.0", "::"):
            raise ConfigError(f"advertised.listeners: {a.name} advertises {a.host or 'no host'}, which no "
                              "client can connect to")
    names = [b.name for b in bind]
    inter_broker = str(config.get("inter.broker.listener.name") or "").upper()
    if inter_broker:
        if inter_broker not in names:
            raise ConfigError(f"inter.broker.listener.name: {inter_broker} is not among the listeners "
                              f"({', '.join(names)})")
    else:
        wanted = str(config.get("security.inter.broker.protocol")).upper()
        inter_broker = next((n for n in names if n == wanted), names[0])
    inter_broker_listener = next(b for b in bind if b.name == inter_broker)
    if config.get("zookeeper.connect") and inter_broker_listener.uses_sasl:
        # checked now, so a broker that could not log in to the others refuses to start rather than joining
        # a cluster it cannot replicate in (the settings themselves are built by cluster/member.py)
        inter_broker_sasl(config, inter_broker_listener)
    given = frozenset(name for name, by_property, by_flag in (("listeners", text, listen),
                                                              ("advertised.listeners", advertised_text, advertise))
                      if by_property.strip() or by_flag is not None)
    return ListenerSetup(tuple(bind), advertised, inter_broker, tuple(legacy07), given)
