"""Client quotas (KIP-13, KIP-55, KIP-124): byte rates and request time per user and client id.

Configuration. A quota entity names a user, a client id, or both; either part may be the default
(`<default>` in Kafka's tools, a null name on the wire). Three keys are enforced:

- ``producer_byte_rate``: bytes/s of Produce requests;
- ``consumer_byte_rate``: bytes/s of records in Fetch responses to consumers (followers are exempt);
- ``request_percentage``: the share of the broker's request-handling time, in percent of one thread (the
  event loop), spent on the client's requests.

Precedence, per key, as Kafka resolves it: the first of these entities that sets the key applies (u the
principal's name, c the request's client id):

    (u, c)  (u, <default>)  (u, -)  (<default>, c)  (<default>, <default>)  (<default>, -)  (-, c)  (-, <default>)

The quota is shared by every client the entity covers: a quota on (u, -) is one budget for all of u's
clients, one on (-, <default>) a budget for each client id. So the measured rate's key is the matched
entity with each default replaced by the client's own name.

Measurement follows Kafka's sampled rate: ``quota.window.num`` samples of ``quota.window.size.seconds``;
the rate is what the live samples hold over the time they span, counted as at least ``num - 1`` whole
windows, so that a client's first second is not judged on a sliver of time. Over its bound the client is
throttled for

    (rate - bound) / bound * span

(capped at the whole window span): the time after which the rate, with nothing more recorded, falls back
to the bound. KIP-219: the response goes out at once with ``throttle_time_ms`` set and the connection reads
nothing more until the time has passed (net/connection.py), so a client that ignores the field is slowed
all the same. A consumer over its quota is answered an empty Fetch (no records read) for the throttle time.

Where the quotas live:

- a single node: ``client-quotas.json`` in the data directory, replaced atomically on every change;
- cluster mode: Kafka's znodes, ``/config/users/<user>``, ``/config/users/<user>/clients/<client>``,
  ``/config/clients/<client>`` (``<default>`` for the default, names URL-encoded), with a ``/config/changes``
  notification (cluster/member.py). The user znode also holds the user's SCRAM credentials.

Quotas are enforced by each broker on what it serves, as in Kafka. Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Awaitable, Callable, Iterable, NamedTuple

from odradek.storage.files import write_file_atomically

FILE_NAME = "client-quotas.json"
PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
QUOTA_KEYS = (PRODUCE, FETCH, REQUEST)
BYTE_RATES = (PRODUCE, FETCH)
USER, CLIENT_ID = "user", "client-id"


class DefaultName:
    """The default name of an entity part (``<default>``); a real name never equals it."""

    def __repr__(self) -> str:
        return "<default>"


DEFAULT = DefaultName()


class QuotaEntity(NamedTuple):
    """A user, a client id, or both; a part is a name, DEFAULT, or None (not in the entity)."""

    user: str | DefaultName | None = None
    client_id: str | DefaultName | None = None

    def parts(self) -> list[tuple[str, str | None]]:
        """(entity type, name) for the wire; a default's name is None."""
        out = []
        for kind, value in ((USER, self.user), (CLIENT_ID, self.client_id)):
            if value is not None:
                out.append((kind, None if value is DEFAULT else value))
        return out

    def to_json(self) -> dict:
        return {kind: name for kind, name in self.parts()}

    @classmethod
    def from_json(cls, value: dict) -> "QuotaEntity":
        def part(kind: str):
            if kind not in value:
                return None
            return DEFAULT if value[kind] is None else str(value[kind])
        return cls(part(USER), part(CLIENT_ID))


Configs = dict[QuotaEntity, dict[str, float]]
# what one AlterClientQuotas changes: entity -> key -> the new value, or None to remove it
Changes = dict[QuotaEntity, dict[str, "float | None"]]


class SampledRate:
    """Kafka's windowed rate: the sum of the live samples over the time they span (see the module
    docstring). Samples are (start in ms, total)."""

    __slots__ = ("window_ms", "samples", "_starts", "_totals")

    def __init__(self, window_ms: int, samples: int) -> None:
        self.window_ms = window_ms
        self.samples = samples
        self._starts: list[float] = []
        self._totals: list[float] = []

    def record(self, value: float, now_ms: float) -> None:
        if not self._starts or now_ms >= self._starts[-1] + self.window_ms:
            self._starts.append(now_ms)
            self._totals.append(0.0)
            if len(self._starts) > self.samples:
                del self._starts[0], self._totals[0]
        self._totals[-1] += value

    def _expire(self, now_ms: float) -> None:
        horizon = now_ms - self.samples * self.window_ms
        while self._starts and self._starts[0] + self.window_ms <= horizon:
            del self._starts[0], self._totals[0]

    def span_ms(self, now_ms: float) -> float:
        """The time the rate is taken over: since the oldest live sample, at least ``samples - 1`` windows."""
        self._expire(now_ms)
        elapsed = now_ms - self._starts[0] if self._starts else 0.0
        return max(elapsed, (self.samples - 1) * self.window_ms)

    def per_second(self, now_ms: float) -> float:
        span = self.span_ms(now_ms)
        return sum(self._totals) * 1000.0 / span

    def throttle_ms(self, bound: float, now_ms: float) -> int:
        """How long to hold the client so its rate falls back to ``bound``; 0 within it."""
        span = self.span_ms(now_ms)
        rate = sum(self._totals) * 1000.0 / span
        if rate <= bound:
            return 0
        return int(min((rate - bound) / bound * span, self.samples * self.window_ms))


def precedence(user: str, client_id: str) -> list[tuple[QuotaEntity, tuple[str, str]]]:
    """The entities that may set a (user, client id)'s quota, most specific first, each with the key of the
    rate it is measured by (see the module docstring)."""
    u, c, d = user, client_id, DEFAULT
    return [
        (QuotaEntity(u, c), (u, c)), (QuotaEntity(u, d), (u, c)), (QuotaEntity(u, None), (u, "")),
        (QuotaEntity(d, c), (u, c)), (QuotaEntity(d, d), (u, c)), (QuotaEntity(d, None), (u, "")),
        (QuotaEntity(None, c), ("", c)), (QuotaEntity(None, d), ("", c)),
    ]


class ClientQuotas:
    """The configured quotas, the rates they are measured by, and the throttle each client has earned."""

    def __init__(self, window_ms: int = 1000, samples: int = 11,
                 persist: Callable[[Configs], Awaitable[None]] | None = None) -> None:
        self.window_ms = window_ms
        self.samples = samples
        self._configs: Configs = {}
        # every quota resolved for a (key, user, client id): (bound, rate key) or None; cleared on changes
        self._resolved: dict[tuple[str, str, str], tuple[float, tuple[str, str]] | None] = {}
        self._rates: dict[tuple[str, tuple[str, str]], SampledRate] = {}
        self.enabled = False  # any quota configured: the request path checks this one flag
        self.persist = persist  # writes the whole new configuration before it applies

    # -- configuration ----------------------------------------------------------------------------------

    def configs(self) -> Configs:
        return {entity: dict(values) for entity, values in self._configs.items()}

    def replace(self, configs: Configs) -> None:
        self._configs = {e: dict(v) for e, v in configs.items() if v}
        self._resolved.clear()
        self.enabled = bool(self._configs)

    def set_entity(self, entity: QuotaEntity, values: dict[str, float]) -> None:
        """One entity's quotas as loaded (empty: none)."""
        configs = self.configs()
        configs[entity] = dict(values)
        self.replace(configs)

    async def alter(self, changes: Changes) -> None:
        """Apply ``changes`` once they are stored (OSError, or the backend's error, if they cannot be)."""
        configs = self.configs()
        for entity, ops in changes.items():
            values = configs.setdefault(entity, {})
            for key, value in ops.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
        configs = {e: v for e, v in configs.items() if v}
        if self.persist is not None:
            await self.persist(configs)
        self.replace(configs)

    # -- enforcement ------------------------------------------------------------------------------------

    def _quota(self, key: str, user: str, client_id: str) -> tuple[float, tuple[str, str]] | None:
        cache_key = (key, user, client_id)
        try:
            return self._resolved[cache_key]
        except KeyError:
            pass
        found = None
        for entity, rate_key in precedence(user, client_id):
            bound = self._configs.get(entity, {}).get(key)
            if bound is not None:
                found = (bound, rate_key)
                break
        if len(self._resolved) > 100_000:  # client ids are the clients' to choose
            self._resolved.clear()
        self._resolved[cache_key] = found
        return found

    def _rate(self, key: str, rate_key: tuple[str, str]) -> SampledRate:
        rate = self._rates.get((key, rate_key))
        if rate is None:
            rate = self._rates[(key, rate_key)] = SampledRate(self.window_ms, self.samples)
        return rate

    def record(self, key: str, user: str, client_id: str, value: float, now_ms: float) -> int:
        """Count ``value`` against the client's ``key`` quota; the throttle it has earned (ms, 0: none)."""
        quota = self._quota(key, user, client_id)
        if quota is None:
            return 0
        rate = self._rate(key, quota[1])
        rate.record(value, now_ms)
        return rate.throttle_ms(quota[0], now_ms)

    def throttle_ms(self, key: str, user: str, client_id: str, now_ms: float) -> int:
        """The throttle the client has earned so far, recording nothing."""
        quota = self._quota(key, user, client_id)
        if quota is None:
            return 0
        return self._rate(key, quota[1]).throttle_ms(quota[0], now_ms)

    def forget_idle(self, now_ms: float) -> None:
        """Drop the rates with nothing left in their window (called now and then: client ids come and go)."""
        idle = [k for k, rate in self._rates.items() if rate.per_second(now_ms) == 0.0]
        for k in idle:
            del self._rates[k]

    # -- description ------------------------------------------------------------------------------------

    def describe(self, components: Iterable[tuple[str, int, str | None]], strict: bool) -> Configs:
        """The configured entities a DescribeClientQuotas filter selects: each component is (entity type,
        match type 0 exact / 1 default / 2 any, name); ``strict`` excludes entities with other parts."""
        components = list(components)
        wanted = {kind for kind, _, _ in components}
        selected: Configs = {}
        for entity, values in self._configs.items():
            parts = {USER: entity.user, CLIENT_ID: entity.client_id}
            if strict and {k for k, v in parts.items() if v is not None} != wanted:
                continue
            if all(_matches(parts.get(kind), match_type, name) for kind, match_type, name in components):
                selected[entity] = dict(values)
        return selected


def _matches(value: str | DefaultName | None, match_type: int, name: str | None) -> bool:
    if value is None:
        return False
    if match_type == 0:
        return value == name
    if match_type == 1:
        return value is DEFAULT
    return True


def validate_value(key: str, value: float) -> str | None:
    """Why ``value`` is not a valid ``key`` quota (None: it is), in Kafka's words where it has them."""
    if key not in QUOTA_KEYS:
        return f"Unknown or unsupported quota key {key!r}; odradek enforces {', '.join(QUOTA_KEYS)}"
    if not math.isfinite(value) or value <= 0:
        return f"Invalid value {value} for {key}: it must be positive"
    if key in BYTE_RATES and value != int(value):
        return f"Invalid value {value} for {key}: it must be a whole number of bytes per second"
    return None


class QuotaFile:
    """A single node's quotas: ``client-quotas.json`` in the data directory, a list of entities::

        {"version": 1, "quotas": [{"entity": {"user": "alice", "client-id": null}, "config": {"producer_byte_rate": 1048576}}]}

    A null name is the default; a missing part is not in the entity.
    """

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE_NAME

    def load_into(self, quotas: ClientQuotas) -> None:
        try:
            value = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        quotas.replace({QuotaEntity.from_json(e["entity"]): {k: float(v) for k, v in e["config"].items()}
                        for e in value.get("quotas", [])})

    async def persist(self, configs: Configs) -> None:
        entries = [{"entity": entity.to_json(), "config": dict(sorted(values.items()))}
                   for entity, values in sorted(configs.items(), key=lambda item: repr(item[0]))]
        write_file_atomically(self.path, json.dumps({"version": 1, "quotas": entries}, indent=1).encode())
