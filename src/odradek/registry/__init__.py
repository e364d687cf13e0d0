"""`odradek registry`: a Confluent-compatible schema registry (Avro, JSON Schema, Protobuf) kept in the cluster's `_schemas` topic
(docs/schema-registry.md).

    odradek registry --bootstrap HOST:PORT [--listen 127.0.0.1:8081] [--command-config FILE]
        [--allowed-hosts HOST,...] [--users-file PATH] [--token-file PATH] [--max-request-bytes N]

It talks to the cluster only through confluent-kafka, so it works as well against Apache Kafka.
`--command-config` names a properties file of client settings (security.protocol, sasl.*, ssl.*, ...)
given to every client. It reads the whole `_schemas` topic before it listens, then prints
`odradek registry: listening on http://HOST:PORT`.
Every request passes odradek.http_guard first (Host, Origin, Content-Type, authentication, body size).

Modules: formats.py (what each schema format offers, dispatch by schemaType), avro.py, jsonschema_format.py,
protobuf_format.py (parsing, identity, reader/writer compatibility of each), compatibility.py (the levels), state.py
(the state the log builds, and the checks of each change), store.py (the topic), app.py (the REST API),
errors.py (Confluent's error codes).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from pathlib import Path
from typing import Any

from odradek import http_guard

# request bodies above this are answered 413 (--max-request-bytes)
MAX_REQUEST_BYTES = 4 * 1024 * 1024
READY_MARKER = "odradek registry: listening on "


def add_parser(sub: Any) -> None:
    p = sub.add_parser("registry", help="a Confluent-compatible schema registry (Avro, JSON Schema, Protobuf), stored in the cluster")
    p.add_argument("--bootstrap", default="127.0.0.1:9092", metavar="HOST:PORT")
    p.add_argument("--listen", default="127.0.0.1:8081", metavar="HOST:PORT", help="where the REST API listens")
    p.add_argument("--command-config", type=Path, default=None, metavar="FILE",
                   help="client properties (security.protocol, sasl.*, ssl.*, ...) for every Kafka client")
    p.add_argument("--topic", default="_schemas", help="the compacted topic that holds the registry's state")
    p.add_argument("--log-level", default="warning")
    http_guard.add_arguments(p, default_max_bytes=MAX_REQUEST_BYTES)


def run(args: argparse.Namespace) -> int:
    if args.hash_password is not None:
        return http_guard.print_users_line(args.hash_password)
    try:
        # the formats' parsers are imported only when a schema of theirs arrives: checked here for a clear
        # message at start
        for module in ("fastavro", "jsonschema", "google.protobuf"):
            importlib.import_module(module)

        from odradek.registry.app import JSON_TYPES, create_app, error_body
        from odradek.registry.store import Store
        from odradek.web import client_properties, listen_address, serve
    except ImportError as exc:
        print(f"odradek registry: {exc} (pip install fastavro jsonschema protobuf grpcio-tools starlette uvicorn)", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    address = listen_address("registry", args.listen)
    client_config = client_properties("registry", args.command_config)
    if address is None or client_config is None:
        return 2
    policy = http_guard.policy_from_args("registry", args, address[0], error_body, JSON_TYPES)
    if policy is None:
        return 2
    store = Store(args.bootstrap, client_config, args.topic)
    try:
        store.start()
    except Exception as exc:  # noqa: BLE001 - the cluster is unreachable, a bad client property, ...
        print(f"odradek registry: cannot read {args.topic} from {args.bootstrap}: {exc}", file=sys.stderr)
        store.close()
        return 1
    try:
        started = serve(http_guard.HttpGuard(create_app(store), policy), *address, READY_MARKER, args.log_level)
    finally:
        store.close()
    return 0 if started else 1
