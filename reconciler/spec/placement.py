"""Which Spark execution mode a flow's job runs in, and how many task slots and tasks it has.

Real-time mode (Spark 4.1) is the fast path: long-running tasks forward each record as it arrives (p50 ~20 ms),
at about MM2's CPU per record. The source partitions are dealt to the job's tasks (`jvm/GroupedKafkaSource.java`),
each reading its share with one consumer; a task needs a task slot for as long as the job runs. How many tasks:

- `spark.kmirror.realtimeTasks` when the file sets it (at most one per slot);
- else, where kmirror sizes the slots itself, `DEFAULT_REALTIME_TASKS` (2): `deploy: local` with no
  `spark.master` gets `local[N]` with N = twice the tasks (at least 4; idle local slots cost nothing), and a
  cluster deploy with no `spark.cores.max` asks for one core per task;
- else one task per slot the job has: an explicit `local[N]`, a `spark.cores.max`, or the cores a cluster grants
  (fewer than asked on a full cluster: fewer tasks, still real-time).

Any number of partitions runs in real-time mode: a task's consumer and the producer its executor shares are
sized by the partitions they hold (`realtime_client_sizing`), within budgets that do not grow with the count.
Micro-batch mode is for what real-time mode cannot do, a `spark.kmirror.triggerInterval` under 5 s (a
micro-batch trigger; real-time mode's interval is a checkpoint interval of 5 s or more), or when
`spark.kmirror.mode: microbatch` asks for it. Partitions added while a job runs join its tasks.

Pure: values in, values out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reconciler.spec.defaults import DEFAULT_REALTIME_TASKS, REALTIME_MIN_INTERVAL_SECONDS, REALTIME_TASKS_SETTING
from reconciler.spec.intervals import interval_seconds, trigger_interval

MODE_SETTING = "spark.kmirror.mode"
INTERVAL_SETTING = "spark.kmirror.triggerInterval"
CORES_SETTING = "spark.cores.max"
#: Local slots never go below this (the job's own threads, a source partition or two added later).
MIN_LOCAL_SLOTS = 4
_LOCAL = re.compile(r"^local\[(\d+)(?:,\s*\d+)?\]$")


@dataclass(frozen=True)
class Placement:
    """The mode a job runs in, the task slots it has, and the Spark settings that give them."""

    mode: str  # "realtime" or "microbatch"
    slots: int | None  # task slots the job has or asks for; None: whatever the cluster gives
    reason: str  # one clause for a plan row or the status: why this mode
    master: str | None = None  # the `spark.master` the job sets itself (deploy local, none in the file)
    cores_max: int | None = None  # the `spark.cores.max` the job asks a standalone master for
    tasks: int | None = None  # real-time mode: the most tasks the source partitions are dealt to

    def describe(self) -> str:
        """`real-time mode (13 source partitions in 2 tasks; local[4])`: for plan rows and logs."""
        where = self.master or (f"spark.cores.max {self.cores_max}" if self.cores_max else None)
        mode = "real-time mode" if self.mode == "realtime" else "micro-batch mode"
        return f"{mode} ({self.reason}{'; ' + where if where else ''})"


def local_slots(master: str) -> int | None:
    """Task slots of a `local[N]` master; None for `local[*]`, `local` and other masters."""
    if master == "local":
        return 1
    match = _LOCAL.match(master.strip())
    return int(match.group(1)) if match else None


def realtime_task_setting(conf: dict[str, object]) -> int | None:
    """`spark.kmirror.realtimeTasks` (validated when the file is loaded), or None when the file leaves it out."""
    value = conf.get(REALTIME_TASKS_SETTING)
    return None if value is None else max(1, int(str(value).strip()))


def requested_mode(conf: dict[str, object]) -> str | None:
    """`spark.kmirror.mode` as written (lower case), or None when the file leaves the choice to kmirror."""
    value = conf.get(MODE_SETTING)
    return None if value is None else str(value).strip().lower()


def choose_placement(
    *, deploy: str, master: str | None, conf: dict[str, object], partitions: int, slots_now: int | None = None
) -> Placement:
    """The placement of a job replicating `partitions` source partitions.

    `master` is `spark.master` from the file (None: kmirror sizes it); `slots_now`, when known, the task slots
    the running Spark context has (a standalone cluster may grant fewer cores than asked).
    """
    wanted = requested_mode(conf)
    if wanted == "microbatch":
        return Placement("microbatch", slots_now, "spark.kmirror.mode is microbatch")
    interval = conf.get(INTERVAL_SETTING)
    seconds = None if interval is None else interval_seconds(trigger_interval(str(interval)))
    if wanted is None and seconds is not None and seconds < REALTIME_MIN_INTERVAL_SECONDS:
        reason = (
            f"{INTERVAL_SETTING} {interval} is a micro-batch trigger (real-time mode checkpoints every 5 s or more)"
        )
        return Placement("microbatch", slots_now, reason)
    setting = realtime_task_setting(conf)
    master_set = cores_max = None
    slots: int | None
    if deploy == "local" and master is None:
        limit = setting or DEFAULT_REALTIME_TASKS
        slots = max(MIN_LOCAL_SLOTS, 2 * max(1, min(partitions, limit)))
        master_set = f"local[{slots}]"
    elif deploy == "local" and master is not None:
        slots = local_slots(master)  # None: `local[*]`, the machine's cores, known when the job starts
        limit = setting or slots_now or slots or DEFAULT_REALTIME_TASKS
    else:
        cores = conf.get(CORES_SETTING)
        if cores is not None and str(cores).strip().isdigit():
            slots = int(str(cores).strip())
            limit = setting or slots
        else:
            limit = setting or DEFAULT_REALTIME_TASKS
            slots = cores_max = max(1, min(partitions, limit))
    if slots_now is not None:
        slots = slots_now
    # partitions added later join these tasks: the most the source ever deals them to, one per slot at most
    most = max(1, min(limit, slots)) if slots else limit
    tasks = max(1, min(partitions, most))
    size = f"{partitions} source partition{'s' if partitions != 1 else ''}"
    described = f"{size} in {tasks} task{'s' if tasks != 1 else ''}" if tasks < partitions else size
    return Placement("realtime", slots, described, master=master_set, cores_max=cores_max, tasks=most)


#: Real-time mode keeps, for as long as the job runs, a consumer per task (its fetches buffered for all of the
#: task's partitions) and a producer per executor (an open batch per partition its tasks write). These budgets
#: bound what one task's consumer and one executor's producer hold, whatever the partition count: a few partitions
#: keep the throughput sizes (8 MB fetches, 256 KB batches), hundreds get smaller ones instead of a
#: `BufferExhaustedException` or an `OutOfMemoryError` (265 partitions at the throughput sizes had both in one
#: 1 GB driver heap).
FETCH_BUDGET = 64 * 1024 * 1024
BATCH_BUDGET = 16 * 1024 * 1024
_FETCH_RANGE = (256 * 1024, 8 * 1024 * 1024)
#: A flow's query in an application (`spark.application`) shares the driver JVM with the other flows' tasks, and
#: a task's fetch response costs the JVM twice its size for as long as the query runs: the response's own array
#: (a humongous one for G1, which the heap grows for and keeps) and the temporary direct buffer the JDK reads a
#: socket into for it, cached per task thread at its largest (`sun.nio.ch.Util`). At the job's own budget six
#: flows of 2 tasks held 172 MB of such buffers and a heap grown to 934 MB after a warm copy (NMT,
#: benchmarks/README.md). In an application a task fetches at most 8 MB, at most 1 MB per partition (Kafka's
#: own default, which MirrorMaker 2 copies with).
APPLICATION_FETCH_BUDGET = 8 * 1024 * 1024
_APPLICATION_FETCH_RANGE = (256 * 1024, 1024 * 1024)
_BATCH_RANGE = (16 * 1024, 256 * 1024)
#: The producer's `buffer.memory` (Kafka's default 32 MB) holds at least two batches per partition it writes, so
#: that thousands of partitions at the smallest batch do not block on the pool.
_BUFFER_DEFAULT = 32 * 1024 * 1024
#: Spark caches this many consumers per executor by default and closes the oldest idle ones when it holds more:
#: with a consumer per partition, every checkpoint boundary then re-created most of them.
SPARK_CONSUMER_CACHE = 64


def _power_of_two_within(budget: int, bounds: tuple[int, int]) -> int:
    low, high = bounds
    size = high
    while size > low and size > budget:
        size //= 2
    return size


@dataclass(frozen=True)
class ClientSizing:
    """Client sizes for `partitions` partitions read by long-running tasks; the flow's own settings win."""

    consumer: dict[str, str]
    producer: dict[str, str]
    consumer_cache: int  # `spark.kafka.consumer.cache.capacity`


def realtime_client_sizing(
    partitions: int, slots: int | None = None, tasks: int | None = None, *, in_application: bool = False
) -> ClientSizing:
    """Sizes for `partitions` source partitions dealt to `tasks` tasks on `slots` task slots.

    A task's consumer fetches at most `FETCH_BUDGET` per request (`fetch.max.bytes`), shared by the partitions
    it holds (`max.partition.fetch.bytes`, at least 256 KB: the request's cap, not the partition count, bounds
    the memory); a query in an application (`in_application`) at most `APPLICATION_FETCH_BUDGET`, at most 1 MB per
    partition. The producer an executor's tasks share keeps `batch.size` per partition within `BATCH_BUDGET`
    (at least 16 KB) and a `buffer.memory` of two batches per partition (at least Kafka's 32 MB). Spark's
    consumer cache holds one consumer per slot (partitions added later included). With `tasks` unknown, every
    partition counts as one task's (the sizes of the landed version)."""
    count = max(1, partitions)
    per_task = -(-count // max(1, tasks or 1))
    budget, bounds = (
        (APPLICATION_FETCH_BUDGET, _APPLICATION_FETCH_RANGE) if in_application else (FETCH_BUDGET, _FETCH_RANGE)
    )
    fetch = _power_of_two_within(budget // per_task, bounds)
    batch = _power_of_two_within(BATCH_BUDGET // count, _BATCH_RANGE)
    return ClientSizing(
        consumer={"max.partition.fetch.bytes": str(fetch), "fetch.max.bytes": str(budget)},
        producer={"batch.size": str(batch), "buffer.memory": str(max(_BUFFER_DEFAULT, 2 * count * batch))},
        consumer_cache=max(SPARK_CONSUMER_CACHE, slots or 0, count),
    )
