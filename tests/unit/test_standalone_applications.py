"""Applications on a Spark standalone cluster (`spark.application` with `deploy: standalone`): which folder roots
the file may name (the driver reads its application's folder on a shared path), and the deployment record that
names the application, as the state topic keeps it."""

from __future__ import annotations

import re

import pytest

from reconciler.errors import KmirrorError
from reconciler.resources.deployments import StandaloneDeployment, deployment_of
from reconciler.spec.loader import load_text
from reconciler.spec.models import DesiredState

pytestmark = pytest.mark.unit


def _state(roots: str, *, own: bool = False) -> DesiredState:
    application = "" if own else "\n  application: fleet"
    flow_key = "\n    spark: {application: fleet}" if own else ""
    text = f"""
version: 1
clusters:
  src: {{bootstrap_servers: "127.0.0.1:1"}}
  dst: {{bootstrap_servers: "127.0.0.1:2"}}
state: {{cluster: dst}}
spark:
  deploy: standalone
  master: "spark://h:7077"
  rest_url: "http://h:6066"{application}
  {roots}
flows:
  - name: a
    source: src
    target: dst
    topics: {{include: ['a\\\\..*']}}{flow_key}
"""
    return load_text(text).state


@pytest.mark.parametrize(
    "roots",
    [
        "checkpoint_root: /mnt/kmirror/checkpoints",
        "checkpoint_root: file:///mnt/kmirror/checkpoints",
        "checkpoint_root: s3a://bucket/cp\n  job_folder_root: /mnt/kmirror/jobs",
    ],
)
def test_a_shared_folder_root_takes_an_application(roots: str) -> None:
    assert _state(roots).application_of(_state(roots).flow("a")) == "fleet"
    assert _state(roots, own=True).application_of(_state(roots, own=True).flow("a")) == "fleet"


@pytest.mark.parametrize(
    ("roots", "key"),
    [
        ("checkpoint_root: hdfs://nn:8020/cp", "checkpoint_root is 'hdfs://nn:8020/cp'"),
        ("checkpoint_root: s3a://bucket/cp\n  job_folder_root: hdfs://nn:8020/jobs", "job_folder_root is"),
    ],
)
@pytest.mark.parametrize("own", [False, True])
def test_a_folder_root_on_hdfs_refuses_an_application_saying_which_key_and_what_to_do(
    roots: str, key: str, own: bool
) -> None:
    with pytest.raises(KmirrorError) as err:
        _state(roots, own=own)
    said = str(err.value)
    where = "flows[a].spark.application" if own else "spark.application"
    assert where in said and key in said and "give an absolute path or file: URI" in said, said
    assert re.search(r":\d+:\d+: ", said), said  # where: file:line:column


def test_the_deployment_record_names_the_application_and_reads_back_the_same() -> None:
    folder = "/mnt/j/k/_apps/fleet/a"
    record = StandaloneDeployment(flow="a", submission_id="driver-1", folder=folder, application="fleet")
    written = record.model_dump(mode="json")
    assert written["application"] == "fleet" and written["runner"] == "standalone"
    assert deployment_of(written) == record
    assert "application" not in StandaloneDeployment(flow="a", submission_id="driver-2").model_dump(mode="json")
