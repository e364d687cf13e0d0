"""Kafka Streams fixtures: the word-count application (java/WordCount.java) compiled against kafka-streams 4.4.

The jars (kafka-streams, kafka-clients, rocksdbjni, slf4j) are resolved from Maven Central by `mvn` from
tests/streams/pom.xml into ~/.cache/odradek/streams/kafka-streams-<version>/ (ODRADEK_STREAMS_DIR overrides
the cache root) the first time, then reused. Without mvn, a JDK or the network the tests skip, except under
CI (`CI` set), where that fails, as the reference suite does.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.cluster.conftest import cluster_factory, zookeeper, zookeeper_factory  # noqa: F401  (3-broker runs)
from tests.conftest import BrokerProcess
from tests.reference.conftest import installed_launcher, kafka_reference  # noqa: F401  (the session's Kafka 4.4)

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
SOURCE = HERE / "java" / "WordCount.java"
RESOLVE_TIMEOUT_S = 900
# The brokers of the SIGKILL test, where a killed instance's tasks move only once its session expires: 12 s
# (heartbeats every 2 s) instead of the 45 s default (heartbeats every 5 s), the first assignment without
# the 3 s initial delay. Kafka also needs its bounds on the group-level values lowered to allow them.
SHORT_SESSION = {"group.streams.session.timeout.ms": "12000", "group.streams.heartbeat.interval.ms": "2000",
                 "group.streams.initial.rebalance.delay.ms": "0"}
KAFKA_SHORT_SESSION = {**SHORT_SESSION, "group.streams.min.session.timeout.ms": "12000",
                       "group.streams.min.heartbeat.interval.ms": "2000"}
KAFKA_START_TIMEOUT_S = 180


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"Kafka Streams must run in CI: {reason}")
    pytest.skip(reason)


def pom_version(pom: Path = POM) -> str:
    found = re.search(r"<kafka.version>(.*?)</kafka.version>", pom.read_text())
    assert found, f"{pom} names no kafka.version"
    return found.group(1)


def streams_version() -> str:
    return pom_version(POM)


def resolve_jars(pom: Path = POM, name: str = "kafka-streams", cache: str = "streams") -> list[Path]:
    """The runtime closure of `pom` in ~/.cache/odradek/<cache>/<name>-<version>/ (ODRADEK_STREAMS_DIR replaces
    ~/.cache/odradek/streams), resolved by mvn the first time. Also used by
    tests/kafka_tools for Kafka Connect (tests/kafka_tools/connect-pom.xml)."""
    default_root = Path.home() / ".cache" / "odradek" / cache
    root = Path(os.environ.get("ODRADEK_STREAMS_DIR", default_root)) if cache == "streams" else default_root
    version = pom_version(pom)
    dest = root / f"{name}-{version}"
    stamp = dest / ".installed"
    if not stamp.exists():
        mvn = shutil.which("mvn")
        if mvn is None:
            _unavailable("mvn not found (tools/install-system-deps.sh installs Maven)")
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f".{name}-{version}.partial.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        proc = subprocess.run([mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                               f"-DoutputDirectory={tmp}", "-DincludeScope=runtime"],
                              capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S)
        if proc.returncode != 0:
            _unavailable(f"mvn could not resolve {pom.name} ({name} {version}): {proc.stdout[-2000:]}")
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
        stamp.write_text(pom.read_text())
    return sorted(dest.glob("*.jar"))


@pytest.fixture(scope="session")
def word_count_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None:
        _unavailable("javac/java not found (tools/install-system-deps.sh installs a JDK)")
    jars = resolve_jars()
    out = tmp_path_factory.mktemp("word-count-classes")
    cp = os.pathsep.join(str(j) for j in jars)
    proc = subprocess.run([javac, "-nowarn", "-d", str(out), "-cp", cp, str(SOURCE)],
                          capture_output=True, text=True, timeout=180)
    if proc.returncode != 0:
        pytest.fail(f"javac failed on WordCount.java:\n{proc.stdout}\n{proc.stderr}")
    return os.pathsep.join([str(out), cp])


@pytest.fixture
def short_session_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    """An odradek broker with SHORT_SESSION."""
    return broker_factory(SHORT_SESSION, name="short-session")


@pytest.fixture
def short_session_kafka() -> Iterator[Callable[[], Any]]:
    """Apache Kafka 4.4 with KAFKA_SHORT_SESSION, started in the background as the test begins; the test calls
    the value to wait for it (so that its JVM starts while the test drives odradek)."""
    ref, libs = installed_launcher()
    kafka = ref.KafkaReference(libs, settings=KAFKA_SHORT_SESSION)
    # one worker thread, kept until Kafka is stopped: Kafka is started with PR_SET_PDEATHSIG, which fires when
    # the thread that started it ends
    starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafka-short-session")
    started = starter.submit(kafka.start, KAFKA_START_TIMEOUT_S)

    def ready() -> Any:
        try:
            return started.result(KAFKA_START_TIMEOUT_S + 30)
        except RuntimeError as exc:
            pytest.fail(f"Apache Kafka {ref.kafka_version()} did not start: {exc}")

    try:
        yield ready
    finally:
        started.exception(KAFKA_START_TIMEOUT_S + 30)  # a start under way is finished before it is stopped
        kafka.stop()
        starter.shutdown()


@dataclass
class StreamsInstance:
    """One running WordCount JVM; its stdout lines arrive on a queue read by a thread."""

    name: str
    proc: subprocess.Popen
    stderr_path: Path
    lines: "queue.Queue[str]" = field(default_factory=queue.Queue)
    states: list[str] = field(default_factory=list)
    active: set[str] = field(default_factory=set)
    standby: set[str] = field(default_factory=set)
    closed: bool = False

    def drain(self) -> None:
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return
            if line.startswith("STATE "):
                self.states.append(line[6:])
            elif line.startswith("TASKS "):
                parts = dict(p.split("=", 1) for p in line[6:].split(" "))
                self.active = {t for t in parts["active"].split(",") if t}
                self.standby = {t for t in parts["standby"].split(",") if t}
            elif line == "CLOSED":
                self.closed = True

    def close(self, timeout: float = 90) -> int:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("close\n")  # type: ignore[union-attr]
                self.proc.stdin.flush()  # type: ignore[union-attr]
            except (BrokenPipeError, OSError):
                pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)
        finally:
            self.drain()

    def kill(self) -> None:
        """SIGKILL: no close, no commit, no leave; the group learns of it from the session timeout."""
        self.proc.kill()
        self.proc.wait(30)

    def stderr_tail(self, n: int = 4000) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""


@pytest.fixture
def streams_launcher(word_count_classpath: str, tmp_path: Path) -> Iterator:
    """`launch(name, bootstrap, app_id, input, output, protocol, standbys, guarantee)` starts a WordCount instance; all are
    closed at the end of the test."""
    started: list[StreamsInstance] = []

    def launch(name: str, bootstrap: str, app_id: str, source: str, sink: str, protocol: str,
               standbys: int = 0, guarantee: str = "at_least_once") -> StreamsInstance:
        state_dir = tmp_path / f"state-{name}"
        err = tmp_path / f"{name}.stderr"
        proc = subprocess.Popen(
            [shutil.which("java") or "java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp",
             word_count_classpath, "WordCount", bootstrap, app_id, source, sink, protocol, str(state_dir),
             str(standbys), guarantee], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err.open("w"), text=True)
        instance = StreamsInstance(name, proc, err)

        def read() -> None:
            for line in proc.stdout:  # type: ignore[union-attr]
                instance.lines.put(line.rstrip("\n"))

        threading.Thread(target=read, daemon=True).start()
        started.append(instance)
        return instance

    yield launch
    for instance in started:
        instance.close(timeout=30)
