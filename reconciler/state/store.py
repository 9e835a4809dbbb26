"""StateStore: reads and writes kmirror's state topic (a compacted, single-partition topic on the state cluster).

Reading folds the whole partition (read_committed) into a `StateSnapshot`. Writing happens only inside an
`ApplySession`, which the lock hands out: every write is a Kafka transaction of a producer whose
`transactional.id` is the same for every kmirror writing this state topic, so a newer holder's
`init_transactions` fences an older one (Kafka's own zombie fencing) and a writer that lost the lock cannot
write. Each change is recorded in its own transaction as it completes: a crash leaves the record true.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from reconciler.core.topic_rules import durable_configs, internal_replication_factor
from reconciler.errors import KmirrorError
from reconciler.kafka_clients.admin import KafkaAdmin, unreachable
from reconciler.plan.forms import Form
from reconciler.spec.client_config import ClientConfig
from reconciler.state.records import (
    HISTORY_PART_SIZE,
    LEASE,
    LOCK,
    META,
    RESOURCE,
    ChangeRecord,
    HistoryEntry,
    HistoryPart,
    MetaRecord,
    Record,
    RecordEntry,
    ResourceRecord,
    StateSnapshot,
    Who,
    encode,
    fold,
    history_key,
    history_part_key,
)

PARTITION = 0
LOCK_PREFIX, LEASE_PREFIX = LOCK.encode(), LEASE.encode()


class StateError(KmirrorError):
    """The state topic could not be read or written."""


class FencedError(StateError):
    """Another kmirror took the state lock; this one may no longer write."""


def whoami() -> Who:
    return Who(
        user=os.environ.get("GITHUB_ACTOR") or _safe(getpass.getuser),
        host=socket.gethostname(),
        pid=os.getpid(),
        git_commit=os.environ.get("GITHUB_SHA") or _git_commit(),
        ci=bool(os.environ.get("CI")),
    )


class StateStore:
    def __init__(self, cluster: str, config: ClientConfig, topic: str, timeout: float = 30.0) -> None:
        self.cluster = cluster
        self.topic = topic
        self.timeout = timeout
        self._config = dict(config)

    # -- reading ----------------------------------------------------------------------------------------------
    def read(self) -> StateSnapshot:
        """The folded state; an absent topic is an empty state (nothing applied yet)."""
        consumer = Consumer(
            {
                **self._config,
                "group.id": f"kmirror-state-reader-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                # The end is known from an empty fetch, which the broker would hold for 500 ms by default.
                "fetch.wait.max.ms": 10,
                # Asking for the state topic's metadata must never create it (uncompacted).
                "allow.auto.create.topics": False,
                "log_level": 0,
            }
        )
        try:
            exists, cluster_id = self._exists(consumer)
            if not exists:
                return StateSnapshot(cluster_id=cluster_id)
            low, high = consumer.get_watermark_offsets(TopicPartition(self.topic, PARTITION), timeout=self.timeout)
            records: list[tuple[str, bytes | None, int]] = []
            append_times: dict[int, float] = {}  # broker time of the lock and lease records (LogAppendTime)
            log_time: float | None = None
            if high > low:
                consumer.assign([TopicPartition(self.topic, PARTITION, low)])
                deadline = time.monotonic() + self.timeout
                while time.monotonic() < deadline:
                    batch = consumer.consume(num_messages=2000, timeout=0.1)
                    eof = False
                    for msg in batch:
                        err = msg.error()
                        if err is not None:
                            if err.code() == KafkaError._PARTITION_EOF:
                                eof = True
                                continue
                            raise StateError(f"reading state topic {self.topic} on {self.cluster}: {err.str()}")
                        key = msg.key()
                        kind, stamp = msg.timestamp()
                        if kind == TIMESTAMP_LOG_APPEND_TIME:
                            log_time = stamp / 1000
                            if key is not None and key.startswith((LOCK_PREFIX, LEASE_PREFIX)):
                                append_times[int(msg.offset())] = stamp / 1000
                        if key is not None:
                            records.append((key.decode(), msg.value(), int(msg.offset())))
                    if eof:
                        break
                else:
                    raise StateError(
                        f"reading state topic {self.topic} on '{self.cluster}' did not reach its end within "
                        f"{self.timeout:.0f}s (an open transaction of a stuck apply holds it back; "
                        "see `kmirror state history`)"
                    )
            return dataclasses.replace(fold(records, append_times, log_time), cluster_id=cluster_id)
        finally:
            consumer.close()

    def _exists(self, consumer: Consumer) -> tuple[bool, str | None]:
        """Whether the state topic exists, from a metadata request for it alone (not the cluster's every topic), and
        the id of the cluster that holds it."""
        try:
            metadata = consumer.list_topics(self.topic, timeout=self.timeout)
        except KafkaException as exc:
            bootstrap = str(self._config.get("bootstrap.servers", "?"))
            raise unreachable(self.cluster, bootstrap, self.timeout, exc) from exc
        topic = metadata.topics.get(self.topic)
        return topic is not None and not (topic.error is not None and not topic.partitions), metadata.cluster_id

    # -- writing ----------------------------------------------------------------------------------------------
    def ensure_topic(self) -> None:
        admin = KafkaAdmin(self.cluster, self._config, self.timeout)
        if self.topic in admin.topics():
            # The lock judges leases by the broker's append times: a state topic made before keeps them from now on
            # (best effort: without them, leases are judged by the hosts' clocks as before).
            admin.alter_topic_configs({self.topic: ({"message.timestamp.type": "LogAppendTime"}, [])})
            return
        # As the planner creates every internal topic: min(3, brokers) replicas, min.insync.replicas to match.
        rf = internal_replication_factor(admin.brokers)
        configs = {"cleanup.policy": "compact", "message.timestamp.type": "LogAppendTime", **durable_configs(rf)}
        [outcome] = admin.create_topics([(self.topic, 1, rf, configs)])
        if not outcome.ok:
            raise StateError(f"could not create state topic {self.topic} on '{self.cluster}': {outcome.message}")

    def append(self, records: Sequence[tuple[str, Record | None]]) -> None:
        """Plain (non-transactional, idempotent) appends: used for lock claims, leases and releases."""
        producer = Producer({**self._config, "enable.idempotence": True, "log_level": 0})
        for key, value in records:
            producer.produce(self.topic, key=key.encode(), value=encode(value), partition=PARTITION)
        if producer.flush(self.timeout) != 0:
            raise StateError(f"could not write to state topic {self.topic} on '{self.cluster}' in time")

    def fencing_producer(self) -> Producer:
        """A transactional producer; creating it fences every older one of any kmirror on this state topic."""
        producer = Producer(
            {
                **self._config,
                "transactional.id": f"kmirror-state-{self.topic}",
                "transaction.timeout.ms": 60000,
                "log_level": 0,
            }
        )
        try:
            producer.init_transactions(self.timeout)
        except KafkaException as exc:
            raise StateError(f"could not take the writer role on state topic {self.topic}: {exc}") from exc
        return producer


class ApplySession:
    """The writes of one apply: a new serial, then one transaction per completed change, then the outcome."""

    def __init__(
        self,
        store: StateStore,
        snapshot: StateSnapshot,
        plan_id: str,
        spec_digest: str,
        lock_id: str,
        operation: str = "apply",
        *,
        flow: str | None = None,
        addresses: Sequence[str] | None = None,
    ):
        """`operation`: what writes (apply, cutover, a state edit), kept in the history entry with the cutover's
        `flow` or the state edit's `addresses`."""
        self.store = store
        self.lineage = snapshot.lineage or str(uuid.uuid4())
        self.serial = snapshot.serial + 1
        self._producer = store.fencing_producer()
        about: dict[str, str | tuple[str, ...]] = {}
        if flow is not None:
            about["flow"] = flow
        if addresses is not None:
            about["addresses"] = tuple(addresses)
        self._history = HistoryEntry.model_validate(
            {
                "serial": self.serial,
                "lineage": self.lineage,
                "plan_id": plan_id,
                "spec_digest": spec_digest,
                "lock_id": lock_id,
                "operation": operation,
                **about,
                "who": whoami(),
                "started_at": _now(),
                "finished_at": None,
                "status": "running",
            }
        )
        self._changes: list[ChangeRecord] = []
        self._parts_written = 0
        self._changes_written = 0
        meta = MetaRecord(lineage=self.lineage, serial=self.serial, updated_at=_now())
        self._write([(META, meta), self._hist()])

    def intend(self, items: Sequence[tuple[str, str, Form | None]]) -> None:
        """Record resources about to be created, as pending, in one transaction before the call that creates them.

        A crash between the broker creating them and `record` leaves them owned (pending), so the next plan
        treats them as kmirror's own and plans exactly the remaining work, instead of calling them foreign.
        """
        records: list[tuple[str, Record | None]] = [
            (RESOURCE + address, self._resource(address, kind, attributes, pending=True))
            for address, kind, attributes in items
            if attributes is not None
        ]
        if records:
            self._write(records)

    def record(
        self,
        address: str,
        kind: str,
        attributes: Form | None,
        action: str,
        outcome: str,
        message: str = "",
    ) -> None:
        """Record one change as done (attributes = its applied form; None: resource gone) or as failed/skipped."""
        self.record_many([(address, kind, attributes, action, outcome, message)])

    def record_many(self, entries: Sequence[RecordEntry]) -> None:
        """Record the changes one batch call completed, in one transaction.

        A create that did not happen (`failed`) withdraws its pending record; one whose fate is not known
        (`unconfirmed`: its answer was lost and the controller did not say) keeps it, so the next plan confirms it.
        Other failures leave the record as it was.
        """
        records: list[tuple[str, Record | None]] = []
        for address, kind, attributes, action, outcome, message in entries:
            self._changes.append(ChangeRecord(address=address, action=action, outcome=outcome, message=message))
            if outcome == "applied":
                value = None if attributes is None else self._resource(address, kind, attributes)
                records.append((RESOURCE + address, value))
            elif action == "create" and outcome == "failed":
                records.append((RESOURCE + address, None))
        records += self._parts()
        records.append(self._hist())
        self._write(records)

    def _resource(self, address: str, kind: str, attributes: Form, pending: bool = False) -> ResourceRecord:
        record = ResourceRecord(
            address=address,
            kind=kind,
            attributes=attributes.model_dump(mode="json"),
            serial=self.serial,
            plan_id=self._history.plan_id,
            applied_at=_now(),
        )
        # `pending` is written only when true, as every version has
        return record.model_copy(update={"pending": True}) if pending else record

    def finish(self, status: str) -> None:
        self._history = self._history.model_copy(update={"status": status, "finished_at": _now()})
        self._write([self._hist()])

    def _hist(self) -> tuple[str, HistoryEntry]:
        """The apply's history head (who, when, status, counts); outcomes go to parts (see `_parts`)."""
        counts: dict[str, int] = {}
        for c in self._changes:
            counts[c.outcome] = counts.get(c.outcome, 0) + 1
        return history_key(self.serial), self._history.model_copy(
            update={"counts": counts, "parts": self._parts_written}
        )

    def _parts(self) -> list[tuple[str, Record | None]]:
        """The history parts holding outcomes added since the last write (rewriting only the last, growing one)."""
        first = (
            self._parts_written - 1
            if self._parts_written and self._changes_written % HISTORY_PART_SIZE
            else self._parts_written
        )
        records: list[tuple[str, Record | None]] = []
        part = max(first, 0)
        while part * HISTORY_PART_SIZE < len(self._changes):
            chunk = tuple(self._changes[part * HISTORY_PART_SIZE : (part + 1) * HISTORY_PART_SIZE])
            records.append((history_part_key(self.serial, part), HistoryPart(changes=chunk)))
            part += 1
        self._parts_written = part
        self._changes_written = len(self._changes)
        return records

    def _write(self, records: Sequence[tuple[str, Record | None]]) -> None:
        p = self._producer
        try:
            p.begin_transaction()
            for key, value in records:
                p.produce(self.store.topic, key=key.encode(), value=encode(value), partition=PARTITION)
            p.commit_transaction(self.store.timeout)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED):
                raise FencedError(
                    "another kmirror took the state lock (force-unlock or an expired lease); this apply stopped "
                    "writing. Run `kmirror plan` to see what is left."
                ) from exc
            raise StateError(f"writing state topic {self.store.topic}: {exc}") from exc


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _safe(fn: Callable[[], object]) -> str:
    try:
        return str(fn())
    except Exception:
        return "unknown"


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=2, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
