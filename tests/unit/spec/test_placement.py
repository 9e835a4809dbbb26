"""The execution mode and task slots a flow's job chooses (reconciler.spec.placement) and what the plan says."""

from __future__ import annotations

import pytest

from reconciler.errors import KmirrorError
from reconciler.live.model import ClusterState, LiveState, TopicInfo
from reconciler.plan.jobs import plan_jobs
from reconciler.resources.job_status import JobInfo, JobStatus
from reconciler.resources.recorded import RecordedState
from reconciler.spec.loader import load_text
from reconciler.spec.placement import (
    APPLICATION_FETCH_BUDGET,
    BATCH_BUDGET,
    FETCH_BUDGET,
    choose_placement,
    local_slots,
    realtime_client_sizing,
)

pytestmark = pytest.mark.unit


def test_no_spark_settings_give_real_time_mode_with_the_partitions_dealt_to_two_tasks() -> None:
    placement = choose_placement(deploy="local", master=None, conf={}, partitions=13)
    assert (placement.mode, placement.tasks, placement.slots, placement.master) == ("realtime", 2, 4, "local[4]")
    assert placement.describe() == "real-time mode (13 source partitions in 2 tasks; local[4])"


def test_a_few_partitions_get_a_task_each_and_room_for_partitions_added_later() -> None:
    placement = choose_placement(deploy="local", master=None, conf={}, partitions=1)
    assert (placement.mode, placement.tasks, placement.slots) == ("realtime", 2, 4)
    assert placement.describe() == "real-time mode (1 source partition; local[4])"


def test_the_task_setting_sets_how_many_tasks_read_the_partitions() -> None:
    conf: dict[str, object] = {"spark.kmirror.realtimeTasks": "16"}
    placement = choose_placement(deploy="local", master=None, conf=conf, partitions=240)
    assert (placement.mode, placement.tasks, placement.master) == ("realtime", 16, "local[32]")
    standalone = choose_placement(deploy="standalone", master="spark://m:7077", conf=conf, partitions=240)
    assert (standalone.mode, standalone.tasks, standalone.cores_max) == ("realtime", 16, 16)


def test_a_small_flow_still_gets_a_few_local_slots() -> None:
    assert choose_placement(deploy="local", master=None, conf={}, partitions=1).master == "local[4]"


def test_an_explicit_master_with_fewer_slots_than_tasks_runs_a_task_per_slot_in_real_time() -> None:
    placement = choose_placement(deploy="local", master="local[1]", conf={}, partitions=7)
    assert (placement.mode, placement.slots, placement.tasks, placement.master) == ("realtime", 1, 1, None)
    assert placement.describe() == "real-time mode (7 source partitions in 1 task)"


def test_an_explicit_master_gets_a_task_per_slot_unless_the_task_setting_says_otherwise() -> None:
    placement = choose_placement(deploy="local", master="local[8]", conf={}, partitions=7)
    assert (placement.mode, placement.tasks, placement.slots, placement.master) == ("realtime", 8, 8, None)
    assert placement.describe() == "real-time mode (7 source partitions)"
    conf: dict[str, object] = {"spark.kmirror.realtimeTasks": "2"}
    two = choose_placement(deploy="local", master="local[8]", conf=conf, partitions=7)
    assert (two.tasks, two.describe()) == (2, "real-time mode (7 source partitions in 2 tasks)")


@pytest.mark.parametrize("partitions", [513, 2000, 20000])
def test_any_partition_count_runs_real_time_with_the_default_settings(partitions: int) -> None:
    placement = choose_placement(deploy="local", master=None, conf={}, partitions=partitions)
    assert (placement.mode, placement.tasks, placement.master) == ("realtime", 2, "local[4]")
    assert placement.describe() == f"real-time mode ({partitions} source partitions in 2 tasks; local[4])"
    standalone = choose_placement(deploy="standalone", master="spark://m:7077", conf={}, partitions=partitions)
    assert (standalone.mode, standalone.tasks, standalone.cores_max) == ("realtime", 2, 2)


def test_hundreds_of_partitions_run_real_time_in_a_few_tasks_locally_and_on_a_standalone_cluster() -> None:
    local = choose_placement(deploy="local", master=None, conf={}, partitions=240)
    assert (local.mode, local.tasks, local.master) == ("realtime", 2, "local[4]")
    standalone = choose_placement(deploy="standalone", master="spark://m:7077", conf={}, partitions=240)
    assert (standalone.mode, standalone.tasks, standalone.cores_max) == ("realtime", 2, 2)


@pytest.mark.parametrize(
    ("partitions", "fetch", "batch"),
    [(1, 8 << 20, 256 << 10), (6, 8 << 20, 256 << 10), (64, 2 << 20, 256 << 10), (240, 512 << 10, 64 << 10)],
)
def test_real_time_client_buffers_shrink_with_the_partitions_that_hold_them_at_once(
    partitions: int, fetch: int, batch: int
) -> None:
    sizing = realtime_client_sizing(partitions, slots=2 * partitions, tasks=2)
    assert sizing.consumer == {"max.partition.fetch.bytes": str(fetch), "fetch.max.bytes": str(FETCH_BUDGET)}
    assert sizing.producer == {"batch.size": str(batch), "buffer.memory": str(32 << 20)}
    # one task's partitions fit its request, or keep the throughput size
    assert -(-partitions // 2) * fetch <= FETCH_BUDGET or fetch == 8 << 20
    assert partitions * batch <= BATCH_BUDGET or batch == 256 << 10
    # Spark's consumer cache keeps a consumer per slot, so a checkpoint boundary re-uses them all
    assert sizing.consumer_cache == max(64, 2 * partitions)


@pytest.mark.parametrize("partitions", [2000, 20000])
def test_thousands_of_partitions_keep_floor_sizes_and_a_buffer_of_two_batches_each(partitions: int) -> None:
    sizing = realtime_client_sizing(partitions, tasks=2)
    assert sizing.consumer["max.partition.fetch.bytes"] == str(256 << 10)
    # the request's cap bounds what a task's consumer holds, whatever the count
    assert sizing.consumer["fetch.max.bytes"] == str(FETCH_BUDGET)
    assert sizing.producer["batch.size"] == str(16 << 10)
    assert sizing.producer["buffer.memory"] == str(max(32 << 20, 2 * partitions * (16 << 10)))


def test_more_tasks_give_each_partition_a_larger_share_of_its_task_fetch() -> None:
    few = realtime_client_sizing(240, tasks=2).consumer["max.partition.fetch.bytes"]
    many = realtime_client_sizing(240, tasks=16).consumer["max.partition.fetch.bytes"]
    assert (int(few), int(many)) == (512 << 10, 4 << 20)


@pytest.mark.parametrize(("partitions", "fetch"), [(1, 1 << 20), (4, 1 << 20), (16, 1 << 20), (64, 256 << 10)])
def test_a_query_in_an_application_fetches_at_most_8_mb_and_1_mb_per_partition(partitions: int, fetch: int) -> None:
    # every flow's tasks share the driver JVM: a task's response is held in the heap and in a cached direct buffer
    own = realtime_client_sizing(partitions, tasks=2)
    shared = realtime_client_sizing(partitions, tasks=2, in_application=True)
    assert shared.consumer == {
        "max.partition.fetch.bytes": str(fetch),
        "fetch.max.bytes": str(APPLICATION_FETCH_BUDGET),
    }
    assert APPLICATION_FETCH_BUDGET == 8 << 20 and int(own.consumer["fetch.max.bytes"]) == FETCH_BUDGET
    assert int(shared.consumer["max.partition.fetch.bytes"]) <= int(own.consumer["max.partition.fetch.bytes"])
    assert (shared.producer, shared.consumer_cache) == (own.producer, own.consumer_cache)


def test_the_mode_setting_wins() -> None:
    placement = choose_placement(deploy="local", master=None, conf={"spark.kmirror.mode": "MicroBatch"}, partitions=3)
    assert placement.mode == "microbatch"
    asked = choose_placement(deploy="local", master="local[1]", conf={"spark.kmirror.mode": "realtime"}, partitions=3)
    assert (asked.mode, asked.tasks, asked.slots) == ("realtime", 1, 1)


def test_a_standalone_job_asks_for_a_core_per_task_unless_cores_are_set() -> None:
    placement = choose_placement(deploy="standalone", master="spark://m:7077", conf={}, partitions=12)
    assert (placement.mode, placement.tasks, placement.cores_max, placement.master) == ("realtime", 2, 2, None)
    assert "spark.cores.max 2" in placement.describe()
    few = choose_placement(deploy="standalone", master="spark://m:7077", conf={}, partitions=1)
    assert (few.mode, few.cores_max) == ("realtime", 1)
    capped = choose_placement(deploy="standalone", master="spark://m:7077", conf={"spark.cores.max": 1}, partitions=12)
    assert (capped.mode, capped.tasks, capped.cores_max) == ("realtime", 1, None)
    many = choose_placement(deploy="standalone", master="spark://m:7077", conf={"spark.cores.max": 8}, partitions=12)
    assert (many.mode, many.tasks, many.describe()) == (
        "realtime",
        8,
        "real-time mode (12 source partitions in 8 tasks)",
    )


def test_the_slots_a_running_context_has_decide() -> None:
    granted = choose_placement(deploy="standalone", master="spark://m:7077", conf={}, partitions=12, slots_now=1)
    assert (granted.mode, granted.slots, granted.tasks) == ("realtime", 1, 1)
    asked = {"spark.kmirror.mode": "realtime"}
    few = choose_placement(deploy="standalone", master="spark://m:7077", conf=asked, partitions=12, slots_now=1)
    assert (few.mode, few.tasks, few.slots) == ("realtime", 1, 1)
    assert "12 source partitions in 1 task" in few.describe()


@pytest.mark.parametrize(("master", "slots"), [("local[16]", 16), ("local[3,2]", 3), ("local", 1), ("local[*]", None)])
def test_local_slots(master: str, slots: int | None) -> None:
    assert local_slots(master) == slots


FILE = """
version: 1
clusters:
  a: {bootstrap_servers: "a:9092"}
  b: {bootstrap_servers: "b:9092"}
state: {cluster: b}
spark: {deploy: local%s}
flows:
  - {name: f, source: a, target: b, topics: {include: ["orders.*"]}}
"""


def _live(partitions: int) -> LiveState:
    topics = {"orders": TopicInfo("orders", partitions, 1), "other": TopicInfo("other", 50, 1)}
    return LiveState({"a": ClusterState("a", topics, None)})


def test_the_plan_row_of_a_new_job_names_its_mode_and_slots() -> None:
    desired = load_text(FILE % "").state
    out = plan_jobs(desired, RecordedState(), JobStatus(known=True), _live(6))
    (row,) = out.changes
    # orders' 6 partitions: `other` is not replicated.
    assert row.reason.endswith("; real-time mode (6 source partitions in 2 tasks; local[4])"), row.reason


def test_a_job_that_left_real_time_mode_is_redeployed_to_be_sized_again() -> None:
    desired = load_text(FILE % "").state
    digest = desired.flow_digest("f")
    info = JobInfo(
        "f",
        True,
        digest,
        mode="microbatch",
        mode_reason="30 source partitions now but 14 task slots",
        mode_fallback=True,
    )
    out = plan_jobs(desired, RecordedState(), JobStatus(known=True, jobs={"f": info}), _live(29))
    (row,) = out.changes
    assert row.after is not None and row.after.model_dump(mode="json")["operation"] == "redeploy"
    assert "left real-time mode (30 source partitions now but 14 task slots)" in row.reason
    # A job of an earlier version that left real-time mode past 512 partitions: any count runs real-time now.
    info = JobInfo("f", True, digest, mode="microbatch", mode_reason="600 source partitions now", mode_fallback=True)
    (row,) = plan_jobs(desired, RecordedState(), JobStatus(known=True, jobs={"f": info}), _live(600)).changes
    assert "left real-time mode (600 source partitions now)" in row.reason


def test_a_sub_second_trigger_interval_means_micro_batches() -> None:
    conf: dict[str, object] = {"spark.kmirror.triggerInterval": "200 milliseconds"}
    placement = choose_placement(deploy="local", master=None, conf=conf, partitions=2)
    assert placement.mode == "microbatch" and "micro-batch trigger" in placement.reason
    conf = {"spark.kmirror.triggerInterval": "30s"}
    assert choose_placement(deploy="local", master=None, conf=conf, partitions=2).mode == "realtime"


@pytest.mark.parametrize("value", ["0", "four", "-2", "1.5"])
def test_a_bad_real_time_task_count_is_a_load_error_naming_the_setting(value: str) -> None:
    text = FILE.replace("spark: {deploy: local%s}", 'spark: {deploy: local, conf: {spark.kmirror.realtimeTasks: "%s"}}')
    with pytest.raises(KmirrorError, match=r"spark\.kmirror\.realtimeTasks is .*whole number above 0"):
        load_text(text % value)
    assert load_text(text % "8").state.spark.conf["spark.kmirror.realtimeTasks"] == "8"
