"""Which Spark execution mode a flow's job runs in, and how many task slots it asks for.

Real-time mode (Spark 4.1) is the fast path: one long-running task per source partition forwards each record
as it arrives (p50 ~20 ms), at less CPU per record than micro-batches. It needs a task slot per replicated
source partition for as long as the job runs, so a user who writes no Spark settings gets:

- `deploy: local` with no `spark.master`: the job sizes its own master, `local[N]` with N = twice the
  partitions (at least 4): idle slots cost nothing in local mode, and partitions added later fit;
- `deploy: standalone` with no `spark.cores.max` in `spark.conf`: the job asks the master for one core per
  partition (cores are real there), and the plan says how many;
- more partitions than real-time mode takes by default (`REALTIME_MAX_PARTITIONS`: 512 in local mode, where a
  slot is a thread, 64 on a standalone cluster, where it is a core), or fewer slots than partitions (an explicit
  `local[2]`, a `spark.cores.max`): micro-batch mode, which runs any number of partitions on any number of
  slots; the plan and `kmirror status` say why.

- a `spark.kmirror.triggerInterval` under 5 s (a micro-batch trigger; real-time mode's interval is a
  checkpoint interval of 5 s or more): micro-batch mode.

`spark.kmirror.mode: realtime | microbatch` overrides the choice (real-time with too few slots is refused).
The job applies the same rules when it starts, from the partitions it reads then, and falls back to micro-batch
while it runs if partitions grow past its slots (a redeploy sizes it again).

Pure: values in, values out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reconciler.spec.defaults import REALTIME_MIN_INTERVAL_SECONDS
from reconciler.spec.intervals import interval_seconds, trigger_interval

MODE_SETTING = "spark.kmirror.mode"
INTERVAL_SETTING = "spark.kmirror.triggerInterval"
CORES_SETTING = "spark.cores.max"
#: Above this many replicated partitions the automatic choice is micro-batch: a long-running task per partition
#: stops paying off against micro-batches that share the slots. In local mode a slot is a thread waiting on its
#: consumer: 265 partitions in real-time mode on 2 cores copied 64,027 records/s at p50 14 ms where micro-batches
#: made 36,392 at 711 ms (benchmarks/README.md); its client buffers are sized by partition count
#: (`realtime_client_sizing`). On a standalone cluster a slot is a core the master hands out.
REALTIME_MAX_PARTITIONS = {"local": 512, "standalone": 64}
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

    def describe(self) -> str:
        """`real-time mode, 13 source partitions on local[26]`: for plan rows and logs."""
        where = self.master or (f"spark.cores.max {self.cores_max}" if self.cores_max else None)
        mode = "real-time mode" if self.mode == "realtime" else "micro-batch mode"
        return f"{mode} ({self.reason}{'; ' + where if where else ''})"


def local_slots(master: str) -> int | None:
    """Task slots of a `local[N]` master; None for `local[*]`, `local` and other masters."""
    if master == "local":
        return 1
    match = _LOCAL.match(master.strip())
    return int(match.group(1)) if match else None


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
    most = REALTIME_MAX_PARTITIONS.get(deploy, min(REALTIME_MAX_PARTITIONS.values()))
    if wanted is None and partitions > most:
        reason = f"{size}: more than the {most} real-time mode takes by default"
        return Placement(
            "microbatch", slots_now, reason, master="local[*]" if deploy == "local" and master is None else None
        )
    master_set = cores_max = None
    if deploy == "local":
        if master is None:
            slots = max(MIN_LOCAL_SLOTS, 2 * partitions)
            master_set = f"local[{slots}]"
        else:
            slots = local_slots(master) or 0
    else:
        cores = conf.get(CORES_SETTING)
        if cores is not None and str(cores).strip().isdigit():
            slots = int(str(cores).strip())
        else:
            slots = cores_max = max(1, partitions)
    if slots_now is not None:
        slots = slots_now
    if wanted is None and slots < partitions:
        reason = f"{size} but {slots} task slot{'s' if slots != 1 else ''}: real-time mode needs one per partition"
        return Placement("microbatch", slots, reason, master=master_set)
    return Placement("realtime", slots, size, master=master_set, cores_max=cores_max)


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
