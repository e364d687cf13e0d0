"""`odradek quotas`: list and change client quotas (security/quotas.py), as Kafka's `kafka-configs` does for
users and clients:

    odradek quotas describe [--user NAME | --user-default] [--client-id NAME | --client-default]
    odradek quotas alter (--user NAME | --user-default) [--client-id NAME | --client-default] \\
        [--add-config producer_byte_rate=1048576,consumer_byte_rate=...] [--delete-config request_percentage]

`describe` without an entity lists every quota; with one, the entities that include it (`--strict`: only
that exact entity). It speaks DescribeClientQuotas and AlterClientQuotas (keys 48 and 49) to any broker of
the cluster, over a PLAINTEXT listener (`--bootstrap`): confluent-kafka, which the other tools use, has no
quota calls.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
from typing import Any

from odradek.protocol import codec
from odradek.protocol.api_keys import ApiKey

TIMEOUT_S = 15.0
DEFAULT_LABEL = "<default>"


class QuotaToolError(Exception):
    pass


def add_parser(sub: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap", default="127.0.0.1:9092", metavar="HOST:PORT")
    user = common.add_mutually_exclusive_group()
    user.add_argument("--user", metavar="NAME")
    user.add_argument("--user-default", action="store_true", help="the default user")
    client = common.add_mutually_exclusive_group()
    client.add_argument("--client-id", metavar="NAME")
    client.add_argument("--client-default", action="store_true", help="the default client id")
    quotas = sub.add_parser("quotas", help="list and change client quotas (per user and client id)")
    actions = quotas.add_subparsers(dest="action", required=True)
    describe = actions.add_parser("describe", parents=[common], help="list quotas")
    describe.add_argument("--strict", action="store_true", help="only the exact entity given")
    alter = actions.add_parser("alter", parents=[common], help="set or remove quotas of one entity")
    alter.add_argument("--add-config", default="", metavar="KEY=VALUE,...")
    alter.add_argument("--delete-config", default="", metavar="KEY,...")


def run(args: argparse.Namespace) -> int:
    try:
        return _describe(args) if args.action == "describe" else _alter(args)
    except (QuotaToolError, OSError, codec.ProtocolError) as exc:
        print(f"odradek quotas: {exc}", file=sys.stderr)
        return 1


def _entity(args: argparse.Namespace) -> list[dict]:
    """The entity the options name, as the wire gives it (a null name: the default)."""
    parts = []
    if args.user is not None or args.user_default:
        parts.append({"entity_type": "user", "entity_name": args.user})
    if args.client_id is not None or args.client_default:
        parts.append({"entity_type": "client-id", "entity_name": args.client_id})
    return parts


def _label(parts: list[dict]) -> str:
    return ", ".join(f"{p['entity_type']}={DEFAULT_LABEL if p['entity_name'] is None else p['entity_name']}"
                     for p in sorted(parts, key=lambda p: p["entity_type"] != "user"))


def _describe(args: argparse.Namespace) -> int:
    components = [{"entity_type": p["entity_type"], "match_type": 1 if p["entity_name"] is None else 0,
                   "match": p["entity_name"]} for p in _entity(args)]
    body = _call(args.bootstrap, ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": components, "strict": args.strict})
    if body["error_code"]:
        raise QuotaToolError(f"error {body['error_code']}: {body['error_message'] or ''}")
    for entry in sorted(body["entries"] or [], key=lambda e: _label(e["entity"])):
        values = ", ".join(f"{v['key']}={_number(v['value'])}" for v in sorted(entry["values"], key=lambda v: v["key"]))
        print(f"{_label(entry['entity'])}: {values}")
    return 0


def _alter(args: argparse.Namespace) -> int:
    entity = _entity(args)
    if not entity:
        raise QuotaToolError("name an entity: --user/--user-default and/or --client-id/--client-default")
    ops = []
    for item in filter(None, args.add_config.split(",")):
        key, sep, value = item.partition("=")
        try:
            ops.append({"key": key.strip(), "value": float(value), "remove": False})
        except ValueError:
            raise QuotaToolError(f"--add-config wants KEY=NUMBER, not {item!r}") from None
    ops += [{"key": key.strip(), "value": 0.0, "remove": True} for key in filter(None, args.delete_config.split(","))]
    if not ops:
        raise QuotaToolError("nothing to change: give --add-config and/or --delete-config")
    body = _call(args.bootstrap, ApiKey.ALTER_CLIENT_QUOTAS,
                 {"entries": [{"entity": entity, "ops": ops}], "validate_only": False})
    result = body["entries"][0]
    if result["error_code"]:
        raise QuotaToolError(f"error {result['error_code']}: {result['error_message'] or ''}")
    print(f"changed the quotas of {_label(entity)}")
    return 0


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)


def _call(bootstrap: str, api_key: int, body: dict) -> dict:
    """One request on a connection of its own; the decoded response body."""
    host, _, port = bootstrap.rpartition(":")
    version = max(codec.request_versions(api_key))
    with socket.create_connection((host.strip("[]"), int(port)), timeout=TIMEOUT_S) as sock:
        sock.sendall(codec.encode_request(api_key, version, 1, "odradek-quotas", body))
        size = struct.unpack(">i", _read(sock, 4))[0]
        return codec.decode_response(api_key, version, _read(sock, size))[1]


def _read(sock: socket.socket, n: int) -> bytes:
    data = sock.recv(n, socket.MSG_WAITALL)
    if len(data) < n:
        raise QuotaToolError("the broker closed the connection")
    return data
