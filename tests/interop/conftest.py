"""Interop fixtures shared across modules: the Java client harness, for two versions of the Java client.

`java/OdradekClient.java` (one source, written against the API common to kafka-clients 3.9 and 4.x) is
compiled once per session per client:

* `java_client`: against kafka-clients 3.9, the jars shipped in the `shigawire-apache-flink-libraries` wheel
  (pyflink/lib). Without javac or those jars its tests skip, except under CI (`CI` set) where that fails.
* `java4_client`: against kafka-clients 4.x, the jars `make reference` resolves from Maven Central for the
  reference Kafka (reference/pom.xml names the version; tests/reference/conftest.py finds the install). It
  logs through log4j2 at WARN to stderr, and a run whose stderr mentions an unsupported version, or has an
  ERROR line, fails. Without the install its tests skip with the reason; under CI they fail, unless the
  install could not reach Maven's repository (the rule of tests/reference).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reference.conftest import _unavailable as _reference_unavailable
from tests.reference.conftest import load_launcher

HARNESS_SRC = Path(__file__).parent / "java" / "OdradekClient.java"
# jackson: kafka-clients' optional dependency for the OAUTHBEARER OIDC login (its token endpoint's JSON)
JARS = ["kafka-clients.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar", "slf4j-api.jar",
        "jackson-databind.jar", "jackson-core.jar", "jackson-annotations.jar"]
# The same jars in the reference install, named `<name>-<version>.jar` there, plus the slf4j binding to log4j2
# (so that the client's own warnings reach stderr, where the tests look for them).
JARS4 = ["kafka-clients", "lz4-java", "snappy-java", "zstd-jni", "slf4j-api", "jackson-databind", "jackson-core",
         "jackson-annotations", "log4j-slf4j2-impl", "log4j-api", "log4j-core"]
LOG4J2_STDERR = """\
status = warn
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %c{1} %m%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
"""
# What the 4.x client logs when it and the broker disagree on versions, and any ERROR line of its log.
VERSION_TROUBLE = re.compile(r"UnsupportedVersion|unsupported version|^ERROR ", re.IGNORECASE | re.MULTILINE)
JAVA_TIMEOUT_S = 90
CONSUME_TIMEOUT_S = 30.0


def _candidate_lib_dirs() -> list[Path]:
    dirs: list[Path] = []
    spec = importlib.util.find_spec("pyflink")
    if spec is not None:
        for loc in spec.submodule_search_locations or []:
            dirs.append(Path(loc) / "lib")
        if spec.origin:
            dirs.append(Path(spec.origin).parent / "lib")
    roots = list(sys.path)
    try:
        roots += site.getsitepackages()
    except AttributeError:
        pass
    for root in roots:
        if root:
            dirs.append(Path(root) / "pyflink" / "lib")
    return dirs


def find_jars() -> list[Path] | None:
    for d in _candidate_lib_dirs():
        jars = [d / j for j in JARS]
        if all(j.is_file() for j in jars):
            return jars
    return None


def _unavailable(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"Java interop must run in CI: {reason}")
    pytest.skip(reason)


class JavaClient:
    def __init__(self, classes_dir: Path, jars: list[Path], java: str, jvm_options: tuple[str, ...] = (),
                 forbidden_log: re.Pattern[str] | None = None, version: str = "") -> None:
        self.classpath = os.pathsep.join([str(classes_dir)] + [str(j) for j in jars])
        self.java = java
        self.jvm_options = jvm_options  # for every run (the 4.x client's logging configuration)
        self.forbidden_log = forbidden_log  # a run whose stderr matches fails
        self.version = version

    def command(self, args: tuple | list, java_opts: tuple[str, ...] | list[str] = ()) -> list[str]:
        return [self.java, "-Xmx256m", "-XX:+UseSerialGC", "-Djava.net.preferIPv4Stack=true", *self.jvm_options,
                *java_opts, "-cp", self.classpath, "OdradekClient", *[str(a) for a in args]]

    def check_log(self, args: tuple | list, stderr: str) -> None:
        """Fail if the client's log (its stderr) has what this client must never log."""
        if self.forbidden_log is None:
            return
        bad = [line for line in stderr.splitlines() if self.forbidden_log.search(line)]
        if bad:
            pytest.fail(f"kafka-clients {self.version}: java {' '.join(str(a) for a in args[:1])} logged:\n"
                        + "\n".join(bad[:20]))

    def _exec(self, args: tuple, timeout: float, client_config: Path | None,
              java_opts: tuple[str, ...] | list[str]) -> subprocess.CompletedProcess:
        cmd = self.command(args, java_opts)
        env = dict(os.environ, ODRADEK_CLIENT_CONFIG=str(client_config)) if client_config else None
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired as e:
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            pytest.fail(f"java {' '.join(str(a) for a in args[:1])} timed out after {timeout}s\n"
                        f"--- stdout (tail) ---\n{out[-2000:]}\n--- stderr (tail) ---\n{err[-6000:]}")
        self.check_log(args, proc.stderr)
        return proc

    def run(self, *args: str, timeout: float = JAVA_TIMEOUT_S, expect_rc: int = 0,
            client_config: Path | None = None, java_opts: tuple[str, ...] | list[str] = ()) -> list[str]:
        """Run the harness; ``client_config``: a properties file every client of it also takes (its
        properties win over the harness's own); ``java_opts``: JVM options (``-Dname=value``)."""
        proc = self._exec(args, timeout, client_config, java_opts)
        if proc.returncode != expect_rc:
            pytest.fail(f"java {' '.join(str(a) for a in args)} exited {proc.returncode}\n"
                        f"--- stdout (tail) ---\n{proc.stdout[-2000:]}\n--- stderr (tail) ---\n{proc.stderr[-6000:]}")
        return [line for line in proc.stdout.splitlines() if line.strip()]

    def run_failing(self, *args: str, timeout: float = JAVA_TIMEOUT_S, client_config: Path | None = None,
                    java_opts: tuple[str, ...] | list[str] = ()) -> str:
        """Run the harness expecting it to fail (a non-zero exit); returns its stderr, for the exception."""
        proc = self._exec(args, timeout, client_config, java_opts)
        if proc.returncode == 0:
            pytest.fail(f"java {' '.join(str(a) for a in args)} succeeded, expected a failure\n"
                        f"--- stdout (tail) ---\n{proc.stdout[-2000:]}\n--- stderr (tail) ---\n{proc.stderr[-6000:]}")
        return proc.stderr

    def produce(self, bootstrap: str, topic: str, n: int, acks: str = "all", compression: str = "none",
                prefix: str = "") -> list[int]:
        lines = self.run("produce", bootstrap, topic, n, acks, compression, prefix)
        return [int(x) for x in lines]

    def consume(self, bootstrap: str, topic: str, n: int, partition: int = 0, start_offset: int = -1,
                max_partition_fetch_bytes: int = -1, isolation: str = "read_uncommitted") -> list[dict]:
        lines = self.run("consume", bootstrap, topic, partition, n, int(CONSUME_TIMEOUT_S * 1000),
                         start_offset, max_partition_fetch_bytes, isolation)
        out = []
        for line in lines:
            parts = line.split("\t")
            assert len(parts) == 5, f"unexpected harness line: {line!r}"
            offset, key, value, ts, headers = parts
            out.append({"offset": int(offset), "key": key, "value": value, "timestamp": int(ts),
                        "headers": headers})
        return out


def _compile(tmp_path_factory: pytest.TempPathFactory, name: str, jars: list[Path], javac: str) -> Path:
    out_dir = tmp_path_factory.mktemp(name)
    cp = os.pathsep.join(str(j) for j in jars)
    proc = subprocess.run([javac, "-nowarn", "-d", str(out_dir), "-cp", cp, str(HARNESS_SRC)],
                          capture_output=True, text=True, timeout=180)
    if proc.returncode != 0:
        pytest.fail(f"javac failed ({proc.returncode}) against {jars[0].name}:\n{proc.stdout}\n{proc.stderr}")
    return out_dir


@pytest.fixture(scope="session")
def java_client(tmp_path_factory: pytest.TempPathFactory) -> JavaClient:
    javac = shutil.which("javac")
    java = shutil.which("java")
    if javac is None or java is None:
        _unavailable("javac/java not found (tools/install-system-deps.sh installs a JDK)")
    jars = find_jars()
    if jars is None:
        _unavailable("pyflink/lib/kafka-clients.jar not found (install the project's [java] extra)")
    return JavaClient(_compile(tmp_path_factory, "java-classes", jars, javac), jars, java)


def find_reference_jars(libs: Path) -> list[Path]:
    """The jars of JARS4 in the reference install's libs, one per name (`<name>-<version>.jar`)."""
    jars = []
    for name in JARS4:
        found = [j for j in libs.glob(f"{name}-*.jar") if re.fullmatch(re.escape(name) + r"-\d[\w.-]*\.jar", j.name)]
        if len(found) != 1:
            pytest.fail(f"expected one {name}-<version>.jar in {libs}, found {[j.name for j in found]}")
        jars.append(found[0])
    return jars


@pytest.fixture(scope="session")
def java4_client(tmp_path_factory: pytest.TempPathFactory) -> JavaClient:
    """The harness on kafka-clients 4.x, the version of the reference install (`make reference`)."""
    ref = load_launcher()
    status = ref.install_status()
    if not status.installed:
        _reference_unavailable(status.reason, status.unreachable)
    javac = shutil.which("javac")
    java = shutil.which("java")
    if javac is None or java is None:
        _unavailable("javac/java not found (tools/install-system-deps.sh installs a JDK)")
    jars = find_reference_jars(status.libs)
    out_dir = _compile(tmp_path_factory, "java4-classes", jars, javac)
    log_config = out_dir / "log4j2.properties"
    log_config.write_text(LOG4J2_STDERR)
    return JavaClient(out_dir, jars, java, jvm_options=(f"-Dlog4j2.configurationFile={log_config}",),
                      forbidden_log=VERSION_TROUBLE, version=ref.kafka_version())


@pytest.fixture(params=["java_client", "java4_client"], ids=["3.9", "4.x"])
def any_java_client(request: pytest.FixtureRequest) -> JavaClient:
    """Each Java client in turn: a test taking it runs once with kafka-clients 3.9 and once with 4.x."""
    return request.getfixturevalue(request.param)
