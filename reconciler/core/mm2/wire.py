"""Byte-exact encoding of MirrorMaker 2's internal-topic records: heartbeats, checkpoints and offset-syncs.

What this is for: kmirror writes and reads the same `heartbeats`, `<source>.checkpoints.internal` and
`mm2-offset-syncs.<cluster>.internal` records as MM2, so that MM2's own tools (MirrorClient,
RemoteClusterUtils, the console formatters) work on a kmirror deployment and kmirror can read what MM2 wrote.
The layouts mirror, field for field, the Kafka `Struct` schemas in apache/kafka
`connect/mirror-client/.../Heartbeat.java`, `connect/mirror-client/.../Checkpoint.java` and
`connect/mirror/.../OffsetSync.java`:

    Heartbeat   key   sourceClusterAlias STRING, targetClusterAlias STRING
                value version INT16 (= 0) | timestamp INT64
    Checkpoint  key   group STRING, topic STRING, partition INT32
                value version INT16 (= 0) | upstreamOffset INT64, offset INT64, metadata STRING
    OffsetSync  key   topic STRING, partition INT32
                value upstreamOffset INT64, offset INT64               (no version header)

The `|` marks where MM2 writes a separate `HEADER_SCHEMA` struct (`version INT16`) before the versioned value
struct; `deserializeRecord` reads that header first and picks the value schema by it. On the wire the two are
simply concatenated. Kafka's `Type.STRING` is an INT16 big-endian byte length (0..32767, never null) followed
by UTF-8; INT16/INT32/INT64 are big-endian two's complement.

Where kmirror is stricter than MM2's readers, and why: trailing bytes after the last field, an unknown value
version (MM2 only `assert`s it, and assertions are off in production), negative string lengths and invalid
UTF-8 (Java silently substitutes U+FFFD) all raise `WireFormatError`, since a record that does not round-trip
byte for byte is not one kmirror should act on.

What this module must not do: import a Kafka or Spark client, or do any I/O. It turns values into bytes and
bytes into values; producing and consuming belong to the adapters.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple, Self

from reconciler.errors import WireFormatError

__all__ = [
    "CHECKPOINT_VERSION",
    "HEARTBEAT_VERSION",
    "Checkpoint",
    "Heartbeat",
    "OffsetSync",
    "TopicPartition",
]

HEARTBEAT_VERSION = 0
"""`Heartbeat.VERSION`: the only value version MM2 has ever written."""

CHECKPOINT_VERSION = 0
"""`Checkpoint.VERSION`: the only value version MM2 has ever written."""

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_MAX_STRING_BYTES = 0x7FFF  # Type.STRING writes its length as a signed short


class TopicPartition(NamedTuple):
    """A topic name and partition number, like Kafka's `TopicPartition`."""

    topic: str
    partition: int


# ---------------------------------------------------------------------------------------------------------
# Kafka protocol primitive types (org.apache.kafka.common.protocol.types.Type)
# ---------------------------------------------------------------------------------------------------------


def _check_int(record: str, field: str, value: int, packer: struct.Struct, type_name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireFormatError(f"{record}.{field} must be an integer ({type_name}), got {value!r}")
    bits = packer.size * 8
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not low <= value <= high:
        raise WireFormatError(f"{record}.{field}={value} does not fit in {type_name} ({low}..{high})")


def _check_string(record: str, field: str, value: str) -> None:
    if not isinstance(value, str):
        raise WireFormatError(f"{record}.{field} must be a string, got {value!r}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise WireFormatError(f"{record}.{field} is not encodable as UTF-8: {exc.reason}") from exc
    if size > _MAX_STRING_BYTES:
        limit = _MAX_STRING_BYTES
        raise WireFormatError(f"{record}.{field} is {size} bytes of UTF-8; a Kafka STRING holds at most {limit}")


def _string(value: str) -> bytes:
    data = value.encode("utf-8")
    return _INT16.pack(len(data)) + data


class _Reader:
    """Reads Kafka primitive types from one key or value, naming the field when the bytes run out."""

    def __init__(self, data: bytes, what: str) -> None:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise WireFormatError(f"{what} must be bytes, got {type(data).__name__}")
        self._data = bytes(data)
        self._pos = 0
        self._what = what

    def _take(self, size: int, field: str) -> bytes:
        end = self._pos + size
        if end > len(self._data):
            raise WireFormatError(
                f"{self._what} is truncated: field '{field}' needs {size} bytes at offset {self._pos}, "
                f"only {len(self._data) - self._pos} left (record is {len(self._data)} bytes)"
            )
        chunk = self._data[self._pos : end]
        self._pos = end
        return chunk

    def int16(self, field: str) -> int:
        value: int = _INT16.unpack(self._take(2, field))[0]
        return value

    def int32(self, field: str) -> int:
        value: int = _INT32.unpack(self._take(4, field))[0]
        return value

    def int64(self, field: str) -> int:
        value: int = _INT64.unpack(self._take(8, field))[0]
        return value

    def string(self, field: str) -> str:
        start = self._pos
        length = self.int16(field)
        if length < 0:
            # Type.STRING: "String length -1 cannot be negative" (a null STRING is not allowed here).
            raise WireFormatError(f"{self._what}: field '{field}' at offset {start} has length {length} < 0")
        raw = self._take(length, field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WireFormatError(f"{self._what}: field '{field}' at offset {start} is not UTF-8 ({exc})") from exc

    def version(self, expected: int) -> None:
        version = self.int16("version")
        if version != expected:
            raise WireFormatError(
                f"{self._what} has version {version}; kmirror (like MM2) only understands version {expected}"
            )

    def end(self) -> None:
        extra = len(self._data) - self._pos
        if extra:
            raise WireFormatError(
                f"{self._what} has {extra} unexpected trailing byte(s) after its last field "
                f"(expected {self._pos} bytes, got {len(self._data)})"
            )


# ---------------------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A record of the `heartbeats` topic (MM2 `Heartbeat`): proof of life from source to target."""

    source_cluster_alias: str
    target_cluster_alias: str
    timestamp: int
    """Milliseconds since the epoch when the heartbeat was emitted."""

    def __post_init__(self) -> None:
        _check_string("Heartbeat", "source_cluster_alias", self.source_cluster_alias)
        _check_string("Heartbeat", "target_cluster_alias", self.target_cluster_alias)
        _check_int("Heartbeat", "timestamp", self.timestamp, _INT64, "INT64")

    def key_bytes(self) -> bytes:
        return _string(self.source_cluster_alias) + _string(self.target_cluster_alias)

    def value_bytes(self) -> bytes:
        return _INT16.pack(HEARTBEAT_VERSION) + _INT64.pack(self.timestamp)

    @classmethod
    def from_record(cls, key: bytes, value: bytes) -> Self:
        k = _Reader(key, "heartbeat key")
        source = k.string("sourceClusterAlias")
        target = k.string("targetClusterAlias")
        k.end()
        v = _Reader(value, "heartbeat value")
        v.version(HEARTBEAT_VERSION)
        timestamp = v.int64("timestamp")
        v.end()
        return cls(source, target, timestamp)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A record of `<source>.checkpoints.internal` (MM2 `Checkpoint`): a group's translated offset.

    `topic` is the topic name on the target cluster (the remote topic), as in MM2.
    """

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""
    """The committed offset's metadata; MM2 (like the broker) uses "" for none, never null."""

    def __post_init__(self) -> None:
        _check_string("Checkpoint", "group", self.group)
        _check_string("Checkpoint", "topic", self.topic)
        _check_int("Checkpoint", "partition", self.partition, _INT32, "INT32")
        _check_int("Checkpoint", "upstream_offset", self.upstream_offset, _INT64, "INT64")
        _check_int("Checkpoint", "downstream_offset", self.downstream_offset, _INT64, "INT64")
        _check_string("Checkpoint", "metadata", self.metadata)

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def key_bytes(self) -> bytes:
        return _string(self.group) + _string(self.topic) + _INT32.pack(self.partition)

    def value_bytes(self) -> bytes:
        return (
            _INT16.pack(CHECKPOINT_VERSION)
            + _INT64.pack(self.upstream_offset)
            + _INT64.pack(self.downstream_offset)
            + _string(self.metadata)
        )

    @classmethod
    def from_record(cls, key: bytes, value: bytes) -> Self:
        k = _Reader(key, "checkpoint key")
        group = k.string("group")
        topic = k.string("topic")
        partition = k.int32("partition")
        k.end()
        v = _Reader(value, "checkpoint value")
        v.version(CHECKPOINT_VERSION)
        upstream = v.int64("upstreamOffset")
        downstream = v.int64("offset")
        metadata = v.string("metadata")
        v.end()
        return cls(group, topic, partition, upstream, downstream, metadata)


@dataclass(frozen=True, slots=True)
class OffsetSync:
    """A record of `mm2-offset-syncs.<cluster>.internal` (MM2 `OffsetSync`).

    The source record at `upstream_offset` of `topic`/`partition` (names on the source cluster) was written to
    the remote topic at `downstream_offset`.
    """

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def __post_init__(self) -> None:
        _check_string("OffsetSync", "topic", self.topic)
        _check_int("OffsetSync", "partition", self.partition, _INT32, "INT32")
        _check_int("OffsetSync", "upstream_offset", self.upstream_offset, _INT64, "INT64")
        _check_int("OffsetSync", "downstream_offset", self.downstream_offset, _INT64, "INT64")

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def key_bytes(self) -> bytes:
        return _string(self.topic) + _INT32.pack(self.partition)

    def value_bytes(self) -> bytes:
        return _INT64.pack(self.upstream_offset) + _INT64.pack(self.downstream_offset)

    @classmethod
    def from_record(cls, key: bytes, value: bytes) -> Self:
        k = _Reader(key, "offset-sync key")
        topic = k.string("topic")
        partition = k.int32("partition")
        k.end()
        v = _Reader(value, "offset-sync value")
        upstream = v.int64("upstreamOffset")
        downstream = v.int64("offset")
        v.end()
        return cls(topic, partition, upstream, downstream)
