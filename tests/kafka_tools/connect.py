"""Kafka Connect's distributed worker and MirrorMaker 2 as JVMs, for test_connect.py.

`connect-distributed.sh worker.properties` is `java -cp libs/* org.apache.kafka.connect.cli.ConnectDistributed
worker.properties`, and `connect-mirror-maker.sh mm2.properties` the same with
org.apache.kafka.connect.mirror.MirrorMaker (dedicated mode). The classpath is connect-pom.xml's runtime closure
(connect-runtime, connect-mirror, connect-file at 4.3.1, the newest of the three on Maven Central; see there).
A `JvmProcess` runs one of them (the tool runner's JVM options and WARN-to-stderr log4j, stderr to a file for
the failure message) and is always stopped by the test that started it: SIGTERM, which lets the worker stop
its tasks and flush their offsets, then SIGKILL after a deadline. `ConnectRest` is the worker's REST API over
urllib.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.interop.helpers import wait_until

from .tools import JVM_OPTIONS, ToolRunner

CONNECT_DISTRIBUTED = "org.apache.kafka.connect.cli.ConnectDistributed"
MIRROR_MAKER = "org.apache.kafka.connect.mirror.MirrorMaker"
STOP_TIMEOUT_S = 30.0
POM = Path(__file__).resolve().parent / "connect-pom.xml"


def connect_classpath() -> str:
    """connect-pom.xml's jars (resolved by mvn into ~/.cache/odradek/connect the first time), or a skip (a
    failure under CI) with the reason."""
    from tests.streams.conftest import resolve_jars

    return os.pathsep.join(str(jar) for jar in resolve_jars(POM, "connect", "connect"))


def properties(settings: dict[str, Any]) -> str:
    return "".join(f"{key}={value}\n" for key, value in settings.items())


class JvmProcess:
    """One long-running JVM (a Connect worker, MirrorMaker) with `main_class properties_file`."""

    def __init__(self, runner: ToolRunner, classpath: str, name: str, main_class: str, settings: dict[str, Any],
                 work_dir: Path) -> None:
        self.name = name
        self.work_dir = work_dir
        work_dir.mkdir(parents=True, exist_ok=True)
        self.config = work_dir / f"{name}.properties"
        self.config.write_text(properties(settings))
        self.stderr_path = work_dir / f"{name}.stderr"
        # A worker holds more than a tool: a heap of 384 MB rather than the tools' 256.
        options = [o for o in JVM_OPTIONS if not o.startswith("-Xmx")]
        self.argv = [runner.java, "-Xmx384m", *options, "-Xlog:disable", "-Xlog:all=warning:stderr",
                     f"-Dlog4j2.configurationFile={runner.log4j}", "-cp", classpath, main_class,
                     str(self.config)]
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> "JvmProcess":
        assert self.proc is None or self.proc.poll() is not None, f"{self.name} is already running"
        self.starts += 1
        with self.stderr_path.open("a") as err:
            err.write(f"=== start {self.starts}\n")
            err.flush()
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                         cwd=self.work_dir)
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (the worker's shutdown hook stops the tasks and commits their offsets), SIGKILL past `timeout`."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def log(self, n: int = 6000) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""


class ConnectRest:
    """The REST API of one Connect worker at http://127.0.0.1:`port`."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def call(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                return exc.code, json.loads(raw) if raw else None
            except ValueError:
                return exc.code, raw.decode(errors="replace")

    def wait_up(self, worker: JvmProcess, timeout: float) -> dict:
        """The worker's root resource (version, commit, kafka_cluster_id) once it answers; fails at once if the
        JVM exited."""
        def up() -> dict | None:
            assert worker.running(), f"{worker.name} exited {worker.proc and worker.proc.returncode}:\n{worker.log()}"
            status, body = self.call("GET", "/", timeout=2.0)
            return body if status == 200 else None

        return wait_until(up, timeout=timeout, interval=0.5, message=f"{worker.name}'s REST API")

    def put_connector(self, name: str, config: dict[str, str]) -> None:
        status, body = self.call("PUT", f"/connectors/{name}/config", {"name": name, **config}, timeout=60.0)
        assert status in (200, 201), f"PUT /connectors/{name}/config: {status} {body}"

    def wait_running(self, name: str, tasks: int, timeout: float) -> dict:
        """The connector's status once it and `tasks` tasks are RUNNING; a FAILED one fails with its trace."""
        def running() -> dict | None:
            status, body = self.call("GET", f"/connectors/{name}/status")
            if status != 200:
                return None
            states = [body["connector"]["state"], *(t["state"] for t in body["tasks"])]
            assert "FAILED" not in states, f"{name} failed: {json.dumps(body, indent=1)[:4000]}"
            return body if len(body["tasks"]) == tasks and set(states) == {"RUNNING"} else None

        return wait_until(running, timeout=timeout, interval=0.5, message=f"connector {name} RUNNING")
