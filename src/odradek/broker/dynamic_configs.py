"""Dynamic broker configs applied at run time: what a broker does when the configs stored for it (its own id's
and the cluster-wide `<default>`'s, broker/broker_configs.py checks them, the cluster stores them) change.

As in Kafka, a broker's own value wins over the cluster-wide default, which wins over its static properties.
Applied without a restart:
- the topic defaults of the `log.*` properties (`log.retention.ms`, `log.retention.bytes`, `log.segment.bytes`,
  `log.roll.ms`, `log.cleanup.policy`, ...), `message.max.bytes`, `compression.type`, `min.insync.replicas`,
  `unclean.leader.election.enable` and the other broker properties behind topic configs: every topic without
  an override of its own takes the new value (its local logs from their next append or retention pass; the
  produce path reads it for every request);
- the log cleaner's `log.cleaner.threads`, `log.cleaner.io.max.bytes.per.second`, `log.cleaner.backoff.ms`,
  `log.cleaner.dedupe.buffer.size`; `producer.id.expiration.ms`;
- the connection limits `max.connections`, `max.connections.per.ip`, `max.connections.per.ip.overrides`
  (the next connection accepted; open ones stay), through the hooks the listeners register;
- a TLS listener's keystore and truststore (`listener.name.L.ssl.keystore.location`, ...): new handshakes use
  the new certificate (net/tls.py `TlsListener.reconfigure`; a keystore that does not load is refused before
  it is stored, broker/topic_configs.py);
- in a cluster, `follower.replication.throttled.rate` (cluster/member.py) and `leader.replication.throttled.rate`
  (read by every follower Fetch, cluster/leader_throttle.py).
Kafka's other dynamic configs (thread pool sizes, `max.connection.creation.rate`, the local retention of
tiered storage, the SASL/Kerberos login settings, ...) are stored and described but change nothing here:
odradek has no such setting.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from odradek.broker.broker_configs import DYNAMIC_TYPES, KAFKA_ONLY, PER_LISTENER_ONLY
from odradek.config import BrokerConfig
from odradek.storage.cleaner import CleanerConfig
from odradek.topic_config import log_config_for

if TYPE_CHECKING:
    from odradek.broker.core import Broker

log = logging.getLogger(__name__)


def applied_at_run_time(name: str) -> bool:
    """Whether a stored dynamic config (a name without its `listener.name.L.` prefix) is one odradek takes over
    its static property; names Kafka refuses to change at run time are never stored, so never seen here."""
    return name in DYNAMIC_TYPES or name in PER_LISTENER_ONLY


def cleaner_config_of(config: BrokerConfig) -> CleanerConfig:
    return CleanerConfig(enable=bool(config.get("log.cleaner.enable")), threads=config.int("log.cleaner.threads"),
                         dedupe_buffer_size=config.int("log.cleaner.dedupe.buffer.size"),
                         io_max_bytes_per_second=float(config.get("log.cleaner.io.max.bytes.per.second")),  # type: ignore[arg-type]
                         backoff_ms=config.int("log.cleaner.backoff.ms"))


def apply(broker: "Broker", defaults: dict[str, str], own: dict[str, str]) -> None:
    """Apply the cluster-wide ``defaults`` and this broker's ``own`` dynamic configs (each the whole set now
    stored) over the broker's static properties."""
    if (defaults, own) == broker.dynamic_broker_configs:
        return
    broker.dynamic_broker_configs = (dict(defaults), dict(own))
    live = broker.config.with_dynamic({**defaults, **own}, applied_at_run_time)
    broker.live_config = live
    topic_defaults = live.topic_defaults()
    if topic_defaults != broker.topic_defaults:
        broker.topic_defaults = topic_defaults
        broker.forget_effective_configs()
        broker.logs.default_config = log_config_for(topic_defaults)
        for (topic, _), plog in broker.logs.logs().items():
            plog.update_config(broker.log_config(topic))
    broker.logs.cleaner.reconfigure(cleaner_config_of(live))
    broker.logs.producer_id_expiration_ms = live.int("producer.id.expiration.ms")
    for hook in broker.reconfigure_hooks:
        try:
            hook(live)
        except Exception:  # one listener's trouble must not stop the others from taking the change
            log.exception("applying dynamic broker configs failed")
    log.info("dynamic broker configs in force: %s",
             ", ".join(f"{k}={_shown(k, v)}" for k, v in sorted({**defaults, **own}.items())) or "none")


def _shown(name: str, value: str) -> str:
    """A value for the log: Kafka's own non-secret configs as they are; passwords, JAAS texts and names Kafka
    does not know (which DescribeConfigs treats as secrets) hidden."""
    shown = name in DYNAMIC_TYPES or name.endswith(("ssl.keystore.location", "ssl.truststore.location")) or \
        (name in KAFKA_ONLY and KAFKA_ONLY[name][0] != "PASSWORD")
    return value if shown else "(hidden)"
