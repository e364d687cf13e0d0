"""The delivery state of one partition for one share group (KIP-932): which records are in flight.

A share group reads a partition cooperatively: each record goes to one member at a time, which
acknowledges it on its own. The state is a window of offsets:

    SPSO (`start`)                               SPEO (`end`)
      |  in flight: every offset has a state         |  never acquired yet
      v                                              v
    ... [ACKNOWLEDGED][ACQUIRED][AVAILABLE][ARCHIVED] ...

Below the share-partition start offset (SPSO) everything is done; at and above the end offset nothing was
handed out yet. Inside, each offset is

* AVAILABLE: may be acquired (released by a member, or its acquisition lock ran out);
* ACQUIRED: handed to one member until `lock_deadline_ms` (the acquisition lock);
* ACKNOWLEDGED: accepted by the member that held it;
* ARCHIVED: rejected, a gap, a transaction marker or aborted record, or delivered `delivery_limit` times.

`start` moves up over finished (ACKNOWLEDGED or ARCHIVED) offsets as soon as they reach it. The window is
at most `max_in_flight` offsets wide (Kafka's `group.share.partition.max.record.locks`, or the group's
`share.partition.max.record.locks`): a partition whose oldest record is still unfinished hands out no new
records past that, only released ones; in batch-optimized mode the batch in which the cap is reached is
still handed out whole, as Kafka does, so the window can exceed the cap by less than one batch.

Representation: one small entry per in-flight offset; the window bound keeps that at most `max_in_flight`
entries plus one batch. The stored form (`snapshot`) is runs of equal (state, delivery count).

Acknowledge types (as on the wire): 0 gap, 1 accept, 2 release, 3 reject. A released record, or one whose
lock expired, becomes AVAILABLE again, or ARCHIVED once it has been delivered `delivery_limit` times.

Pure state: no I/O, no timers. The caller passes the time, schedules `expire_locks`, persists `snapshot()`
when `dirty` and reads the log. Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from odradek.protocol.errors import ErrorCode

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4  # Kafka's RecordState ids
ACK_GAP, ACK_ACCEPT, ACK_RELEASE, ACK_REJECT, ACK_RENEW = 0, 1, 2, 3, 4  # renew: KIP-1222 (v2)
FINISHED = (ACKNOWLEDGED, ARCHIVED)


@dataclass(slots=True)
class InFlight:
    state: int = AVAILABLE
    delivery_count: int = 0
    member: str | None = None
    lock_deadline_ms: int = 0


@dataclass(frozen=True)
class LogBatch:
    """Offsets [first, last] of one stored batch; `skip` when no member should get them (a control batch,
    or an aborted transaction's batch for a read_committed group)."""

    first: int
    last: int
    skip: bool = False


class SharePartition:
    def __init__(self, start: int, delivery_limit: int = 5, max_in_flight: int = 2000) -> None:
        self.start = start
        self.end = start
        self.delivery_limit = delivery_limit
        self.max_in_flight = max_in_flight
        self.records: dict[int, InFlight] = {}
        self.dirty = True  # a new partition's start is stored with its first delivery (see `untouched`)
        self.persisted = False  # written to (or read from) the share coordinator at least once

    @property
    def untouched(self) -> bool:
        """A window this leader opened (at `share.auto.offset.reset`) that has never held a record and was
        never stored: as in Kafka, such a start is not written, so the partition stays uninitialized
        (DescribeShareGroupOffsets: no start offset) until the group is first handed a record there."""
        return not self.persisted and self.end == self.start

    # ----------------------------------------------------------------------------------------- reading

    def next_fetch_offset(self) -> int | None:
        """Where the next read of the log should begin: the first AVAILABLE offset in the window, else the
        end when the window has room; None when nothing can be acquired now."""
        for offset in range(self.start, self.end):
            if self.records[offset].state == AVAILABLE:
                return offset
        if self.end - self.start < self.max_in_flight:
            return self.end
        return None

    def acquire(self, member: str, batches: Iterable[LogBatch], max_records: int, now_ms: int,
                lock_ms: int, whole_batches: bool = False) -> list[tuple[int, int, int]]:
        """Acquire for ``member`` up to ``max_records`` offsets of ``batches`` (what was read from the log, in
        order) that are AVAILABLE or new; returns the acquired (first, last, delivery count) ranges.
        ``whole_batches`` (ShareFetch's batch-optimized acquire mode, KIP-1206) lets the limit, and the window's
        `max_in_flight`, be exceeded to finish the batch in which it was reached, as Kafka 4.4 does (one batch
        of 150 records with a cap of 100: all 150); otherwise both are exact (record-limit mode)."""
        acquired: list[tuple[int, int, int]] = []
        taken = 0
        for batch in batches:
            if taken >= max_records:
                break
            if whole_batches and batch.first >= self.end and self.end - self.start >= self.max_in_flight:
                break  # the window is full: no new batch is started
            for offset in range(max(batch.first, self.start), batch.last + 1):
                if taken >= max_records and not whole_batches:
                    break
                if offset >= self.end:
                    if offset - self.start >= self.max_in_flight and not whole_batches:
                        break
                    for missing in range(self.end, offset):  # not in the log (compacted, deleted): no record
                        self.records[missing] = InFlight(ARCHIVED)
                    self.records[offset] = InFlight()
                    self.end = offset + 1
                    self.dirty = True
                rec = self.records[offset]
                if rec.state != AVAILABLE:
                    continue
                if batch.skip:
                    rec.state = ARCHIVED
                    self.dirty = True
                    continue
                rec.state, rec.member, rec.lock_deadline_ms = ACQUIRED, member, now_ms + lock_ms
                rec.delivery_count += 1
                taken += 1
                if acquired and acquired[-1][1] == offset - 1 and acquired[-1][2] == rec.delivery_count:
                    acquired[-1] = (acquired[-1][0], offset, rec.delivery_count)
                else:
                    acquired.append((offset, offset, rec.delivery_count))
        self._advance()
        return acquired

    def unacquire(self, member: str, first: int, last: int) -> None:
        """Undo this request's acquisition of [first, last] by ``member`` (the response did not go out: a
        throttled ShareFetch): the records are AVAILABLE again with their delivery counts as before."""
        for offset in range(first, last + 1):
            rec = self.records.get(offset)
            if rec is not None and rec.state == ACQUIRED and rec.member == member:
                rec.state, rec.member = AVAILABLE, None
                rec.delivery_count = max(rec.delivery_count - 1, 0)
                self.dirty = True

    def move_start(self, offset: int) -> None:
        """The log no longer holds offsets below ``offset`` (retention, DeleteRecords): they are gone."""
        if offset <= self.start:
            return
        for o in range(self.start, min(offset, self.end)):
            self.records.pop(o, None)
        self.start = offset
        self.end = max(self.end, offset)
        self.dirty = True

    # ----------------------------------------------------------------------------------------- acknowledging

    def acknowledge(self, member: str, first: int, last: int, types: list[int],
                    renew_until_ms: int | None = None) -> int:
        """Apply one acknowledgement batch; an error code (nothing applied) when an offset is not held by
        ``member`` or the types do not fit. A renew (type 4) keeps the record acquired with its lock running
        until ``renew_until_ms``; allowed only when that is given (the request said IsRenewAck)."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            return ErrorCode.INVALID_REQUEST
        allowed = (ACK_GAP, ACK_ACCEPT, ACK_RELEASE, ACK_REJECT) if renew_until_ms is None else \
            (ACK_GAP, ACK_ACCEPT, ACK_RELEASE, ACK_REJECT, ACK_RENEW)
        if any(t not in allowed for t in types):
            return ErrorCode.INVALID_REQUEST
        for offset in range(first, last + 1):
            rec = self.records.get(offset)
            if rec is None or rec.state != ACQUIRED or rec.member != member:
                return ErrorCode.INVALID_RECORD_STATE
        for i, offset in enumerate(range(first, last + 1)):
            kind = types[0] if len(types) == 1 else types[i]
            rec = self.records[offset]
            if kind == ACK_ACCEPT:
                self._finish(rec, ACKNOWLEDGED)
            elif kind == ACK_RELEASE:
                self._release(rec)
            elif kind == ACK_RENEW:
                rec.lock_deadline_ms = max(rec.lock_deadline_ms, renew_until_ms or 0)
            else:  # reject, or a gap (an offset with no record for the client)
                self._finish(rec, ARCHIVED)
        self._advance()
        return ErrorCode.NONE

    def release_member(self, member: str) -> bool:
        """A member's session closed or it left: whatever it holds is released; whether anything was."""
        released = False
        for rec in self.records.values():
            if rec.state == ACQUIRED and rec.member == member:
                self._release(rec)
                released = True
        self._advance()
        return released

    def expire_locks(self, now_ms: int) -> bool:
        """Release records whose acquisition lock ran out; whether any was."""
        released = False
        for rec in self.records.values():
            if rec.state == ACQUIRED and rec.lock_deadline_ms <= now_ms:
                self._release(rec)
                released = True
        self._advance()
        return released

    def next_lock_deadline(self) -> int | None:
        deadlines = [r.lock_deadline_ms for r in self.records.values() if r.state == ACQUIRED]
        return min(deadlines) if deadlines else None

    def _finish(self, rec: InFlight, state: int) -> None:
        rec.state, rec.member = state, None
        self.dirty = True

    def _release(self, rec: InFlight) -> None:
        rec.state = ARCHIVED if rec.delivery_count >= self.delivery_limit else AVAILABLE
        rec.member = None
        self.dirty = True

    def _advance(self) -> None:
        while self.start < self.end and self.records[self.start].state in FINISHED:
            del self.records[self.start]
            self.start += 1
            self.dirty = True

    # ----------------------------------------------------------------------------------------- counts

    def count(self, state: int) -> int:
        return sum(1 for r in self.records.values() if r.state == state)

    # ----------------------------------------------------------------------------------------- storage

    def snapshot(self) -> tuple[int, int, list[tuple[int, int, int, int]]]:
        """(start, end, runs of (first, last, state, delivery count)) to store. An ACQUIRED record is stored
        AVAILABLE: after a restart no lock survives, but its delivery count does."""
        runs: list[tuple[int, int, int, int]] = []
        for offset in range(self.start, self.end):
            rec = self.records[offset]
            state = AVAILABLE if rec.state == ACQUIRED else rec.state
            if runs and runs[-1][1] == offset - 1 and runs[-1][2:] == (state, rec.delivery_count):
                runs[-1] = (runs[-1][0], offset, state, rec.delivery_count)
            else:
                runs.append((offset, offset, state, rec.delivery_count))
        return self.start, self.end, runs

    @classmethod
    def restore(cls, start: int, end: int, runs: list[tuple[int, int, int, int]], delivery_limit: int = 5,
                max_in_flight: int = 2000) -> "SharePartition":
        sp = cls(start, delivery_limit, max_in_flight)
        sp.end = max(end, start)
        for offset in range(sp.start, sp.end):
            sp.records[offset] = InFlight()
        for first, last, state, count in runs:
            for offset in range(max(first, sp.start), min(last + 1, sp.end)):
                sp.records[offset] = InFlight(AVAILABLE if state == ACQUIRED else state, count)
        sp._advance()
        sp.dirty = False
        sp.persisted = True
        return sp
