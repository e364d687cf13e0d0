"""One local SparkSession for the whole Spark suite (the JVM start is slow), bound to loopback."""

from __future__ import annotations

import os
import sys
from typing import Iterator

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="session")
def spark() -> Iterator:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("odradek-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    # No register(): format("odradek") must be found through the installed pyspark_odradek module.
    yield session
    session.stop()
