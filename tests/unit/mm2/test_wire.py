"""Byte compatibility of MM2 internal-topic records with Kafka's Heartbeat/Checkpoint/OffsetSync.java.

Expected bytes are built here independently of `reconciler.core.mm2.wire`: with `struct.pack` straight from the
Java `Struct` schemas, and as golden hex strings written out by hand from the Java code (see `GOLDEN`).
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.core.mm2.wire import Checkpoint, Heartbeat, OffsetSync, TopicPartition
from reconciler.errors import KmirrorError, WireFormatError

pytestmark = pytest.mark.unit

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def kstring(value: str) -> bytes:
    """Kafka `Type.STRING`: `buffer.putShort((short) bytes.length); buffer.put(bytes)` with UTF-8 bytes."""
    data = value.encode("utf-8")
    return struct.pack(">h", len(data)) + data


# --- expected bytes from the schemas, by struct.pack ----------------------------------------------------


def test_heartbeat_matches_java_schema() -> None:
    hb = Heartbeat("us-west", "us-east", 1_700_000_000_123)
    # KEY_SCHEMA: sourceClusterAlias STRING, targetClusterAlias STRING
    assert hb.key_bytes() == kstring("us-west") + kstring("us-east")
    # serializeValue(VERSION): HEADER_SCHEMA (version INT16) then VALUE_SCHEMA_V0 (timestamp INT64)
    assert hb.value_bytes() == struct.pack(">hq", 0, 1_700_000_000_123)


def test_checkpoint_matches_java_schema() -> None:
    cp = Checkpoint("group-1", "topic-2", 3, 4, 5, "metadata-6")
    # KEY_SCHEMA: group STRING, topic STRING, partition INT32
    assert cp.key_bytes() == kstring("group-1") + kstring("topic-2") + struct.pack(">i", 3)
    # HEADER_SCHEMA (version INT16 = 0), then VALUE_SCHEMA_V0: upstreamOffset INT64, offset INT64,
    # metadata STRING. The header is a separate struct, but the two are written back to back.
    assert cp.value_bytes() == struct.pack(">hqq", 0, 4, 5) + kstring("metadata-6")


def test_offset_sync_matches_java_schema() -> None:
    sync = OffsetSync("topic1", 2, 100, 200)
    # KEY_SCHEMA: topic STRING, partition INT32
    assert sync.key_bytes() == kstring("topic1") + struct.pack(">i", 2)
    # VALUE_SCHEMA: upstreamOffset INT64, offset INT64. OffsetSync has no HEADER_SCHEMA / version.
    assert sync.value_bytes() == struct.pack(">qq", 100, 200)
    assert len(sync.value_bytes()) == 16


def test_non_ascii_string_length_counts_utf8_bytes() -> None:
    # Utils.utf8(String) then bytes.length: "é" is 2 bytes, "🚀" is 4 bytes, so the prefix is 0x0006.
    sync = OffsetSync("é🚀", 0, 0, 0)
    assert sync.key_bytes()[:2] == b"\x00\x06"
    assert sync.key_bytes() == struct.pack(">h", 6) + "é🚀".encode() + struct.pack(">i", 0)
    assert OffsetSync.from_record(sync.key_bytes(), sync.value_bytes()) == sync


def test_extreme_integers() -> None:
    cp = Checkpoint("", "", INT32_MIN, INT64_MIN, INT64_MAX, "")
    assert cp.key_bytes() == b"\x00\x00" + b"\x00\x00" + struct.pack(">i", INT32_MIN)
    assert cp.value_bytes() == struct.pack(">hqqh", 0, INT64_MIN, INT64_MAX, 0)
    assert Checkpoint.from_record(cp.key_bytes(), cp.value_bytes()) == cp


# --- golden hex, derived by hand from the Java code -------------------------------------------------------
#
# How these were derived (no encoder involved): for each field of the Java Struct schema, in declaration
# order, write Type.STRING as a 2-byte big-endian length followed by the ASCII bytes of the text (ASCII
# 'u'=75 's'=73 '-'=2d 'w'=77 'e'=65 't'=74 'a'=61 'g'=67 'r'=72 'o'=6f 'p'=70 'i'=69 'c'=63 'm'=6d 'd'=64,
# digits 0x30+n), Type.INT16/INT32/INT64 as 2/4/8-byte big-endian two's complement. For values, Heartbeat
# and Checkpoint prepend HEADER_SCHEMA (version INT16 = 0 -> "0000"); OffsetSync has no header.
# Heartbeat timestamp 1700000000000 ms = 0x0000018BCFE56800. The Checkpoint uses the values of
# apache/kafka CheckpointTest.testSerde (group-1, topic-2, 3, 4, 5, metadata-6; "metadata-6" is 10 bytes).


def fields(*hex_fields: str) -> str:
    """One hex string from per-field pieces, so each field of the schema stays visible below."""
    return "".join(hex_fields)


GOLDEN = [
    (
        Heartbeat("us-west", "us-east", 1_700_000_000_000),
        fields("0007", "75732d77657374", "0007", "75732d65617374"),
        fields("0000", "0000018bcfe56800"),
    ),
    (
        Checkpoint("group-1", "topic-2", 3, 4, 5, "metadata-6"),
        fields("0007", "67726f75702d31", "0007", "746f7069632d32", "00000003"),
        fields("0000", "0000000000000004", "0000000000000005", "000a", "6d657461646174612d36"),
    ),
    (
        OffsetSync("topic1", 2, 100, 200),
        fields("0006", "746f70696331", "00000002"),
        fields("0000000000000064", "00000000000000c8"),
    ),
]


@pytest.mark.parametrize(("record", "key_hex", "value_hex"), GOLDEN, ids=lambda x: type(x).__name__)
def test_golden_bytes(record: Heartbeat | Checkpoint | OffsetSync, key_hex: str, value_hex: str) -> None:
    assert record.key_bytes().hex() == key_hex
    assert record.value_bytes().hex() == value_hex
    assert type(record).from_record(bytes.fromhex(key_hex), bytes.fromhex(value_hex)) == record


# --- round trips --------------------------------------------------------------------------------------------

# Kafka STRING holds at most 32767 UTF-8 bytes; 8000 code points of up to 4 bytes each always fit.
texts = st.text(max_size=8000)
int32s = st.integers(INT32_MIN, INT32_MAX)
int64s = st.integers(INT64_MIN, INT64_MAX)


@given(texts, texts, int64s)
def test_heartbeat_round_trip(source: str, target: str, ts: int) -> None:
    hb = Heartbeat(source, target, ts)
    assert Heartbeat.from_record(hb.key_bytes(), hb.value_bytes()) == hb
    assert hb.key_bytes() == kstring(source) + kstring(target)
    assert hb.value_bytes() == struct.pack(">hq", 0, ts)


@given(texts, texts, int32s, int64s, int64s, texts)
def test_checkpoint_round_trip(group: str, topic: str, p: int, up: int, down: int, meta: str) -> None:
    cp = Checkpoint(group, topic, p, up, down, meta)
    assert Checkpoint.from_record(cp.key_bytes(), cp.value_bytes()) == cp
    assert cp.key_bytes() == kstring(group) + kstring(topic) + struct.pack(">i", p)
    assert cp.value_bytes() == struct.pack(">hqq", 0, up, down) + kstring(meta)


@given(texts, int32s, int64s, int64s)
def test_offset_sync_round_trip(topic: str, p: int, up: int, down: int) -> None:
    sync = OffsetSync(topic, p, up, down)
    assert OffsetSync.from_record(sync.key_bytes(), sync.value_bytes()) == sync
    assert sync.key_bytes() == kstring(topic) + struct.pack(">i", p)
    assert sync.value_bytes() == struct.pack(">qq", up, down)


def test_topic_partition_and_defaults() -> None:
    assert OffsetSync("t", 1, 2, 3).topic_partition == TopicPartition("t", 1)
    assert Checkpoint("g", "t", 1, 2, 3).topic_partition == ("t", 1)
    assert Checkpoint("g", "t", 1, 2, 3).metadata == ""


# --- garbage in, clear errors out ---------------------------------------------------------------------------

ALL_RECORDS = [record for record, _, _ in GOLDEN]


@pytest.mark.parametrize("record", ALL_RECORDS, ids=lambda x: type(x).__name__)
def test_every_truncation_is_rejected(record: Heartbeat | Checkpoint | OffsetSync) -> None:
    cls = type(record)
    key, value = record.key_bytes(), record.value_bytes()
    for cut in range(len(key)):
        with pytest.raises(WireFormatError, match="key"):
            cls.from_record(key[:cut], value)
    for cut in range(len(value)):
        with pytest.raises(WireFormatError, match="value"):
            cls.from_record(key, value[:cut])


@pytest.mark.parametrize("record", ALL_RECORDS, ids=lambda x: type(x).__name__)
def test_trailing_bytes_are_rejected(record: Heartbeat | Checkpoint | OffsetSync) -> None:
    cls = type(record)
    with pytest.raises(WireFormatError, match="trailing"):
        cls.from_record(record.key_bytes() + b"\x00", record.value_bytes())
    with pytest.raises(WireFormatError, match="trailing"):
        cls.from_record(record.key_bytes(), record.value_bytes() + b"\x00")


def test_truncation_message_names_the_field() -> None:
    key = kstring("topic1")  # partition INT32 missing
    with pytest.raises(WireFormatError, match=r"offset-sync key is truncated: field 'partition'"):
        OffsetSync.from_record(key, struct.pack(">qq", 1, 2))
    with pytest.raises(WireFormatError, match=r"'topic' needs 10 bytes"):
        OffsetSync.from_record(struct.pack(">h", 10) + b"abc", struct.pack(">qq", 1, 2))


def test_unknown_version_is_rejected() -> None:
    hb_key = kstring("a") + kstring("b")
    with pytest.raises(WireFormatError, match="version 1"):
        Heartbeat.from_record(hb_key, struct.pack(">hq", 1, 0))
    cp_key = kstring("g") + kstring("t") + struct.pack(">i", 0)
    with pytest.raises(WireFormatError, match="version -1"):
        Checkpoint.from_record(cp_key, struct.pack(">hqq", -1, 0, 0) + kstring(""))


def test_negative_string_length_is_rejected() -> None:
    # Type.STRING.read: "String length -1 cannot be negative" (STRING is not NULLABLE_STRING).
    with pytest.raises(WireFormatError, match="has length -1 < 0"):
        OffsetSync.from_record(struct.pack(">hi", -1, 0), struct.pack(">qq", 0, 0))


def test_invalid_utf8_is_rejected() -> None:
    with pytest.raises(WireFormatError, match="not UTF-8"):
        OffsetSync.from_record(struct.pack(">h", 2) + b"\xff\xfe" + struct.pack(">i", 0), bytes(16))


def test_non_bytes_input_is_rejected() -> None:
    with pytest.raises(WireFormatError, match="must be bytes"):
        OffsetSync.from_record("topic", bytes(16))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "build",
    [
        lambda: OffsetSync("t", INT32_MAX + 1, 0, 0),
        lambda: OffsetSync("t", 0, INT64_MAX + 1, 0),
        lambda: OffsetSync("t", 0, 0, INT64_MIN - 1),
        lambda: Heartbeat("a", "b", 2**64),
        lambda: Checkpoint("g", "t", INT32_MIN - 1, 0, 0),
        lambda: OffsetSync("t", True, 0, 0),
        lambda: OffsetSync("t", 0, 1.5, 0),  # type: ignore[arg-type]
        lambda: Checkpoint("g", "t", 0, 0, 0, None),  # type: ignore[arg-type]
        lambda: OffsetSync("x" * 32768, 0, 0, 0),
        lambda: Heartbeat("é" * 16384, "b", 0),
        lambda: Heartbeat("\ud800", "b", 0),
    ],
)
def test_unencodable_values_are_rejected(build: object) -> None:
    assert callable(build)
    with pytest.raises(WireFormatError):
        build()


def test_longest_string_is_accepted() -> None:
    sync = OffsetSync("x" * 32767, 0, 0, 0)
    assert sync.key_bytes()[:2] == b"\x7f\xff"
    assert OffsetSync.from_record(sync.key_bytes(), sync.value_bytes()) == sync


def test_wire_format_error_is_a_kmirror_error() -> None:
    assert issubclass(WireFormatError, KmirrorError)
