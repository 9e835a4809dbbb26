"""Applications on a Spark standalone cluster (`spark.application` with `deploy: standalone`): the folder roots the
file may name, the deployment record that names the application, and the driver-side mirror of an application's
folder on HDFS (`replication/app_mirror.py`) against an in-memory folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.replication.app_mirror import FolderMirror
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
        "checkpoint_root: hdfs://nn:8020/kmirror/checkpoints",
        "checkpoint_root: s3a://bucket/cp\n  job_folder_root: /mnt/kmirror/jobs",
        "checkpoint_root: s3a://bucket/cp\n  job_folder_root: hdfs://nn:8020/jobs",
    ],
)
@pytest.mark.parametrize("own", [False, True])
def test_every_standalone_folder_root_takes_an_application(roots: str, own: bool) -> None:
    desired = _state(roots, own=own)
    assert desired.application_of(desired.flow("a")) == "fleet"


def test_the_deployment_record_names_the_application_and_reads_back_the_same() -> None:
    folder = "hdfs://nn:8020/kmirror/k/_apps/fleet/a"
    record = StandaloneDeployment(flow="a", submission_id="driver-1", folder=folder, application="fleet")
    written = record.model_dump(mode="json")
    assert written["application"] == "fleet" and written["runner"] == "standalone"
    assert deployment_of(written) == record
    assert "application" not in StandaloneDeployment(flow="a", submission_id="driver-2").model_dump(mode="json")


class FakeHdfs:
    """An application's folder on HDFS, in memory: name -> (bytes, modification time)."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[bytes, int]] = {}
        self.clock = 0
        self.puts: list[str] = []

    def write(self, name: str, data: bytes) -> None:
        self.clock += 1
        self.files[name] = (data, self.clock)

    def listing(self, name: str = "") -> dict[str, tuple[bool, int]]:
        prefix = f"{name}/" if name else ""
        out: dict[str, tuple[bool, int]] = {}
        for path, (_, mtime) in self.files.items():
            if path.startswith(prefix):
                head, _, rest = path[len(prefix) :].partition("/")
                out[head] = (bool(rest), mtime)
        return out

    def read(self, name: str) -> bytes | None:
        found = self.files.get(name)
        return found[0] if found else None

    def put(self, name: str, data: bytes) -> None:
        self.puts.append(name)
        self.write(name, data)

    def delete(self, name: str) -> None:
        self.files.pop(name, None)


def test_the_mirror_copies_requests_in_and_statuses_out_and_never_takes_a_torn_request(tmp_path: Path) -> None:
    hdfs = FakeHdfs()
    local = tmp_path / "fleet"
    mirror = FolderMirror(hdfs, local)
    hdfs.write("a/spec.json", b'{"digest": "d1"}')
    hdfs.write("a/request.json", b'{"flow": "a", "digest": "d1"}')
    mirror.step()
    assert json.loads((local / "a" / "request.json").read_text())["digest"] == "d1"
    assert (local / "a" / "spec.json").is_file()

    hdfs.write("a/request.json", b'{"flow": "a", "dig')  # a runner's overwrite seen half-written
    mirror.step()
    assert json.loads((local / "a" / "request.json").read_text())["digest"] == "d1"  # kept, not dropped
    hdfs.write("a/request.json", b'{"flow": "a", "digest": "d2"}')
    mirror.step()
    assert json.loads((local / "a" / "request.json").read_text())["digest"] == "d2"

    hdfs.write("a/stop.request", b"stop requested\n")
    mirror.step()
    assert (local / "a" / "stop.request").is_file()
    hdfs.delete("a/stop.request")  # deployed again
    mirror.step()
    assert not (local / "a" / "stop.request").exists()

    (local / "status.json").write_text('{"state": "running", "flows": ["a"]}')
    (local / "a" / "status.json").write_text('{"state": "running"}')
    mirror.step()
    assert hdfs.read("status.json") == b'{"state": "running", "flows": ["a"]}'
    assert hdfs.read("a/status.json") == b'{"state": "running"}'
    puts = len(hdfs.puts)
    mirror.step()
    assert len(hdfs.puts) == puts  # unchanged statuses are not written again
    (local / "a" / "status.json").write_text('{"state": "stop')  # torn: not sent
    mirror.step()
    assert hdfs.read("a/status.json") == b'{"state": "running"}'
