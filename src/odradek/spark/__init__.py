"""PySpark connector: `format("odradek")` reads and writes Kafka topics like Spark's built-in Kafka source
and sink (same options, same row schema), through confluent-kafka, against any Kafka-compatible broker.

    df = spark.read.format("odradek").option("kafka.bootstrap.servers", "127.0.0.1:9092") \\
        .option("subscribe", "events").load()

Spark finds the source by itself through the installed `pyspark_odradek` module; `register(spark)` is for
sessions whose Python path lacks it. Needs the `spark` extra (`pip install 'odradek[spark]'`: pyspark 4.x, pyarrow, pandas<3) and a JDK.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register", "OdradekDataSource", "extra_missing"]

EXTRAS = {"spark": ("pyspark", "pyarrow", "pandas"), "delta": ("pyspark", "pyarrow", "pandas", "delta")}


def extra_missing(what: str, extra: str) -> bool:
    """Whether a module of the `extra` is missing; if so, says so on stderr for `what` (a command). Checked
    before anything runs, as the jobs import PySpark only where they use it."""
    import importlib.util
    import sys

    missing = [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]
    if missing:
        print(f"odradek: {what} needs the '{extra}' extra (pip install 'odradek[{extra}]'); missing: "
              f"{', '.join(missing)}", file=sys.stderr)
    return bool(missing)


def register(spark: Any) -> None:
    """Register `format("odradek")` with a SparkSession."""
    from odradek.spark.source import OdradekDataSource

    spark.dataSource.register(OdradekDataSource)


def __getattr__(name: str) -> Any:
    if name == "OdradekDataSource":
        from odradek.spark.source import OdradekDataSource

        return OdradekDataSource
    raise AttributeError(name)
