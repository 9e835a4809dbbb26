"""The job contract's pure parts: where a flow's checkpoint and folder live, where a job whose checkpoint is gone
resumes, and how data loss is recognised. No JVM, no broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.jobcontract.layout import (
    CheckpointRoot,
    checkpoint_root_problem,
    local_job_folder,
    local_state_keys,
    state_key,
)
from reconciler.jobcontract.spec import EffectiveSpec, JobSpec, next_generation
from reconciler.replication.metrics import ReplicationMetrics
from reconciler.replication.query import resume_offsets
from reconciler.resources.deployments import LocalDeployment, deployment_of
from reconciler.runners.common import checkpoint_for, checkpoint_missing
from reconciler.spec.loader import load_text

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "uri", "path"),
    [
        ("/mnt/k", "file:///mnt/k", Path("/mnt/k")),
        ("file:///mnt/k", "file:///mnt/k", Path("/mnt/k")),
        ("file:/mnt/k", "file:///mnt/k", Path("/mnt/k")),
        ("cp", "file:///repo/cp", Path("/repo/cp")),
        ("hdfs://nn:8020/k/", "hdfs://nn:8020/k", None),
        ("s3a://bucket/k", "s3a://bucket/k", None),
    ],
)
def test_checkpoint_roots_are_paths_or_uris(text: str, uri: str, path: Path | None) -> None:
    root = CheckpointRoot.parse(text, Path("/repo"))
    assert (root.uri, root.path) == (uri, path)


def test_checkpoints_and_folders_are_keyed_by_state_topic_and_flow(tmp_path: Path) -> None:
    shared = CheckpointRoot.parse("/mnt/k", tmp_path)
    assert shared.checkpoint("_kmirror.state", "f") == "/mnt/k/_kmirror.state/f/checkpoint"
    assert shared.checkpoint("_kmirror.state.b", "f") != shared.checkpoint("_kmirror.state", "f")
    folder = shared.job_folder("_kmirror.state", "f")
    assert folder is not None and folder.spec == Path("/mnt/k/_kmirror.state/f/spec.json")
    assert CheckpointRoot.parse("s3a://b/k", tmp_path).checkpoint("st", "f") == "s3a://b/k/st/f/checkpoint"
    assert CheckpointRoot.parse("s3a://b/k", tmp_path).job_folder("st", "f") is None
    assert local_job_folder("st", "f", tmp_path).path == tmp_path / "jobs" / "st" / "f"


def test_two_states_with_one_topic_name_on_two_clusters_get_their_own_folders(tmp_path: Path) -> None:
    """The layout's key is the state topic and the state cluster's id: two environments on one host (or one shared
    checkpoint root) with the same state topic name never share a job folder or a checkpoint."""
    east, west = state_key("_kmirror.state", "AbC-1_x"), state_key("_kmirror.state", "ZyX-9_y")
    assert east == "_kmirror.state@AbC-1_x" and east != west
    assert state_key("_kmirror.state", None) == "_kmirror.state"  # no cluster read (demo, tests): the topic alone
    assert local_job_folder(east, "f", tmp_path).path != local_job_folder(west, "f", tmp_path).path
    root = CheckpointRoot.parse("hdfs://nn/k", tmp_path)
    assert root.checkpoint(east, "f") == "hdfs://nn/k/_kmirror.state@AbC-1_x/f/checkpoint" != root.checkpoint(west, "f")
    for key in (east, west, "_kmirror.state.b@AbC-1_x", "_kmirror.state"):
        local_job_folder(key, "f", tmp_path).path.mkdir(parents=True)
    assert local_state_keys("_kmirror.state", tmp_path) == sorted(["_kmirror.state", east, west])
    assert local_state_keys("other", tmp_path) == []


def test_the_local_runner_uses_a_recorded_folder_and_sees_no_other_states_jobs(tmp_path: Path) -> None:
    """A job deployed before folders were keyed by the cluster keeps its recorded folder; a folder of the same
    state topic name under another cluster's key is another environment's, so it is not this state's job."""
    from reconciler.runners import LocalRunner

    old = tmp_path / "jobs" / "_kmirror.state" / "f"
    recorded = LocalDeployment(flow="f", host="h", pid=1, folder=str(old), checkpoint="/c/f")
    east = LocalRunner(tmp_path, state_topic="_kmirror.state", state_key="_kmirror.state@east", root=tmp_path)
    assert east.folder("g").path == tmp_path / "jobs" / "_kmirror.state@east" / "g"
    keyed = LocalRunner(
        tmp_path, state_topic="_kmirror.state", state_key="_kmirror.state@east", deployments={"f": recorded}
    )
    assert keyed.folder("f").path == old
    west = local_job_folder("_kmirror.state@west", "f", tmp_path)
    west.path.mkdir(parents=True)
    west.runner.write_text(json.dumps(LocalDeployment(flow="f", host="h", pid=1).model_dump(mode="json")))
    assert east.status().jobs == {}  # west's job is not east's
    assert east._written("f") is None


def test_only_a_root_every_worker_and_checkout_shares_serves_the_standalone_runner() -> None:
    assert checkpoint_root_problem(".kmirror/checkpoints", "local") is None
    assert checkpoint_root_problem("hdfs://nn/k", "local") is None
    assert checkpoint_root_problem("/mnt/k", "standalone") is None
    assert checkpoint_root_problem("file:///mnt/k", "standalone") is None
    assert "is relative" in (checkpoint_root_problem("cp", "standalone") or "")
    assert checkpoint_root_problem("hdfs://nn/k", "standalone") is None  # side files through WebHDFS
    assert "set job_folder_root" in (checkpoint_root_problem("s3a://b/k", "standalone") or "")
    # An s3a: checkpoint with the jobs' folders elsewhere: on HDFS or a shared path (standalone), on HDFS (yarn).
    assert checkpoint_root_problem("s3a://b/k", "standalone", "hdfs://nn/jobs") is None
    assert checkpoint_root_problem("s3a://b/k", "standalone", "/mnt/jobs") is None
    assert "is relative" in (checkpoint_root_problem("s3a://b/k", "standalone", "jobs") or "")
    assert checkpoint_root_problem("s3a://b/k", "yarn") is None  # default: <fs.defaultFS>/user/<user>/kmirror
    assert checkpoint_root_problem("s3a://b/k", "yarn", "hdfs://nn/jobs") is None
    assert "WebHDFS" in (checkpoint_root_problem("s3a://b/k", "yarn", "/mnt/jobs") or "")
    assert "gs: and abfs:" in (checkpoint_root_problem("gs://b/k", "yarn") or "")
    assert "leave job_folder_root out" in (checkpoint_root_problem("s3a://b/k", "local", "hdfs://nn/j") or "")


def test_a_recorded_checkpoint_is_used_on_and_an_old_unkeyed_one_is_found(tmp_path: Path) -> None:
    root = CheckpointRoot.parse(str(tmp_path), tmp_path)
    assert (
        checkpoint_for("f", root, "st", LocalDeployment(checkpoint="/elsewhere/f")) == "/elsewhere/f"
    )  # e.g. after a rename
    assert checkpoint_for("f", root, "st", None) == str(tmp_path / "st" / "f" / "checkpoint")
    (tmp_path / "f" / "offsets").mkdir(parents=True)  # written by a kmirror that did not key checkpoints yet
    assert checkpoint_for("f", root, "st", None) == str(tmp_path / "f")


def test_a_checkpoint_is_missing_only_for_a_flow_that_ran_before(tmp_path: Path) -> None:
    cp = tmp_path / "cp"
    assert checkpoint_missing(str(cp), None) is False  # a first deployment starts from start_from
    assert checkpoint_missing(str(cp), LocalDeployment(pid=1)) is True
    (cp / "offsets").mkdir(parents=True)
    assert checkpoint_missing(str(cp), LocalDeployment(pid=1)) is False
    assert checkpoint_missing("s3a://b/cp", LocalDeployment(pid=1)) is None  # the job checks it itself


def test_a_lost_checkpoint_resumes_after_the_newest_offset_sync_of_each_partition() -> None:
    offsets = resume_offsets({"orders": 3, "pay": 1}, {("orders", 0): 41, ("orders", 2): 0}, "earliest")
    assert offsets == {"orders": {"0": 42, "1": -2, "2": 1}, "pay": {"0": -2}}
    assert resume_offsets({"orders": 1}, {}, "latest") == {"orders": {"0": -1}}


def test_records_deleted_before_they_were_copied_are_counted_once() -> None:
    m = ReplicationMetrics("a", "b")
    m.observe_positions({("t", 0): 100, ("t", 1): 50})
    m.observe_source_ends({("t", 0): 200, ("t", 1): 60})
    assert m.observe_source_starts({("t", 0): 100, ("t", 1): 0}) == []  # nothing gone that was not copied
    events = m.observe_source_starts({("t", 0): 130, ("t", 1): 0})
    assert events == ["t[0]: 30 records deleted before they were copied"]
    assert (m.data_loss_records, m.data_loss_events) == (30, 1)
    assert m.observe_source_starts({("t", 0): 130}) == []  # the job reads on from 130: counted once


def test_a_topic_created_again_counts_every_record_below_the_jobs_old_position_as_they_arrive() -> None:
    """Spark reads on from its old position in the new log: what lands below it is never copied."""
    m = ReplicationMetrics("a", "b")
    m.observe_positions({("t", 0): 50, ("t", 1): 50})
    m.observe_source_ends({("t", 0): 50, ("t", 1): 50})
    assert m.observe_topic_ids({"t": "id-1"}) == []  # first sight
    m.observe_source_ends({("t", 0): 0, ("t", 1): 0})  # deleted and created again, still empty
    events = m.observe_source_starts({("t", 0): 0, ("t", 1): 0})
    assert events == [
        "t[0]: offsets went back from 50 to 0 (topic re-created?)",
        "t[1]: offsets went back from 50 to 0 (topic re-created?)",
    ]
    assert (m.data_loss_records, m.data_loss_events) == (0, 2)
    m.observe_source_ends({("t", 0): 30, ("t", 1): 50})  # records arrive below the old position
    m.observe_source_starts({("t", 0): 0, ("t", 1): 0})
    assert m.data_loss_records == 80
    assert m.observe_topic_ids({"t": "id-2"}) == []  # the same re-creation: no second hole
    m.observe_source_ends({("t", 0): 90, ("t", 1): 70})  # the new logs pass the old position: copied from there
    m.observe_source_starts({("t", 0): 0, ("t", 1): 0})
    assert (m.data_loss_records, m.data_loss_events) == (100, 2)
    m.observe_source_ends({("t", 0): 200, ("t", 1): 200})
    assert m.observe_source_starts({("t", 0): 0, ("t", 1): 0}) == []


def test_a_topic_created_again_is_seen_by_its_id_when_its_offsets_did_not_go_back() -> None:
    m = ReplicationMetrics("a", "b")
    m.observe_positions({("t", 0): 100})
    m.observe_source_ends({("t", 0): 100})
    m.observe_topic_ids({"t": "id-1"})
    (event,) = m.observe_topic_ids({"t": "id-2"})  # the new topic already holds 100 records: same end
    assert "deleted and created again" in event
    m.observe_source_starts({("t", 0): 0})
    assert (m.data_loss_records, m.data_loss_events) == (100, 1)


def test_forgetting_a_removed_flows_job_deletes_its_checkpoint_and_record(tmp_path: Path) -> None:
    from reconciler.runners import LocalRunner
    from reconciler.runners.common import write_json

    runner = LocalRunner(tmp_path, state_topic="st", root=tmp_path / "home")
    checkpoint = tmp_path / "cp" / "st" / "f" / "checkpoint"
    (checkpoint / "offsets").mkdir(parents=True)
    write_json(runner.folder("f").runner, {"runner": "local", "pid": 999_999_999, "checkpoint": str(checkpoint)})
    runner.forget("f")
    assert not checkpoint.exists() and not runner.folder("f").runner.exists()
    assert runner.job("f") is None  # added back, the flow is deployed afresh


def test_each_deployment_gets_the_next_generation_and_the_spec_file_carries_it(tmp_path: Path) -> None:
    assert next_generation(None) == 1
    assert next_generation(deployment_of({"runner": "local"})) == 1  # recorded before generations existed
    assert next_generation(deployment_of({"generation": 4})) == 5
    assert next_generation(deployment_of({"generation": "4"})) == 1
    assert next_generation(deployment_of({"generation": True})) == 1
    ds = load_text(
        """
version: 1
clusters:
  src: {bootstrap_servers: "127.0.0.1:1"}
  dst: {bootstrap_servers: "127.0.0.1:2"}
state: {cluster: dst}
flows: [{name: f, source: src, target: dst, topics: {include: ["o"]}}]
"""
    ).state
    spec = JobSpec("f", EffectiveSpec.of(ds, "f"), ds.flow_digest("f"), tmp_path, generation=5)
    spec.write(tmp_path / "spec.json")
    assert JobSpec.read(tmp_path / "spec.json").generation == 5
    old = json.loads((tmp_path / "spec.json").read_text())
    del old["generation"]
    (tmp_path / "spec.json").write_text(json.dumps(old))
    assert JobSpec.read(tmp_path / "spec.json").generation == 0
