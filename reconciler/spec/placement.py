"""Which Spark execution mode a flow's job runs in, and how many task slots it asks for.

Real-time mode (Spark 4.1) is the fast path: long-running tasks forward each record as it arrives (p50 ~20 ms),
at about MM2's CPU per record. The source partitions are dealt to at most `spark.kmirror.realtimeTasks` tasks
(default 2), each reading its share with one consumer (`jvm/GroupedKafkaSource.java`); a task needs a task slot
for as long as the job runs, so a user who writes no Spark settings gets:

- `deploy: local` with no `spark.master`: the job sizes its own master, `local[N]` with N = twice the tasks (at
  least 4): idle slots cost nothing in local mode;
- `deploy: standalone` with no `spark.cores.max` in `spark.conf`: the job asks the master for one core per task,
  and the plan says how many;
- fewer slots than tasks (an explicit `local[2]`, a `spark.cores.max`, a cluster that grants fewer cores):
  micro-batch mode, which runs any number of partitions on any number of slots (with `spark.kmirror.mode:
  realtime`, as many tasks as there are slots);
- more than `REALTIME_MAX_PARTITIONS` replicated partitions: micro-batch mode, which sizes nothing by partition
  count; the plan and `kmirror status` say why;
- a `spark.kmirror.triggerInterval` under 5 s (a micro-batch trigger; real-time mode's interval is a
  checkpoint interval of 5 s or more): micro-batch mode.

Partitions added while a job runs join its tasks. `spark.kmirror.mode: realtime | microbatch` overrides the
choice.

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
#: Above this many replicated partitions the automatic choice is micro-batch: real-time mode keeps a fetch and an
#: open producer batch per partition in the driver's heap, and past this count they no longer fit the budgets
#: below even at their smallest sizes (`realtime_client_sizing`).
REALTIME_MAX_PARTITIONS = 512
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


def realtime_task_limit(conf: dict[str, object]) -> int:
    """`spark.kmirror.realtimeTasks` (validated when the file is loaded), or its default."""
    value = conf.get(REALTIME_TASKS_SETTING)
    return DEFAULT_REALTIME_TASKS if value is None else max(1, int(str(value).strip()))


def requested_mode(conf: dict[str, object]) -> str | None:
    """`spark.kmirror.mode` as written (lower case), or None when the file leaves the choice to kmirror."""
    value = conf.get(MODE_SETTING)
    return None if value is None else str(value).strip().lower()


def choose_placement(
    *, deploy: str, master: str | None, conf: dict[str, object], partitions: int, slots_now: int | None = None
) -> Placement:
    """The placement of a job replicating `partitions` source partitions.

    `master` is `spark.master` from the file (None: kmirror sizes it); `slots_now`, when known, the task slots
    the running Spark context has (a standalone cluster may grant fewer cores than asked). An explicit
    `spark.kmirror.mode: realtime` stays real-time whatever the slots (the job refuses to start without enough).
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
    size = f"{partitions} source partition{'s' if partitions != 1 else ''}"
    if wanted is None and partitions > REALTIME_MAX_PARTITIONS:
        reason = f"{size}: more than the {REALTIME_MAX_PARTITIONS} real-time mode takes by default"
        return Placement(
            "microbatch", slots_now, reason, master="local[*]" if deploy == "local" and master is None else None
        )
    limit = realtime_task_limit(conf)
    tasks = max(1, min(partitions, limit))
    master_set = cores_max = None
    if deploy == "local":
        if master is None:
            slots = max(MIN_LOCAL_SLOTS, 2 * tasks)
            master_set = f"local[{slots}]"
        else:
            slots = local_slots(master) or 0
    else:
        cores = conf.get(CORES_SETTING)
        if cores is not None and str(cores).strip().isdigit():
            slots = int(str(cores).strip())
        else:
            slots = cores_max = tasks
    if slots_now is not None:
        slots = slots_now
    if wanted is None and slots < tasks:
        reason = f"{size} but {slots} task slot{'s' if slots != 1 else ''}: real-time mode needs {tasks} (one per task)"
        return Placement("microbatch", slots, reason, master=master_set)
    tasks = min(tasks, slots) if slots >= 1 else tasks  # `spark.kmirror.mode: realtime` on fewer slots
    described = f"{size} in {tasks} task{'s' if tasks != 1 else ''}" if tasks < partitions else size
    # the source deals partitions added later to the same tasks: at most `limit`, and never more than the slots
    return Placement(
        "realtime", slots, described, master=master_set, cores_max=cores_max, tasks=min(limit, slots or limit)
    )


#: Real-time mode keeps a consumer and an open producer batch per partition for as long as the job runs, in one
#: driver heap (local mode: 1 GB by default). These budgets bound what all partitions hold together; a few
#: partitions keep the throughput sizes (8 MB fetches, 256 KB batches), hundreds get smaller ones instead of a
#: `BufferExhaustedException` or an `OutOfMemoryError` (265 partitions at the throughput sizes had both).
FETCH_BUDGET = 128 * 1024 * 1024
BATCH_BUDGET = 16 * 1024 * 1024
_FETCH_RANGE = (256 * 1024, 8 * 1024 * 1024)
_BATCH_RANGE = (16 * 1024, 256 * 1024)
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
    """Per-partition client sizes for `partitions` long-running tasks; the flow's own settings win over them."""

    consumer: dict[str, str]
    producer: dict[str, str]
    consumer_cache: int  # `spark.kafka.consumer.cache.capacity`


def realtime_client_sizing(partitions: int, slots: int | None = None) -> ClientSizing:
    """Fetch and batch sizes that keep `partitions` consumers and batches within the budgets above, and a
    consumer cache that holds one consumer per slot (partitions added later included)."""
    count = max(1, partitions)
    fetch = _power_of_two_within(FETCH_BUDGET // count, _FETCH_RANGE)
    batch = _power_of_two_within(BATCH_BUDGET // count, _BATCH_RANGE)
    return ClientSizing(
        consumer={"max.partition.fetch.bytes": str(fetch)},
        producer={"batch.size": str(batch)},
        consumer_cache=max(SPARK_CONSUMER_CACHE, slots or 0, count),
    )
