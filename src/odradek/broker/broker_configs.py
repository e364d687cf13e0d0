"""Dynamic broker configs: which names AlterConfigs / IncrementalAlterConfigs take on a BROKER resource, how
their values are checked, and what DescribeConfigs lists of them — answered as Apache Kafka 4.4 answers.

Kafka 4.4's rules (asked of Kafka itself, tests/reference scenarios `broker-configs-*`):
- the resource name is this broker's id or "" (the cluster-wide default); anything else → INVALID_REQUEST
  ("Node id must be an integer, but it is: x", "Unexpected broker id, expected 1, but received 99");
- SET with a null value → INVALID_REQUEST ("Null value not supported for : NAME");
- a broker config Kafka cannot change at run time → INVALID_REQUEST ("Cannot update these configs
  dynamically: [NAME]"); an SSL config without a listener prefix → INVALID_REQUEST (per-listener only);
- a dynamic broker config whose value does not parse or is out of range → INVALID_REQUEST ("Invalid value V
  for configuration NAME: Not a number of type LONG" / "Value must be at least 0" / ...);
- every other name — topic-level names (`cleanup.policy`), names Kafka does not know — is accepted and
  stored; DescribeConfigs then lists it with a null value, read-only;
- Kafka's broker configs that odradek does not read (`sasl.kerberos.min.time.before.relogin`, ...; the table
  kafka_broker_configs.py is generated from Kafka's jars) are refused or checked and stored by Kafka's rules
  for their type, and described with their value, Kafka's default and read-only flag (a PASSWORD one as a
  secret);
- DELETE of any name is accepted.
Stored values live where the cluster keeps dynamic configs (cluster/admin.py `alter_broker_configs`).
odradek applies only some of them at run time (the follower replication throttle in a cluster); the rest
are kept and described, as issue 40 tracks.
"""

from __future__ import annotations

from odradek.broker.kafka_broker_configs import KAFKA_BROKER_CONFIGS
from odradek.config import BROKER_PROPERTIES
from odradek.protocol.errors import ErrorCode

INT_MAX, LONG_MAX = 2**31 - 1, 2**63 - 1
LONG_MIN = -(2**63)
INT, LONG, SHORT, DOUBLE, BOOLEAN, STRING, LIST = "INT", "LONG", "SHORT", "DOUBLE", "BOOLEAN", "STRING", "LIST"

# Kafka's dynamic broker configs odradek checks: name -> (type, minimum or allowed values, Kafka's default)
DYNAMIC_TYPES: dict[str, tuple[str, object, str | None]] = {
    "log.retention.ms": (LONG, None, None),
    "log.retention.bytes": (LONG, None, "-1"),
    "log.roll.ms": (LONG, 1, None),
    "log.roll.jitter.ms": (LONG, 0, None),
    "log.segment.bytes": (INT, 14, "1073741824"),
    "log.segment.delete.delay.ms": (LONG, 0, "60000"),
    "log.flush.interval.messages": (LONG, 1, str(LONG_MAX)),
    "log.flush.interval.ms": (LONG, None, None),
    "log.index.interval.bytes": (INT, 0, "4096"),
    "log.index.size.max.bytes": (INT, 4, "10485760"),
    "log.preallocate": (BOOLEAN, None, "false"),
    "log.cleanup.policy": (LIST, ("compact", "delete"), "delete"),
    "log.message.timestamp.type": (STRING, ("CreateTime", "LogAppendTime"), "CreateTime"),
    "log.message.timestamp.before.max.ms": (LONG, 0, str(LONG_MAX)),
    "log.message.timestamp.after.max.ms": (LONG, 0, "3600000"),
    "log.cleaner.threads": (INT, 0, "1"),
    "log.cleaner.dedupe.buffer.size": (LONG, None, "134217728"),
    "log.cleaner.io.buffer.size": (INT, 0, "524288"),
    "log.cleaner.io.max.bytes.per.second": (DOUBLE, None, "1.7976931348623157E308"),
    "log.cleaner.backoff.ms": (LONG, 0, "15000"),
    "log.cleaner.delete.retention.ms": (LONG, 0, "86400000"),
    "log.cleaner.min.compaction.lag.ms": (LONG, 0, "0"),
    "log.cleaner.max.compaction.lag.ms": (LONG, 1, str(LONG_MAX)),
    "log.cleaner.min.cleanable.ratio": (DOUBLE, 0, "0.5"),
    "log.local.retention.ms": (LONG, -2, "-2"),
    "log.local.retention.bytes": (LONG, -2, "-2"),
    "compression.type": (STRING, ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), "producer"),
    "message.max.bytes": (INT, 0, "1048588"),
    "min.insync.replicas": (INT, 1, "1"),
    "unclean.leader.election.enable": (BOOLEAN, None, "false"),
    "max.connections": (INT, 0, str(INT_MAX)),
    "max.connections.per.ip": (INT, 0, str(INT_MAX)),
    "max.connections.per.ip.overrides": (STRING, None, ""),
    "max.connection.creation.rate": (INT, 0, str(INT_MAX)),
    "producer.id.expiration.ms": (INT, 1, "86400000"),
    "num.io.threads": (INT, 1, "8"),
    "num.network.threads": (INT, 1, "3"),
    "num.replica.fetchers": (INT, None, "1"),
    "num.recovery.threads.per.data.dir": (INT, 1, "2"),
    "background.threads": (INT, 1, "10"),
    "leader.replication.throttled.rate": (LONG, 0, str(LONG_MAX)),
    "follower.replication.throttled.rate": (LONG, 0, str(LONG_MAX)),
    "replica.alter.log.dirs.io.max.bytes.per.second": (LONG, 0, str(LONG_MAX)),
}
# thread pools Kafka resizes at run time only within half to double of the current size
RESIZABLE_POOLS = frozenset({"log.cleaner.threads", "num.io.threads", "num.network.threads",
                             "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads"})
# security configs Kafka changes only per listener (`listener.name.L.NAME`)
PER_LISTENER_ONLY = frozenset({
    "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.location", "ssl.truststore.type",
    "ssl.truststore.password", "ssl.truststore.certificates", "ssl.client.auth", "ssl.cipher.suites",
    "ssl.enabled.protocols", "ssl.endpoint.identification.algorithm", "ssl.protocol", "ssl.provider",
})
# Kafka's dynamic broker configs among the properties odradek lists (DescribeConfigs' read_only flag)
KAFKA_DYNAMIC_BROKER_CONFIGS = frozenset(DYNAMIC_TYPES) | frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map", "sasl.enabled.mechanisms",
    "sasl.mechanism.inter.broker.protocol", "plain.sasl.jaas.config", "scram-sha-256.sasl.jaas.config",
    "scram-sha-512.sasl.jaas.config", *PER_LISTENER_ONLY,
})
# names odradek reads that Kafka 4.4 no longer knows (ZooKeeper mode is gone there): stored like unknown names
NOT_IN_KAFKA = frozenset(n for n in BROKER_PROPERTIES if n.startswith("zookeeper."))
# Kafka's broker configs odradek does not read: name -> (Kafka's type, changed at run time, default); stored and
# described as Kafka does, so a client's AlterConfigs then DescribeConfigs sees what it set (librdkafka's 0081)
KAFKA_ONLY: dict[str, tuple[str, bool, bool, str | None]] = {
    name: spec for name, spec in KAFKA_BROKER_CONFIGS.items()
    if name not in BROKER_PROPERTIES and name not in DYNAMIC_TYPES and name not in PER_LISTENER_ONLY}
# Kafka's read-only broker configs: odradek's properties that Kafka cannot change at run time, and Kafka's
# that odradek does not read and Kafka does not change at run time
READ_ONLY = (frozenset(BROKER_PROPERTIES) - KAFKA_DYNAMIC_BROKER_CONFIGS - NOT_IN_KAFKA) | {
    "advertised.listeners", "process.roles", "log.dirs", "log.dir", "controller.listener.names",
    "controller.quorum.voters", "controller.quorum.bootstrap.servers", "metadata.log.dir"} | frozenset(
    name for name, (_, dynamic, _, _) in KAFKA_ONLY.items() if not dynamic)
# Kafka's configs it changes only per broker (the listener-related ones), never at the cluster-wide default
PER_BROKER_ONLY = frozenset({"listeners", "listener.security.protocol.map"}) | frozenset(
    name for name, (_, dynamic, per_broker, _) in KAFKA_ONLY.items() if dynamic and per_broker)


def check_name(resource_name: str, node_id: int) -> tuple[int, str] | None:
    """A BROKER resource's name must be this broker's id or "" (Kafka's words otherwise)."""
    if resource_name == "":
        return None
    # Java's Integer.parseInt: ASCII digits with an optional sign, within 32 bits (no spaces, no other digits)
    digits = resource_name[1:] if resource_name[:1] in "+-" else resource_name
    asked = int(resource_name) if digits.isascii() and digits.isdigit() else None
    if asked is None or not -(2**31) <= asked <= INT_MAX:
        return ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {resource_name}"
    if asked != node_id:
        return ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {node_id}, but received {resource_name}"
    return None


def check_changes(changes: dict[str, str | None], default_level: bool,
                  current: dict[str, str]) -> tuple[int, str] | None:
    """Why Kafka would refuse these changes (name -> value, None: DELETE), or None. ``current``: the values in
    force now (for the thread pools' half-to-double rule)."""
    setting = {n: v for n, v in changes.items() if v is not None}
    fixed = [n for n in setting if n in READ_ONLY]
    if fixed:
        return ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: [{', '.join(fixed)}]"
    per_listener = [n for n in setting if n in PER_LISTENER_ONLY]
    if per_listener:
        return ErrorCode.INVALID_REQUEST, ("These security configs can be dynamically updated only per-listener "
                                           f"using the listener prefix: [{', '.join(per_listener)}]")
    per_broker = [n for n in setting if n in PER_BROKER_ONLY]
    if per_broker and default_level:
        return ErrorCode.INVALID_REQUEST, ("Cannot update these configs at default cluster level, broker id must "
                                           f"be specified: [{', '.join(per_broker)}]")
    bad_endpoint = next((item for item in setting.get("listeners", "").split(",")
                         if item.strip() and "://" not in item), None)
    if bad_endpoint is not None:
        return ErrorCode.INVALID_REQUEST, (f"Error creating broker listeners from '[{setting['listeners']}]': "
                                           f"Unable to parse {bad_endpoint.strip()} to a broker endpoint")
    for name, value in setting.items():
        problem = _value_problem(name, value.strip())
        if problem:
            return ErrorCode.INVALID_REQUEST, f"Invalid value {value} for configuration {name}: {problem}"
    for name in RESIZABLE_POOLS & set(setting):
        problem = _pool_problem(name, int(setting[name].strip()), int(current.get(name, DYNAMIC_TYPES[name][2] or 1)))
        if problem:
            return ErrorCode.INVALID_REQUEST, problem
    return None


def _value_problem(name: str, value: str) -> str | None:
    spec = DYNAMIC_TYPES.get(name)
    if spec is None and name in KAFKA_ONLY:
        spec = (KAFKA_ONLY[name][0], None, None)  # Kafka parses it by its type (its validators are not carried)
    if spec is None:
        return None  # stored as given, as Kafka stores names it does not check
    kind, bound, _ = spec
    if kind in (INT, LONG, SHORT):
        low, high = {INT: (-(2**31), INT_MAX), LONG: (LONG_MIN, LONG_MAX), SHORT: (-(2**15), 2**15 - 1)}[kind]
        try:
            number = int(value)
        except ValueError:
            return f"Not a number of type {kind}"
        if not low <= number <= high:
            return f"Not a number of type {kind}"
        if isinstance(bound, int) and number < bound:
            return f"Value must be at least {bound}"
    elif kind == DOUBLE:
        try:
            number_f = float(value)
        except ValueError:
            return "Not a number of type DOUBLE"
        if isinstance(bound, int) and number_f < bound:
            return f"Value must be at least {bound}"
    elif kind == BOOLEAN:
        if value.lower() not in ("true", "false"):
            return "Expected value to be either true or false"
    elif isinstance(bound, tuple):
        # an empty list is a list (Kafka stores `log.cleanup.policy=` as SUBTRACT leaves it)
        items = ([v.strip() for v in value.split(",")] if value else []) if kind == LIST else [value]
        if any(item not in bound for item in items):
            return f"String must be one of: {', '.join(bound)}"
    return None


def _pool_problem(name: str, wanted: int, current: int) -> str | None:
    if wanted == 0 or current == 0:
        return "/ by zero"  # Kafka's own answer to a pool of 0
    prefix = "Invalid value org.apache.kafka.common.config.ConfigException: "
    suffix = " for configuration Invalid dynamic configuration"
    what = "Log cleaner threads" if name == "log.cleaner.threads" else f"{name} value"
    if wanted > current * 2:
        return f"{prefix}{what} cannot be increased to more than double the current value {current}{suffix}"
    if wanted < current / 2:
        return f"{prefix}{what} cannot be decreased to less than half the current value {current}{suffix}"
    return None


def known_value(name: str) -> bool:
    """Whether DescribeConfigs shows a stored value (a broker config Kafka knows), not a null read-only one."""
    return (name in DYNAMIC_TYPES or name in BROKER_PROPERTIES or name in KAFKA_ONLY
            or name.startswith("listener.name.")) and name not in NOT_IN_KAFKA


# the replication throttles' defaults live outside Kafka's broker config definition: it lists none
NO_LISTED_DEFAULT = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                               "replica.alter.log.dirs.io.max.bytes.per.second"})


def kafka_default(name: str) -> str | None:
    """Kafka's default of a dynamic broker config, as DescribeConfigs lists it (None: not listed)."""
    if name in KAFKA_ONLY:
        return KAFKA_ONLY[name][3]
    spec = None if name in NO_LISTED_DEFAULT else DYNAMIC_TYPES.get(name)
    return spec[2] if spec is not None else None


# DescribeConfigs' config_type of Kafka's ConfigDef types
CONFIG_TYPES = {BOOLEAN: 1, STRING: 2, INT: 3, SHORT: 4, LONG: 5, DOUBLE: 6, LIST: 7, "CLASS": 8, "PASSWORD": 9}


def kafka_only_type(name: str) -> int | None:
    """DescribeConfigs' config_type of a Kafka broker config odradek does not read (None: not one)."""
    spec = KAFKA_ONLY.get(name)
    return CONFIG_TYPES[spec[0]] if spec is not None else None
