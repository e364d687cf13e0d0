"""Spark discovers Python data sources in top-level `pyspark_*` modules that define `DefaultSource`, so with
odradek installed `spark.read.format("odradek")` works with no `register()` call."""

from odradek.spark.source import OdradekDataSource as DefaultSource

__all__ = ["DefaultSource"]
