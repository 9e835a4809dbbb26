"""The control plane of the replication jobs: the runners that deploy, stop and report them from the CLI.

`runner_for(desired, deployments)` gives the executor and the planner one `FlowRunners`: it deploys with the
runner `spark.deploy` names (`local.py`: a spark-submit on this machine; `standalone.py`: a driver on a Spark
standalone cluster; `yarn.py`: a cluster-mode application on YARN) and stops and reports each flow with the
runner that deployed it, as recorded in the state topic (a flow moved from one to another is stopped where it ran).
`deployments` is what the state topic recorded per flow (the `deployment` of each `job/<flow>` record); no runner
reads anything of the checkout.

The job itself (what runs inside the Spark driver) is `reconciler.replication`; the two meet only in
`reconciler.jobcontract`.

Must not: decide whether a job should run (the planner does); import `reconciler.replication`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from reconciler.jobcontract.layout import CheckpointRoot
from reconciler.jobcontract.spec import EffectiveSpec, eos_flow_for
from reconciler.resources.deployments import Deployment, StandaloneDeployment, YarnDeployment, deployment_of
from reconciler.resources.job_status import JobInfo, JobStatus
from reconciler.runners.common import JobRunnerError, checkpoint_for
from reconciler.runners.local import LocalJob, LocalRunner
from reconciler.runners.standalone import StandaloneJob, StandaloneRunner
from reconciler.runners.yarn import YarnJob, YarnRunner
from reconciler.spec.models import DesiredState, SparkSpec

Runner = LocalRunner | StandaloneRunner | YarnRunner

__all__ = [
    "FlowRunners",
    "JobRunnerError",
    "LocalJob",
    "LocalRunner",
    "StandaloneJob",
    "StandaloneRunner",
    "YarnJob",
    "YarnRunner",
    "runner_for",
]


class FlowRunners:
    """Deploys with the configured runner; stops and reports each flow with the one that deployed it."""

    def __init__(
        self,
        base_dir: Path,
        spark: SparkSpec,
        state_topic: str,
        deployments: Mapping[str, Deployment] | None = None,
        state_key: str | None = None,
    ) -> None:
        self.base_dir = base_dir
        self.spark = spark
        self.state_topic = state_topic
        #: What this state's folders and checkpoints are keyed by (`jobcontract.layout.state_key`).
        self.state_key = state_key or state_topic
        self.deployments: dict[str, Deployment] = dict(deployments or {})
        self.primary = self._make(spark.deploy, spark, self._of_kind(spark.deploy))
        self.kind = self.primary.kind

    def deploy(self, flow: str, spec: EffectiveSpec, spec_digest: str) -> Deployment:
        previous = self.deployments.get(flow)
        if previous is not None and previous.runner != self.kind:
            self._runner_of(flow).stop(flow)  # it ran under the other runner: stop it there first
            self.primary.deployments.pop(flow, None)
        record = self.primary.deploy(flow, spec, spec_digest)
        self.deployments[flow] = record
        return record

    def stop(self, flow: str) -> None:
        self._runner_of(flow).stop(flow)

    def forget(self, flow: str) -> None:
        """A removed flow's stopped job: its checkpoint and its folder's record go, so added back it starts afresh."""
        self._runner_of(flow).forget(flow)
        self.deployments.pop(flow, None)

    def move(self, old: str, new: str) -> None:
        """A renamed flow: stop `old`'s job gracefully; `new`'s next deploy starts on `old`'s checkpoint."""
        record = self.deployments.get(old)
        runner = self._runner_of(old)
        runner.stop(old)
        root = CheckpointRoot.parse(self.spark.checkpoint_root, self.base_dir)
        carried = deployment_of(
            {
                "runner": record.runner if record is not None else self.kind,
                "checkpoint": checkpoint_for(old, root, self.state_key, record),
                "eos_flow": eos_flow_for(old, record),  # its exactly-once group: the renamed job resumes from it
                # and counts on from its generation
                **({"generation": record.generation} if record is not None and record.generation is not None else {}),
            }
        )
        self.deployments[new] = carried
        if carried.runner == self.kind:
            self.primary.deployments[new] = carried

    def status(self) -> JobStatus:
        status = self.primary.status()
        if not status.known:
            return status
        ephemeral = self.kind == "local" and os.environ.get("CI", "").lower() in ("true", "1")
        jobs: dict[str, JobInfo] = dict(status.jobs)
        for flow, record in self.deployments.items():
            if record.runner != self.kind:
                other = self._runner_of(flow)
                try:
                    info = other.info(flow)
                except JobRunnerError:
                    return JobStatus(known=False)
                if info is not None:
                    jobs[flow] = info
        return JobStatus(jobs, ephemeral_host=ephemeral)

    def job(self, flow: str) -> LocalJob | StandaloneJob | YarnJob | None:
        return self._runner_of(flow).job(flow)

    def _runner_of(self, flow: str) -> Runner:
        record = self.deployments.get(flow)
        if record is None or record.runner == self.kind:
            return self.primary
        spark = self.spark
        if isinstance(record, StandaloneDeployment):
            spark = SparkSpec(
                deploy="standalone",
                master=record.master or "spark://unknown:7077",
                rest_url=record.rest_url or "http://unknown:6066",
                checkpoint_root=record.folder or "/unknown",
            )
        elif isinstance(record, YarnDeployment):
            folder = record.folder or "hdfs://unknown/unknown"
            spark = SparkSpec(
                deploy="yarn",
                master="yarn",
                hadoop_conf_dir=record.hadoop_conf_dir or spark.hadoop_conf_dir,
                checkpoint_root=folder if folder.startswith("hdfs:") else "hdfs://unknown/unknown",
            )
        else:
            spark = SparkSpec(checkpoint_root=spark.checkpoint_root)
        return self._make(record.runner, spark, {flow: record})

    def _of_kind(self, kind: str) -> dict[str, Deployment]:
        return {f: r for f, r in self.deployments.items() if r.runner == kind}

    def _make(self, kind: str, spark: SparkSpec, deployments: Mapping[str, Deployment]) -> Runner:
        if kind == "local":
            return LocalRunner(
                self.base_dir, spark, state_topic=self.state_topic, state_key=self.state_key, deployments=deployments
            )
        if kind == "standalone":
            return StandaloneRunner(
                self.base_dir, spark, state_topic=self.state_topic, state_key=self.state_key, deployments=deployments
            )
        if kind == "yarn":
            return YarnRunner(
                self.base_dir, spark, state_topic=self.state_topic, state_key=self.state_key, deployments=deployments
            )
        raise JobRunnerError(f"spark.deploy '{kind}' runs no job, so it has no job runner")


def runner_for(
    desired: DesiredState, deployments: Mapping[str, Deployment] | None = None, state_key: str | None = None
) -> FlowRunners:
    """The runners of `desired`, rooted at the desired-state file's folder (or the working folder); `state_key`:
    what its jobs' folders and checkpoints are keyed by (`jobcontract.layout.state_key`; the state topic alone when
    left out)."""
    if desired.spark.deploy == "none":
        raise JobRunnerError("spark.deploy 'none' runs no job, so it has no job runner")
    return FlowRunners(desired.base_dir or Path.cwd(), desired.spark, desired.state.topic, deployments, state_key)
