"""Where the truth about jobs lives, with the local runner: one desired-state file, one world; and the scheduled
drift check in a fresh checkout while the jobs run.

Two files in one folder with different state topics and the same flow name each get their own job and checkpoint;
applying one (re-applying, then disabling its flow with prune.jobs on) leaves the other's job running. The drift
workflow's exact `plan` step, run in a fresh copy of the config repository, exits 0 while the jobs run: the jobs
are found from the state topic and this host's processes, not from the checkout that applied them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import KafkaCluster
from tests.integration.replication.conftest import create_topic
from tests.workflows import REUSABLE, Runner, load, only_job

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def kmirror(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=400
    )


def write(
    folder: Path, name: str, source: KafkaCluster, target: KafkaCluster, tag: str, *, enabled: bool = True
) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(f"""
version: 1
clusters:
  src{tag}: {{bootstrap_servers: "{source.bootstrap_servers}"}}
  dst{tag}: {{bootstrap_servers: "{target.bootstrap_servers}"}}
state: {{cluster: dst{tag}, topic: "_kmirror.state.{name}-{tag}"}}
spark:
  deploy: local
  master: "local[1]"
  checkpoint_root: checkpoints
  conf: {{spark.kmirror.triggerInterval: "1 second", spark.driver.memory: 512m}}
flows:
  - name: repl
    enabled: {str(enabled).lower()}
    source: src{tag}
    target: dst{tag}
    topics: {{include: ["jt{name}{tag}\\\\..*"]}}
    sync: {{acls: false, group_offsets: false}}
    heartbeats: {{enabled: false}}
""")
    return path


def flow_status(path: Path) -> dict:  # type: ignore[type-arg]
    result = kmirror("status", "-f", path.name, "--format", "json", cwd=path.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    (flow,) = json.loads(result.stdout)["flows"]
    return flow  # type: ignore[no-any-return]


@pytest.fixture
def folder(tmp_path: Path, source: KafkaCluster, target: KafkaCluster) -> Iterator[tuple[Path, str]]:
    tag = uuid.uuid4().hex[:6]
    yield tmp_path, tag
    for name in ("a", "b"):
        if (tmp_path / f"{name}.yaml").exists():
            write(tmp_path, name, source, target, tag, enabled=False)
            kmirror("apply", "-f", f"{name}.yaml", "--auto-approve", cwd=tmp_path)


def test_two_files_in_one_folder_keep_their_own_jobs_and_a_fresh_checkout_sees_them(
    folder: tuple[Path, str], source: KafkaCluster, target: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    base, tag = folder
    for name in ("a", "b"):
        create_topic(source, f"jt{name}{tag}.orders", 1)
        path = write(base, name, source, target, tag)
        applied = kmirror("apply", "-f", path.name, "--auto-approve", cwd=base)
        assert applied.returncode == 0, applied.stdout + applied.stderr
    a, b = flow_status(base / "a.yaml"), flow_status(base / "b.yaml")
    assert a["running"] and b["running"], (a, b)
    assert a["checkpoint"] != b["checkpoint"]  # the same flow name, two state topics: two checkpoints
    assert "_kmirror.state.a-" in a["checkpoint"] and "_kmirror.state.b-" in b["checkpoint"]

    # Applying one file plans nothing for the other's job (prune.jobs is on by default).
    again = kmirror("apply", "-f", "a.yaml", "--auto-approve", cwd=base)
    assert again.returncode == 0 and flow_status(base / "b.yaml")["running"], again.stdout + again.stderr
    write(base, "a", source, target, tag, enabled=False)
    stopped = kmirror("apply", "-f", "a.yaml", "--auto-approve", cwd=base)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    listed = kmirror("status", "-f", "a.yaml", "--format", "json", cwd=base)
    assert json.loads(listed.stdout)["flows"] == []  # a disabled flow has no job: its driver was stopped
    assert flow_status(base / "b.yaml")["running"]

    # The hourly drift check, as the workflow runs it, in a fresh checkout of the config repository.
    fresh = tmp_path_factory.mktemp("fresh-checkout")
    shutil.copy(base / "b.yaml", fresh / "kmirror.yaml")
    runner = Runner(fresh, env={"CONFIG": "kmirror.yaml"})
    drift = runner.run(only_job(load(REUSABLE / "kmirror-drift.yml")), "plan", TIMEOUT="30")
    assert drift.outputs["exitcode"] == "0", drift.stdout + drift.stderr
