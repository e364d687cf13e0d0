"""LogFlusher: the thread that runs the fsyncs of every partition log, so the event loop never waits on a disk.

An fsync takes as long as the disk needs to write back what is dirty: tens of milliseconds for a segment that
took a 64 MB burst, far more on a slow disk. Run on the event loop, that would stall every connection. The
logs instead hand their durable steps (seal a rolled segment, flush by policy, write checkpoints) to one
worker thread as jobs. os.fsync releases the GIL, so the loop goes on serving while the disk works.

Jobs run one at a time in submission order. A log relies on that: the fsync of a sealed segment is done
before the recovery point that vouches for it is written (log.py). ``submit`` returns a
``concurrent.futures.Future``; a producer that must not be answered before its data is durable awaits it
(``asyncio.wrap_future``).

``LogFlusher(background=False)`` runs each job inside ``submit`` instead: for tools and tests that open a
log without an event loop, where waiting is what they want.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from typing import Callable

Job = Callable[[], None]


class LogFlusher:
    """A FIFO of durability jobs run by one daemon thread (started on the first submit)."""

    def __init__(self, *, background: bool = True) -> None:
        self.background = background
        self._queue: queue.SimpleQueue[tuple[Job, Future] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self.timings = JobTimings()  # how long each job took (the broker's metrics read it: broker/metrics.py)

    def submit(self, job: Job) -> Future:
        """Queue ``job``; the future completes when it has run (with its exception, if it raised)."""
        future: Future = Future()
        if not self.background:
            _run(job, future)
            return future
        with self._lock:
            if self._closed:
                raise RuntimeError("log flusher is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="odradek-log-flusher", daemon=True)
                self._thread.start()
        self._queue.put((job, future))
        return future

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            start = time.perf_counter()
            _run(*item)
            self.timings.observe((time.perf_counter() - start) * 1000.0)

    def close(self) -> None:
        """Run every queued job, then stop the thread (blocks until then)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join()


class JobTimings:
    """Milliseconds per flusher job, bucketed; written by the flusher thread, read by a metrics scrape on the
    event loop, hence the lock (taken once per job: nothing next to an fsync)."""

    BOUNDS_MS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 5000.0)

    def __init__(self) -> None:
        from bisect import bisect_left

        self._bisect = bisect_left
        self.lock = threading.Lock()
        self.counts = [0] * (len(self.BOUNDS_MS) + 1)
        self.sum_ms = 0.0

    def observe(self, ms: float) -> None:
        with self.lock:
            self.counts[self._bisect(self.BOUNDS_MS, ms)] += 1
            self.sum_ms += ms


def _run(job: Job, future: Future) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        job()
    except BaseException as exc:  # handed to whoever waits; the log also records storage errors itself
        future.set_exception(exc)
    else:
        future.set_result(None)


def completed_future() -> Future:
    """A future that is already done: for "nothing to wait for"."""
    future: Future = Future()
    future.set_result(None)
    return future


SYNCHRONOUS = LogFlusher(background=False)
