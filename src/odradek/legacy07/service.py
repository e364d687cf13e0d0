"""What the Kafka 0.7 requests do to the broker's partitions (codec.py has their bytes).

PRODUCE / MULTIPRODUCE: the message set is checked whole (sizes, magic, codec, CRC: any fault refuses the
request, nothing of it written, and the connection is closed, which is all a 0.7 producer can be told: these
requests have no response). Its messages become v2 batches of keyless records holding the payloads, with no
timestamp (-1, as Produce v0 messages get): a run of uncompressed messages one uncompressed batch, each gzip
or snappy wrapper one batch of its inner messages in its codec, so that a 0.7 consumer gets the wrapper back
and a current consumer reads the records. They are appended through the partition's leader as Produce
appends (LogAppendTime topics stamp the time, a topic's compression.type recompresses). An unknown topic is
created when `auto.create.topics.enable` allows (0.7 brokers created topics on first write). A partition
outside the topic, one this broker does not lead, or a compacted topic (0.7 records have no key) drops the
request with a warning in the log. Under an authorizer: WRITE on every topic named, and CREATE on the cluster or
the topic for one it would create; a refusal (of any part) writes nothing and closes the connection.

FETCH / MULTIFETCH: whole messages from the byte position (positions.py), at most max size bytes of them,
read up to the high watermark. Errors: OffsetOutOfRange (1) for a position past the end, before the start or
inside a message; InvalidFetchSize (4) when the first message is bigger than max size or max size is negative;
WrongPartition (3) for a partition outside the topic; Unknown (-1) for a partition this broker does not lead.
An unknown topic is an empty set without error, as 0.7 answered. Under an authorizer: READ on the topic,
else Unknown (-1) and no messages.

OFFSETS: 0.7's list of (position, time): each segment's first position with its time (largest timestamp, or
the file's mtime without timestamps), then the end with the current time when the last segment is not empty.
Time -1 (latest) starts at the last entry, -2 (earliest) at the first, a timestamp at the last entry not
newer than it; the answer runs from there to the oldest, newest first, at most max offsets of them. An
unknown topic answers [0] for -1 and -2, nothing otherwise. Under an authorizer: DESCRIBE on the topic, else
Unknown (-1) and no positions.

Authorization (with `authorizer.class.name` set; docs/kafka07.md): a connection acts as its listener's
`legacy.principal` (User:ANONYMOUS unless set) from the client's address (the ACL host), and each request is
put to the authorizer as its current counterpart is (Produce, Fetch, ListOffsets, and Metadata for the
auto-creation), before anything else, an unknown topic included, so that a refusal tells nothing of which
topics exist. 0.7 has no authorization error: a refused fetch or offsets request is answered Unknown (-1).

Concurrency: owned by the event loop.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.core import Broker, now_ms
from odradek.broker.metrics import KAFKA07_KEY_BASE
from odradek.cluster.partition import Partition, ReplicationError
from odradek.cluster.topics import topic_name_error
from odradek.protocol.errors import ErrorCode
from odradek.records import compression
from odradek.records.batch import NO_TIMESTAMP, InvalidRecordError, set_log_append_time
from odradek.records.codec import build_batch, recompress, validate_produced
from odradek.records.compression import COMPRESSION_TYPES

from .codec import (
    EARLIEST_TIME,
    LATEST_TIME,
    ErrorCode07,
    FetchRequest,
    InvalidMessage,
    MultiFetchRequest,
    MultiProduceRequest,
    OffsetsRequest,
    ProduceRequest,
    RequestType,
    decode_message_set,
    decode_request,
    encode_fetch_response,
    encode_multifetch_response,
    encode_offsets_response,
)
from .positions import FetchTooSmall, PositionIndexes, PositionOutOfRange

log = logging.getLogger(__name__)

# How long a produce waits for the partitions of a topic it just created to get their leader.
CREATE_WAIT_S = 5.0
# What a fetch or offsets request the authorizer refuses is answered. 0.7 has no authorization error; Unknown is
# the one 0.7 code that claims nothing false (OffsetOutOfRange would make a consumer reset its position,
# WrongPartition say the partition is missing), and 0.7 clients reject codes outside their table (prozess:
# "Invalid error code"), so Kafka's 29 would read as a broken response.
REFUSED = ErrorCode07.UNKNOWN


@dataclass(frozen=True)
class Identity:
    """Who a 0.7 connection is to the authorizer: its listener's `legacy.principal` and the client's address
    (the host ACLs name)."""

    principal: str
    host: str


class ProduceRefused(Exception):
    """A produce request the authorizer refuses: nothing of it is written and the connection is closed."""


class PartitionRefused(Exception):
    """A request for a partition this broker cannot serve; ``error`` is the 0.7 code for it."""

    def __init__(self, error: int, message: str) -> None:
        super().__init__(message)
        self.error = error


class Kafka07Service:
    """Answers decoded 0.7 requests from the broker's partitions."""

    def __init__(self, broker: Broker, magics: set[int]) -> None:
        self.broker = broker
        self.positions = PositionIndexes(magics)

    async def handle(self, frame: bytes | bytearray | memoryview, identity: Identity, magic: int = 1
                     ) -> bytes | None:
        """The response frame to a request frame (without its length prefix), None for the produce requests;
        ``identity``: who the connection is to the authorizer; ``magic``: that of the messages served.
        MalformedRequest: the frame does not parse; InvalidMessage: a produced set is corrupt; ProduceRefused:
        the authorizer refuses a produce."""
        request = decode_request(frame)
        if isinstance(request, ProduceRequest):
            await self.produce([request], identity, RequestType.PRODUCE)
            return None
        if isinstance(request, MultiProduceRequest):
            await self.produce(request.parts, identity, RequestType.MULTIPRODUCE)
            return None
        if isinstance(request, FetchRequest):
            return encode_fetch_response(*self.fetch(request, identity, magic))
        if isinstance(request, MultiFetchRequest):
            return encode_multifetch_response([self.fetch(f, identity, magic, RequestType.MULTIFETCH)
                                               for f in request.fetches])
        return encode_offsets_response(*self.offsets(request, identity, magic))

    # -- authorization --------------------------------------------------------------------------------

    def _allowed(self, identity: Identity, operation: int, resource_type: int, name: str) -> bool:
        return self.broker.authorizer.authorize(identity.principal, identity.host, operation, resource_type, name)

    def _count_refused(self, request_type: int) -> None:
        """Counted as the current protocol counts a refused partition (broker/metrics.py)."""
        if self.broker.metrics is not None:
            self.broker.metrics.refused(KAFKA07_KEY_BASE - request_type, 0, ErrorCode.TOPIC_AUTHORIZATION_FAILED)

    def _topic_allowed(self, identity: Identity, operation: int, topic: str, request_type: int) -> bool:
        if self._allowed(identity, operation, Res.TOPIC, topic):
            return True
        self._count_refused(request_type)
        log.debug("0.7 %s of %s refused to %s from %s", RequestType(request_type).name, topic, identity.principal,
                  identity.host)
        return False

    def _may_create(self, identity: Identity, topic: str) -> bool:
        """What Metadata asks before creating a topic: CREATE on the cluster or on the topic."""
        return (self._allowed(identity, Op.CREATE, Res.CLUSTER, CLUSTER_NAME)
                or self._allowed(identity, Op.CREATE, Res.TOPIC, topic))

    def _would_create(self, topic: str) -> bool:
        broker = self.broker
        return (broker.metadata.topic(topic) is None and topic_name_error(topic) is None
                and bool(broker.config.get("auto.create.topics.enable")))

    def _authorize_produce(self, requests: list[ProduceRequest], identity: Identity, request_type: int) -> None:
        """ProduceRefused unless every part may be written (and its topic created, where it would be)."""
        for request in requests:
            if not self._topic_allowed(identity, Op.WRITE, request.topic, request_type):
                raise ProduceRefused(f"{identity.principal} may not WRITE to topic {request.topic}")
            if self._would_create(request.topic) and not self._may_create(identity, request.topic):
                self._count_refused(request_type)
                raise ProduceRefused(f"{identity.principal} may not CREATE topic {request.topic}")

    # -- produce --------------------------------------------------------------------------------------

    async def produce(self, requests: list[ProduceRequest], identity: Identity,
                      request_type: int = RequestType.PRODUCE) -> None:
        """Authorize every part (ProduceRefused refuses them all), check every set (InvalidMessage refuses them
        all), then append each. The authorizer comes first, so that a refused client makes the broker open no
        message set (no decompression)."""
        self._authorize_produce(requests, identity, request_type)
        built = [(r, self._batches(r)) for r in requests]
        for request, buf in built:
            try:
                partition = await self._leader_for_produce(request.topic, request.partition, identity)
                self._append(partition, buf)
            except (PartitionRefused, ReplicationError, InvalidRecordError, OSError) as exc:
                log.warning("0.7 produce to %s-%d dropped: %s", request.topic, request.partition, exc)

    def _batches(self, request: ProduceRequest) -> bytearray:
        """The v2 batches the produced set becomes (see the module docstring)."""
        messages = decode_message_set(request.messages)
        if not messages:
            raise InvalidMessage("empty message set")
        limit = compression.decompressed_limit(len(request.messages), self._max_message_bytes(request.topic))
        out = bytearray()
        plain: list[tuple] = []
        for message in messages:
            if message.codec == compression.NONE:
                plain.append((None, message.payload, [], NO_TIMESTAMP))
                continue
            if plain:
                out += build_batch(plain)
                plain = []
            try:
                inner = decode_message_set(compression.decompress(message.codec, message.payload, limit=limit))
            except InvalidRecordError as exc:
                raise InvalidMessage(f"compressed message: {exc}") from None
            if not inner or any(m.codec != compression.NONE for m in inner):
                raise InvalidMessage("a compressed message must wrap uncompressed messages")
            out += build_batch([(None, m.payload, [], NO_TIMESTAMP) for m in inner], compression=message.codec)
        if plain:
            out += build_batch(plain)
        return out

    def _max_message_bytes(self, topic_name: str) -> int | None:
        topic = self.broker.metadata.topic(topic_name)
        return None if topic is None else int(self.broker.effective_configs(topic)["max.message.bytes"])

    async def _leader_for_produce(self, topic_name: str, index: int, identity: Identity) -> Partition:
        broker = self.broker
        if broker.metadata.topic(topic_name) is None:
            if not self._would_create(topic_name):
                raise PartitionRefused(ErrorCode07.WRONG_PARTITION, f"no topic {topic_name}")
            # asked again here: the topic may have gone since the request was authorized, as it existed
            if not self._may_create(identity, topic_name):
                raise ProduceRefused(f"{identity.principal} may not CREATE topic {topic_name}")
            broker.admin.auto_create_topic(topic_name)
            await broker.metadata.wait_for(lambda: broker.replicas.partition(topic_name, 0) is not None,
                                           CREATE_WAIT_S)
        return self._partition(topic_name, index)

    def _partition(self, topic_name: str, index: int) -> Partition:
        """The local leader of the partition; PartitionRefused with the 0.7 code otherwise."""
        topic = self.broker.metadata.topic(topic_name)
        if topic is None or not 0 <= index < topic.partitions:
            raise PartitionRefused(ErrorCode07.WRONG_PARTITION, f"no partition {topic_name}-{index}")
        try:
            return self.broker.replicas.leader_partition(topic_name, index)
        except ReplicationError as exc:
            raise PartitionRefused(ErrorCode07.UNKNOWN, str(exc)) from None

    def _append(self, partition: Partition, buf: bytearray) -> None:
        configs = self.broker.effective_configs(self.broker.metadata.topic(partition.topic))
        if "compact" in configs["cleanup.policy"]:
            raise PartitionRefused(ErrorCode07.UNKNOWN, "a compacted topic takes only keyed records")
        max_bytes = int(configs["max.message.bytes"])
        batches = validate_produced(buf, max_bytes)
        stored_codec = COMPRESSION_TYPES.get(configs["compression.type"])
        if stored_codec is not None and any(header.compression != stored_codec for _, header in batches):
            buf = recompress(buf, batches, stored_codec)
            batches = validate_produced(buf, max_bytes)
        if configs["message.timestamp.type"] == "LogAppendTime":
            append_time = now_ms()
            for pos, header in batches:
                set_log_append_time(buf, pos, header, append_time)
        appended = partition.append_as_leader(buf, batches)
        if self.broker.metrics is not None and not appended.duplicate:
            self.broker.metrics.produced(partition.topic, appended.last_offset - appended.base_offset + 1, len(buf))

    # -- fetch and offsets ----------------------------------------------------------------------------

    def fetch(self, request: FetchRequest, identity: Identity, magic: int = 1,
              request_type: int = RequestType.FETCH) -> tuple[int, bytes]:
        """(0.7 error code, message set) for one partition."""
        if not self._topic_allowed(identity, Op.READ, request.topic, request_type):
            return REFUSED, b""
        if self.broker.metadata.topic(request.topic) is None:
            return ErrorCode07.NONE, b""
        if request.max_size < 0:
            return ErrorCode07.INVALID_FETCH_SIZE, b""
        try:
            partition = self._partition(request.topic, request.partition)
            return ErrorCode07.NONE, self.positions.of(partition.log, magic).read(request.offset, request.max_size)
        except PartitionRefused as exc:
            return exc.error, b""
        except PositionOutOfRange:
            return ErrorCode07.OFFSET_OUT_OF_RANGE, b""
        except FetchTooSmall:
            return ErrorCode07.INVALID_FETCH_SIZE, b""
        except (InvalidRecordError, OSError) as exc:
            log.error("0.7 fetch from %s-%d failed: %s", request.topic, request.partition, exc)
            return ErrorCode07.UNKNOWN, b""

    def offsets(self, request: OffsetsRequest, identity: Identity, magic: int = 1) -> tuple[int, list[int]]:
        """(0.7 error code, positions) for one partition."""
        if not self._topic_allowed(identity, Op.DESCRIBE, request.topic, RequestType.OFFSETS):
            return REFUSED, []
        if self.broker.metadata.topic(request.topic) is None:
            return ErrorCode07.NONE, [0] if request.time in (LATEST_TIME, EARLIEST_TIME) else []
        try:
            partition = self._partition(request.topic, request.partition)
            index = self.positions.of(partition.log, magic)
            entries = index.segment_starts()
        except PartitionRefused as exc:
            return exc.error, []
        except (InvalidRecordError, OSError) as exc:
            log.error("0.7 offsets of %s-%d failed: %s", request.topic, request.partition, exc)
            return ErrorCode07.UNKNOWN, []
        if not entries or index.end_position > entries[-1][0]:
            entries.append((index.end_position, int(time.time() * 1000)))
        if request.time == LATEST_TIME:
            first = len(entries) - 1
        elif request.time == EARLIEST_TIME:
            first = 0
        else:
            first = next((i for i in range(len(entries) - 1, -1, -1) if entries[i][1] <= request.time), -1)
        wanted = max(request.max_offsets, 0)
        return ErrorCode07.NONE, [entries[i][0] for i in range(first, -1, -1)][:wanted]
