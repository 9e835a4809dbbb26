"""Committed group offsets read and written with their metadata byte for byte, through librdkafka's C API.

Why not confluent-kafka's `list_consumer_group_offsets` / `alter_consumer_group_offsets`: librdkafka copies a
result's partition list with `rd_kafka_topic_partition_list_copy`, which allocates `metadata_size` bytes for the
metadata and drops the NUL the response parser had put after it; confluent-kafka (2.16.1, `c_part_to_py`) then
`strdup`s the metadata as a C string, reading past its end up to some NUL in the heap. Metadata committed by a Java
client (Kafka Streams, MirrorMaker 2, kmirror's exactly-once writer), which carries no NUL of its own, comes back
with garbage appended: sometimes invalid UTF-8 (`TopicPartition.metadata` raises UnicodeDecodeError), sometimes
silently wrong text. The other way, `py_to_c_parts` sends `strlen(metadata) + 1` bytes: a Java reader sees the
metadata with a trailing "\\0". (confluentinc/librdkafka#4649.)

This module calls the same librdkafka (the one confluent-kafka's wheel ships and has already loaded) through ctypes,
with its own client instance, and reads `metadata`/`metadata_size` of each result partition itself, and writes
`metadata_size` = the UTF-8 length: exactly what MirrorMaker 2 and Java clients read and write. Each call answers
with `concurrent.futures.Future`s that resolve like confluent-kafka's (a `KafkaException` on failure), so the admin
adapter handles both the same way.

`available(config)` is False where this cannot be used: no librdkafka found, one older than 2.0 (no group-offsets
Admin API), or a configuration with a Python callback (`oauth_cb` for AWS_MSK_IAM) that a C client cannot call; the
admin adapter then uses confluent-kafka and treats read metadata as unknown.

The configuration (with resolved secrets) goes only to `rd_kafka_conf_set`, in memory; an error names the property,
never its value. Must not: log, print or keep a configuration value.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException

_RD_KAFKA_PRODUCER = 0
_RD_KAFKA_CONF_OK = 0
_RD_KAFKA_ADMIN_OP_ANY = 0
_MIN_VERSION = 0x020000FF  # 2.0.0: ListConsumerGroupOffsets / AlterConsumerGroupOffsets
_POLL_MS = 200


class _Partition(ctypes.Structure):
    """`rd_kafka_topic_partition_t` (rdkafka.h; unchanged since librdkafka 0.9)."""

    _fields_ = [
        ("topic", ctypes.c_char_p),
        ("partition", ctypes.c_int32),
        ("offset", ctypes.c_int64),
        ("metadata", ctypes.c_void_p),
        ("metadata_size", ctypes.c_size_t),
        ("opaque", ctypes.c_void_p),
        ("err", ctypes.c_int),
        ("_private", ctypes.c_void_p),
    ]


class _PartitionList(ctypes.Structure):
    """`rd_kafka_topic_partition_list_t`."""

    _fields_ = [("cnt", ctypes.c_int), ("size", ctypes.c_int), ("elems", ctypes.POINTER(_Partition))]


@dataclass(frozen=True)
class CommittedOffset:
    """One committed offset and its metadata exactly as stored (None when it is empty or null: librdkafka
    does not tell them apart)."""

    offset: int
    metadata: bytes | None


_P = ctypes.c_void_p
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "rd_kafka_version": (ctypes.c_int, []),
    "rd_kafka_conf_new": (_P, []),
    "rd_kafka_conf_set": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]),
    "rd_kafka_conf_destroy": (None, [_P]),
    "rd_kafka_new": (_P, [ctypes.c_int, _P, ctypes.c_char_p, ctypes.c_size_t]),
    "rd_kafka_destroy": (None, [_P]),
    "rd_kafka_queue_new": (_P, [_P]),
    "rd_kafka_queue_destroy": (None, [_P]),
    "rd_kafka_queue_poll": (_P, [_P, ctypes.c_int]),
    "rd_kafka_AdminOptions_new": (_P, [_P, ctypes.c_int]),
    "rd_kafka_AdminOptions_destroy": (None, [_P]),
    "rd_kafka_AdminOptions_set_request_timeout": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]),
    "rd_kafka_AdminOptions_set_opaque": (None, [_P, _P]),
    "rd_kafka_event_opaque": (_P, [_P]),
    "rd_kafka_event_error": (ctypes.c_int, [_P]),
    "rd_kafka_event_error_string": (ctypes.c_char_p, [_P]),
    "rd_kafka_event_destroy": (None, [_P]),
    "rd_kafka_err2name": (ctypes.c_char_p, [ctypes.c_int]),
    "rd_kafka_error_code": (ctypes.c_int, [_P]),
    "rd_kafka_error_string": (ctypes.c_char_p, [_P]),
    "rd_kafka_group_result_error": (_P, [_P]),
    "rd_kafka_group_result_partitions": (ctypes.POINTER(_PartitionList), [_P]),
    "rd_kafka_topic_partition_list_new": (ctypes.POINTER(_PartitionList), [ctypes.c_int]),
    "rd_kafka_topic_partition_list_add": (ctypes.POINTER(_Partition), [_P, ctypes.c_char_p, ctypes.c_int32]),
    "rd_kafka_topic_partition_list_destroy": (None, [_P]),
    "rd_kafka_ListConsumerGroupOffsets_new": (_P, [ctypes.c_char_p, _P]),
    "rd_kafka_ListConsumerGroupOffsets_destroy": (None, [_P]),
    "rd_kafka_ListConsumerGroupOffsets": (None, [_P, ctypes.POINTER(_P), ctypes.c_size_t, _P, _P]),
    "rd_kafka_event_ListConsumerGroupOffsets_result": (_P, [_P]),
    "rd_kafka_ListConsumerGroupOffsets_result_groups": (ctypes.POINTER(_P), [_P, ctypes.POINTER(ctypes.c_size_t)]),
    "rd_kafka_AlterConsumerGroupOffsets_new": (_P, [ctypes.c_char_p, _P]),
    "rd_kafka_AlterConsumerGroupOffsets_destroy": (None, [_P]),
    "rd_kafka_AlterConsumerGroupOffsets": (None, [_P, ctypes.POINTER(_P), ctypes.c_size_t, _P, _P]),
    "rd_kafka_event_AlterConsumerGroupOffsets_result": (_P, [_P]),
    "rd_kafka_AlterConsumerGroupOffsets_result_groups": (ctypes.POINTER(_P), [_P, ctypes.POINTER(ctypes.c_size_t)]),
}

_lib_lock = threading.Lock()
_lib: Any = None
_lib_problem: str | None = None


def _library_paths() -> list[str]:
    """confluent-kafka's own librdkafka first (the wheel's `confluent_kafka.libs`), then the system's."""
    import confluent_kafka

    site = os.path.dirname(os.path.dirname(os.path.abspath(confluent_kafka.__file__)))
    paths = sorted(glob.glob(os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*")))
    system = ctypes.util.find_library("rdkafka")
    return [*paths, *([system] if system else [])]


def library() -> Any:
    """The loaded librdkafka with the signatures above, or None (`library_problem()` says why)."""
    global _lib, _lib_problem
    with _lib_lock:
        if _lib is not None or _lib_problem is not None:
            return _lib
        problems = []
        for path in _library_paths():
            try:
                lib = ctypes.CDLL(path)
                for name, (restype, argtypes) in _SIGNATURES.items():
                    fn = getattr(lib, name)
                    fn.restype, fn.argtypes = restype, argtypes
            except (OSError, AttributeError) as exc:
                problems.append(f"{path}: {exc}")
                continue
            if lib.rd_kafka_version() < _MIN_VERSION:
                problems.append(f"{path}: librdkafka {lib.rd_kafka_version():#x} is older than 2.0")
                continue
            _lib = lib
            return _lib
        _lib_problem = "; ".join(problems) or "no librdkafka found next to confluent-kafka or on the system"
        return None


def library_problem() -> str | None:
    library()
    return _lib_problem


def available(config: Mapping[str, Any]) -> bool:
    """Whether `ExactOffsets(config)` can be used: librdkafka found, and no Python callback in `config`."""
    return not any(callable(v) for v in config.values()) and library() is not None


def _conf_value(value: Any) -> bytes:
    if isinstance(value, bool):
        return b"true" if value else b"false"
    return str(value).encode()


def _error(code: int, reason: str) -> KafkaException:
    return KafkaException(KafkaError(code, reason))


class _Handle:
    """One rd_kafka_t, destroyed when its owner is collected."""

    def __init__(self, lib: Any, config: Mapping[str, Any]) -> None:
        errstr = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        settings = {k: v for k, v in config.items() if k not in ("logger", "log_level")}
        settings["log_level"] = 0  # errors reach the caller as results, not as lines on stderr
        for key, value in settings.items():
            if lib.rd_kafka_conf_set(conf, key.encode(), _conf_value(value), errstr, len(errstr)) != _RD_KAFKA_CONF_OK:
                lib.rd_kafka_conf_destroy(conf)
                raise ValueError(f"librdkafka does not take the client property '{key}'")  # its value is not shown
        rk = lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, len(errstr))
        if not rk:
            lib.rd_kafka_conf_destroy(conf)
            raise ValueError(f"librdkafka could not create a client: {errstr.value.decode(errors='replace')}")
        self.rk = rk
        self._finalizer = weakref.finalize(self, lib.rd_kafka_destroy, rk)


class ExactOffsets:
    """Group offsets with exact metadata, on one cluster (`config`: a librdkafka configuration without callbacks)."""

    def __init__(self, config: Mapping[str, Any], timeout: float) -> None:
        lib = library()
        if lib is None:
            raise RuntimeError(f"librdkafka's C API is not usable: {library_problem()}")
        self._lib = lib
        self._config = dict(config)
        self._handle: _Handle | None = None
        self._handle_lock = threading.Lock()
        #: Why the client could not be created (`usable()` is False), naming the property, never its value.
        self.problem: str | None = None
        self.timeout = timeout

    def _rk(self) -> Any:
        with self._handle_lock:
            if self._handle is None:
                self._handle = _Handle(self._lib, self._config)
            return self._handle.rk

    def usable(self) -> bool:
        """Whether the client could be created (False when librdkafka refused a property of the configuration:
        the admin adapter then uses confluent-kafka, whose configuration handling differs)."""
        if self.problem is None:
            try:
                self._rk()
            except ValueError as exc:
                self.problem = str(exc)
        return self.problem is None

    def close(self) -> None:
        with self._handle_lock:
            handle, self._handle = self._handle, None
        if handle is not None:
            handle._finalizer()

    # -- reads ----------------------------------------------------------------------------------------------
    def list_group_offsets(self, groups: Sequence[str]) -> dict[str, Future[dict[tuple[str, int], CommittedOffset]]]:
        """Every committed offset of each group (one request a group, all in flight at once), waited for here."""
        lib, rk = self._lib, self._rk()
        return self._run(
            groups,
            lambda group, options, queue: self._call(
                lib.rd_kafka_ListConsumerGroupOffsets_new(group.encode(), None),
                lib.rd_kafka_ListConsumerGroupOffsets,
                lib.rd_kafka_ListConsumerGroupOffsets_destroy,
                rk,
                options,
                queue,
            ),
            lambda event: self._groups(
                lib.rd_kafka_event_ListConsumerGroupOffsets_result(event),
                lib.rd_kafka_ListConsumerGroupOffsets_result_groups,
            ),
            self._committed,
        )

    def _committed(self, partitions: Any) -> dict[tuple[str, int], CommittedOffset]:
        out = {}
        plist = partitions.contents if partitions else None
        for i in range(plist.cnt if plist is not None else 0):
            p = plist.elems[i]  # type: ignore[union-attr]
            topic = (p.topic or b"").decode()
            if p.err:
                raise _error(p.err, f"{topic} [{p.partition}]: {self._lib.rd_kafka_err2name(p.err).decode()}")
            meta = ctypes.string_at(p.metadata, p.metadata_size) if p.metadata else None
            out[(topic, p.partition)] = CommittedOffset(p.offset, meta)
        return out

    # -- writes ---------------------------------------------------------------------------------------------
    def alter_group_offsets(
        self, group: str, offsets: Mapping[tuple[str, int], int], metadata: Mapping[tuple[str, int], bytes]
    ) -> Future[None]:
        """Commit `offsets` for `group`, each with exactly the bytes of `metadata` (none when not given)."""
        lib, rk = self._lib, self._rk()
        keep: list[Any] = []  # the metadata buffers, alive until librdkafka has copied the list

        def send(name: str, options: Any, queue: Any) -> None:
            plist = lib.rd_kafka_topic_partition_list_new(max(len(offsets), 1))
            try:
                for (topic, partition), offset in offsets.items():
                    p = lib.rd_kafka_topic_partition_list_add(plist, topic.encode(), partition).contents
                    p.offset = offset
                    meta = metadata.get((topic, partition))
                    if meta:
                        buf = ctypes.create_string_buffer(meta, len(meta))
                        keep.append(buf)
                        p.metadata, p.metadata_size = ctypes.cast(buf, ctypes.c_void_p), len(meta)
                request = lib.rd_kafka_AlterConsumerGroupOffsets_new(name.encode(), plist)  # copies the list
            finally:
                for i in range(plist.contents.cnt):  # the buffers are Python's: librdkafka must not free them
                    plist.contents.elems[i].metadata, plist.contents.elems[i].metadata_size = None, 0
                lib.rd_kafka_topic_partition_list_destroy(plist)
            self._call(
                request,
                lib.rd_kafka_AlterConsumerGroupOffsets,
                lib.rd_kafka_AlterConsumerGroupOffsets_destroy,
                rk,
                options,
                queue,
            )

        def check(partitions: Any) -> None:
            self._committed(partitions)  # raises on the first partition the broker refused

        return self._run(
            [group],
            send,
            lambda event: self._groups(
                lib.rd_kafka_event_AlterConsumerGroupOffsets_result(event),
                lib.rd_kafka_AlterConsumerGroupOffsets_result_groups,
            ),
            check,
        )[group]

    # -- plumbing -------------------------------------------------------------------------------------------
    @staticmethod
    def _call(request: Any, fn: Any, destroy: Any, rk: Any, options: Any, queue: Any) -> None:
        arr = (ctypes.c_void_p * 1)(request)
        try:
            fn(rk, arr, 1, options, queue)  # copies the request
        finally:
            destroy(request)

    def _groups(self, result: Any, groups_of: Any) -> list[Any]:
        count = ctypes.c_size_t(0)
        arr = groups_of(result, ctypes.byref(count)) if result else None
        return [arr[i] for i in range(count.value)] if arr else []

    def _run(self, groups: Sequence[str], send: Any, results_of: Any, convert: Any) -> dict[str, Future[Any]]:
        """Send one request per group on a queue of its own, each tagged with its index; wait for every answer."""
        lib, rk = self._lib, self._rk()
        futures: dict[str, Future[Any]] = {g: Future() for g in groups}
        if not groups:
            return futures
        queue = lib.rd_kafka_queue_new(rk)
        errstr = ctypes.create_string_buffer(256)
        pending = set(range(len(groups)))
        try:
            for i, group in enumerate(groups):
                options = lib.rd_kafka_AdminOptions_new(rk, _RD_KAFKA_ADMIN_OP_ANY)
                try:
                    lib.rd_kafka_AdminOptions_set_request_timeout(options, int(self.timeout * 1000), errstr, 256)
                    lib.rd_kafka_AdminOptions_set_opaque(options, ctypes.c_void_p(i + 1))
                    send(group, options, queue)
                finally:
                    lib.rd_kafka_AdminOptions_destroy(options)
            deadline = time.monotonic() + self.timeout + 5
            while pending and time.monotonic() < deadline:
                event = lib.rd_kafka_queue_poll(queue, _POLL_MS)
                if not event:
                    continue
                try:
                    index = (lib.rd_kafka_event_opaque(event) or 0) - 1
                    if index not in pending:
                        continue
                    pending.discard(index)
                    futures[groups[index]] = self._settle(event, results_of, convert)
                finally:
                    lib.rd_kafka_event_destroy(event)
        finally:
            lib.rd_kafka_queue_destroy(queue)
        for index in pending:
            futures[groups[index]].set_exception(
                _error(KafkaError._TIMED_OUT, f"no answer within {self.timeout + 5:.0f}s")
            )
        return futures

    def _settle(self, event: Any, results_of: Any, convert: Any) -> Future[Any]:
        lib = self._lib
        future: Future[Any] = Future()
        code = lib.rd_kafka_event_error(event)
        if code:
            future.set_exception(_error(code, (lib.rd_kafka_event_error_string(event) or b"").decode()))
            return future
        results = results_of(event)
        if len(results) != 1:
            future.set_exception(_error(KafkaError._FAIL, f"{len(results)} group results for one group"))
            return future
        error = lib.rd_kafka_group_result_error(results[0])
        if error:
            code = lib.rd_kafka_error_code(error)
            future.set_exception(_error(code, (lib.rd_kafka_error_string(error) or b"").decode()))
            return future
        try:
            future.set_result(convert(lib.rd_kafka_group_result_partitions(results[0])))
        except KafkaException as exc:
            future.set_exception(exc)
        return future
