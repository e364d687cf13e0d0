"""A Spark standalone cluster (one master, N workers) run from the installed pyspark, on loopback.

    with StandaloneCluster(Path("data/spark"), workers=2) as cluster:   # back once 2 workers are ALIVE
        spark = (SparkSession.builder.master(cluster.master_url)          # spark://127.0.0.1:40123
                 .config(map=cluster.app_conf()).getOrCreate())
        print(cluster.ui_url)               # the master's web UI (JSON at ui_url + "/json/")
        cluster.kill_worker(0)              # SIGKILL of worker 0 and its executors: a lost machine
        cluster.add_worker()                # a replacement, back once the master counts it ALIVE

Why: `local[*]` runs every task inside the driver's JVM, so it never ships the connector to another
process, never loses an executor mid-batch and never recomputes a stage elsewhere. A standalone cluster
does all of that, and needs nothing pip did not install: pyspark's wheel carries `bin/spark-class` and
every jar the master and workers run on (a JDK is the only other requirement, as for any PySpark).

Each process is `spark-class <Master|Worker> ...` in a session (process group) of its own, its output in
`<base_dir>/logs/<name>.log`; a worker's executors are its children, in its group, with their own
stdout/stderr under its `--work-dir` (`<base_dir>/worker-N/<app id>/<executor id>/`). Ports are picked
free on loopback and Spark's own port retries are off (`spark.port.maxRetries=0`), so a port taken in the
meantime fails the start loudly and another is picked, instead of Spark quietly moving to the next port,
which this class would not know. The environment of every process:

* SPARK_HOME = the installed pyspark's directory (never a SPARK_HOME of some other Spark: its jars would
  not match this pyspark), SPARK_LOCAL_IP = the host, so nothing binds beyond it;
* PYSPARK_PYTHON = this interpreter. Executors start the Python the driver names (its PYSPARK_PYTHON or
  `spark.pyspark.python`; the pipeline's driver names its own interpreter), so with a driver of this
  environment they run Python where odradek, pyarrow and confluent-kafka are installed: that is how
  `format("odradek")` reaches them (the driver pickles the data source by reference to its module, and
  every executor imports it);
* PYTHONPATH starting with the directory this odradek was imported from when that is a source checkout
  (on PYTHONPATH, or an editable install): executors inherit their worker's environment, so they import
  the same code as the process that started the cluster; an odradek in site-packages is found anyway.

Workers without odradek get it from the application instead: `spark.submit.pyFiles` (spark-submit's
`--py-files`) with a zip of the `odradek` and `pyspark_odradek` packages; confluent-kafka, pyarrow and pandas
must then be installed there, since they are compiled code.

Each process also gets SIGKILL when the thread that started it ends (Linux PR_SET_PDEATHSIG), so an owner
killed with SIGKILL leaves no JVMs behind: start the cluster from a thread that outlives it (the main
thread), or pass `die_with_owner=False`. `stop()` ends every process group, workers first, and waits
until no member of any group is left. Not thread-safe: one owner starts and stops the cluster.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Mapping

from odradek.tools.zookeeper import pick_free_port  # may be taken again before use: see PORT_RETRIES

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
START_TIMEOUT_S = 90.0  # a JVM start on a busy 2-core machine takes 5-15 s; a master and two workers in parallel
STOP_GRACE_S = 10.0
PORT_RETRIES = 3
# The master and workers only schedule: a small heap, serial GC and C1 only (they never run hot) leave the
# machine's memory and cores to executors and drivers.
DAEMON_MEMORY = "256m"
DAEMON_JAVA_OPTS = ("-Dspark.port.maxRetries=0", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
PR_SET_PDEATHSIG = 1


class StandaloneClusterError(RuntimeError):
    """A master or worker did not come up, or did not go away (the message carries the logs' tails)."""


def spark_home() -> Path:
    """The installed pyspark's directory: a SPARK_HOME with `bin/spark-class` and `jars/`."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def odradek_source_root() -> Path:
    """The directory `odradek` (and `pyspark_odradek` beside it) was imported from."""
    import odradek

    return Path(odradek.__file__).resolve().parent.parent


def standalone_unavailable() -> str | None:
    """Why a standalone cluster cannot start here (no pyspark, no spark-class, no java), or None."""
    try:
        home = spark_home()
    except ImportError:
        return "pyspark is not installed (pip install 'odradek[spark]')"
    if not (home / "bin" / "spark-class").is_file():
        return f"{home / 'bin' / 'spark-class'} not found: this pyspark install has no launcher scripts"
    java = Path(os.environ["JAVA_HOME"]) / "bin" / "java" if os.environ.get("JAVA_HOME") else None
    if not (java and java.is_file()) and not shutil.which("java"):
        return "java not found (Spark needs a JDK 17+; set JAVA_HOME or put java on PATH)"
    return None


def _prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


# Looked up now: the child must not need the dynamic loader (whose lock another thread may hold at the fork).
_PRCTL = _prctl()


def _die_with_owner() -> None:
    # Runs in the child between fork and exec: one system call through a function resolved before the fork.
    # The flag survives exec (spark-class execs the JVM in its own process).
    _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _processes() -> list[tuple[int, int, int]]:
    """(pid, parent pid, process group) of every live (not zombie) process, from /proc; [] without one.
    An orphaned zombie (where PID 1 never reaps) still answers kill(0) but is gone for every purpose here."""
    out = []
    proc = Path("/proc")
    if not proc.is_dir():
        return out
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()  # the command name may hold spaces and parentheses
        if len(fields) > 2 and fields[0] != "Z":
            out.append((int(entry.name), int(fields[1]), int(fields[2])))
    return out


def _groups_of(pgid: int) -> set[int]:
    """Process group `pgid` and the groups of its members' descendants: pyspark's daemon on an executor
    puts itself and its Python workers in a group of their own, which a signal to the worker's group
    would miss."""
    table = _processes()
    if not table:  # no /proc: the group alone
        return {pgid}
    children: dict[int, list[tuple[int, int]]] = {}
    for pid, ppid, group in table:
        children.setdefault(ppid, []).append((pid, group))
    todo = [pid for pid, _, group in table if group == pgid]
    groups = {pgid}
    while todo:
        for pid, group in children.get(todo.pop(), []):
            groups.add(group)
            todo.append(pid)
    return groups


def _alive(groups: set[int]) -> list[int]:
    """Live processes of these groups (the groups themselves where there is no /proc)."""
    table = _processes()
    if table:
        return [pid for pid, _, group in table if group in groups]
    alive = []
    for group in groups:
        try:
            os.killpg(group, 0)
            alive.append(group)
        except (ProcessLookupError, PermissionError):
            pass
    return alive


@dataclass
class SparkDaemon:
    """One master or worker process (the leader of its own process group) and its log."""

    name: str
    command: list[str]
    log_path: Path
    port: int
    ui_port: int
    work_dir: Path | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    log_offset: int = 0  # where this start's output begins in the log

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, env: Mapping[str, str], die_with_owner: bool) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            # a session of its own: a Ctrl-C meant for the owner does not reach the JVMs before the owner has
            # stopped the queries that run on them, and kill_worker/stop can end a worker with its executors
            self.proc = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=dict(env),
                cwd=self.work_dir or self.log_path.parent, start_new_session=True,
                preexec_fn=_die_with_owner if die_with_owner and _PRCTL is not None else None)

    def log_tail(self, n: int = 3000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_offset)
                return f.read().decode("utf-8", errors="replace")[-n:]
        except OSError:
            return ""

    def end(self, grace: float) -> None:
        """SIGTERM to its process group (and its descendants' groups) and up to `grace` seconds for them to
        go, then SIGKILL (at once with grace 0); returns once none of their processes is left.
        StandaloneClusterError if one survives."""
        if self.proc is None:
            return
        proc, pgid = self.proc, self.proc.pid
        groups = _groups_of(pgid)
        if grace > 0:
            for group in groups:
                _signal_group(group, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while _alive(groups) and time.monotonic() < deadline:
                if proc.poll() is None:
                    try:
                        proc.wait(0.1)
                    except subprocess.TimeoutExpired:
                        pass
                else:
                    time.sleep(0.1)
            groups |= _groups_of(pgid)  # a Python daemon started meanwhile
        for group in groups:
            _signal_group(group, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10.0
        while left := _alive(groups):
            if time.monotonic() >= deadline:
                raise StandaloneClusterError(f"{self.name}: processes {left} survived SIGKILL")
            time.sleep(0.05)
        self.proc = None


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


class StandaloneCluster:
    """A Spark standalone master and `workers` workers, each with `cores` cores and `memory` for executors.

    Nothing starts until `start()` (or `with`). `master_url` is what SparkSession.builder.master() takes;
    `app_conf()` the executor sizes an application needs to fit these workers.
    """

    def __init__(self, base_dir: Path, workers: int = 2, cores: int = 1, memory: str = "1g",
                 host: str = "127.0.0.1", env: Mapping[str, str] | None = None, die_with_owner: bool = True) -> None:
        if workers < 0 or cores < 1:
            raise ValueError("a cluster needs workers >= 0 and cores >= 1")
        self.base_dir = Path(base_dir).absolute()
        self.workers_wanted = workers
        self.cores = cores
        self.memory = memory
        self.host = host
        self.die_with_owner = die_with_owner
        self.env = self._environment(env)
        self.master: SparkDaemon | None = None
        self.workers: list[SparkDaemon] = []  # every worker ever started, killed ones included

    def _environment(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        env = dict(os.environ)
        path = list(filter(None, env.get("PYTHONPATH", "").split(os.pathsep)))
        root = odradek_source_root()
        # An installed odradek is in site-packages, where the executors' Python finds it anyway (and which on
        # PYTHONPATH would come before the standard library); a checkout's src/ is not
        if root.name not in ("site-packages", "dist-packages"):
            path.insert(0, str(root))
        env.update({
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": self.host,
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join(dict.fromkeys(path)),
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            "SPARK_DAEMON_JAVA_OPTS": " ".join(DAEMON_JAVA_OPTS),
            "SPARK_NO_DAEMONIZE": "1",
        })
        env.update(extra or {})
        return env

    # -- addresses ---------------------------------------------------------------------------------

    @property
    def master_url(self) -> str:
        """`spark://host:port` of the master (known once `start()` returned)."""
        if self.master is None:
            raise StandaloneClusterError("the cluster is not started")
        return f"spark://{self.host}:{self.master.port}"

    @property
    def ui_url(self) -> str:
        """The master's web UI; its JSON (workers, their state and cores used, applications) is at /json/."""
        if self.master is None:
            raise StandaloneClusterError("the cluster is not started")
        return f"http://{self.host}:{self.master.ui_port}"

    def app_conf(self, executor_memory: str = "512m", executor_cores: int | None = None) -> dict[str, str]:
        """Settings an application needs on these workers: one executor per worker (all its cores) of a
        memory that fits `memory` (Spark's 1g default would take a 1g worker whole, with nothing to spare
        for an executor started on it while the lost one is still being counted)."""
        return {"spark.executor.memory": executor_memory,
                "spark.executor.cores": str(executor_cores or self.cores)}

    # -- processes ---------------------------------------------------------------------------------

    def _spark_class(self, *args: str) -> list[str]:
        return ["bash", str(spark_home() / "bin" / "spark-class"), *args]

    def start(self, timeout: float = START_TIMEOUT_S) -> "StandaloneCluster":
        """Start the master, then the workers (in parallel), and wait until the master counts every one of
        them ALIVE; StandaloneClusterError with the logs' tails if that does not happen within `timeout`."""
        reason = standalone_unavailable()
        if reason is not None:
            raise StandaloneClusterError(f"cannot start a Spark standalone cluster: {reason}")
        deadline = time.monotonic() + timeout
        try:
            self._start_master(deadline)
            started = [self._launch_worker() for _ in range(self.workers_wanted - len(self.alive_daemons()))]
            self._wait_workers(started, deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_master(self, deadline: float) -> None:
        for attempt in range(PORT_RETRIES):
            port, ui_port = pick_free_port(self.host), pick_free_port(self.host)
            self.master = SparkDaemon("master", self._spark_class(
                MASTER_CLASS, "--host", self.host, "--port", str(port), "--webui-port", str(ui_port)),
                self.base_dir / "logs" / "master.log", port, ui_port)
            self.master.start(self.env, self.die_with_owner)
            try:
                self._wait(lambda: (self.status() or {}).get("status") == "ALIVE", deadline, self.master,
                           "the master to serve")
                return
            except StandaloneClusterError as exc:
                if "BindException" not in str(exc) or attempt == PORT_RETRIES - 1:
                    raise
                self.master.end(grace=0)  # a port was taken between picking and binding: pick others

    def _launch_worker(self) -> SparkDaemon:
        n = len(self.workers)
        port, ui_port = pick_free_port(self.host), pick_free_port(self.host)
        work_dir = self.base_dir / f"worker-{n}"
        work_dir.mkdir(parents=True, exist_ok=True)
        worker = SparkDaemon(f"worker-{n}", self._spark_class(
            WORKER_CLASS, "--host", self.host, "--port", str(port), "--webui-port", str(ui_port),
            "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work_dir), self.master_url),
            self.base_dir / "logs" / f"worker-{n}.log", port, ui_port, work_dir)
        worker.start(self.env, self.die_with_owner)
        self.workers.append(worker)
        return worker

    def _wait_workers(self, workers: list[SparkDaemon], deadline: float) -> list[SparkDaemon]:
        """Wait for each worker to be ALIVE; one whose port was taken is replaced by a worker on other ports.
        Returns the workers that came up."""
        up = []
        for worker in workers:
            for attempt in range(PORT_RETRIES):
                try:
                    self._wait(lambda w=worker: self.worker_state(w) == "ALIVE", deadline, worker,
                               f"{worker.name} to register with the master as ALIVE")
                    break
                except StandaloneClusterError as exc:
                    if "BindException" not in str(exc) or attempt == PORT_RETRIES - 1:
                        raise
                    worker.end(grace=0)
                    worker = self._launch_worker()
            up.append(worker)
        return up

    def _wait(self, ready: Any, deadline: float, daemon: SparkDaemon, what: str) -> None:
        """Poll `ready()` until true; StandaloneClusterError if `daemon` exits or the deadline passes."""
        while True:
            if daemon.proc is None or daemon.proc.poll() is not None:
                code = None if daemon.proc is None else daemon.proc.returncode
                raise StandaloneClusterError(f"{daemon.name} exited with {code} waiting for {what}; "
                                             f"{daemon.name} log ({daemon.log_path}):\n{daemon.log_tail()}")
            if ready():
                return
            if time.monotonic() >= deadline:
                raise StandaloneClusterError(f"timed out waiting for {what}; {daemon.name} log "
                                             f"({daemon.log_path}):\n{daemon.log_tail()}\n{self.logs(1500)}")
            time.sleep(0.2)

    def add_worker(self, timeout: float = START_TIMEOUT_S) -> SparkDaemon:
        """Start one more worker (a replacement for a killed one) and wait until the master counts it ALIVE."""
        return self._wait_workers([self._launch_worker()], time.monotonic() + timeout)[0]

    def ensure_workers(self, n: int | None = None, timeout: float = START_TIMEOUT_S) -> None:
        """Start workers until `n` (default: as many as the cluster was built with) are running and ALIVE."""
        want = self.workers_wanted if n is None else n
        started = [self._launch_worker() for _ in range(want - len(self.alive_daemons()))]
        self._wait_workers(started, time.monotonic() + timeout)

    def kill_worker(self, index: int) -> SparkDaemon:
        """SIGKILL worker `index` (of `workers`) and its whole process group (its executors and their Python
        workers): the loss of a machine, nothing closed cleanly. Returns once every one of them is gone."""
        worker = self.workers[index]
        if not worker.is_running():
            raise StandaloneClusterError(f"{worker.name} is not running")
        worker.end(grace=0)
        return worker

    def alive_daemons(self) -> list[SparkDaemon]:
        """The workers whose process runs (whatever the master says of them)."""
        return [w for w in self.workers if w.is_running()]

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        """End every worker (with its executors), then the master; returns once none of their processes is
        left. Safe to call more than once."""
        errors = []
        for daemon in [*self.workers, *([self.master] if self.master else [])]:
            try:
                daemon.end(grace)
            except StandaloneClusterError as exc:
                errors.append(str(exc))
        if errors:
            raise StandaloneClusterError("; ".join(errors))

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- what the master says ----------------------------------------------------------------------

    def status(self, timeout: float = 2.0) -> dict[str, Any] | None:
        """The master's JSON (`url`, `status`, `workers` with their `state`, `cores`, `coresused`, `activeapps`,
        ...), or None while it does not answer."""
        if self.master is None:
            return None
        try:
            with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=timeout) as resp:
                return json.loads(resp.read().decode("utf-8"))
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def worker_info(self, worker: SparkDaemon, status: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The master's entry for this worker (matched by host and port), or None if it has none."""
        status = status if status is not None else self.status()
        for entry in (status or {}).get("workers", []):
            if entry.get("host") == self.host and entry.get("port") == worker.port:
                return entry
        return None

    def worker_state(self, worker: SparkDaemon) -> str | None:
        """ALIVE, DEAD, DECOMMISSIONED, ... as the master sees the worker; None if it never registered."""
        info = self.worker_info(worker)
        return None if info is None else info.get("state")

    def alive_workers(self) -> list[dict[str, Any]]:
        """The master's entries of the workers it counts ALIVE."""
        return [w for w in (self.status() or {}).get("workers", []) if w.get("state") == "ALIVE"]

    # -- diagnostics -------------------------------------------------------------------------------

    def logs(self, n: int = 3000) -> str:
        """The end of the master's and every worker's log and of every executor's stderr, for assertion
        messages."""
        parts = []
        for daemon in [*([self.master] if self.master else []), *self.workers]:
            parts.append(f"--- {daemon.name} ({daemon.log_path}):\n{daemon.log_tail(n)}")
            if daemon.work_dir is not None:
                for stderr in sorted(daemon.work_dir.glob("*/*/stderr")):
                    try:
                        text = stderr.read_text(errors="replace")[-n:]
                    except OSError:
                        continue
                    parts.append(f"--- {daemon.name} executor {stderr.parent.parent.name}/{stderr.parent.name} "
                                 f"stderr:\n{text}")
        return "\n".join(parts)

    def __repr__(self) -> str:
        where = self.master_url if self.master is not None else "not started"
        return f"StandaloneCluster({where}, {len(self.alive_daemons())} worker(s) running, {self.base_dir})"
