"""The `odradek` Python data source: Spark's Kafka source and sink options and schema, through
confluent-kafka, against any Kafka-compatible broker."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from odradek.spark.options import parse_read_options, parse_write_options


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

    def schema(self) -> StructType:
        from odradek.spark.reader import kafka_schema

        return kafka_schema(self._include_headers())

    def reader(self, schema: StructType) -> DataSourceReader:
        from odradek.spark.reader import KafkaBatchReader

        return KafkaBatchReader(parse_read_options(self.options, streaming=False), self.schema())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from odradek.spark.reader import KafkaStreamReader

        return KafkaStreamReader(parse_read_options(self.options, streaming=True), self.schema())

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from odradek.spark.writer import KafkaBatchWriter, validate_input_schema

        opts = parse_write_options(self.options, streaming=False)
        validate_input_schema(schema, opts)
        return KafkaBatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from odradek.spark.writer import make_stream_writer

        return make_stream_writer(parse_write_options(self.options, streaming=True), schema)
