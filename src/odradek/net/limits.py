"""Connection limits, with Kafka's properties: `max.connections` over every listener but the inter-broker
one (in cluster mode), `max.connections.per.ip`, and `max.connections.per.ip.overrides` (`host:count,...`, which may also raise
the limit of one address above the default). A connection over a limit is closed as soon as it is accepted
(Kafka keeps an over-limit `max.connections` connection waiting in the accept queue instead).

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import logging
from collections import Counter

from odradek.config import BrokerConfig, ConfigError

log = logging.getLogger(__name__)

INT_MAX = 2147483647


class ConnectionLimits:
    def __init__(self, config: BrokerConfig, inter_broker_listener: str | None) -> None:
        self.max_total = config.int("max.connections")
        self.max_per_ip = config.int("max.connections.per.ip")
        self.overrides = parse_overrides(str(config.get("max.connections.per.ip.overrides") or ""))
        self.inter_broker_listener = inter_broker_listener
        self._total = 0
        self._per_ip: Counter[str] = Counter()

    def reconfigure(self, config: BrokerConfig) -> None:
        """The limits as changed at run time (dynamic broker configs): they apply to the next connection
        accepted; connections already open stay open, as in Kafka. Overrides that do not parse keep the old."""
        self.max_total = config.int("max.connections")
        self.max_per_ip = config.int("max.connections.per.ip")
        try:
            self.overrides = parse_overrides(str(config.get("max.connections.per.ip.overrides") or ""))
        except ConfigError as exc:
            log.warning("keeping the max.connections.per.ip.overrides in force: %s", exc)

    def admit(self, listener: str, host: str) -> bool:
        """Count a new connection of ``listener`` from ``host``; False (not counted) if it is over a limit."""
        counted = listener != self.inter_broker_listener
        if counted and self._total >= self.max_total:
            log.warning("refusing a connection from %s on %s: max.connections (%d) reached", host, listener,
                        self.max_total)
            return False
        limit = self.overrides.get(host, self.max_per_ip)
        if self._per_ip[host] >= limit:
            log.warning("refusing a connection from %s on %s: max.connections.per.ip (%d) reached", host,
                        listener, limit)
            return False
        self._total += counted
        self._per_ip[host] += 1
        return True

    def release(self, listener: str, host: str) -> None:
        self._total -= listener != self.inter_broker_listener
        self._per_ip[host] -= 1
        if self._per_ip[host] <= 0:
            del self._per_ip[host]


def parse_overrides(text: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: host:count pairs, comma-separated."""
    overrides: dict[str, int] = {}
    for entry in text.split(","):
        if not entry.strip():
            continue
        host, sep, count = entry.strip().rpartition(":")
        if not sep or not host or not count.isdigit():
            raise ConfigError(f"max.connections.per.ip.overrides: {entry.strip()!r} is not host:count")
        overrides[host] = int(count)
    return overrides
