"""The query of a flow with `replication.delivery: exactly_once`: Kafka transactions per source partition.

The record path is the at-least-once one up to the projection (the Kafka source, `read_committed`, the `observe`
aggregate); then, instead of Spark's Kafka sink, a JVM `ForeachWriter` (`jvm/ExactlyOnceWriter.java`) hands each
row to the transactional lane of its source partition (`jvm/TransactionalLane.java`), in both modes: a
`processingTime` trigger in micro-batch mode, Spark 4.1's real-time trigger in real-time mode (Spark allows the
foreach sink there). A lane:
  - owns one transactional producer whose `transactional.id` is `transactional_id(state topic, flow, topic,
    partition)`: stable across restarts, so the producer of a zombie task or driver is fenced when the new one
    calls `initTransactions`;
  - after that, reads the committed offset of `eos_group(state topic, flow)` on the target for its remote
    partition (offsets are kept against the remote topic, which exists on the target; the value is the next
    SOURCE offset), and skips every row below it whatever Spark's checkpoint replays;
  - writes records in source order, each transaction ending with `sendOffsetsToTransaction` of the next source
    offset, committed on a pool thread once older than `spark.kmirror.transactionIntervalMs` (default 10 ms;
    found due by the next row or a timer), and when the Spark task ends; the task never waits for a commit (rows
    that come meanwhile are queued and open the lane's next transaction), so a lane commits back to back and the
    commit's own time sets the latency; an error aborts, drops the lane and fails the task (Spark retries it);
  - writes the offset-syncs with MM2's rule from the offsets its records landed at: in the same transaction when
    the syncs topic is on the target (`offsets.syncs_location: target`), else through a plain producer after the
    commit.
The records get the same topic, partition, key, value, headers and timestamp as at-least-once's; the writer sets
the timestamp itself (no `__kmirror.source` header, no interceptor on the transactional producers).

Why a `ForeachWriter` and not a DataSource V2 writer: it is the one sink Spark's real-time mode allows besides
Kafka's, it is a single small class, and the transaction boundaries (time-based, per source partition) do not
follow Spark's commit protocol anyway: the target's group offset, not Spark's checkpoint, says what was written.

Must not: log the writer's settings (they hold the target's client secrets), or run Python per record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.core.policy.filters import eos_group
from reconciler.replication.interceptor import DELAYED_SYNCS_FLUSH_MS
from reconciler.spec import transactions
from reconciler.spec.models import FlowSpec

WRITER_CLASS = "io.kmirror.replication.ExactlyOnceWriter"
#: How old a transaction gets before it is committed (ms): read_committed consumers see records this much later.
TRANSACTION_INTERVAL = transactions.TRANSACTION_INTERVAL_SETTING
DEFAULT_TRANSACTION_INTERVAL_MS = transactions.DEFAULT_TRANSACTION_INTERVAL_MS
#: `replication.producer` may set another (see reconciler.spec.transactions).
DEFAULT_TRANSACTION_TIMEOUT_MS = str(transactions.DEFAULT_TRANSACTION_TIMEOUT_MS)
#: Producer settings of the at-least-once sink that must not reach the transactional producers.
_NOT_FOR_TRANSACTIONS = ("interceptor.classes",)


def transactional_id_prefix(state_topic: str, flow: str) -> str:
    """`kmirror-eos/<state topic>/<flow>/`: every transactional id of the flow starts with it (one ACL prefix).

    `/` separates the parts because no topic name and no flow name holds one: flow `a` with topic `b.c` and flow
    `a.b` with topic `c` get different ids, and flow `a`'s prefix does not cover flow `a.b`'s."""
    return f"kmirror-eos/{state_topic}/{flow}/"


def legacy_transactional_id_prefix(state_topic: str, flow: str) -> str:
    """The prefix of kmirror versions before 2026-11-27 (`kmirror-eos.<state topic>.<flow>.`): a job of this
    version fences those ids too where the group's positions were written by one."""
    return f"{eos_group(state_topic, flow)}."


def transactional_id(state_topic: str, flow: str, topic: str, partition: int) -> str:
    """The transactional id of one source partition's writer: `<prefix><source topic>/<partition>`."""
    return f"{transactional_id_prefix(state_topic, flow)}{topic}/{partition}"


def transaction_timeout_ms(producer: Mapping[str, str]) -> int:
    """The transactional producers' `transaction.timeout.ms` (validated when the file was loaded)."""
    timeout = transactions.transaction_timeout_ms(producer)
    if timeout is None:
        raise ValueError(f"transaction.timeout.ms is {producer.get('transaction.timeout.ms')!r}; it must be a number")
    return timeout


def interval_problem(interval_ms: int, timeout_ms: int) -> str | None:
    """`transactions.interval_problem` with its hint: why the job cannot run with these settings."""
    problem = transactions.interval_problem(interval_ms, timeout_ms)
    return None if problem is None else f"{problem}; {transactions.interval_hint(interval_ms)}"


def transaction_interval_ms(value: Any) -> int:
    """`spark.kmirror.transactionIntervalMs`, checked (a positive number of milliseconds)."""
    try:
        ms = int(str(value).strip())
    except ValueError:
        raise ValueError(f"{TRANSACTION_INTERVAL} is {value!r}; it must be a number of milliseconds") from None
    if ms <= 0:
        raise ValueError(f"{TRANSACTION_INTERVAL} is {value!r}; it must be more than 0")
    return ms


def producer_properties(sink: Mapping[str, str]) -> dict[str, str]:
    """The transactional producers' properties from the at-least-once sink's options (`kafka.`-prefixed: the
    target's client properties, the defaults, the flow's `replication.producer`, idempotence and acks=all),
    without the interceptor, with a transaction timeout unless the flow sets one."""
    props = {k.removeprefix("kafka."): v for k, v in sink.items() if k.startswith("kafka.")}
    props = {k: v for k, v in props.items() if k not in _NOT_FOR_TRANSACTIONS and not k.startswith("kmirror.")}
    props.setdefault("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS)
    props.update({"enable.idempotence": "true", "acks": "all"})
    return props


def writer_settings(
    *,
    state_topic: str,
    flow: str,
    producer: Mapping[str, str],
    source: Mapping[str, str],
    generation: int,
    run: str,
    syncs_topic: str | None,
    syncs_in_transaction: bool,
    syncs_client: Mapping[str, str],
    offset_lag_max: int,
    interval_ms: int = DEFAULT_TRANSACTION_INTERVAL_MS,
    flush_ms: int = DELAYED_SYNCS_FLUSH_MS,
) -> dict[str, str]:
    """The settings map `ExactlyOnceWriter` is built with (see its Javadoc). Holds secrets: never log it."""
    settings = {f"producer.{k}": v for k, v in producer.items()}
    settings.update({f"source.{k}": v for k, v in source.items()})
    settings.update(
        {
            "transactional.id.prefix": transactional_id_prefix(state_topic, flow),
            "legacy.transactional.id.prefix": legacy_transactional_id_prefix(state_topic, flow),
            "generation": str(generation),
            "run": run,
            "group": eos_group(state_topic, flow),
            "transaction.interval.ms": str(interval_ms),
            "offset.lag.max": str(offset_lag_max),
            "syncs.flush.ms": str(flush_ms),
        }
    )
    if syncs_topic is not None:
        settings["syncs.topic"] = syncs_topic
        settings["syncs.in.transaction"] = "true" if syncs_in_transaction else "false"
        if not syncs_in_transaction:
            settings.update({f"syncs.client.{k}": v for k, v in syncs_client.items()})
    return settings


def projection(flow: FlowSpec) -> list[str]:
    """The writer's columns (ExactlyOnceWriter's order) as SQL expressions over the Kafka source's columns."""
    return [
        f"{flow.spark_remote_topic_expr('topic')} AS topic",
        "partition",
        "key",
        "value",
        "headers",
        "topic AS sourceTopic",
        "offset AS sourceOffset",
        "unix_millis(timestamp) AS timestampMs",
    ]


def start_query(
    spark: Any,
    observed: Any,
    flow: FlowSpec,
    settings: Mapping[str, str],
    *,
    checkpoint: str,
    mode: str,
    interval: str,
) -> Any:
    """Start the flow's query writing through `ExactlyOnceWriter` (`observed`: the source stream, observed)."""
    jvm = spark.sparkContext._jvm
    jsettings = jvm.java.util.HashMap()
    for key, value in settings.items():
        jsettings.put(key, value)
    writer = (
        observed.selectExpr(*projection(flow))
        .writeStream.queryName(f"kmirror-{flow.name}")
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
    )
    writer._jwrite = writer._jwrite.foreach(jvm.io.kmirror.replication.ExactlyOnceWriter(jsettings))
    if mode == "realtime":
        # pyspark 4.1 has no keyword for it yet; the JVM's RealTimeTrigger is what `realTime=` will set.
        trigger = jvm.org.apache.spark.sql.execution.streaming.RealTimeTrigger.create(interval)
        writer._jwrite = writer._jwrite.trigger(trigger)
        return writer.start()
    return writer.trigger(processingTime=interval).start()
