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
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import KafkaCluster
from tests.integration.replication.conftest import SequenceProducer, create_topic, read_partition, wait_for
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
    runner = Runner(fresh, env={"CONFIG": "kmirror.yaml", "KMIRROR_PLAN_KEY": "drift-check-key-0123456789"})
    drift = runner.run(only_job(load(REUSABLE / "kmirror-drift.yml")), "plan", TIMEOUT="30")
    assert drift.outputs["exitcode"] == "0", drift.stdout + drift.stderr


def test_a_renamed_flow_carries_its_job_over_with_nothing_copied_again(
    tmp_path: Path, source: KafkaCluster, target: KafkaCluster
) -> None:
    """Terraform's `moved`: the plan says the job moves; apply stops it and starts it under the new name on the
    same checkpoint, so records keep flowing with none lost and at most offset_lag_max per partition again."""
    tag = uuid.uuid4().hex[:6]
    topic = f"jtr{tag}.orders"
    create_topic(source, topic, 2)
    path = write(tmp_path, "r", source, target, tag)
    text = path.read_text()
    try:
        with SequenceProducer(source, topic, 2, per_round=40) as seq:
            applied = kmirror("apply", "-f", path.name, "--auto-approve", cwd=tmp_path)
            assert applied.returncode == 0, applied.stdout + applied.stderr
            remote = f"src{tag}.{topic}"
            wait_for("the job to copy some records", lambda: seq.copied(target, remote) > 500)
            path.write_text(
                text.replace("  - name: repl", "  - name: mirror-orders")
                + "moved:\n  - {from: repl, to: mirror-orders}\n"
            )
            planned = kmirror("plan", "-f", path.name, "--format", "json", cwd=tmp_path)
            changes = {c["address"]: c for c in json.loads(planned.stdout)["changes"]}
            assert set(changes) == {"job/mirror-orders"}, changes
            move = changes["job/mirror-orders"]
            assert move["after"]["operation"] == "move" and "moved from job/repl" in move["reason"]
            moved = kmirror("apply", "-f", path.name, "--auto-approve", cwd=tmp_path)
            assert moved.returncode == 0, moved.stdout + moved.stderr
            status = flow_status(path)
            assert status["flow"] == "mirror-orders" and status["running"], status
            assert "/repl/checkpoint" in status["checkpoint"]  # the old job's checkpoint, carried over
            time.sleep(3)
        total, duplicates = seq.check(target, remote)
        lag_max = 100
        for p in range(2):
            got = Counter(int(r.value or b"-1") for r in read_partition(target, remote, p))
            again = sum(c - 1 for c in got.values())
            assert again <= lag_max, f"partition {p}: {again} records copied again"
        print(f"rename: {total} records, none lost, {duplicates} duplicates")
        again = kmirror("plan", "-f", path.name, "--detailed-exitcode", cwd=tmp_path)
        assert again.returncode == 0, again.stdout + again.stderr  # the old name's record is gone too
    finally:
        write(tmp_path, "r", source, target, tag, enabled=False)
        off = tmp_path / "r.yaml"
        off.write_text(off.read_text().replace("  - name: repl", "  - name: mirror-orders"))
        kmirror("apply", "-f", off.name, "--auto-approve", cwd=tmp_path)


def test_a_renamed_exactly_once_flow_resumes_from_its_group_with_nothing_written_twice(
    tmp_path: Path, source: KafkaCluster, target: KafkaCluster
) -> None:
    """The exactly-once group and transactional ids stay the old name's across `moved`: the renamed job skips what
    the target committed, so a read_committed consumer sees every record once, in order, across the move."""
    tag = uuid.uuid4().hex[:6]
    topic = f"jte{tag}.orders"
    create_topic(source, topic, 2)
    path = write(tmp_path, "e", source, target, tag)
    text = path.read_text().replace("    sync:", "    replication: {delivery: exactly_once}\n    sync:")
    path.write_text(text)
    remote = f"src{tag}.{topic}"

    def committed() -> dict[int, list[int]]:
        read = {p: read_partition(target, remote, p, read_committed=True) for p in (0, 1)}
        return {p: [int(r.value or b"-1") for r in records] for p, records in read.items()}

    try:
        with SequenceProducer(source, topic, 2, per_round=40) as seq:
            applied = kmirror("apply", "-f", path.name, "--auto-approve", cwd=tmp_path)
            assert applied.returncode == 0, applied.stdout + applied.stderr
            wait_for("the job to copy some records", lambda: seq.copied(target, remote) > 500)
            renamed = text.replace("  - name: repl", "  - name: mirror-orders")
            path.write_text(renamed + "moved:\n  - {from: repl, to: mirror-orders}\n")
            moved = kmirror("apply", "-f", path.name, "--auto-approve", cwd=tmp_path)
            assert moved.returncode == 0, moved.stdout + moved.stderr
            assert flow_status(path)["delivery"] == "exactly_once"
            time.sleep(3)
        wanted = {p: list(s) for p, s in seq.produced.items()}
        wait_for("every record, read_committed", lambda: all(len(v) >= len(wanted[p]) for p, v in committed().items()))
        assert committed() == wanted  # once each, in order: the renamed job resumed from the old name's group
        print(f"exactly-once rename: {sum(len(s) for s in wanted.values())} records, none lost, none twice")
    finally:
        off = text.replace("  - name: repl", "  - name: mirror-orders").replace("enabled: true", "enabled: false")
        path.write_text(off)
        kmirror("apply", "-f", path.name, "--auto-approve", cwd=tmp_path)


def test_two_environments_with_one_state_topic_name_on_one_host_keep_their_own_jobs(
    tmp_path: Path, source: KafkaCluster, target: KafkaCluster
) -> None:
    """Two environments (two checkouts, one `$KMIRROR_HOME`, one shared checkpoint root) whose state topics have the
    same name on different clusters, with the same flow name: each gets its own job folder and checkpoint, keyed by
    its state cluster's id. The second's apply starts its own job from the start of its topic; it neither stops
    the first's job nor resumes from the first's checkpoint (which it did when folders were keyed by the state
    topic's name alone: it copied nothing)."""
    tag = uuid.uuid4().hex[:6]
    shared = tmp_path / "shared-checkpoints"
    envs = {"a": "dst", "b": "src"}  # where each environment keeps its state: two clusters, one topic name
    paths: dict[str, Path] = {}
    for env, state_cluster in envs.items():
        checkout = tmp_path / f"checkout-{env}"
        checkout.mkdir()
        create_topic(source, f"jtk{tag}{env}.orders", 1)
        path = write(checkout, "kmirror", source, target, tag)
        text = path.read_text().replace(f"jtkmirror{tag}", f"jtk{tag}{env}")
        text = text.replace(
            f'state: {{cluster: dst{tag}, topic: "_kmirror.state.kmirror-{tag}"}}',
            f'state: {{cluster: {state_cluster}{tag}, topic: "_kmirror.state.k-{tag}"}}',
        )
        path.write_text(text.replace("checkpoint_root: checkpoints", f"checkpoint_root: {shared}"))
        paths[env] = path
    try:
        with SequenceProducer(source, f"jtk{tag}a.orders", 1, per_round=20) as seq_a:
            for path in paths.values():
                applied = kmirror("apply", "-f", path.name, "--auto-approve", cwd=path.parent)
                assert applied.returncode == 0, applied.stdout + applied.stderr
            a, b = flow_status(paths["a"]), flow_status(paths["b"])
            assert a["running"] and b["running"], (a, b)  # b's deploy did not stop a's job
            assert a["checkpoint"] != b["checkpoint"], (a, b)
            with SequenceProducer(source, f"jtk{tag}b.orders", 1, per_round=20) as seq_b:
                time.sleep(3)
        total_a, _ = seq_a.check(target, f"src{tag}.jtk{tag}a.orders")
        total_b, _ = seq_b.check(target, f"src{tag}.jtk{tag}b.orders")  # every record of b's topic: none skipped
        assert total_a > 0 and total_b > 0
        for env, path in paths.items():
            planned = kmirror("plan", "-f", path.name, "--detailed-exitcode", cwd=path.parent)
            assert planned.returncode == 0, f"{env}: " + planned.stdout + planned.stderr
    finally:
        for path in paths.values():
            path.write_text(path.read_text().replace("enabled: true", "enabled: false"))
        with ThreadPoolExecutor(max_workers=2) as pool:  # two environments: their jobs stop side by side
            list(pool.map(lambda p: kmirror("apply", "-f", p.name, "--auto-approve", cwd=p.parent), paths.values()))
