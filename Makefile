# Quick start: `make run` starts a broker on 127.0.0.1:9092 with data in ./data; `make test` runs the suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
VENV_STAMP := $(VENV)/.odradek-installed
SYSTEM_STAMP := $(VENV)/.odradek-system-deps

.PHONY: install venv bytecode system-deps reference spark-packages run cluster test compat unit bench bench-spark soak soak-short pipeline pipeline-cluster clean

install: venv system-deps

venv: $(VENV_STAMP)

$(VENV_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,java,spark,delta]'
	touch $@

# The editable install runs odradek from src/. Where PYTHONDONTWRITEBYTECODE is set, nothing would cache
# its bytecode and every broker start would compile every module again (about twice the start-up time);
# compileall writes the cache regardless and only recompiles what changed.
bytecode: venv
	$(PY) -m compileall -q src >/dev/null

# kcat, a JDK and ZooKeeper for the interop and cluster tests (Debian packages; installed only where missing).
system-deps: $(SYSTEM_STAMP)

$(SYSTEM_STAMP): tools/install-system-deps.sh | $(VENV_STAMP)
	bash tools/install-system-deps.sh
	touch $@

# Apache Kafka, the reference broker of the differential tests (tests/reference), from Maven Central into a
# cache outside the repository (reference/install.sh; instant once installed). A failed install warns and
# lets `make test` go on: the tests that need Kafka then skip with the reason.
ODRADEK_REFERENCE_DIR ?= $(HOME)/.cache/odradek/reference
export ODRADEK_REFERENCE_DIR
reference:
	bash reference/install.sh

# Spark's own Kafka connector (spark-sql-kafka-0-10) and Delta Lake (delta-spark) for the installed pyspark, from
# Maven Central into a cache outside the repository (odradek.spark.packages; instant once there). A failed
# resolution warns and lets `make test` go on: the tests that need the package then skip with the reason.
spark-packages: venv system-deps
	$(PY) -m odradek.spark.packages >/dev/null

run: venv bytecode
	$(VENV)/bin/odradek serve --listen 127.0.0.1:9092 --data-dir ./data

# ZooKeeper on 127.0.0.1:2181 and brokers 1-3 on 127.0.0.1:9092-9094, data and logs in ./data/cluster; Ctrl-C stops it.
cluster: venv bytecode system-deps
	$(VENV)/bin/odradek cluster run --brokers 3 --base-port 9092 --data-dir ./data/cluster

# The JUnit report feeds docs/compatibility.md: `make compat` after a test run.
test: install reference spark-packages bytecode
	$(PY) -m pytest -q -n 2 --dist loadgroup --no-loadscope-reorder --durations=30 --junitxml=build/junit.xml

compat: venv
	$(PY) tools/gen_compat.py --junit build/junit.xml

unit: venv bytecode
	$(PY) -m pytest -q tests/unit

# Side by side with peer brokers (installed on first run into bench/.peers/, never into $(VENV)).
# `make bench BENCH_ARGS=--quick` for a ~4 minute run (the cluster part included); the report goes to bench/results/latest.md.
bench: venv bytecode reference
	$(PY) bench/compare.py $(BENCH_ARGS)

# format("odradek") vs Spark's own format("kafka") (and a plain consumer) on one topic, local[1] and local[nproc];
# BENCH_SPARK_ARGS="--parts local,cluster" adds a standalone cluster of 1 then 2 workers. `BENCH_SPARK_ARGS=--help`.
bench-spark: venv bytecode spark-packages
	$(PY) bench/spark_read.py $(BENCH_SPARK_ARGS)

# A three-broker cluster (ZooKeeper and each broker in a network namespace of its own where run as root) under
# SOAK_MINUTES of random faults (kill -9, SIGSTOP, partitions, ZooKeeper restarts, SIGTERM), with an idempotent
# producer, a transactional loop, a consumer group and the Java client; fails on a lost, duplicated or reordered
# acknowledged write, a transactional anomaly, a skipped group offset, or a client stuck after a heal
# (tests/faults/nemesis.py). Then SOAK_KAFKA_MINUTES of the same faults (those that apply) on Apache Kafka's
# KRaft cluster, for its unavailability beside odradek's (0: not run). Summary in bench/results/soak.md and
# soak.json; SOAK_SEED repeats a run's faults.
SOAK_MINUTES ?= 15
SOAK_KAFKA_MINUTES ?= 5
SOAK_SEED ?=
soak: venv bytecode system-deps reference
	$(PY) bench/soak.py --minutes $(SOAK_MINUTES) $(if $(SOAK_SEED),--seed $(SOAK_SEED)) \
		$(if $(filter-out 0,$(SOAK_KAFKA_MINUTES)),--kafka --kafka-minutes $(SOAK_KAFKA_MINUTES))

# The short soak alone (one fault of each kind, ~4 min; `make test` runs it too, on one worker while the other runs the rest).
soak-short: venv bytecode system-deps
	$(PY) -m pytest -q -m soak tests/faults/test_soak_short.py

# The clickstream PySpark pipeline against a running broker (`make run` in another shell).
BOOTSTRAP ?= 127.0.0.1:9092
pipeline: venv bytecode
	$(VENV)/bin/odradek pipeline clickstream --bootstrap $(BOOTSTRAP)

# The same on a Spark standalone cluster of 2 one-core workers started on loopback (tools/pipeline_cluster.py):
# against BOOTSTRAP when given (`make pipeline-cluster BOOTSTRAP=host:port`), else against a broker started
# here; prints the Spark master UI's URL; data and logs in ./data/pipeline-cluster; Ctrl-C stops it all.
# More pipeline options through PIPELINE_ARGS, e.g. PIPELINE_ARGS="--rate 200 --trigger-seconds 5".
pipeline-cluster: venv bytecode
	$(PY) tools/pipeline_cluster.py $(if $(filter command line environment,$(origin BOOTSTRAP)),--bootstrap $(BOOTSTRAP)) $(PIPELINE_ARGS)

clean:
	rm -rf $(VENV) data build *.egg-info src/*.egg-info
