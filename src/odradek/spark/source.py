"""The `odradek` Python data source: Spark's Kafka source and sink options and schema, through
confluent-kafka, against any Kafka-compatible broker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from odradek.spark.options import (
    parse_read_options,
    parse_registry_options,
    parse_subscription,
    parse_write_options,
    wants_registry,
)

if TYPE_CHECKING:
    from odradek.spark.registry_formats import RegistryPlan


class OdradekDataSource(DataSource):
    """`spark.read/readStream/write/writeStream.format("odradek")` after `odradek.spark.register(spark)`."""

    @classmethod
    def name(cls) -> str:
        return "odradek"

    def _include_headers(self) -> bool:
        for key, value in self.options.items():
            if key.lower() == "includeheaders":
                return str(value).strip().lower() == "true"
        return False

    def _registry_plan(self) -> RegistryPlan | None:
        """The registry's schemas for valueFormat/keyFormat avro, json or protobuf, fetched once: Spark
        pickles this instance after schema() and plans the read from the copy, so the reader decodes to the
        schema load() gave."""
        if not hasattr(self, "_registry"):
            plan = None
            if wants_registry(self.options):
                from odradek.spark.registry_formats import plan_registry

                opts = parse_registry_options(self.options, parse_subscription(self.options))
                assert opts is not None
                plan = plan_registry(opts)
            self._registry = plan
        return self._registry

    def schema(self) -> StructType:
        from odradek.spark.reader import kafka_schema

        plan = self._registry_plan()
        base = kafka_schema(self._include_headers())
        return base if plan is None else plan.apply(base)

    def reader(self, schema: StructType) -> DataSourceReader:
        from odradek.spark.reader import KafkaBatchReader

        return KafkaBatchReader(parse_read_options(self.options, streaming=False), self.schema(), self._registry_plan())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from odradek.spark.reader import KafkaStreamReader

        return KafkaStreamReader(parse_read_options(self.options, streaming=True), self.schema(), self._registry_plan())

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from odradek.spark.writer import KafkaBatchWriter, validate_input_schema

        opts = parse_write_options(self.options, streaming=False)
        validate_input_schema(schema, opts)
        return KafkaBatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from odradek.spark.writer import make_stream_writer

        return make_stream_writer(parse_write_options(self.options, streaming=True), schema)
