"""The wheel as users get it: `pip install odradek` into a fresh venv, then every `odradek` subcommand.

Run alone with `pytest tests/packaging` (or leave it out with `-m 'not packaging'`). Once per session:

* a snapshot of the checkout (git's tracked and untracked-but-not-ignored files, i.e. a clean checkout plus
  work in progress) is copied to a temporary directory and `python -m build --wheel` builds it there,
  isolated (build fetches setuptools from PyPI into its own environment). Building in the checkout itself
  would leave `build/lib` behind, and setuptools puts whatever is in there into the next wheel, stale
  modules included;
* `python -m venv` (no `--system-site-packages`) makes a fresh venv and `pip install <wheel>` installs
  the wheel with no extras. Commands run from the venv's `bin/` with PYTHONPATH unset, from a directory
  outside the checkout, so nothing of the test venv or of `src/` can stand in for a missing file or
  dependency;
* a second fresh venv gets `pip install '<wheel>[spark,delta]'`. That costs pyspark (a ~450 MB sdist; pip builds
  it into a wheel once and caches it). Measured on the 2-core dev machine: 33-65 s with pip's cache warm
  (as in CI, where `make install` has already installed the extra) and 80 s with `--no-cache-dir`, so
  within the ~2 minute budget. The connector is therefore tested for real (a Spark batch read that finds
  `format("odradek")` through the installed `pyspark_odradek` module), not only through the wheel's
  metadata, which is checked as well.

The subcommands are taken from `odradek --help`, so a new one (`odradek cluster`, ...) is covered by the
`--help` check as soon as it exists. No output may contain "Traceback" or "ModuleNotFoundError".

A static check complements the runs: every third-party import in the wheel's modules must be a declared
dependency (the core ones for everything, plus the `spark` extra for odradek.spark, odradek.pipelines and
pyspark_odradek), which catches an undeclared import on code paths the runs do not reach.
"""

from __future__ import annotations

import ast
import email.parser
import importlib.metadata
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import free_port

pytestmark = [pytest.mark.packaging, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
READY_MARKER = "odradek: accepting connections on "
START_TIMEOUT_S = 30.0
SPARK_EXTRA_HINT = "odradek[spark]"
# the modules that may use the `spark` extra on top of the core dependencies
SPARK_MODULE_PREFIXES = ("odradek/spark/", "odradek/pipelines/", "odradek/tables/", "pyspark_odradek/")
DELTA_EXTRA_HINT = "odradek[delta]"
# what build and install leave in a checkout, and what only a developer's checkout has
SNAPSHOT_IGNORE = (".git", ".venv", "build", "dist", "data", "*.egg-info", "__pycache__", ".pytest_cache",
                   ".peers", "results", "clickstream-output")
# environment variables that would let something other than the fresh venv provide modules
ENV_DROP = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV", "__PYVENV_LAUNCHER__",
            "SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")


# ---------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------


def assert_no_crash(text: str, what: str) -> None:
    for word in ("Traceback", "ModuleNotFoundError"):
        assert word not in text, f"{what}: output contains {word!r}:\n{text[-6000:]}"


@dataclass
class Venv:
    root: Path
    env: dict[str, str] = field(repr=False)  # kept out of failure reports: it is the CI job's environment
    cwd: Path = field(default=Path("/"))  # outside the checkout

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def odradek(self) -> Path:
        return self.root / "bin" / "odradek"

    def run(self, *args: str | Path, timeout: float = 120.0, input: str | None = None) -> subprocess.CompletedProcess[str]:
        stdin = {"stdin": subprocess.DEVNULL} if input is None else {"input": input}
        try:
            return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                                  env=self.env, cwd=self.cwd, **stdin)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"{' '.join(str(a) for a in args)} timed out after {timeout} s\n{exc.stdout!r}\n{exc.stderr!r}")

    def cli(self, *args: str, rc: int | None = 0, timeout: float = 120.0, input: str | None = None) -> str:
        """Run `odradek ARGS` (`input` on its stdin); return stdout + stderr after checking it did not crash
        and (unless rc is None) exited with `rc`."""
        proc = self.run(self.odradek, *args, timeout=timeout, input=input)
        out = proc.stdout + proc.stderr
        what = f"odradek {' '.join(args)}"
        assert_no_crash(out, what)
        if rc is not None:
            assert proc.returncode == rc, f"{what}: exit code {proc.returncode}, expected {rc}:\n{out}"
        return out


def clean_env(venv_root: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_DROP}
    test_bin = str(Path(sys.executable).parent)
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != test_bin]
    if venv_root is not None:
        path.insert(0, str(venv_root / "bin"))
    env["PATH"] = os.pathsep.join(path)
    env["PYTHONNOUSERSITE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def snapshot_checkout(dest: Path) -> None:
    """Copy what a clean checkout has, plus files not yet committed (but not ignored ones)."""
    try:
        listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                capture_output=True, check=True, timeout=60).stdout.decode()
    except (OSError, subprocess.SubprocessError):
        shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(*SNAPSHOT_IGNORE), dirs_exist_ok=True)
        return
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if src.is_file():  # tracked files deleted in the working tree are listed too
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def make_venv(root: Path, install: str, timings: dict[str, float], label: str) -> Venv:
    started = time.monotonic()
    env = clean_env(None)
    proc = subprocess.run([sys.executable, "-m", "venv", str(root)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, f"python -m venv failed:\n{proc.stdout}\n{proc.stderr}"
    venv = Venv(root, clean_env(root), root.parent)
    proc = venv.run(venv.python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", install,
                    timeout=480)
    assert proc.returncode == 0, f"pip install {install} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    timings[label] = time.monotonic() - started
    return venv


class Broker:
    """`odradek serve` from a venv's bin/, on a free loopback port."""

    def __init__(self, venv: Venv, data_dir: Path) -> None:
        self.venv = venv
        self.data_dir = data_dir
        self.port = free_port()
        self.log_path = data_dir.parent / f"broker-{self.port}.log"
        self.stdout: list[str] = []
        self.proc: subprocess.Popen[str] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "Broker":
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [str(self.venv.odradek), "serve", "--listen", self.bootstrap, "--data-dir", str(self.data_dir)],
                stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True, env=self.venv.env,
                cwd=self.venv.cwd)
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.stdout.append(line)
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.kill()
                pytest.fail(f"odradek serve printed no {READY_MARKER!r} within {START_TIMEOUT_S} s:\n{self.output()}")
            if line is None:
                pytest.fail(f"odradek serve exited with {self.proc.wait()} before it was ready:\n{self.output()}")
            if line.startswith(READY_MARKER):
                return self

    def output(self) -> str:
        try:
            log = self.log_path.read_text()
        except OSError:
            log = ""
        return "".join(self.stdout) + log

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, as a service manager stops it; the exit code (None if it had to be killed)."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


@pytest.fixture
def broker_from(tmp_path: Path) -> Iterator:
    """`broker_from(venv)` starts a broker from that venv's `odradek`; whatever is left running is killed."""
    started: list[Broker] = []

    def start(venv: Venv) -> Broker:
        b = Broker(venv, tmp_path / f"data-{len(started)}")
        started.append(b)
        return b.start()

    yield start
    for b in started:
        b.kill()


def produce_one(bootstrap: str, topic: str, key: bytes, value: bytes) -> None:
    """Create `topic` and produce one record with confluent-kafka from the test venv."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "message.timeout.ms": 30000})
    reports: list = []
    producer.produce(topic, key=key, value=value, on_delivery=lambda err, msg: reports.append((err, msg)))
    assert producer.flush(30) == 0, "record not delivered within 30 s"
    [(err, msg)] = reports
    assert err is None, f"delivery failed: {err}"
    assert msg.offset() == 0


def extra_requirements(requires: list[Requirement], *extras: str) -> set[str]:
    """What the extras add (an extra that names another, as delta names odradek[spark], adds only its own)."""
    return {canonicalize_name(r.name) for r in requires if r.marker is not None and "extra" in str(r.marker)
            and any(r.marker.evaluate({"extra": extra}) for extra in extras)}


def core_requirements(requires: list[Requirement]) -> set[str]:
    return {canonicalize_name(r.name) for r in requires if r.marker is None or "extra" not in str(r.marker)}


class _Imports(ast.NodeVisitor):
    """Absolute imports of a module as (top-level name, line), skipping `if TYPE_CHECKING:` blocks."""

    def __init__(self) -> None:
        self.found: list[tuple[str, int]] = []

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else None
        if name == "TYPE_CHECKING":
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found += [(alias.name.split(".")[0], node.lineno) for alias in node.names]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            self.found.append((node.module.split(".")[0], node.lineno))


# ---------------------------------------------------------------------------------------------------
# Session fixtures: the wheel and the two venvs
# ---------------------------------------------------------------------------------------------------


@dataclass
class Built:
    wheel: Path
    source: Path  # the snapshot the wheel was built from


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory, timings: dict[str, float]) -> Built:
    source = tmp_path_factory.mktemp("checkout")
    snapshot_checkout(source)
    out = tmp_path_factory.mktemp("dist")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(source)],
                          capture_output=True, text=True, timeout=480, env=clean_env(None), cwd=source)
    timings["python -m build --wheel (isolated)"] = time.monotonic() - started
    assert proc.returncode == 0, f"wheel build failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    wheels = sorted(out.glob("*.whl"))
    assert len(wheels) == 1, f"expected one wheel, got {wheels}"
    return Built(wheels[0], source)


@pytest.fixture(scope="session")
def wheel_names(built: Built) -> list[str]:
    with zipfile.ZipFile(built.wheel) as zf:
        return zf.namelist()


@pytest.fixture(scope="session")
def wheel_requires(built: Built, wheel_names: list[str]) -> list[Requirement]:
    [metadata] = [n for n in wheel_names if n.endswith(".dist-info/METADATA")]
    with zipfile.ZipFile(built.wheel) as zf:
        msg = email.parser.Parser().parsestr(zf.read(metadata).decode())
    return [Requirement(r) for r in msg.get_all("Requires-Dist") or []]


# The venvs are removed at the end of the session: pytest keeps the last three runs' temporary directories,
# and the spark venv alone is about 900 MB.


@pytest.fixture(scope="session")
def plain_venv(built: Built, tmp_path_factory: pytest.TempPathFactory, timings: dict[str, float]) -> Iterator[Venv]:
    venv = make_venv(tmp_path_factory.mktemp("plain") / "venv", str(built.wheel), timings,
                     "python -m venv + pip install <wheel>")
    yield venv
    shutil.rmtree(venv.root, ignore_errors=True)


@pytest.fixture(scope="session")
def spark_venv(built: Built, tmp_path_factory: pytest.TempPathFactory, timings: dict[str, float]) -> Iterator[Venv]:
    venv = make_venv(tmp_path_factory.mktemp("spark") / "venv", f"{built.wheel}[spark,delta]", timings,
                     "python -m venv + pip install '<wheel>[spark,delta]'")
    yield venv
    shutil.rmtree(venv.root, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------
# The wheel's contents and metadata
# ---------------------------------------------------------------------------------------------------


def test_wheel_holds_every_module_and_nothing_else(built: Built, wheel_names: list[str]) -> None:
    src = built.source / "src"
    expected = {p.relative_to(src).as_posix() for top in ("odradek", "pyspark_odradek")
                for p in (src / top).rglob("*.py") if "__pycache__" not in p.parts}
    shipped = {n for n in wheel_names if n.endswith(".py")}
    assert not expected - shipped, f"modules missing from the wheel: {sorted(expected - shipped)}"
    assert not shipped - expected, f"modules in the wheel that src/ does not have: {sorted(shipped - expected)}"

    subpackages = {n for n in wheel_names if re.fullmatch(r"odradek/[^/]+/__init__\.py", n)}
    expected_subpackages = {f"odradek/{p.parent.name}/__init__.py" for p in (src / "odradek").glob("*/__init__.py")}
    assert subpackages == expected_subpackages
    assert {"odradek/protocol/__init__.py", "odradek/broker/__init__.py", "odradek/storage/__init__.py",
            "odradek/tools/__init__.py", "odradek/spark/__init__.py"} <= subpackages
    assert "odradek/broker/handlers/__init__.py" in wheel_names

    dist_info = {n.split("/")[0] for n in wheel_names if n.split("/")[0].endswith(".dist-info")}
    assert len(dist_info) == 1
    tops = {n.split("/")[0] for n in wheel_names}
    assert tops == {"odradek", "pyspark_odradek"} | dist_info, f"unexpected top-level entries: {sorted(tops)}"
    for name in wheel_names:
        assert not name.startswith(("tests/", "bench/", "tools/", "docs/")), name
        assert not name.endswith(("conftest.py", ".pyc")), name

    with zipfile.ZipFile(built.wheel) as zf:
        entry_points = zf.read(f"{dist_info.pop()}/entry_points.txt").decode()
        assert re.search(r"^odradek\s*=\s*odradek\.cli:main\s*$", entry_points, re.M), entry_points
        # the generated protocol tables (tools/gen_schema.py), byte for byte as checked in
        for generated in ("schema_tables.py", "api_keys.py", "errors.py"):
            shipped_bytes = zf.read(f"odradek/protocol/{generated}")
            assert shipped_bytes == (src / "odradek" / "protocol" / generated).read_bytes(), generated
        assert b"MESSAGES" in zf.read("odradek/protocol/schema_tables.py")


def test_wheel_metadata_declares_the_extras(wheel_requires: list[Requirement]) -> None:
    core = core_requirements(wheel_requires)
    assert {"crc32c", "cramjam", "uvloop", "confluent-kafka"} <= core, core
    # what `pip install 'odradek[spark]'` adds for the connector and the pipelines
    assert {"pyspark", "pyarrow", "pandas"} <= extra_requirements(wheel_requires, "spark")
    # and what `pip install 'odradek[delta]'` adds for odradek tables
    assert "delta-spark" in extra_requirements(wheel_requires, "delta")
    assert not core & {"pytest", "build", "pyspark"}, core


def test_every_third_party_import_is_declared(built: Built, wheel_names: list[str],
                                              wheel_requires: list[Requirement]) -> None:
    core = core_requirements(wheel_requires)
    with_spark = core | extra_requirements(wheel_requires, "spark", "delta")
    providers = importlib.metadata.packages_distributions()
    own = {"odradek", "pyspark_odradek"}
    undeclared = []
    with zipfile.ZipFile(built.wheel) as zf:
        for name in sorted(n for n in wheel_names if n.endswith(".py")):
            visitor = _Imports()
            visitor.visit(ast.parse(zf.read(name), filename=name))
            allowed = with_spark if name.startswith(SPARK_MODULE_PREFIXES) else core
            for module, line in visitor.found:
                if module in own or module in sys.stdlib_module_names:
                    continue
                dists = {canonicalize_name(d) for d in providers.get(module, [module])}
                if not dists & allowed:
                    undeclared.append(f"src/{name}:{line}: import {module} (distribution {', '.join(sorted(dists))})")
    assert not undeclared, ("third-party imports that the wheel's dependencies do not provide (the core ones;"
                            f" the spark extra too under {', '.join(SPARK_MODULE_PREFIXES)}):\n"
                            + "\n".join(undeclared))


# ---------------------------------------------------------------------------------------------------
# The plain install: `pip install odradek`
# ---------------------------------------------------------------------------------------------------


def test_plain_install_is_self_contained(plain_venv: Venv) -> None:
    cfg = (plain_venv.root / "pyvenv.cfg").read_text()
    assert re.search(r"^include-system-site-packages\s*=\s*false\s*$", cfg, re.M), cfg
    proc = plain_venv.run(plain_venv.python, "-c", "import odradek, sys; print(odradek.__file__); print(sys.path)")
    assert proc.returncode == 0, proc.stderr
    location = proc.stdout.splitlines()[0]
    assert location.startswith(str(plain_venv.root / "lib")), f"odradek imported from {location}, not the venv"
    assert str(ROOT) not in proc.stdout, f"the checkout is on the fresh venv's sys.path: {proc.stdout}"
    proc = plain_venv.run(plain_venv.python, "-m", "pip", "check", "--disable-pip-version-check")
    assert proc.returncode == 0, f"pip check:\n{proc.stdout}\n{proc.stderr}"


def test_every_subcommand_help(plain_venv: Venv) -> None:
    out = plain_venv.cli("--help")
    match = re.search(r"\{([^{}]+)\}", out)
    assert match, f"no {{subcommand,...}} list in odradek --help:\n{out}"
    subcommands = [s.strip() for s in match.group(1).split(",")]
    assert {"serve", "groups", "pipeline"} <= set(subcommands), subcommands
    failures = []
    for sub in subcommands:
        proc = plain_venv.run(plain_venv.odradek, sub, "--help")
        text = proc.stdout + proc.stderr
        if proc.returncode != 0 or "Traceback" in text or "ModuleNotFoundError" in text:
            failures.append(f"odradek {sub} --help: exit code {proc.returncode}\n{text}")
        elif "usage:" not in text:
            failures.append(f"odradek {sub} --help printed no usage:\n{text}")
    assert not failures, "\n\n".join(failures)


def test_serve_and_groups(plain_venv: Venv, broker_from) -> None:
    from confluent_kafka import Consumer

    broker = broker_from(plain_venv)
    topic, group = "wheel-check", "wheel-check-group"
    produce_one(broker.bootstrap, topic, b"k1", b"from the wheel")

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "broker.address.family": "v4"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        msg = None
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is not None:
                pytest.fail(f"consumer error: {msg.error()}")
        assert msg is not None, "no record consumed within 30 s"
        assert (msg.key(), msg.value(), msg.offset()) == (b"k1", b"from the wheel", 0)
        consumer.commit(message=msg, asynchronous=False)

        out = plain_venv.cli("groups", "list", "--bootstrap", broker.bootstrap)
        assert out.splitlines()[0].split() == ["GROUP", "STATE", "TYPE"], out
        assert any(line.split()[:2] == [group, "STABLE"] for line in out.splitlines()), out

        out = plain_venv.cli("groups", "describe", group, "--bootstrap", broker.bootstrap)
        assert out.startswith(f"group {group}  state STABLE"), out
        rows = [line.split() for line in out.splitlines() if line.startswith(f"{topic} ")]
        # topic, partition, committed, log end, lag, member
        assert [r[:5] for r in rows] == [[topic, "0", "1", "1", "0"]], out
    finally:
        consumer.close()

    rc = broker.stop()
    assert rc == 0, f"odradek serve exited with {rc} on SIGTERM:\n{broker.output()}"
    assert_no_crash(broker.output(), "odradek serve")


def test_cluster_commands(plain_venv: Venv, broker_from, tmp_path: Path) -> None:
    """`odradek cluster describe` and `reassign` from the wheel, against the wheel's own single node (a cluster
    of one): DescribeCluster, Metadata, DescribeLogDirs and ListPartitionReassignments through the installed
    confluent-kafka and codec; `cluster run` needs ZooKeeper, so only its help page here."""
    broker = broker_from(plain_venv)
    topic = "wheel-cluster"
    produce_one(broker.bootstrap, topic, b"k", b"v")
    out = plain_venv.cli("cluster", "describe", "--bootstrap", broker.bootstrap)
    assert "controller" in out and topic in out, out
    assert re.search(rf"\b{topic}\b.*\b0\b", out), out
    assert re.search(r"\d+(\.\d)? (B|KiB|MiB)", out), f"no log size from DescribeLogDirs:\n{out}"
    out = plain_venv.cli("cluster", "reassign", "--list", "--bootstrap", broker.bootstrap)
    assert "0 reassignment(s) in progress." in out, out
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    out = plain_venv.cli("cluster", "reassign", "--generate", "--topics-to-move-json-file", str(topics),
                         "--broker-list", "0", "--bootstrap", broker.bootstrap)
    assert "Proposed partition reassignment configuration" in out and f'"{topic}"' in out, out
    assert "usage:" in plain_venv.cli("cluster", "run", "--help")


def test_quotas_commands(plain_venv: Venv, broker_from) -> None:
    """`odradek quotas alter` and `describe` from the wheel (AlterClientQuotas, DescribeClientQuotas)."""
    broker = broker_from(plain_venv)
    out = plain_venv.cli("quotas", "alter", "--user", "alice", "--client-default",
                         "--add-config", "producer_byte_rate=1048576", "--bootstrap", broker.bootstrap)
    assert "changed the quotas of user=alice, client-id=<default>" in out, out
    out = plain_venv.cli("quotas", "describe", "--user", "alice", "--bootstrap", broker.bootstrap)
    assert "user=alice, client-id=<default>: producer_byte_rate=1048576" in out, out


def test_admin_commands(plain_venv: Venv, broker_from, tmp_path: Path) -> None:
    """`odradek topics|configs|produce|consume|records` from the wheel, each action's help page and a real
    call against the wheel's own broker (with a --command-config file)."""
    for args in (("topics", "create"), ("topics", "list"), ("topics", "describe"), ("topics", "alter"),
                 ("topics", "delete"), ("configs", "describe"), ("configs", "alter"), ("produce",), ("consume",),
                 ("records", "delete")):
        assert "usage:" in plain_venv.cli(*args, "--help"), args
    broker = broker_from(plain_venv)
    props = tmp_path / "client.properties"
    props.write_text("client.id=odradek-wheel\n")
    b = ("--bootstrap", broker.bootstrap, "--command-config", str(props))
    topic = "wheel-admin"
    assert f"created topic {topic}" in plain_venv.cli("topics", "create", topic, "--partitions", "2", *b)
    assert any(line.split() == [topic, "2", "1"] for line in plain_venv.cli("topics", "list", *b).splitlines())
    plain_venv.cli("topics", "alter", topic, "--partitions", "3", "--config", "retention.ms=600000", *b)
    out = plain_venv.cli("configs", "describe", "--entity-type", "topics", "--entity-name", topic, "--output", "json", *b)
    assert '"retention.ms"' in out and '"600000"' in out, out
    plain_venv.cli("configs", "alter", "--entity-type", "topics", "--entity-name", topic,
                   "--delete-config", "retention.ms", *b)
    plain_venv.cli("produce", topic, "-K", ":", "-H", "h=1", "-p", "0", *b, input="k1:v1\nk2:v2\nk3:v3\n")
    out = plain_venv.run(plain_venv.odradek, "consume", topic, "-e", "-f", r"%p %o %k=%s %h\n", *b).stdout
    assert out == "0 0 k1=v1 h=1\n0 1 k2=v2 h=1\n0 2 k3=v3 h=1\n", out
    out = plain_venv.cli("records", "delete", topic, "--partition", "0", "--before", "1", "--output", "json", *b)
    assert '"log_start_offset": 1' in out, out
    out = plain_venv.run(plain_venv.odradek, "consume", topic, "-e", "-p", "0", "--output", "json", *b).stdout
    assert [json.loads(line)["key"] for line in out.splitlines()] == ["k2", "k3"], out
    out = plain_venv.cli("topics", "describe", topic, *b)
    assert re.search(r"^\s*0\s+0\s+0\s+0\s+1\s+3\s*$", out, re.M), out
    plain_venv.cli("topics", "delete", topic, *b)
    assert "unknown topic" in plain_venv.cli("topics", "describe", topic, *b, rc=1)


def test_registry_command(plain_venv: Venv, broker_from, tmp_path: Path) -> None:
    """`odradek registry` from the wheel (fastavro, starlette and uvicorn from the core dependencies): it
    reads `_schemas` from the wheel's own broker, listens, registers and serves a schema over HTTP, and
    exits 0 on SIGTERM."""
    import urllib.request

    broker = broker_from(plain_venv)
    port = free_port()
    log_path = tmp_path / "registry.log"
    marker = f"odradek registry: listening on http://127.0.0.1:{port}"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([str(plain_venv.odradek), "registry", "--bootstrap", broker.bootstrap,
                                 "--listen", f"127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True, env=plain_venv.env, cwd=plain_venv.cwd)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while marker not in log_path.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"odradek registry printed no {marker!r}:\n{log_path.read_text()}")
            time.sleep(0.1)

        def call(method: str, path: str, body: dict | None = None) -> object:
            req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
            with urllib.request.urlopen(req, timeout=30) as res:
                return json.loads(res.read())

        schema = json.dumps({"type": "record", "name": "W", "fields": [{"name": "a", "type": "int"}]})
        assert call("POST", "/subjects/wheel-value/versions", {"schema": schema}) == {"id": 1}
        assert call("GET", "/subjects") == ["wheel-value"]
        assert call("GET", "/schemas/ids/1") == {"schema": schema}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0, log_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert_no_crash(log_path.read_text(), "odradek registry")


def test_pipeline_help_without_spark_extra(plain_venv: Venv) -> None:
    """Without the extra, the pipeline must say so and fail, not offer a help page for a command that
    cannot run."""
    proc = plain_venv.run(plain_venv.odradek, "pipeline", "clickstream", "--help")
    out = proc.stdout + proc.stderr
    assert_no_crash(out, "odradek pipeline clickstream --help")
    assert proc.returncode != 0 and SPARK_EXTRA_HINT in out, \
        f"expected a non-zero exit and a message asking for {SPARK_EXTRA_HINT!r}; exit code {proc.returncode}:\n{out}"


def test_pipeline_run_without_spark_extra(plain_venv: Venv, broker_from, tmp_path: Path) -> None:
    broker = broker_from(plain_venv)
    proc = plain_venv.run(plain_venv.odradek, "pipeline", "clickstream", "--bootstrap", broker.bootstrap,
                          "--available-now", "--events", "5", "--output", tmp_path / "out",
                          "--checkpoint", tmp_path / "checkpoint")
    out = proc.stdout + proc.stderr
    assert_no_crash(out, "odradek pipeline clickstream (no spark extra)")
    assert proc.returncode != 0 and SPARK_EXTRA_HINT in out, \
        f"expected a non-zero exit and a message asking for {SPARK_EXTRA_HINT!r}; exit code {proc.returncode}:\n{out}"


def test_tables_sync_without_delta_extra(plain_venv: Venv, tmp_path: Path) -> None:
    proc = plain_venv.run(plain_venv.odradek, "tables", "sync", "--topic", "t", "--path", tmp_path / "t")
    out = proc.stdout + proc.stderr
    assert_no_crash(out, "odradek tables sync (no delta extra)")
    assert proc.returncode != 0 and DELTA_EXTRA_HINT in out, \
        f"expected a non-zero exit and a message asking for {DELTA_EXTRA_HINT!r}; exit code {proc.returncode}:\n{out}"


# ---------------------------------------------------------------------------------------------------
# The spark and delta extras: `pip install 'odradek[spark,delta]'`
# ---------------------------------------------------------------------------------------------------

SPARK_READ = """
import json, os, sys
os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
from pyspark.sql import SparkSession

spark = (SparkSession.builder.master("local[1]").appName("odradek-wheel")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.sql.shuffle.partitions", "1").getOrCreate())
try:
    # no odradek.spark.register(): Spark must find the source through the installed pyspark_odradek module
    df = (spark.read.format("odradek").option("kafka.bootstrap.servers", sys.argv[1])
          .option("subscribe", sys.argv[2]).load())
    rows = df.select("key", "value", "topic", "partition", "offset").collect()
    print("ROWS " + json.dumps([[bytes(r.key).decode(), bytes(r.value).decode(), r.topic, r.partition, r.offset]
                                for r in rows]))
finally:
    spark.stop()
"""


@pytest.mark.timeout(900)
def test_spark_extra_install(spark_venv: Venv) -> None:
    proc = spark_venv.run(spark_venv.python, "-m", "pip", "check", "--disable-pip-version-check")
    assert proc.returncode == 0, f"pip check:\n{proc.stdout}\n{proc.stderr}"
    proc = spark_venv.run(spark_venv.python, "-c",
                          "import pyspark_odradek, odradek.spark.reader, odradek.spark.writer, odradek.pipelines.clickstream;"
                          "print(pyspark_odradek.DefaultSource.name())")
    assert_no_crash(proc.stdout + proc.stderr, "import the connector")
    assert proc.returncode == 0 and proc.stdout.strip() == "odradek", proc.stdout + proc.stderr
    out = spark_venv.cli("pipeline", "clickstream", "--help")
    assert "usage:" in out and "--bootstrap" in out, out
    out = spark_venv.cli("tables", "sync", "--help")
    assert "usage:" in out and "--topics-pattern" in out, out


@pytest.mark.timeout(900)
def test_spark_extra_connector_reads_a_topic(spark_venv: Venv, broker_from, tmp_path: Path,
                                             timings: dict[str, float]) -> None:
    if shutil.which("java", path=spark_venv.env["PATH"]) is None and not os.environ.get("JAVA_HOME"):
        if os.environ.get("CI"):
            pytest.fail("Spark needs a JDK (tools/install-system-deps.sh installs one)")
        pytest.skip("no java: Spark cannot start")
    broker = broker_from(spark_venv)  # this install's `odradek serve` too
    topic = "wheel-spark"
    produce_one(broker.bootstrap, topic, b"k1", b"read by spark")
    script = tmp_path / "spark_read.py"
    script.write_text(SPARK_READ)
    started = time.monotonic()
    proc = spark_venv.run(spark_venv.python, script, broker.bootstrap, topic, timeout=400)
    timings["spark batch read through the installed connector"] = time.monotonic() - started
    out = proc.stdout + proc.stderr
    assert_no_crash(out, "spark.read.format('odradek')")
    assert proc.returncode == 0, f"spark read exited with {proc.returncode}:\n{out[-6000:]}"
    [line] = [line for line in proc.stdout.splitlines() if line.startswith("ROWS ")]
    assert json.loads(line[5:]) == [["k1", "read by spark", topic, 0, 0]], out[-6000:]
    assert broker.stop() == 0, broker.output()


@pytest.mark.timeout(900)
def test_delta_extra_tables_sync(spark_venv: Venv, broker_from, tmp_path: Path, timings: dict[str, float]) -> None:
    """`odradek tables sync` from the installed wheel: Delta's jars (from the cache `make spark-packages`
    fills, or Maven Central) on the job's classpath, the topic's record in the table's first commit."""
    if shutil.which("java", path=spark_venv.env["PATH"]) is None and not os.environ.get("JAVA_HOME"):
        if os.environ.get("CI"):
            pytest.fail("Spark needs a JDK (tools/install-system-deps.sh installs one)")
        pytest.skip("no java: Spark cannot start")
    broker = broker_from(spark_venv)
    topic = "wheel-delta"
    produce_one(broker.bootstrap, topic, b"k1", b"kept as a row")
    table = tmp_path / "table"
    started = time.monotonic()
    proc = spark_venv.run(spark_venv.odradek, "tables", "sync", "--bootstrap", broker.bootstrap, "--topic", topic,
                          "--path", table, "--available-now", "--master", "local[1]",
                          "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
                          "--conf", "spark.driver.bindAddress=127.0.0.1", timeout=400)
    timings["odradek tables sync --available-now (one record)"] = time.monotonic() - started
    out = proc.stdout + proc.stderr
    assert_no_crash(out, "odradek tables sync")
    assert proc.returncode == 0, f"odradek tables sync exited with {proc.returncode}:\n{out[-6000:]}"
    actions = [json.loads(line) for commit in sorted((table / "_delta_log").glob("*.json"))
               for line in commit.read_text().splitlines() if line.strip()]
    written = [a["commitInfo"]["operationMetrics"]["numOutputRows"] for a in actions
               if "commitInfo" in a and a["commitInfo"].get("operation") == "STREAMING UPDATE"]
    assert [int(n) for n in written] == [1], actions
    assert broker.stop() == 0, broker.output()
