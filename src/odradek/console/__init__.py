"""`odradek console`: a web console for any Kafka-compatible cluster (docs/console.md).

    odradek console --bootstrap HOST:PORT [--listen 127.0.0.1:8080] [--command-config FILE]
        [--allowed-hosts HOST,...] [--users-file PATH] [--token-file PATH] [--max-request-bytes N]

It talks to the cluster only through confluent-kafka's AdminClient, Consumer and Producer (never odradek's
internals), so it works as well against Apache Kafka. `--command-config` names a properties file of client
settings (security.protocol, sasl.*, ssl.*, ...) given to every client. Once it listens it prints
`odradek console: serving on http://HOST:PORT/`.
Every request passes odradek.http_guard first (Host, Origin, Content-Type, authentication, body size).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from odradek import http_guard

# request bodies above this are answered 413 (--max-request-bytes)
MAX_REQUEST_BYTES = 4 * 1024 * 1024
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
    http_guard.add_arguments(p, default_max_bytes=MAX_REQUEST_BYTES)


def run(args: argparse.Namespace) -> int:
    if args.hash_password is not None:
        return http_guard.print_users_line(args.hash_password)
    try:
        from odradek.console.app import Console, create_app
        from odradek.console.kafka import Kafka
        from odradek.web import client_properties, listen_address, serve
    except ImportError as exc:
        print(f"odradek console: {exc} (pip install starlette uvicorn)", file=sys.stderr)
        return 2
    address = listen_address("console", args.listen)
    client_config = client_properties("console", args.command_config)
    if address is None or client_config is None:
        return 2
    policy = http_guard.policy_from_args("console", args, address[0])
    if policy is None:
        return 2
    try:
        kafka = Kafka(args.bootstrap, client_config)
    except Exception as exc:  # a bad client property
        print(f"odradek console: {exc}", file=sys.stderr)
        return 2
    console = Console(kafka, sample_interval=max(args.sample_interval, 0.5))
    try:
        started = serve(http_guard.HttpGuard(create_app(console), policy), *address, READY_MARKER, args.log_level,
                        lifespan="on", path="/")
    finally:
        kafka.close()
    return 0 if started else 1
