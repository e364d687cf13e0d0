"""`odradek console`: a web console for any Kafka-compatible cluster (docs/console.md).

    odradek console --bootstrap HOST:PORT [--listen 127.0.0.1:8080] [--command-config FILE]

It talks to the cluster only through confluent-kafka's AdminClient, Consumer and Producer (never odradek's
internals), so it works as well against Apache Kafka. `--command-config` names a properties file of client
settings (security.protocol, sasl.*, ssl.*, ...) given to every client. Once it listens it prints
`odradek console: serving on http://HOST:PORT/`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

READY_MARKER = "odradek console: serving on "


def add_parser(sub: Any) -> None:
    p = sub.add_parser("console", help="a web console for any Kafka-compatible cluster")
    p.add_argument("--bootstrap", default="127.0.0.1:9092", metavar="HOST:PORT")
    p.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT", help="where the web server listens")
    p.add_argument("--command-config", type=Path, default=None, metavar="FILE",
                   help="client properties (security.protocol, sasl.*, ssl.*, ...) for every Kafka client")
    p.add_argument("--sample-interval", type=float, default=5.0, metavar="S",
                   help="seconds between samples of end offsets and group lag (sparklines, lag charts)")
    p.add_argument("--log-level", default="warning")


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from odradek.console.app import Console, create_app
        from odradek.console.kafka import Kafka, read_client_properties
    except ImportError as exc:
        print(f"odradek console: {exc} (pip install starlette uvicorn)", file=sys.stderr)
        return 2
    host, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit():
        print(f"odradek console: --listen expects HOST:PORT, got {args.listen!r}", file=sys.stderr)
        return 2
    host = host.strip("[]") or "127.0.0.1"
    try:
        client_config = read_client_properties(args.command_config) if args.command_config else {}
    except (OSError, ValueError) as exc:
        print(f"odradek console: --command-config: {exc}", file=sys.stderr)
        return 2
    try:
        kafka = Kafka(args.bootstrap, client_config)
    except Exception as exc:  # a bad client property
        print(f"odradek console: {exc}", file=sys.stderr)
        return 2
    console = Console(kafka, sample_interval=max(args.sample_interval, 0.5))

    class Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            if self.started:
                shown = f"[{host}]" if ":" in host else host
                print(f"{READY_MARKER}http://{shown}:{port}/", flush=True)

    config = uvicorn.Config(create_app(console), host=host, port=int(port), log_level=args.log_level.lower(),
                            access_log=False, lifespan="on")
    server = Server(config)
    try:
        server.run()
    finally:
        kafka.close()
    return 0 if server.started else 1
