"""Clocks and timers for the coordinator, real (asyncio) or fake (unit tests).

`Scheduler.call_later(delay_ms, fn)` runs `fn()` once after the delay and returns a handle with `cancel()`.
`AsyncioScheduler` uses the running event loop; a timer requested before any loop runs (group state loaded
at start-up, before `asyncio.run`) is parked and handed to the loop by `start()`. `FakeScheduler` moves
only when a test calls `advance(ms)`.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Callable, Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    def now_ms(self) -> int: ...

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> TimerHandle: ...


class _Parked:
    """A timer requested before the event loop ran; becomes a real one in `AsyncioScheduler.start`."""

    def __init__(self, due_ms: int, fn: Callable[[], None]) -> None:
        self.due_ms = due_ms
        self.fn = fn
        self.cancelled = False
        self.real: asyncio.TimerHandle | None = None

    def cancel(self) -> None:
        self.cancelled = True
        if self.real is not None:
            self.real.cancel()


class AsyncioScheduler:
    def __init__(self) -> None:
        self._parked: list[_Parked] = []

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> TimerHandle:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            parked = _Parked(self.now_ms() + max(delay_ms, 0), fn)
            self._parked.append(parked)
            return parked
        return loop.call_later(max(delay_ms, 0) / 1000.0, fn)

    def start(self) -> None:
        """Move parked timers onto the running loop (call from the loop)."""
        parked, self._parked = self._parked, []
        loop = asyncio.get_running_loop()
        now = self.now_ms()
        for p in parked:
            if not p.cancelled:
                p.real = loop.call_later(max(p.due_ms - now, 0) / 1000.0, p.fn)


class _FakeHandle:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeScheduler:
    """Virtual time for tests: timers fire, in due order, only inside `advance`."""

    def __init__(self, start_ms: int = 1_000_000) -> None:
        self._now = start_ms
        self._heap: list[tuple[int, int, _FakeHandle, Callable[[], None]]] = []
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self._now

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> TimerHandle:
        handle = _FakeHandle()
        heapq.heappush(self._heap, (self._now + max(delay_ms, 0), next(self._seq), handle, fn))
        return handle

    def start(self) -> None:
        pass

    def advance(self, ms: int) -> None:
        target = self._now + ms
        while self._heap and self._heap[0][0] <= target:
            due, _, handle, fn = heapq.heappop(self._heap)
            self._now = max(self._now, due)
            if not handle.cancelled:
                fn()
        self._now = target
