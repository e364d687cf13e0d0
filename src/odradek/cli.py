"""Command line: `odradek serve --listen HOST:PORT --data-dir DIR [--advertise HOST:PORT] [--config FILE] [--set k=v ...]`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from odradek.config import BrokerConfig, ConfigError, read_properties
from odradek.tools.common import key_value


def parse_host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="odradek", description="A Kafka-compatible streaming broker.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the broker")
    serve.add_argument("--listen", type=parse_host_port, default=None, metavar="HOST:PORT",
                       help="one PLAINTEXT listener (default 127.0.0.1:9092); for several, or TLS, set the "
                            "listeners property instead")
    serve.add_argument("--data-dir", type=Path, default=Path("data"), metavar="DIR")
    serve.add_argument("--advertise", type=parse_host_port, default=None, metavar="HOST:PORT",
                       help="address clients are told to connect to (default: the listen address)")
    serve.add_argument("--config", type=Path, default=None, metavar="FILE", help="a server.properties file")
    serve.add_argument("--set", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                       help="a broker property, overriding the config file (repeatable)")
    serve.add_argument("--log-level", default="INFO")
    serve.add_argument("--event-loop", choices=("uvloop", "asyncio"), default=None,
                       help="uvloop (the default where it is installed: every platform but Windows) or "
                            "asyncio's own selector loop")
    from odradek.tools import groups

    groups.add_parser(sub)
    from odradek.tools import cluster

    cluster.add_parser(sub)
    from odradek.tools import quotas

    quotas.add_parser(sub)
    from odradek.tools import configs, produce_consume, records, topics

    topics.add_parser(sub)
    configs.add_parser(sub)
    produce_consume.add_parser(sub)
    records.add_parser(sub)
    from odradek import console

    console.add_parser(sub)
    from odradek import registry

    registry.add_parser(sub)
    from odradek import tables

    tables.add_parser(sub)
    # No -h of its own: `odradek pipeline NAME --help` is the pipeline's help; `odradek pipeline [--help]`
    # lists the pipelines (main below).
    pipeline = sub.add_parser("pipeline", help="run a shipped PySpark pipeline (needs the 'spark' extra)",
                              add_help=False)
    pipeline.add_argument("-h", "--help", action="store_true", dest="list_pipelines", help="list the pipelines")
    pipeline.add_argument("name", nargs="?", help="pipeline name: clickstream")
    pipeline.add_argument("args", nargs=argparse.REMAINDER, help="the pipeline's options (NAME --help lists them)")
    return parser


def event_loop_runner(name: str | None):
    """``asyncio.run`` or ``uvloop.run`` for ``--event-loop`` (None: uvloop if installed), or None if the
    named loop is not installed.

    uvloop is the default: in each of the twelve make bench runs of 2026-11-23 the broker needed less CPU
    on it for the latency workload (about 7,000 produce requests a second: 75-79 % of a core against
    77-87 % on asyncio's loop), and once the benchmark stopped favouring one column by its order,
    throughput was the same within noise (see the README's performance section).
    """
    if name == "asyncio":
        return asyncio.run
    try:
        import uvloop
    except ImportError:
        return None if name == "uvloop" else asyncio.run
    return uvloop.run


def cmd_serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        values = read_properties(args.config) if args.config else {}
        values.update(dict(args.set))
        config = BrokerConfig(values)
    except (ConfigError, OSError) as exc:
        print(f"odradek: configuration error: {exc}", file=sys.stderr)
        return 2
    run = event_loop_runner(args.event_loop)
    if run is None:
        print("odradek: --event-loop uvloop needs uvloop (pip install uvloop)", file=sys.stderr)
        return 2
    from odradek.server import run_broker

    return run_broker(config, args.data_dir, args.listen, args.advertise, run)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return cmd_serve(args)
    if args.command == "groups":
        from odradek.tools import groups

        return groups.run(args)
    if args.command == "cluster":
        from odradek.tools import cluster

        return cluster.run(args)
    if args.command == "quotas":
        from odradek.tools import quotas

        return quotas.run(args)
    if args.command in ("topics", "configs", "records"):
        from odradek.tools import configs, records, topics

        return {"topics": topics, "configs": configs, "records": records}[args.command].run(args)
    if args.command in ("produce", "consume"):
        from odradek.tools import produce_consume

        return produce_consume.run_produce(args) if args.command == "produce" else produce_consume.run_consume(args)
    if args.command == "console":
        from odradek import console

        return console.run(args)
    if args.command == "registry":
        from odradek import registry

        return registry.run(args)
    if args.command == "tables":
        from odradek import tables

        return tables.run(args)
    if args.command == "pipeline":
        from odradek.pipelines import PIPELINES, run_pipeline

        if args.list_pipelines or args.name is None:
            print("usage: odradek pipeline NAME [options]   (NAME --help lists a pipeline's options)\n"
                  f"pipelines: {', '.join(PIPELINES)}; they need the 'spark' extra: pip install 'odradek[spark]'")
            return 0 if args.list_pipelines else 2
        return run_pipeline(args.name, args.args)
    return 2
