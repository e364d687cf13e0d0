"""One local SparkSession for the whole Spark suite (the JVM start is slow), bound to loopback.

Spark's own Kafka connector (format("kafka"), the spark-sql-kafka-0-10 package) lives in the same JVM: its jars
come from the cache `make spark-packages` fills (odradek.spark.packages; resolved here once if that never
ran), as local files, so starting the session needs no network. Without them the session starts without it
and the tests that use it (the `kafka_connector` fixture) skip with the reason; under CI (`CI` set) that is
a failure, except when the resolution could not reach Maven Central (as in tests/reference/conftest.py).
Delta Lake (odradek tables sync) is on the session the same way, through the `delta` fixture.
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
    from odradek.spark.packages import KAFKA

    status = KAFKA.status()
    if not status.installed and not status.attempted:
        status = KAFKA.resolve()
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
def delta_package_status():
    """Where Delta Lake's jars are in the cache, or why not (None without the delta-spark Python package)."""
    from odradek.spark.packages import DELTA

    try:
        status = DELTA.status()
    except RuntimeError:  # delta-spark is not installed
        return None
    if not status.installed and not status.attempted:
        status = DELTA.resolve()
    return status


@pytest.fixture(scope="session")
def delta(delta_package_status):
    """Delta Lake on the shared session; skips (under CI: fails, unless Maven Central was unreachable) where
    it could not be had. Ask for it before `spark`."""
    st = delta_package_status
    if st is None or not st.installed:
        reason = "delta-spark is not installed (pip install 'odradek[delta]')" if st is None else st.reason
        if os.environ.get("CI") and (st is None or not st.unreachable):
            pytest.fail(f"Delta Lake must be tested in CI: {reason}")
        pytest.skip(reason)
    return st


@pytest.fixture(scope="session")
def spark(kafka_package_status, delta_package_status) -> Iterator:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from odradek.spark.packages import DELTA, KAFKA, combined_conf
    from odradek.tables.sync import SESSION_DEFAULTS

    delta_conf = {**DELTA.spark_conf(delta_package_status), **SESSION_DEFAULTS} if delta_package_status else {}
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
        .config(map=combined_conf(KAFKA.spark_conf(kafka_package_status), delta_conf))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    # No register(): format("odradek") must be found through the installed pyspark_odradek module.
    yield session
    from odradek.spark.job import stop_spark

    stop_spark(session)  # no state-store maintenance thread left to log "SparkEnv not active"


@pytest.fixture(scope="module")
def registry(broker, tmp_path_factory) -> Iterator:
    """`odradek registry` on the module's broker (a process of its own, one per module)."""
    from interop.test_schema_registry import RegistryProcess

    r = RegistryProcess(broker.bootstrap, tmp_path_factory.mktemp("registry") / "registry.log").start()
    yield r
    r.stop()
