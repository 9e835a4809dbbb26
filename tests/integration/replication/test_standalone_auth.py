"""The standalone runner against a master whose REST submission server requires authentication (Spark's own
JWSFilter on `spark.master.rest.filters`): refused without the key and with a wrong one, with a clear message;
with `spark.rest_jws_secret_key` referencing the key, apply submits the driver, the plan sees it running, and a
disabled flow stops it. The key never reaches a file kmirror writes or a command line."""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler import operations
from reconciler.devenv import spark_standalone
from reconciler.devenv.spark_standalone import StandaloneCluster
from reconciler.runners import JobRunnerError
from reconciler.runners.rest import RestClient
from reconciler.spec.loader import load_desired_state
from tests.conftest import KafkaCluster
from tests.integration.replication.conftest import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEY = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    home = tmp_path_factory.mktemp("spark-authenticated")
    c = spark_standalone.start(home, rest_jws_key=KEY)
    try:
        yield c
    finally:
        spark_standalone.stop(home)


def test_requests_without_the_key_or_with_another_are_refused_clearly(cluster: StandaloneCluster) -> None:
    with pytest.raises(JobRunnerError, match=r"requires authentication; set spark\.rest_jws_secret_key"):
        RestClient(cluster.rest_url).status("driver-none")
    other = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
    with pytest.raises(JobRunnerError, match="token kmirror signed was not accepted"):
        RestClient(cluster.rest_url, signing_key=other).status("driver-none")
    answer = RestClient(cluster.rest_url, signing_key=KEY).status("driver-none")
    assert not answer.found  # the server answered: it knows no such driver


def test_apply_submits_plans_and_stops_a_driver_with_the_referenced_key(
    cluster: StandaloneCluster,
    source: KafkaCluster,
    target: KafkaCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KM_SPARK_REST_KEY", KEY)
    tag = uuid.uuid4().hex[:6]
    create_topic(source, f"au{tag}.orders", 1)
    spec = tmp_path / "kmirror.yaml"

    def write(enabled: bool) -> None:
        spec.write_text(f"""
version: 1
clusters:
  s{tag}: {{bootstrap_servers: "{source.bootstrap_servers}"}}
  t{tag}: {{bootstrap_servers: "{target.bootstrap_servers}"}}
state: {{cluster: t{tag}, topic: _kmirror.state.{tag}}}
spark:
  deploy: standalone
  master: "{cluster.master_url}"
  rest_url: "{cluster.rest_url}"
  rest_jws_secret_key: "${{env:KM_SPARK_REST_KEY}}"
  checkpoint_root: "{tmp_path / "shared"}"
  conf: {{spark.executor.memory: 512m, spark.cores.max: 1}}
flows:
  - name: auth
    enabled: {str(enabled).lower()}
    source: s{tag}
    target: t{tag}
    topics: {{include: ["au{tag}\\\\..*"]}}
    sync: {{acls: false, group_offsets: false}}
    heartbeats: {{enabled: false}}
""")

    write(True)
    desired = load_desired_state(spec)
    result = operations.apply(desired)
    assert result is not None and not result.failed, result and result.failed
    try:
        info = operations.job_status(desired, operations.job_runner(desired, operations.read_state(desired).recorded()))
        assert info.jobs["auth"].running, info
        assert not [c for c in operations.make_plan(desired).changes if c.address == "job/auth"]
    finally:
        write(False)
        stopped = operations.apply(load_desired_state(spec))
        assert stopped is not None and not stopped.failed
    written = [p for p in (tmp_path / "shared").rglob("*") if p.is_file()]
    assert written and all(KEY.encode() not in p.read_bytes() for p in written)
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            assert KEY.encode() not in cmdline.read_bytes(), f"the key in the command line of {cmdline.parent.name}"
        except OSError:
            continue
    assert (
        json.loads((tmp_path / "shared" / f"_kmirror.state.{tag}" / "auth" / "status.json").read_text())["state"]
        == "stopped"
    )
