"""Keys and values in Confluent's wire format, decoded through a Confluent-compatible schema registry: what
the three formats (Avro, JSON Schema, Protobuf) share, as the registry itself puts its formats behind one
interface (odradek/registry/formats.py).

Every record is `0x00`, a 4-byte big-endian schema id, then the format's own bytes (Protobuf puts its message
indexes first). A format (avro.py, jsonschema_format.py, protobuf_format.py beside this module) offers:

* planning (driver): the latest registered schema of the subject -> the reader schema of the whole query,
  in a text that pickles to executors, and its Spark type. The DataFrame's schema therefore does not change
  under a running query; a newer registered schema is picked up when the DataFrame is defined again.
* decoding (executors): one record's bytes after the schema id -> a Python value pyarrow builds the
  planned Spark type from. Schemas asked for by id are cached per Python worker (an id never changes
  meaning).

This module picks the format, builds the plan and decodes Arrow batches; registry_schemas.py holds what the
formats share (the registry's HTTP calls, the caches, the errors, the framing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import StructField, StructType

from odradek.spark.options import RegistryFormatOptions
from odradek.spark.registry_schemas import (HEADER, MAGIC, DecodeError, RegistryColumn, RegistryFormat,
                                            SchemaMappingError, check_schema_type, fetch_latest)


def format_named(name: str) -> RegistryFormat:
    """The format of a `valueFormat` / `keyFormat` value."""
    # imported here: each format pulls in its own libraries (fastavro, protobuf) only when used
    if name == "avro":
        from odradek.spark.avro import AVRO
        return AVRO
    if name == "json":
        from odradek.spark.jsonschema_format import JSON_SCHEMA
        return JSON_SCHEMA
    if name == "protobuf":
        from odradek.spark.protobuf_format import PROTOBUF
        return PROTOBUF
    raise ValueError(f"no registry format {name!r}")


# ---------------------------------------------------------------------------------------------------
# Planning (driver) and decoding (executors)
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RegistryPlan:
    registry_url: str
    mode: str
    columns: tuple[RegistryColumn, ...]

    def apply(self, schema: StructType) -> StructType:
        """Kafka's row schema with the decoded columns' binary type replaced by theirs (always nullable:
        tombstones, null keys and PERMISSIVE failures are null)."""
        types = {c.column: c.data_type() for c in self.columns}
        return StructType([StructField(f.name, types[f.name], True) if f.name in types else f for f in schema.fields])


def plan_registry(opts: RegistryFormatOptions) -> RegistryPlan:
    """Fetch each subject's latest schema and map it (driver side, at planning time)."""
    columns = []
    for col in opts.columns:
        fmt = format_named(col.format)
        latest = fetch_latest(opts.registry_url, col.subject)
        where = f"the latest schema of subject {col.subject!r} (id {latest.id})"
        check_schema_type(latest, fmt, where)
        try:
            text, dt = fmt.plan(opts.registry_url, col.subject, latest, col)
        except SchemaMappingError as exc:
            raise type(exc)(f"{where}: {exc}") from None
        columns.append(RegistryColumn(col.column, col.format, col.subject, latest.id, text, dt.json()))
    return RegistryPlan(opts.registry_url, opts.mode, tuple(columns))


class _ColumnDecoder:
    def __init__(self, plan: RegistryPlan, col: RegistryColumn) -> None:
        self.plan = plan
        self.col = col
        self.decode_record = format_named(col.format).record_decoder(plan.registry_url, col)

    def decode(self, raw: bytes | None) -> Any:
        """The decoded value; raises DecodeError with the reason (no position: the caller adds it)."""
        if raw is None:
            return None
        if len(raw) < HEADER.size or raw[0] != MAGIC:
            raise DecodeError(f"the {self.col.column} is not in Confluent's wire format (magic byte 0, "
                              f"schema id, {self.col.format}): it starts with "
                              f"{bytes(raw[:HEADER.size]).hex() or 'nothing'}")
        _, schema_id = HEADER.unpack_from(raw)
        return self.decode_record(schema_id, memoryview(raw)[HEADER.size:])


class RegistryDecoder:
    """Turns the binary key/value columns of Arrow batches from `read_range` into the planned types."""

    def __init__(self, plan: RegistryPlan, arrow_schema: Any) -> None:
        self.plan = plan
        self.arrow_schema = arrow_schema
        self.columns = {c.column: _ColumnDecoder(plan, c) for c in plan.columns}

    def decode_batch(self, batch: Any) -> Any:
        import pyarrow as pa

        arrays = []
        for i, field in enumerate(self.arrow_schema):
            col = batch.column(i)
            dec = self.columns.get(field.name)
            if dec is not None:
                col = pa.array(self._decode_all(dec, batch, col.to_pylist()), type=field.type)
            arrays.append(col)
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def _decode_all(self, dec: _ColumnDecoder, batch: Any, raws: list) -> list:
        out = []
        offsets = None
        for i, raw in enumerate(raws):
            try:
                out.append(dec.decode(raw))
            except DecodeError as exc:
                if self.plan.mode == "PERMISSIVE":
                    out.append(None)
                    continue
                if offsets is None:
                    offsets = batch.column(batch.schema.get_field_index("offset")).to_pylist()
                topic = batch.column(batch.schema.get_field_index("topic"))[i].as_py()
                partition = batch.column(batch.schema.get_field_index("partition"))[i].as_py()
                raise DecodeError(f"cannot decode the record of {topic}-{partition} at offset {offsets[i]}: "
                                  f"{exc} (option registry.mode=PERMISSIVE, or avro.mode=PERMISSIVE, gives null "
                                  "instead)") from None
        return out
