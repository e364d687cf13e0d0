"""Interop fixtures shared across modules: the Java client harness.

`java/OdradekClient.java` is compiled once per session against the jars shipped in the
`shigawire-apache-flink-libraries` wheel (pyflink/lib). Without javac the tests that use `java_client`
skip, except under CI (`CI` set) where a missing JDK is a failure.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

HARNESS_SRC = Path(__file__).parent / "java" / "OdradekClient.java"
# jackson: kafka-clients' optional dependency for the OAUTHBEARER OIDC login (its token endpoint's JSON)
JARS = ["kafka-clients.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar", "slf4j-api.jar",
        "jackson-databind.jar", "jackson-core.jar", "jackson-annotations.jar"]
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
    def __init__(self, classes_dir: Path, jars: list[Path], java: str) -> None:
        self.classpath = os.pathsep.join([str(classes_dir)] + [str(j) for j in jars])
        self.java = java

    def _exec(self, args: tuple, timeout: float, client_config: Path | None,
              java_opts: tuple[str, ...] | list[str]) -> subprocess.CompletedProcess:
        cmd = [self.java, "-Xmx256m", "-XX:+UseSerialGC", "-Djava.net.preferIPv4Stack=true", *java_opts,
               "-cp", self.classpath, "OdradekClient", *[str(a) for a in args]]
        env = dict(os.environ, ODRADEK_CLIENT_CONFIG=str(client_config)) if client_config else None
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired as e:
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            pytest.fail(f"java {' '.join(str(a) for a in args[:1])} timed out after {timeout}s\n"
                        f"--- stdout (tail) ---\n{out[-2000:]}\n--- stderr (tail) ---\n{err[-6000:]}")

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


@pytest.fixture(scope="session")
def java_client(tmp_path_factory: pytest.TempPathFactory) -> JavaClient:
    javac = shutil.which("javac")
    java = shutil.which("java")
    if javac is None or java is None:
        _unavailable("javac/java not found (tools/install-system-deps.sh installs a JDK)")
    jars = find_jars()
    if jars is None:
        _unavailable("pyflink/lib/kafka-clients.jar not found (install the project's [java] extra)")
    out_dir = tmp_path_factory.mktemp("java-classes")
    cp = os.pathsep.join(str(j) for j in jars)
    proc = subprocess.run([javac, "-nowarn", "-d", str(out_dir), "-cp", cp, str(HARNESS_SRC)],
                          capture_output=True, text=True, timeout=180)
    if proc.returncode != 0:
        pytest.fail(f"javac failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return JavaClient(out_dir, jars, java)
