"""How odradek's streaming Spark jobs stop and report: Ctrl-C/SIGTERM as a graceful stop, the progress of their
queries as figures (per micro-batch lines, JSON lines or nothing) and a one-line summary at the end.

* `GracefulStop` takes SIGINT and SIGTERM: the first sets an event the job's loop watches (the queries are then
  stopped between micro-batches, Spark stopped, exit status 0); a second one forces the exit (status 130).
  PySpark's own SIGINT handler (installed by SparkContext) cancels every running job, which prints
  SPARK_JOB_CANCELLED stack traces: `install()` is called again once the session exists.
* `stop_queries` ends the queries between micro-batches: each is told to start no new batch, the one it runs is
  let finish and commit, and only a query still running at the bound is interrupted (Spark's `stop()`: its
  batch's job is cancelled, and replayed from the checkpoint on the next start). `stop_spark` then waits for
  the tasks of cancelled jobs to end and stops the state stores' maintenance before SparkEnv goes, so no thread
  of Spark's outlives it (each would log a stack trace).
* `ProgressReport` reads each query's `recentProgress` (StreamingQueryProgress as dicts) and prints one line per
  new micro-batch, the totals at the end.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, TextIO

REPORT_STYLES = ("lines", "json", "quiet", "live")  # "live": nothing printed per batch, a live view shows it


class GracefulStop:
    """SIGINT/SIGTERM -> `event` set (first signal), immediate exit with status 130 (second)."""

    def __init__(self, event: threading.Event | None = None, out: TextIO | None = None) -> None:
        self.event = event or threading.Event()
        self._out = out  # None: sys.stderr when the signal comes (a live view may have put its proxy there)
        self.signals = 0

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread may set handlers (a job run from a test's thread)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.signals += 1
        if self.signals > 1:
            print("odradek: stopping now (second signal)", file=self._out or sys.stderr, flush=True)
            os._exit(130)
        name = signal.Signals(signum).name
        print(f"odradek: {name}: stopping after the current micro-batch (again to force)", file=self._out or sys.stderr,
              flush=True)
        self.event.set()

    def is_set(self) -> bool:
        return self.event.is_set()


# How long a graceful stop lets the queries' running micro-batches finish: a batch of a busy machine can take half
# a minute, and a query waits out its trigger interval before it sees the stop; a second Ctrl-C forces.
STOP_WAIT_S = 120.0


def _finish_after_batch(query: Any) -> bool:
    """Tell a query to start no further micro-batch: its execution state becomes TERMINATED without the interrupt
    of `stop()`, so the running batch ends and commits, and the trigger loop (which checks the state before and
    after each batch) ends the query. Spark has no public call for it; False where the query is not Spark's
    classic micro-batch execution (the caller then stops it the ordinary way)."""
    try:
        from pyspark import SparkContext

        execution = query._jsq.streamingQuery()
        state = execution.state()
        package = state.get().getClass().getPackage().getName()
        jvm = SparkContext._jvm
        terminated = jvm.java.lang.Class.forName(f"{package}.TERMINATED$").getField("MODULE$").get(None)
        state.set(terminated)
        return True
    except Exception:  # another Spark's internals, Spark Connect, or the query ended while asked
        return False


def _terminated(query: Any) -> bool:
    """Whether the query's execution thread has ended, waiting for it up to half a second. (Its `isActive`, and
    so `awaitTermination`, turns False as soon as it is told to stop, while its batch still runs.)"""
    try:
        thread = query._jsq.streamingQuery().queryExecutionThread()
        thread.join(500)
        return not thread.isAlive()
    except Exception:  # not Spark's classic execution: the public call
        try:
            return bool(query.awaitTermination(0.5))
        except Exception:  # the query ended with an error: it has ended (the job reports the error itself)
            return True


def stop_queries(queries: list[Any], wait_s: float = STOP_WAIT_S) -> None:
    """Stop the queries between micro-batches: every one is told at once to start no new batch; each batch in
    progress then finishes and commits, waiting at most `wait_s` in all, after which a query still running is
    interrupted (its batch replayed from the checkpoint on the next start)."""
    told = {id(q) for q in queries if q.isActive and _finish_after_batch(q)}
    deadline = time.monotonic() + wait_s
    for q in queries:
        if id(q) in told:
            while not _terminated(q) and time.monotonic() < deadline:
                pass
        try:
            q.stop()  # nothing left to do for a query that ended; interrupts one still running
        except Exception:  # it ended with an error while being stopped: the job reports the query's exception
            pass


def stop_spark(spark: Any, wait_s: float = 30.0) -> None:
    """Stop the session once the tasks of its jobs have ended (a stopped query's cancelled tasks end a little
    after it) and the state stores' maintenance thread has stopped: Spark's threads that still run when SparkEnv
    is gone log stack traces ("SparkEnv not active")."""
    try:
        tracker = spark.sparkContext.statusTracker()
        deadline = time.monotonic() + wait_s
        while (tracker.getActiveStageIds() or tracker.getActiveJobsIds()) and time.monotonic() < deadline:
            time.sleep(0.2)
        state_store = spark.sparkContext._jvm.org.apache.spark.sql.execution.streaming.state.StateStore
        state_store.stop()
    except Exception:  # a session already stopped, or another Spark's internals: stop it all the same
        pass
    spark.stop()


def _batch_figures(progress: dict[str, Any]) -> dict[str, Any]:
    sources = progress.get("sources") or [{}]
    sink = progress.get("sink") or {}
    lag = None
    for s in sources:  # per source, the offsets behind the latest one Spark saw, where both are offsets maps
        end, latest = _offsets(s.get("endOffset")), _offsets(s.get("latestOffset"))
        if end is not None and latest is not None:
            lag = (lag or 0) + sum(max(latest.get(k, 0) - v, 0) for k, v in end.items())
    return {"query": progress.get("name"), "batch": progress.get("batchId"),
            "read": int(progress.get("numInputRows") or 0),
            "written": sink.get("numOutputRows") if sink.get("numOutputRows", -1) >= 0 else None,
            "duration_ms": (progress.get("durationMs") or {}).get("triggerExecution"),
            "rows_per_s": round(float(progress.get("processedRowsPerSecond") or 0.0), 1), "lag": lag}


def _offsets(value: Any) -> dict[str, int] | None:
    """{topic-partition: offset} from a source's offset as shown in progress (JSON text or a dict)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, dict):
        return None
    flat: dict[str, int] = {}
    for topic, parts in value.items():
        if not isinstance(parts, dict):
            return None
        for part, off in parts.items():
            if isinstance(off, int):
                flat[f"{topic}-{part}"] = off
    return flat


class ProgressReport:
    """Per-micro-batch figures of a job's queries, printed as `style` ("lines", "json" or "quiet")."""

    def __init__(self, job: str, style: str = "lines", out: TextIO | None = None,
                 extra: Callable[[], str] | None = None, trigger_ms: int | None = None,
                 one_input: bool = False) -> None:
        self.job, self.style, self.out = job, style, out or sys.stdout
        # the queries read the same events and write the same results (one query per sink): a summary counts
        # them once, as the busiest query saw them
        self.one_input = one_input
        self.extra = extra  # a line of the job's own (its latest results), printed after each batch line
        self.trigger_ms = trigger_ms  # a batch longer than this is "falling behind" (Spark's WARN, as one word)
        self.seen: dict[str, int] = {}
        self.latest: dict[str, dict[str, Any]] = {}  # per query, its latest micro-batch's progress
        self.last: dict[str, Any] | None = None  # the figures of the latest micro-batch that read or wrote rows
        self.per_query: dict[str, dict[str, int]] = {}  # per query, its rows read and written since start
        self.batches = self.read = self.written = 0
        self.written_known = False  # a sink that reports no count (foreachBatch) leaves "written" out of the summary
        self.began = time.monotonic()

    def poll(self, queries: list[Any]) -> None:
        for q in queries:
            try:
                recent = q.recentProgress
            except Exception:  # the query ended: its progress was read on the previous poll
                continue
            for p in recent:
                name, batch = p.get("name") or str(p.get("id")), p.get("batchId", -1)
                if batch <= self.seen.get(name, -1):
                    continue
                self.seen[name] = batch
                self.latest[name] = p
                fig = _batch_figures(p)
                if fig["read"] == 0 and not fig["written"]:
                    continue  # an idle trigger: nothing to show
                self.batches += 1
                self.read += fig["read"]
                self.written += fig["written"] or 0
                self.written_known = self.written_known or fig["written"] is not None
                totals = self.per_query.setdefault(name, {"batches": 0, "read": 0, "written": 0})
                totals["batches"] += 1
                totals["read"] += fig["read"]
                totals["written"] += fig["written"] or 0
                self.last = fig
                self._print_batch(fig)

    def falling_behind(self, fig: dict[str, Any]) -> bool:
        return bool(self.trigger_ms and fig["duration_ms"] is not None and fig["duration_ms"] > self.trigger_ms)

    def _print_batch(self, fig: dict[str, Any]) -> None:
        if self.style in ("quiet", "live"):
            return
        if self.style == "json":
            print(json.dumps({"event": "batch", "job": self.job, **fig, "falling_behind": self.falling_behind(fig)}),
                  file=self.out, flush=True)
            return
        parts = [f"{fig['query']} batch {fig['batch']}: read {fig['read']}"]
        if fig["written"] is not None:
            parts.append(f"wrote {fig['written']}")
        if fig["duration_ms"] is not None:
            parts.append(f"{fig['duration_ms'] / 1000:.1f} s")
        if fig["lag"] is not None:
            parts.append(f"lag {fig['lag']}")
        if self.falling_behind(fig):
            parts.append(f"falling behind (trigger {self.trigger_ms / 1000:g} s)")
        print(", ".join(parts), file=self.out, flush=True)
        if self.extra is not None:
            line = self.extra()
            if line:
                print(f"  {line}", file=self.out, flush=True)

    def totals(self) -> tuple[int, int, int]:
        """(micro-batches, rows read, rows written) since start: summed over the queries, or with `one_input`
        the most any one query saw."""
        if not self.one_input:
            return self.batches, self.read, self.written
        per_query = self.per_query.values()
        return tuple(max((t[k] for t in per_query), default=0)  # type: ignore[return-value]
                     for k in ("batches", "read", "written"))

    def summary(self, how: str) -> str:
        """The one line printed when the job ends (`how`: "stopped", "finished", "failed")."""
        secs = time.monotonic() - self.began
        batches, read, written_rows = self.totals()
        if self.style == "json":
            return json.dumps({"event": "summary", "job": self.job, "how": how, "batches": batches,
                               "read": read, "written": written_rows, "seconds": round(secs, 1)})
        written = f", {written_rows} written" if self.written_known else ""
        return f"{self.job} {how}: {batches} micro-batches, {read} rows read{written} in {secs:.0f} s"
