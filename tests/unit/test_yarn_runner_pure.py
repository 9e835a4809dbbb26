"""The YARN runner's pure parts: the spec's rules for `deploy: yarn`, the Hadoop configuration it reads, the Spark
settings it submits with (no resolved secret), and the plan's job row. No JVM, no network."""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path

import pytest

from reconciler.artifacts.job_env import job_distributions, job_env_archive
from reconciler.resources.job_status import JobStatus
from reconciler.runners import JobRunnerError, runner_for
from reconciler.runners.hadoop import HadoopClient
from reconciler.runners.yarn import YarnRunner
from reconciler.spec.issues import SpecError
from reconciler.spec.loader import load_text
from tests.unit.plan.builders import desired, live, plan

pytestmark = pytest.mark.unit


def spec(spark: str) -> str:
    return f"""
version: 1
clusters:
  a: {{bootstrap_servers: "a:9092", client: {{sasl.password: "${{env:KM_TEST_SECRET}}"}}}}
  b: {{bootstrap_servers: "b:9092"}}
state: {{cluster: b}}
spark: {spark}
flows:
  - {{name: f, source: a, target: b, topics: {{include: [orders]}}}}
"""


def conf_dir(tmp_path: Path, yarn: str = "rm:8088", hdfs: str | None = "nn:9870") -> Path:
    folder = tmp_path / "conf"
    folder.mkdir(parents=True)

    def site(name: str, props: dict[str, str]) -> None:
        body = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items())
        (folder / name).write_text(f"<?xml version='1.0'?><configuration>{body}</configuration>")

    site("core-site.xml", {"fs.defaultFS": "hdfs://nn:8020"})
    site("hdfs-site.xml", {"dfs.namenode.http-address": hdfs} if hdfs else {})
    site("yarn-site.xml", {"yarn.resourcemanager.webapp.address": yarn} if yarn else {})
    return folder


def test_deploy_yarn_takes_master_yarn_or_none_and_an_hdfs_or_s3a_checkpoint_root() -> None:
    ok = load_text(
        spec('{deploy: yarn, checkpoint_root: "hdfs://nn:8020/kmirror"}'), environ={"KM_TEST_SECRET": "x"}
    ).state
    assert ok.spark.deploy == "yarn" and ok.spark.master is None
    with pytest.raises(SpecError, match="deploy 'yarn' needs master 'yarn'"):
        load_text(spec('{deploy: yarn, master: "spark://m:7077", checkpoint_root: "hdfs://nn/k"}'))
    on_s3 = load_text(spec('{deploy: yarn, checkpoint_root: "s3a://bucket/k"}'), environ={"KM_TEST_SECRET": "x"})
    assert on_s3.state.spark.job_folder_root is None  # the runner's default: the cluster's HDFS
    for root in ("gs://bucket/k", "/shared/k", "relative/k"):
        with pytest.raises(SpecError, match=r"with deploy 'yarn' .* give an hdfs:// URI"):
            load_text(spec(f'{{deploy: yarn, checkpoint_root: "{root}"}}'))


def test_the_hadoop_configuration_names_the_resource_manager_and_webhdfs(tmp_path: Path) -> None:
    client = HadoopClient.from_conf_dir(conf_dir(tmp_path))
    assert (client.resource_manager, client.namenode_http) == ("http://rm:8088", "http://nn:9870")
    # The jobs' folders of an s3a: checkpoint root, by default: this user's folder on the default FS.
    assert client.home_folder("kmirror") == f"hdfs://nn:8020/user/{client.user}/kmirror"
    with pytest.raises(JobRunnerError, match=r"set spark\.job_folder_root"):
        HadoopClient("http://nn:9870", "http://rm:8088", "u").home_folder("kmirror")
    # No dfs.namenode.http-address: the default FS's host on WebHDFS's default port.
    assert HadoopClient.from_conf_dir(conf_dir(tmp_path / "b", hdfs=None)).namenode_http == "http://nn:9870"
    with pytest.raises(JobRunnerError, match="names no ResourceManager"):
        HadoopClient.from_conf_dir(conf_dir(tmp_path / "c", yarn=""))
    with pytest.raises(JobRunnerError, match="does not exist"):
        HadoopClient.from_conf_dir(tmp_path / "missing")


def test_without_a_hadoop_configuration_the_runner_says_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    text = spec('{deploy: yarn, checkpoint_root: "hdfs://nn:8020/k"}')
    desired_state = load_text(text).state.with_source_path(tmp_path / "kmirror.yaml")
    with pytest.raises(JobRunnerError, match=r"set spark.hadoop_conf_dir or \$HADOOP_CONF_DIR"):
        runner_for(desired_state)


def test_the_submission_holds_no_resolved_secret_and_keeps_the_files_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KM_TEST_SECRET", "s3cr3t-value")
    folder = conf_dir(tmp_path)
    text = spec(
        f'{{deploy: yarn, hadoop_conf_dir: "{folder}", checkpoint_root: "hdfs://nn:8020/k", '
        'conf: {spark.yarn.queue: streaming, spark.some.password: "${env:KM_TEST_SECRET}", '
        "spark.pyspark.python: ./env/bin/python}}"
    )
    desired_state = load_text(text).state.with_source_path(tmp_path / "kmirror.yaml")
    runner = runner_for(desired_state).primary
    assert isinstance(runner, YarnRunner) and runner.conf_dir == folder
    props = runner.properties("f", desired_state.spark)
    assert "s3cr3t-value" not in repr(props) and "spark.some.password" not in props
    assert props["spark.yarn.queue"] == "streaming"
    assert props["spark.pyspark.python"] == "./env/bin/python"  # the file's setting wins over kmirror's default
    assert props["spark.yarn.submit.waitAppCompletion"] == "false"
    assert props["spark.yarn.jars"].startswith("local:") and props["spark.yarn.jars"].endswith("/jars/*")
    archived = desired_state.spark.model_copy(
        update={"conf": {**desired_state.spark.conf, "spark.yarn.archive": "hdfs:///s.zip"}}
    )
    assert "spark.yarn.jars" not in runner.properties("f", archived)


def test_the_plan_says_the_job_runs_on_yarn() -> None:
    ds = desired()
    ds = ds.model_copy(
        update={"spark": ds.spark.model_copy(update={"deploy": "yarn", "checkpoint_root": "hdfs://nn:8020/k"})}
    )
    p = plan(ds, live(), jobs=JobStatus())
    rows = [c for c in p.changes if c.address.startswith("job/")]
    assert rows and all(
        "runs on YARN as a cluster-mode application, checkpoint on hdfs://nn:8020/k" in c.reason for c in rows
    )


def test_the_packed_job_environment_holds_what_the_job_imports_and_no_dev_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = {d.metadata["Name"].lower().replace("_", "-") for d in job_distributions()}
    assert {"pyspark", "confluent-kafka", "pydantic", "click", "py4j"} <= names, names
    assert not names & {"pytest", "mypy", "ruff", "matplotlib", "hypothesis"}, names
    monkeypatch.setenv("KMIRROR_CACHE", str(tmp_path / "cache"))
    archive, built = job_env_archive()
    assert built is not None and job_env_archive() == (archive, None)  # built once, then cached
    with tarfile.open(archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["bin/python"].issym() and members["bin/python"].linkname == sys._base_executable  # type: ignore[attr-defined]
    assert "pyvenv.cfg" in members
    site = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
    assert f"{site}/reconciler/replication/yarn_entry.py" in members  # kmirror's own code, copied
    assert f"{site}/pyspark/__init__.py" in members
    assert not any(name.startswith(f"{site}/pyspark/jars/") for name in members)  # Spark's jars: spark.yarn.jars
    assert not any("__editable__" in name for name in members)
