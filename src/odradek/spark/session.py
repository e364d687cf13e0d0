"""The SparkSession of odradek's own jobs (`odradek pipeline ...`, `odradek tables sync`): quiet Spark logging
(the log4j2 configuration shipped beside this module), no console progress bar, format("odradek") available."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading
from pathlib import Path
from typing import Any

# Executor sizes on a spark:// master unless the caller's settings say otherwise: the jobs' state is small,
# and Spark's defaults (1g, every core of a worker) would not leave room on the small workers of a laptop or
# of `--standalone-workers`.
CLUSTER_DEFAULTS = {"spark.executor.memory": "512m", "spark.executor.cores": "1"}
LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")
# The jobs print their own progress; Spark's bar would interleave with it on the same terminal line.
QUIET_DEFAULTS = {"spark.ui.showConsoleProgress": "false"}


def log_conf() -> dict[str, str]:
    """Settings that make the driver JVM (started by this process) log through LOG4J2_CONFIG."""
    return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}"}


def odradek_source_installed() -> bool:
    """Whether Spark finds format("odradek") by itself: it looks up top-level `pyspark_*` modules defining
    DefaultSource (pyspark_odradek), and registering the same name again makes it log that a statically
    registered data source was replaced."""
    return importlib.util.find_spec("pyspark_odradek") is not None


# Lines the driver JVM writes straight to stderr at start, past log4j: Spark's launcher always adds the
# incubating vector module, and the JVM warns about any incubating module; Spark treats PySpark's driver as a
# shell and says how to change the shell's log level.
JVM_START_NOISE = (b"WARNING: Using incubator modules", b"Setting default log level to",
                   b"To adjust logging level use sc.setLogLevel")


# A Python worker Spark started too slowly (a busy machine) to connect back within Spark's fixed 10 s prints its
# traceback on the stderr it inherits from the JVM; the job sees the failure as the query's and starts the
# query again (odradek.pipelines.clickstream), so the traceback is only noise.
WORKER_CONNECT_BACK_NOISE = (b"[CANNOT_OPEN_SOCKET]",)
TRACEBACK_LINES_HELD = 200


@contextlib.contextmanager
def jvm_stderr_filtered() -> Any:
    """While the driver JVM is launched in this block, it (and the processes it starts) get as stderr a pipe
    that a thread of ours copies to our stderr, less JVM_START_NOISE."""
    try:
        sys.stderr.flush()
        read_fd, write_fd = os.pipe()
        saved = os.dup(2)
    except OSError:  # no file descriptor 2 to stand in for (an embedding host): launch unfiltered
        yield
        return

    def copy() -> None:
        held: list[bytes] = []  # a Python worker's traceback, until its last line says which error it is
        with os.fdopen(read_fd, "rb") as src:
            for line in src:
                if line.startswith(JVM_START_NOISE):
                    continue
                if line.startswith(b"Traceback (most recent call last)") and not held:
                    held.append(line)
                    continue
                if not held:
                    os.write(saved, line)
                    continue
                held.append(line)
                if line[:1] in (b" ", b"\t") and len(held) < TRACEBACK_LINES_HELD:
                    continue  # the traceback's frames
                if line.startswith(b"Traceback"):
                    continue
                if not any(noise in line for noise in WORKER_CONNECT_BACK_NOISE):
                    os.write(saved, b"".join(held))
                held = []

    threading.Thread(target=copy, name="jvm-stderr", daemon=True).start()
    os.dup2(write_fd, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)  # our own stderr again; only the JVM's children keep the pipe's write end
        os.close(write_fd)


def spark_session(master: str, app_name: str, extra: dict[str, str] | None = None) -> Any:
    """A session on `master` (UTC, 4 shuffle partitions, quiet logging, `extra` last) with format("odradek")."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    builder = builder.config("spark.sql.shuffle.partitions", "4").config("spark.sql.session.timeZone", "UTC")
    builder = builder.config(map={**QUIET_DEFAULTS, **log_conf()})
    if master.startswith("spark://"):
        builder = builder.config(map=CLUSTER_DEFAULTS)
    for key, value in (extra or {}).items():
        if key == "spark.driver.extraJavaOptions":  # the caller's options, and still the quiet logging
            value = f"{log_conf()[key]} {value}"
        builder = builder.config(key, value)
    from pyspark import SparkContext

    if SparkContext._active_spark_context is None:  # this call launches the JVM
        with jvm_stderr_filtered():
            spark = builder.getOrCreate()
    else:
        spark = builder.getOrCreate()
    if not odradek_source_installed():
        from odradek.spark import register

        register(spark)
    return spark
