"""The SparkSession of odradek's own jobs (`odradek pipeline ...`, `odradek tables sync`)."""

from __future__ import annotations

import os
import sys
from typing import Any

# Executor sizes on a spark:// master unless the caller's settings say otherwise: the jobs' state is small,
# and Spark's defaults (1g, every core of a worker) would not leave room on the small workers of a laptop or
# of `--standalone-workers`.
CLUSTER_DEFAULTS = {"spark.executor.memory": "512m", "spark.executor.cores": "1"}


def spark_session(master: str, app_name: str, extra: dict[str, str] | None = None) -> Any:
    """A session on `master` (UTC, 4 shuffle partitions, `extra` last) with format("odradek") registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from odradek.spark import register

    builder = SparkSession.builder.master(master).appName(app_name)
    builder = builder.config("spark.sql.shuffle.partitions", "4").config("spark.sql.session.timeZone", "UTC")
    if master.startswith("spark://"):
        builder = builder.config(map=CLUSTER_DEFAULTS)
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
