"""One local SparkSession for the whole Spark suite (the JVM start is slow), bound to loopback.

Spark's own Kafka connector (format("kafka"), the spark-sql-kafka-0-10 package) lives in the same JVM: its jars
come from the cache `make spark-kafka` fills (odradek.spark.kafka_package; resolved here once if that never
ran), as local files, so starting the session needs no network. Without them the session starts without it
and the tests that use it (the `kafka_connector` fixture) skip with the reason; under CI (`CI` set) that is
a failure, except when the resolution could not reach Maven Central (as in tests/reference/conftest.py).
"""

from __future__ import annotations

import os
import sys
from typing import Iterator

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="session")
def kafka_package_status():
    """Where Spark's own Kafka connector is in the cache, or why not (resolving it on first use)."""
    from odradek.spark import kafka_package

    status = kafka_package.status()
    if not status.installed and not status.attempted:
        status = kafka_package.resolve()
    return status


@pytest.fixture(scope="session")
def kafka_connector(kafka_package_status):
    """Spark's Kafka connector, on the shared session's classpath; skips (under CI: fails, unless Maven Central
    was unreachable) where it could not be resolved. Ask for it before `spark`: a skip then starts no JVM."""
    if not kafka_package_status.installed:
        if os.environ.get("CI") and not kafka_package_status.unreachable:
            pytest.fail(f"Spark's Kafka connector must be tested in CI: {kafka_package_status.reason}")
        pytest.skip(kafka_package_status.reason)
    return kafka_package_status


@pytest.fixture(scope="session")
def spark(kafka_package_status) -> Iterator:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from odradek.spark import kafka_package

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
        .config(map=kafka_package.spark_conf(kafka_package_status))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    # No register(): format("odradek") must be found through the installed pyspark_odradek module.
    yield session
    session.stop()
