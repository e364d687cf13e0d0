"""The registry's REST API, the subset of Confluent Schema Registry's that serializers and tools use.

    GET    /subjects                                       ?deleted=true ?subjectPrefix=
    POST   /subjects/{subject}/versions                    register: {"schema", "schemaType", "references"}
                                                           -> {"id"}
    GET    /subjects/{subject}/versions                    ?deleted=true
    GET    /subjects/{subject}/versions/{version}          a number or "latest"; ?deleted=true ?format=serialized
    GET    /subjects/{subject}/versions/{version}/schema   the schema text alone
    GET    /subjects/{subject}/versions/{version}/referencedby   ids of the schemas that reference it
    POST   /subjects/{subject}                             lookup: is this schema registered under the subject?
    DELETE /subjects/{subject}                             soft; ?permanent=true after a soft delete
    DELETE /subjects/{subject}/versions/{version}          soft; ?permanent=true after a soft delete
    GET    /schemas/ids/{id}  /schemas/ids/{id}/schema  /schemas/ids/{id}/subjects  /schemas/ids/{id}/versions
                                                           ?format=serialized: a Protobuf schema as a base64
                                                           FileDescriptorProto
    GET    /schemas/types
    GET    /config   PUT /config                           {"compatibility": LEVEL}
    GET    /config/{subject}  PUT  DELETE                  GET ?defaultToGlobal=true
    POST   /compatibility/subjects/{subject}/versions/{version}   {"is_compatible": bool} (?verbose=true)
    POST   /compatibility/subjects/{subject}/versions             against every version the level looks at
    GET    /mode   PUT /mode                               {"mode": READWRITE | READONLY | IMPORT} (?force=true)
    GET    /                                               {}

Answers are application/vnd.schemaregistry.v1+json; errors are {"error_code", "message"} (errors.py). The
store's calls block (a write waits for Kafka), so handlers run them in Starlette's thread pool.
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable
from urllib.parse import unquote_to_bytes

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from odradek.registry import errors
from odradek.registry.schema import SCHEMA_TYPES, Reference
from odradek.registry.state import State, Version, parse_references
from odradek.registry.store import Store

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
# the request bodies Confluent's registry takes that are JSON (it also takes application/octet-stream, which
# odradek does not: docs/schema-registry.md)
JSON_TYPES = frozenset({CONTENT_TYPE, "application/vnd.schemaregistry+json", "application/json"})
Handler = Callable[[Request], Awaitable[Any]]


class RegistryResponse(Response):
    media_type = CONTENT_TYPE

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":")).encode()


def error_body(status: int, message: str) -> tuple[bytes, str]:
    """The registry's error shape for the answers of odradek.http_guard (error_code: the HTTP status, as
    Confluent's registry answers for errors of the HTTP layer)."""
    return json.dumps({"error_code": status, "message": message}).encode(), CONTENT_TYPE


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


async def _body(request: Request) -> dict:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError as exc:
        raise errors.bad_request(f"Unrecognized request body: {exc}") from None
    except RecursionError:
        raise errors.bad_request("Unrecognized request body: JSON nested too deeply") from None
    if not isinstance(body, dict):
        raise errors.bad_request("The request body must be a JSON object")
    return body


def _schema_of(body: dict) -> tuple[Any, str, tuple[Reference, ...]]:
    """The schema text, its type and its references of a request body."""
    return body.get("schema"), body.get("schemaType") or "AVRO", parse_references(body.get("references"))


def _schema_text(found: Version) -> Any:
    """The answer of the .../schema endpoints: JSON schemas (Avro, JSON Schema) as JSON, .proto text as a
    string."""
    if found.schema_type == "PROTOBUF":
        return found.schema
    return json.loads(found.schema or "null")


def _int_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise errors.schema_not_found(f"Schema {text} not found") from None


# Stands in for a "/" inside one path segment while routing (see keep_encoded_slashes); no subject name has it.
SLASH = "\x00"


def keep_encoded_slashes(app: Any) -> Any:
    """Clients URL-encode a subject's "/" as %2F (`a%2Fb`), but the HTTP server decodes the whole path, so
    the router would see an extra segment. This ASGI wrapper decodes the raw path one segment at a time,
    writing an encoded slash as SLASH, which `api` turns back into "/" in the path parameters."""
    async def wrapped(scope: dict, receive: Any, send: Any) -> None:
        raw = scope.get("raw_path")
        if scope["type"] == "http" and raw and b"%2f" in raw.lower():
            segments = raw.split(b"?", 1)[0].split(b"/")
            path = "/".join(unquote_to_bytes(seg).decode("utf-8", "replace").replace("/", SLASH) for seg in segments)
            scope = {**scope, "path": path}
        await app(scope, receive, send)
    return wrapped


def create_app(store: Store) -> Any:
    def api(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def wrapped(request: Request) -> Response:
            params = request.scope.get("path_params", {})
            for name, value in params.items():
                params[name] = value.replace(SLASH, "/")
            try:
                return RegistryResponse(await handler(request))
            except errors.RegistryError as exc:
                return RegistryResponse({"error_code": exc.code, "message": exc.message}, status_code=exc.status)
        return wrapped

    def read(fn: Callable[[State], Any]) -> Awaitable[Any]:
        return run_in_threadpool(store.read, fn)

    def write(fn: Callable[[State], Any]) -> Awaitable[Any]:
        return run_in_threadpool(store.write, fn)

    # -- subjects and versions ----------------------------------------------------------------------------

    async def root(request: Request) -> Any:
        return {}

    async def subjects(request: Request) -> Any:
        deleted, prefix = _flag(request, "deleted"), request.query_params.get("subjectPrefix", "")
        return await read(lambda s: s.subject_names(deleted, prefix))

    async def register(request: Request) -> Any:
        subject = request.path_params["subject"]
        body = await _body(request)
        text, schema_type, refs = _schema_of(body)
        wanted_id = body.get("id") if isinstance(body.get("id"), int) and body.get("id", 0) > 0 else None
        wanted_version = (body.get("version") if isinstance(body.get("version"), int) and body.get("version", 0) > 0
                          else None)
        schema_id = await write(lambda s: s.plan_register(subject, text, schema_type, wanted_id, wanted_version,
                                                          refs))
        return {"id": schema_id}

    async def versions(request: Request) -> Any:
        subject, deleted = request.path_params["subject"], _flag(request, "deleted")
        return await read(lambda s: s.version_numbers(subject, deleted))

    async def version(request: Request) -> Any:
        p, deleted, fmt = request.path_params, _flag(request, "deleted"), request.query_params.get("format")

        def answer(s: State) -> Any:
            found = s.get_version(p["subject"], p["version"], deleted)
            return found.body(s.render(found, fmt))
        return await read(answer)

    async def version_schema(request: Request) -> Any:
        p, deleted = request.path_params, _flag(request, "deleted")
        return _schema_text(await read(lambda s: s.get_version(p["subject"], p["version"], deleted)))

    async def referenced_by(request: Request) -> Any:
        p = request.path_params
        return await read(lambda s: s.referenced_by(p["subject"], p["version"]))

    async def lookup(request: Request) -> Any:
        subject, deleted = request.path_params["subject"], _flag(request, "deleted")
        text, schema_type, refs = _schema_of(await _body(request))
        return (await read(lambda s: s.lookup(subject, text, schema_type, deleted, refs))).body()

    async def delete_subject(request: Request) -> Any:
        subject, permanent = request.path_params["subject"], _flag(request, "permanent")
        return await write(lambda s: s.plan_delete_subject(subject, permanent))

    async def delete_version(request: Request) -> Any:
        p, permanent = request.path_params, _flag(request, "permanent")
        return await write(lambda s: s.plan_delete_version(p["subject"], p["version"], permanent))

    # -- schemas by id ------------------------------------------------------------------------------------

    async def schema_by_id(request: Request) -> Any:
        schema_id, fmt = _int_id(request.path_params["id"]), request.query_params.get("format")

        def answer(s: State) -> Any:
            found = s.schema_by_id(schema_id)
            body = found.body(s.render(found, fmt))
            return {k: v for k, v in body.items() if k in ("schema", "schemaType", "references")}
        return await read(answer)

    async def schema_text_by_id(request: Request) -> Any:
        schema_id = _int_id(request.path_params["id"])
        return _schema_text(await read(lambda s: s.schema_by_id(schema_id)))

    async def id_subjects(request: Request) -> Any:
        schema_id, deleted = _int_id(request.path_params["id"]), _flag(request, "deleted")
        found = await read(lambda s: s.subjects_of_id(schema_id, deleted))
        if not found:
            raise errors.schema_not_found(f"Schema {schema_id} not found")
        return sorted({f["subject"] for f in found})

    async def id_versions(request: Request) -> Any:
        schema_id, deleted = _int_id(request.path_params["id"]), _flag(request, "deleted")
        found = await read(lambda s: s.subjects_of_id(schema_id, deleted))
        if not found:
            raise errors.schema_not_found(f"Schema {schema_id} not found")
        return found

    async def schema_types(request: Request) -> Any:
        return list(SCHEMA_TYPES)

    # -- config, mode, compatibility ------------------------------------------------------------------------

    async def get_global_config(request: Request) -> Any:
        return {"compatibilityLevel": await read(lambda s: s.level(None))}

    async def put_config(request: Request) -> Any:
        subject = request.path_params.get("subject")
        level = (await _body(request)).get("compatibility")
        await write(lambda s: (s.plan_config(subject, level), None))
        return {"compatibility": level.upper()}

    async def get_subject_config(request: Request) -> Any:
        subject, default = request.path_params["subject"], _flag(request, "defaultToGlobal")
        return {"compatibilityLevel": await read(lambda s: s.subject_level(subject, default))}

    async def delete_subject_config(request: Request) -> Any:
        subject = request.path_params["subject"]
        return {"compatibilityLevel": await write(lambda s: s.plan_delete_config(subject))}

    async def get_mode(request: Request) -> Any:
        return {"mode": await read(lambda s: s.mode)}

    async def put_mode(request: Request) -> Any:
        mode, force = (await _body(request)).get("mode"), _flag(request, "force")
        await write(lambda s: (s.plan_mode(mode, force), None))
        return {"mode": mode.upper()}

    async def compatibility(request: Request) -> Any:
        subject, version_text = request.path_params["subject"], request.path_params.get("version")
        text, schema_type, refs = _schema_of(await _body(request))
        found = await read(lambda s: s.check(subject, text, schema_type, version_text, refs))
        answer: dict[str, Any] = {"is_compatible": not found}
        if _flag(request, "verbose"):
            answer["messages"] = found
        return answer

    routes = [
        Route("/", api(root), methods=["GET"]),
        Route("/subjects", api(subjects), methods=["GET"]),
        Route("/subjects/{subject}/versions", api(register), methods=["POST"]),
        Route("/subjects/{subject}/versions", api(versions), methods=["GET"]),
        Route("/subjects/{subject}/versions/{version}", api(version), methods=["GET"]),
        Route("/subjects/{subject}/versions/{version}", api(delete_version), methods=["DELETE"]),
        Route("/subjects/{subject}/versions/{version}/schema", api(version_schema), methods=["GET"]),
        Route("/subjects/{subject}/versions/{version}/referencedby", api(referenced_by), methods=["GET"]),
        Route("/subjects/{subject}", api(lookup), methods=["POST"]),
        Route("/subjects/{subject}", api(delete_subject), methods=["DELETE"]),
        Route("/schemas/types", api(schema_types), methods=["GET"]),
        Route("/schemas/ids/{id}", api(schema_by_id), methods=["GET"]),
        Route("/schemas/ids/{id}/schema", api(schema_text_by_id), methods=["GET"]),
        Route("/schemas/ids/{id}/subjects", api(id_subjects), methods=["GET"]),
        Route("/schemas/ids/{id}/versions", api(id_versions), methods=["GET"]),
        Route("/config", api(get_global_config), methods=["GET"]),
        Route("/config", api(put_config), methods=["PUT"]),
        Route("/config/{subject}", api(get_subject_config), methods=["GET"]),
        Route("/config/{subject}", api(put_config), methods=["PUT"]),
        Route("/config/{subject}", api(delete_subject_config), methods=["DELETE"]),
        Route("/mode", api(get_mode), methods=["GET"]),
        Route("/mode", api(put_mode), methods=["PUT"]),
        Route("/compatibility/subjects/{subject}/versions/{version}", api(compatibility), methods=["POST"]),
        Route("/compatibility/subjects/{subject}/versions", api(compatibility), methods=["POST"]),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        # unknown paths and methods answer in the registry's error format too
        status = getattr(exc, "status_code", 500)
        return RegistryResponse({"error_code": status, "message": f"HTTP {status} {getattr(exc, 'detail', '')}"},
                                status_code=status)

    return keep_encoded_slashes(Starlette(routes=routes, exception_handlers={404: http_error, 405: http_error}))
