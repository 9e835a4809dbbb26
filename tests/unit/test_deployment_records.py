"""A runner's deployment record, typed: what a runner wrote (its folder's `runner.json`, or the state topic's
`deployment` of a job) is read back as the runner kind's record, including records written before they named their
runner, and the runner answers from its fields."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from reconciler.resources.deployments import (
    LocalDeployment,
    YarnDeployment,
    deployment_of,
    mark_stopped,
)
from reconciler.runners import FlowRunners, LocalRunner
from reconciler.runners.common import HOST
from reconciler.spec.models import SparkSpec

pytestmark = pytest.mark.unit


def test_a_local_runner_reads_the_record_its_folder_holds(tmp_path: Path) -> None:
    runner = LocalRunner(tmp_path, state_topic="st", root=tmp_path / "home")
    written = {"runner": "local", "flow": "f", "host": HOST, "pid": os.getpid(), "digest": "sha256:d",
               "checkpoint": "/cp/f", "eos_flow": "f", "generation": 2, "started_at": 1.5}  # fmt: skip
    runner.folder("f").runner.parent.mkdir(parents=True)
    runner.folder("f").runner.write_text(json.dumps(written))
    job = runner.job("f")
    assert job is not None and not job.running  # this process is not the flow's spark-submit
    assert (job.digest, job.checkpoint, job.pid) == ("sha256:d", "/cp/f", os.getpid())
    assert runner._previous("f") == LocalDeployment.model_validate(written)


def test_a_record_of_another_host_is_reported_as_not_seen_from_here(tmp_path: Path) -> None:
    recorded = LocalDeployment(flow="f", host="elsewhere", pid=1, digest="sha256:d")
    runner = LocalRunner(tmp_path, state_topic="st", root=tmp_path / "home", deployments={"f": recorded})
    info = runner.info("f")
    assert info is not None and info.running is None and info.host == "elsewhere" and info.spec_digest == "sha256:d"


def test_a_standalone_record_in_a_local_folder_is_not_a_local_job(tmp_path: Path) -> None:
    runner = LocalRunner(tmp_path, state_topic="st", root=tmp_path / "home")
    runner.folder("f").runner.parent.mkdir(parents=True)
    runner.folder("f").runner.write_text(json.dumps({"submission_id": "driver-1"}))  # before records named a runner
    assert runner.job("f") is None


def test_each_kind_writes_back_the_fields_it_was_read_with() -> None:
    for record in (
        {"runner": "local", "flow": "f", "host": "h", "pid": 7},
        {"runner": "standalone", "submission_id": "driver-1", "rest_url": "http://m:6066", "master": None},
        {"runner": "yarn", "application_id": "application_1_1", "folder": "hdfs://nn/k/f", "job_environment": "x"},
    ):
        assert deployment_of(record).model_dump(mode="json") == record
    stopped = mark_stopped(deployment_of({"runner": "yarn", "application_id": "a"}), 9.0)
    assert isinstance(stopped, YarnDeployment) and stopped.model_dump(mode="json") == {
        "runner": "yarn", "application_id": "a", "stopped_at": 9.0}  # fmt: skip


def test_a_renamed_flow_carries_its_checkpoint_exactly_once_name_and_generation(tmp_path: Path) -> None:
    spark = SparkSpec(checkpoint_root=str(tmp_path / "cp"))
    old = LocalDeployment(flow="a", host="elsewhere", checkpoint="/cp/a", eos_flow="a", generation=3)
    runners = FlowRunners(tmp_path, spark, "st", {"a": old})
    runners.move("a", "b")
    carried = runners.deployments["b"]
    assert isinstance(carried, LocalDeployment)
    assert (carried.checkpoint, carried.eos_flow, carried.generation) == ("/cp/a", "a", 3)
    assert carried.model_dump(mode="json") == {
        "runner": "local",
        "checkpoint": "/cp/a",
        "eos_flow": "a",
        "generation": 3,
    }
