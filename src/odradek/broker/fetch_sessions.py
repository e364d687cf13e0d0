"""Incremental fetch sessions (KIP-227), the broker's side: which partitions a fetcher follows, kept here so
that its next Fetch names only what changed and its answer holds only what changed.

A Fetch (v7+) says what it wants with `session_id` and `session_epoch`:

    id 0, epoch -1      a full fetch without a session (every client before v7, librdkafka, kafka-python)
    id 0, epoch 0       a full fetch that asks for a new session; the answer names it (0: none was made)
    id S, epoch 0       close session S and make a new one (a full fetch)
    id S, epoch -1      close session S; a full fetch without a session
    id S, epoch N > 0   an incremental fetch in session S: its partitions are added to the session or update
                        the ones there (fetch offset, log start, max bytes, leader epoch), its
                        `forgotten_topics_data` leave it; N must be the session's next epoch

An unknown S is FETCH_SESSION_ID_NOT_FOUND, a wrong N INVALID_FETCH_SESSION_EPOCH (top-level errors: the
fetcher starts a new session). Every fetch of a session reads every partition of the session, but the
answer to an incremental one holds only the partitions with something to say: records, an error, or a high
watermark, last stable offset or log start offset other than the one last sent. Partitions that returned
records move to the end of the session's order, so that a response size limit cannot starve the last ones.

The cache holds at most `max.incremental.fetch.session.cache.slots` sessions (Kafka's default 1000). When
it is full a new session takes the place of the least recently used one that has been idle for
`min.incremental.fetch.session.eviction.ms`, or of any client's session if the new one is a follower's
(followers are privileged, as in Kafka); otherwise no session is made and the fetch is answered as a full
one with session id 0. Sessions are the broker's, not a connection's: a fetcher may go on with its session
over a new connection.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from odradek.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]
INITIAL_EPOCH = 0
FINAL_EPOCH = -1


@dataclass
class SessionPartition:
    """One partition of a session: what the fetcher last asked for, and what the last answer told it."""

    topic: str
    topic_id: bytes
    index: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    log_start_offset: int
    # as last sent (-2: never sent, so the first answer always holds it)
    high_watermark: int = -2
    last_stable_offset: int = -2
    sent_log_start: int = -2
    want: Any = None  # the fetch handler's reading of it, kept until the fetcher changes it

    def update(self, request: dict) -> None:
        self.want = None
        self.fetch_offset = request["fetch_offset"]
        self.max_bytes = request["partition_max_bytes"]
        self.current_leader_epoch = request["current_leader_epoch"]
        self.log_start_offset = request["log_start_offset"]

    def must_answer(self, entry: dict) -> bool:
        """Whether an incremental answer holds this partition's ``entry``; notes what it says."""
        changed = bool(entry["records"]) or entry["error_code"] != ErrorCode.NONE
        if entry["high_watermark"] != self.high_watermark or entry["last_stable_offset"] != self.last_stable_offset \
                or entry["log_start_offset"] != self.sent_log_start:
            changed = True
        if entry["error_code"] != ErrorCode.NONE:
            self.high_watermark = -2  # said again once the error is gone
        else:
            self.high_watermark = entry["high_watermark"]
            self.last_stable_offset = entry["last_stable_offset"]
            self.sent_log_start = entry["log_start_offset"]
        return changed


@dataclass
class FetchSession:
    id: int
    privileged: bool  # a follower's
    partitions: dict[TopicPartition, SessionPartition] = field(default_factory=dict)
    epoch: int = 1  # the epoch the next incremental fetch must carry
    last_used: float = 0.0

    def answered(self, with_records: list[TopicPartition]) -> None:
        """Move the partitions that returned records to the end of the order."""
        for key in with_records:
            part = self.partitions.pop(key, None)
            if part is not None:
                self.partitions[key] = part


class FetchSessionError(Exception):
    def __init__(self, error_code: int) -> None:
        super().__init__(error_code)
        self.error_code = error_code


class FetchSessionCache:
    def __init__(self, max_sessions: int, eviction_ms: int, rng: random.Random | None = None) -> None:
        self.max_sessions = max_sessions
        self.eviction_s = eviction_ms / 1000.0
        self.sessions: dict[int, FetchSession] = {}
        self._rng = rng or random.Random()

    def begin(self, session_id: int, epoch: int, privileged: bool) -> FetchSession | None:
        """The session a Fetch continues (its partitions not yet updated), a new empty one (a full fetch
        that gets a session), or None (a full fetch without one). Raises FetchSessionError."""
        now = time.monotonic()
        if epoch > INITIAL_EPOCH:
            session = self.sessions.get(session_id)
            if session is None:
                raise FetchSessionError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
            if session.epoch != epoch:
                raise FetchSessionError(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
            session.epoch = epoch + 1 if epoch < 0x7FFFFFFF else 1
            session.last_used = now
            return session
        if session_id:
            self.sessions.pop(session_id, None)
        if epoch == FINAL_EPOCH or not self._make_room(privileged, now):
            return None
        while True:
            new_id = self._rng.randrange(1, 0x7FFFFFFF)
            if new_id not in self.sessions:
                break
        session = self.sessions[new_id] = FetchSession(new_id, privileged, last_used=now)
        return session

    def _make_room(self, privileged: bool, now: float) -> bool:
        if len(self.sessions) < self.max_sessions:
            return True
        if self.max_sessions <= 0:
            return False
        oldest = min(self.sessions.values(), key=lambda s: s.last_used)
        if now - oldest.last_used >= self.eviction_s:
            del self.sessions[oldest.id]
            return True
        if privileged:
            clients = [s for s in self.sessions.values() if not s.privileged]
            if clients:
                del self.sessions[min(clients, key=lambda s: s.last_used).id]
                return True
        return False
