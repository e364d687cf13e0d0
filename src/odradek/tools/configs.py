"""`odradek configs`: describe and change the configs of topics and brokers, as Kafka's `kafka-configs`:

    odradek configs describe --entity-type topics|brokers [--entity-name NAME] [--all]
    odradek configs alter --entity-type topics|brokers [--entity-name NAME] \\
        [--add-config k=v,k2=[a,b]] [--delete-config k,k2]

`describe` lists the configs set on the entity (a topic's overrides, a broker's dynamic configs and the
settings it was started with); `--all` lists every config with its source. A broker is named by its id;
without --entity-name, `describe` covers every broker of the cluster and `alter` the cluster-wide
default (Kafka's `--entity-default`). `alter` uses IncrementalAlterConfigs: set, then delete.
"""

from __future__ import annotations

import argparse
from typing import Any

from odradek.tools.common import ToolError, admin_client, connection_options, emit, key_value_list, metadata, \
    result, run_command, table, topic_partitions
from odradek.tools.topics import alter_configs

# the sources shown without --all: what someone set on the entity, as opposed to defaults
SET_SOURCES = {"topics": {"DYNAMIC_TOPIC_CONFIG"},
               "brokers": {"DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG", "STATIC_BROKER_CONFIG",
                           "DYNAMIC_BROKER_LOGGER_CONFIG"}}
ENTITY_TYPES = {"topics": "topic", "brokers": "broker"}


def add_parser(sub: Any) -> None:
    configs = sub.add_parser("configs", help="describe and change topic and broker configs")
    actions = configs.add_subparsers(dest="action", required=True)
    for name, output, what in (("describe", True, "list an entity's configs"), ("alter", False, "change configs")):
        p = actions.add_parser(name, parents=[connection_options(output=output)], help=what)
        p.add_argument("--entity-type", choices=sorted(ENTITY_TYPES), required=True)
        p.add_argument("--entity-name", default=None, metavar="NAME", help="a topic, or a broker id")
    describe = actions.choices["describe"]
    describe.add_argument("--all", action="store_true", help="every config, defaults included, with its source")
    alter = actions.choices["alter"]
    alter.add_argument("--add-config", type=key_value_list, default=[], metavar="K=V,...",
                       help="configs to set (a value with commas in brackets: k=[a,b])")
    alter.add_argument("--delete-config", default="", metavar="K,...", help="configs to remove")


def run(args: argparse.Namespace) -> int:
    return run_command("configs", lambda: cmd_describe(args) if args.action == "describe" else cmd_alter(args))


def _source(entry: Any) -> str:
    from confluent_kafka.admin import ConfigSource

    try:
        return ConfigSource(entry.source).name
    except ValueError:
        return str(entry.source)


def _entities(admin: Any, args: argparse.Namespace) -> list[str]:
    if args.entity_type == "topics":
        if args.entity_name is None:
            raise ToolError("--entity-name TOPIC is required for topics")
        topic_partitions(admin, args, args.entity_name)  # unknown topic: a clear error
        return [args.entity_name]
    md = metadata(admin, args)
    if args.entity_name is None:
        return [str(b) for b in sorted(md.brokers)]
    if not args.entity_name.isdigit() or int(args.entity_name) not in md.brokers:
        raise ToolError(f"unknown broker {args.entity_name} (brokers: {', '.join(map(str, sorted(md.brokers)))})")
    return [args.entity_name]


def cmd_describe(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import ConfigResource

    admin = admin_client(args)
    restype = ENTITY_TYPES[args.entity_type]
    described = []
    for name in _entities(admin, args):
        resource = ConfigResource(restype, name)
        configs = result(admin.describe_configs([resource], request_timeout=args.timeout)[resource],
                         f"configs of {restype} {name}", args.timeout)
        entries = [{"name": k, "value": None if e.is_sensitive else e.value, "source": _source(e),
                    "read_only": bool(e.is_read_only), "sensitive": bool(e.is_sensitive)}
                   for k, e in sorted(configs.items()) if args.all or _source(e) in SET_SOURCES[args.entity_type]]
        described.append({"entity_type": args.entity_type, "entity_name": name, "configs": entries})

    def render(con: Any) -> None:
        for d in described:
            con.print(f"{restype} [bold]{d['entity_name']}[/]: {len(d['configs'])} config(s)")
            con.print(table(["NAME", "VALUE", "SOURCE"],
                            [[c["name"], "<sensitive>" if c["sensitive"] else c["value"], c["source"]]
                             for c in d["configs"]]))
    return emit(args, described[0] if len(described) == 1 else described, render)


def cmd_alter(args: argparse.Namespace) -> int:
    deletes = [k.strip() for k in args.delete_config.split(",") if k.strip()]
    if not args.add_config and not deletes:
        raise ToolError("nothing to change: give --add-config or --delete-config")
    admin = admin_client(args)
    restype = ENTITY_TYPES[args.entity_type]
    if args.entity_type == "topics" or args.entity_name is not None:
        [name] = _entities(admin, args)
    else:
        metadata(admin, args)
        name = ""  # the cluster-wide default of every broker
    alter_configs(admin, args, restype, name, args.add_config, deletes)
    print(f"changed the configs of {restype} {name or '<default>'}")
    return 0
