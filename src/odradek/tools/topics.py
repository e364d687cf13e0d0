"""`odradek topics`: create, list, describe, alter and delete topics on any Kafka-compatible cluster
(confluent-kafka's AdminClient), as Kafka's `kafka-topics` does:

    odradek topics create TOPIC [--partitions N] [--replication-factor R] [--config k=v ...] [--if-not-exists]
    odradek topics list [--include-internal]
    odradek topics describe TOPIC ...       partitions (leader, replicas, ISR, log start and end offsets)
                                            and the topic's configs set on it (--all-configs: every one)
    odradek topics alter TOPIC [--partitions N] [--config k=v ...] [--delete-config k ...]
    odradek topics delete TOPIC ... [--if-exists]

Each takes --bootstrap, --command-config, --timeout; list and describe take --output json.
"""

from __future__ import annotations

import argparse
from typing import Any

from odradek.cluster.topics import INTERNAL_TOPICS
from odradek.tools.common import ToolError, admin_client, connection_options, emit, key_value, metadata, result, \
    run_command, table, topic_partitions



def add_parser(sub: Any) -> None:
    common = connection_options()
    shown = connection_options(output=True)
    topics = sub.add_parser("topics", help="create, list, describe, alter, delete topics")
    actions = topics.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", parents=[common], help="create a topic")
    create.add_argument("topic")
    create.add_argument("--partitions", type=int, default=None, metavar="N", help="(default: the broker's)")
    create.add_argument("--replication-factor", type=int, default=None, metavar="R", help="(default: the broker's)")
    create.add_argument("--config", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                        help="a topic config (repeatable)")
    create.add_argument("--if-not-exists", action="store_true", help="succeed if the topic exists already")
    listing = actions.add_parser("list", parents=[shown], help="list topics")
    listing.add_argument("--include-internal", action="store_true", help="also __consumer_offsets, ...")
    describe = actions.add_parser("describe", parents=[shown], help="partitions, leaders, replicas, ISR, offsets")
    describe.add_argument("topics", nargs="+", metavar="TOPIC")
    describe.add_argument("--all-configs", action="store_true", help="every config, not only those set on the topic")
    alter = actions.add_parser("alter", parents=[common], help="change a topic's configs or partition count")
    alter.add_argument("topic")
    alter.add_argument("--partitions", type=int, default=None, metavar="N", help="the new (larger) partition count")
    alter.add_argument("--config", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                       help="set a config (repeatable)")
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                       help="remove a config, back to the broker's default (repeatable)")
    delete = actions.add_parser("delete", parents=[common], help="delete topics")
    delete.add_argument("topics", nargs="+", metavar="TOPIC")
    delete.add_argument("--if-exists", action="store_true", help="succeed if a topic does not exist")


def run(args: argparse.Namespace) -> int:
    return run_command("topics", lambda: _ACTIONS[args.action](args))


def _positive(value: int | None, what: str) -> None:
    if value is not None and value < 1:
        raise ToolError(f"{what} must be at least 1, got {value}")


def cmd_create(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewTopic

    _positive(args.partitions, "--partitions")
    _positive(args.replication_factor, "--replication-factor")
    admin = admin_client(args)  # keep a reference: a destroyed client fails its futures
    metadata(admin, args)  # fails fast, with a clear message, when the cluster is unreachable
    new = NewTopic(args.topic, num_partitions=args.partitions or -1,
                   replication_factor=args.replication_factor or -1, config=dict(args.config))
    future = admin.create_topics([new], request_timeout=args.timeout)[args.topic]
    try:
        result(future, f"create {args.topic}", args.timeout)
    except ToolError as exc:
        if not (args.if_not_exists and ("TOPIC_ALREADY_EXISTS" in str(exc) or "already exists" in str(exc))):
            raise
        print(f"topic {args.topic} exists already")
        return 0
    print(f"created topic {args.topic}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    md = metadata(admin, args)
    names = sorted(t for t in md.topics if args.include_internal or t not in INTERNAL_TOPICS)
    data = [{"topic": t, "partitions": len(md.topics[t].partitions),
             "replication_factor": max((len(p.replicas) for p in md.topics[t].partitions.values()), default=0)}
            for t in names]
    return emit(args, data, lambda con: con.print(table(
        ["TOPIC", "PARTITIONS", "REPLICATION"], [[d["topic"], d["partitions"], d["replication_factor"]] for d in data],
        right=("PARTITIONS", "REPLICATION"))))


def topic_offsets(admin: Any, args: argparse.Namespace, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
    """partition -> (log start, log end), from ListOffsets (earliest, latest)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    found: dict[int, list[int]] = {p: [-1, -1] for p in partitions}
    for i, spec in enumerate((OffsetSpec.earliest(), OffsetSpec.latest())):
        if not partitions:
            break
        futures = admin.list_offsets({TopicPartition(topic, p): spec for p in partitions},
                                     request_timeout=args.timeout)
        for tp, future in futures.items():
            found[tp.partition][i] = result(future, f"offsets of {topic}:{tp.partition}", args.timeout).offset
    return {p: (low, high) for p, (low, high) in found.items()}


def describe_topic(admin: Any, args: argparse.Namespace, topic: str) -> dict[str, Any]:
    from confluent_kafka.admin import ConfigResource, ConfigSource

    md = metadata(admin, args, topic)
    tmd = md.topics.get(topic)
    if tmd is None or not tmd.partitions:
        raise ToolError(f"unknown topic {topic}")
    offsets = topic_offsets(admin, args, topic, sorted(tmd.partitions))
    resource = ConfigResource("topic", topic)
    configs = result(admin.describe_configs([resource], request_timeout=args.timeout)[resource],
                     f"configs of {topic}", args.timeout)
    shown = {name: entry.value for name, entry in sorted(configs.items())
             if args.all_configs or entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    return {"topic": topic, "partitions": [
        {"partition": p, "leader": part.leader, "replicas": list(part.replicas), "isr": list(part.isrs),
         "log_start_offset": offsets[p][0], "log_end_offset": offsets[p][1]}
        for p, part in sorted(tmd.partitions.items())], "configs": shown}


def cmd_describe(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    described = [describe_topic(admin, args, t) for t in args.topics]

    def render(con: Any) -> None:
        for d in described:
            configs = ",".join(f"{k}={v}" for k, v in d["configs"].items()) or "-"
            con.print(f"topic [bold]{d['topic']}[/]  partitions {len(d['partitions'])}  configs {configs}",
                      soft_wrap=True)
            con.print(table(["PARTITION", "LEADER", "REPLICAS", "ISR", "LOG-START", "LOG-END"],
                            [[p["partition"], p["leader"] if p["leader"] >= 0 else "none",
                              ",".join(map(str, p["replicas"])), ",".join(map(str, p["isr"])),
                              p["log_start_offset"], p["log_end_offset"]] for p in d["partitions"]],
                            right=("PARTITION", "LEADER", "LOG-START", "LOG-END")))
    return emit(args, described[0] if len(described) == 1 else described, render)


def alter_configs(admin: Any, args: argparse.Namespace, restype: str, name: str, set_: list[tuple[str, str]],
                  delete: list[str]) -> None:
    """IncrementalAlterConfigs: SET each of `set_`, DELETE each of `delete`."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
    resource = ConfigResource(restype, name, incremental_configs=entries)
    futures = admin.incremental_alter_configs([resource], request_timeout=args.timeout)
    for future in futures.values():
        result(future, f"alter configs of {restype} {name}", args.timeout)


def cmd_alter(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewPartitions

    if args.partitions is None and not args.config and not args.delete_config:
        raise ToolError("nothing to change: give --partitions, --config or --delete-config")
    _positive(args.partitions, "--partitions")
    admin = admin_client(args)
    current = len(topic_partitions(admin, args, args.topic))
    if args.config or args.delete_config:
        alter_configs(admin, args, "topic", args.topic, args.config, args.delete_config)
        print(f"changed the configs of {args.topic}")
    if args.partitions is not None:
        if args.partitions < current:
            raise ToolError(f"{args.topic} has {current} partitions: their number can only grow")
        if args.partitions > current:
            future = admin.create_partitions([NewPartitions(args.topic, args.partitions)],
                                             request_timeout=args.timeout)[args.topic]
            result(future, f"add partitions to {args.topic}", args.timeout)
        print(f"{args.topic} has {args.partitions} partitions")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    md = metadata(admin, args)
    missing = [t for t in args.topics if t not in md.topics]
    if missing and not args.if_exists:
        raise ToolError(f"unknown topic {', '.join(missing)}")
    wanted = [t for t in args.topics if t in md.topics]
    if wanted:
        futures = admin.delete_topics(wanted, request_timeout=args.timeout)
        for topic in wanted:
            result(futures[topic], f"delete {topic}", args.timeout)
            print(f"deleted topic {topic}")
    return 0


_ACTIONS = {"create": cmd_create, "list": cmd_list, "describe": cmd_describe, "alter": cmd_alter,
            "delete": cmd_delete}
