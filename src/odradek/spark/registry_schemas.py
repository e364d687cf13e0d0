"""The schema registry as the Spark formats (avro.py, jsonschema_format.py, protobuf_format.py) see it: its
HTTP calls (plain urllib: no dependency beyond the standard library), the registered schemas and the
per-worker caches of them, the errors, a planned column, and the interface a format offers. registry_formats.py
builds the plan and the Arrow batch decoding on these and picks the format; the formats import only this
module, so that each loads its own libraries only when used.
"""

from __future__ import annotations

import json
import struct
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from pyspark.sql.types import DataType

from odradek.spark.options import RegistryColumnOptions

REGISTRY_TIMEOUT_S = 30.0
MAGIC = 0
HEADER = struct.Struct(">bI")


class SchemaMappingError(ValueError):
    """A registered schema that has no Spark equivalent here (the message names the place in the schema)."""


class DecodeError(ValueError):
    """A record that cannot be decoded (not Confluent-framed, unknown schema id, not readable as the reader
    schema)."""


class RegistryError(RuntimeError):
    """The registry could not be reached or refused a request that is not about the data."""


# ---------------------------------------------------------------------------------------------------
# Registry access (plain urllib: no dependency beyond the standard library)
# ---------------------------------------------------------------------------------------------------


class _NotFound(Exception):
    pass


@dataclass(frozen=True)
class RegisteredSchema:
    """One registry answer: the schema of an id or of a subject's version. `schema` is the registered text,
    or with `serialized` asked for, a Protobuf schema as a base64 FileDescriptorProto."""

    id: int
    schema_type: str  # AVRO | JSON | PROTOBUF
    schema: str
    references: tuple[tuple[str, str, int], ...] = ()  # (name, subject, version)


def _get_json(url: str) -> Any:
    req = urllib.request.Request(url, headers={"Accept": "application/vnd.schemaregistry.v1+json, application/json"})
    try:
        with urllib.request.urlopen(req, timeout=REGISTRY_TIMEOUT_S) as res:
            return json.loads(res.read())
    except urllib.error.HTTPError as exc:
        try:
            body = json.loads(exc.read())
            message = f"{body.get('error_code')} {body.get('message')}"
        except Exception:  # noqa: BLE001 - not the registry's JSON error body
            message = f"HTTP {exc.code}"
        if exc.code == 404:
            raise _NotFound(message) from None
        raise RegistryError(f"schema registry request {url} failed: {message}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise RegistryError(f"schema registry request {url} failed: {exc}") from None


def _registered(body: dict, schema_id: int | None = None) -> RegisteredSchema:
    refs = tuple((str(r["name"]), str(r["subject"]), int(r["version"])) for r in body.get("references") or ())
    return RegisteredSchema(int(body["id"]) if schema_id is None else schema_id,
                            str(body.get("schemaType") or "AVRO"),  # Confluent leaves it out for Avro
                            str(body["schema"]), refs)


def _serialized_query(serialized: bool) -> str:
    # ?format=serialized makes the registry answer Protobuf as a FileDescriptorProto (no protoc needed
    # here); other formats ignore it
    return "?format=serialized" if serialized else ""


def fetch_version(registry_url: str, subject: str, version: int | str = "latest",
                  serialized: bool = False) -> RegisteredSchema:
    """A version ("latest" or a number) of `subject`."""
    url = (f"{registry_url}/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}"
           f"{_serialized_query(serialized)}")
    try:
        return _registered(_get_json(url))
    except _NotFound as exc:
        what = f"subject {subject!r}" if version == "latest" else f"version {version} of subject {subject!r}"
        raise RegistryError(f"{what} not found in the schema registry at {registry_url} ({exc}); "
                            "options valueSubject/keySubject name another") from None


def fetch_latest(registry_url: str, subject: str, serialized: bool = False) -> RegisteredSchema:
    """The latest version of `subject`."""
    return fetch_version(registry_url, subject, "latest", serialized)


class ProcessCache:
    """Values made once per Python worker and shared by its tasks, for keys whose meaning never changes
    (schema ids); a failed or None make is not kept, so it is asked again by the next task."""

    def __init__(self) -> None:
        self._values: dict[Any, Any] = {}
        self._lock = threading.Lock()

    def get(self, key: Any, make: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._values:
                return self._values[key]
        value = make()  # outside the lock: a slow registry call does not hold up other keys
        if value is not None:
            with self._lock:
                self._values.setdefault(key, value)
        return value


_BY_ID = ProcessCache()


def fetch_by_id(registry_url: str, schema_id: int, serialized: bool = False) -> RegisteredSchema | None:
    """The schema of `schema_id` (cached per process), None when the registry does not know it."""

    def ask() -> RegisteredSchema | None:
        try:
            body = _get_json(f"{registry_url}/schemas/ids/{schema_id}{_serialized_query(serialized)}")
        except _NotFound:
            return None
        return _registered(body, schema_id)
    return _BY_ID.get((registry_url, schema_id, serialized), ask)


# ---------------------------------------------------------------------------------------------------
# The per-format interface
# ---------------------------------------------------------------------------------------------------

# The bytes after the 5-byte header -> a value pyarrow builds the planned Spark type from; raises DecodeError.
RecordDecoder = Callable[[int, memoryview], Any]


class RegistryFormat(Protocol):
    schema_type: str  # the registry's schemaType this format reads

    def plan(self, registry_url: str, subject: str, latest: RegisteredSchema,
             options: RegistryColumnOptions) -> tuple[str, DataType]:
        """(the reader schema as text for the executors, its Spark type) of the subject's latest schema."""
        ...

    def record_decoder(self, registry_url: str, column: "RegistryColumn") -> RecordDecoder:
        """The executors' decoder of one column: (writer schema id, the bytes after the header) -> value."""
        ...


# The valueFormat that reads each schemaType (the table sync picks the format from the registered schema).
FORMAT_OF_SCHEMA_TYPE = {"AVRO": "avro", "JSON": "json", "PROTOBUF": "protobuf"}


def check_schema_type(found: RegisteredSchema, fmt: RegistryFormat, what: str) -> None:
    if found.schema_type != fmt.schema_type:
        hint = FORMAT_OF_SCHEMA_TYPE.get(found.schema_type)
        raise SchemaMappingError(f"{what} is registered as {found.schema_type}, not {fmt.schema_type}"
                                 + (f" (valueFormat/keyFormat {hint} reads it)" if hint else ""))


@dataclass(frozen=True)
class RegistryColumn:
    column: str  # "key" | "value"
    format: str  # "avro" | "json" | "protobuf"
    subject: str
    schema_id: int
    schema: str  # the reader schema (latest of the subject at planning time), in the format's own text
    data_type_json: str  # Spark type as JSON: pickles without pyspark's type objects

    def data_type(self) -> DataType:
        from pyspark.sql.types import _parse_datatype_json_string

        return _parse_datatype_json_string(self.data_type_json)


# Writer schemas as each format parses them, by (registry, id, schemaType), shared by the tasks of a worker.
_WRITERS = ProcessCache()


class WriterSchemas:
    """The writer schemas of one column's records by id, parsed by the format once per Python worker; an id
    the registry does not know is asked for once per task (PERMISSIVE reads may meet it in every record)."""

    def __init__(self, fmt: RegistryFormat, registry_url: str, column: RegistryColumn,
                 parse: Callable[[RegisteredSchema], Any], serialized: bool = False) -> None:
        self.fmt, self.registry_url, self.column = fmt, registry_url, column
        self.parse, self.serialized = parse, serialized
        self.unknown: set[int] = set()

    def _fetch(self, schema_id: int) -> Any | None:
        found = fetch_by_id(self.registry_url, schema_id, self.serialized)
        if found is None:
            return None
        check_schema_type(found, self.fmt, f"schema id {schema_id}")
        return self.parse(found)

    def get(self, schema_id: int) -> Any:
        """The parsed writer schema of `schema_id`; DecodeError when the registry does not know the id or
        knows it as another schema type."""
        parsed = None
        if schema_id not in self.unknown:
            try:
                parsed = _WRITERS.get((self.registry_url, schema_id, self.fmt.schema_type),
                                      lambda: self._fetch(schema_id))
            except SchemaMappingError as exc:
                raise DecodeError(f"the {self.column.column}: {exc}") from None
        if parsed is None:
            self.unknown.add(schema_id)
            raise DecodeError(f"schema id {schema_id} of the {self.column.column} is unknown to the schema "
                              f"registry at {self.registry_url}")
        return parsed


def unreadable(column: RegistryColumn, schema_id: int, exc: Exception) -> DecodeError:
    return DecodeError(f"the {column.column} (schema id {schema_id}) cannot be read as the latest schema of "
                       f"{column.subject!r} (id {column.schema_id}): {type(exc).__name__}: {exc}")
