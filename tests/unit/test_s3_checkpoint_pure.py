"""Pure parts of S3 checkpoints and of where a job's log is: which jars a checkpoint URI needs, the local MinIO's
keys and its `dev status` entry (file paths, never keys), the SigV4 signature the dev tooling sends, and the log
location `kmirror status` names for a driver whose side files are on HDFS."""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import stat
from pathlib import Path

import pytest

from reconciler.artifacts.jars import filesystem_jars, hadoop_aws_set, known_sets, locked
from reconciler.devenv import s3_requests
from reconciler.devenv.minio_local import LocalS3, ensure_keys
from reconciler.runners.rest import DriverStatus
from reconciler.runners.standalone import StandaloneJob

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("uri", ["hdfs://nn:8020/kmirror", "file:///tmp/x", "/tmp/x", "checkpoints", "gs://b/x"])
def test_only_an_s3a_root_adds_jars_to_the_job(uri: str) -> None:
    assert filesystem_jars(uri) == []


def test_s3a_jars_are_pinned_without_the_sdk_bundle() -> None:
    assert hadoop_aws_set() in known_sets("4.1.3")
    lock = locked(hadoop_aws_set())
    assert lock is not None, "hadoop-aws's lock is stale: run `make lock`"
    artifacts = {jar.artifact for jar in lock.jars}
    assert {"hadoop-aws", "s3", "s3-transfer-manager", "sts", "apache-client", "netty-nio-client"} <= artifacts
    assert "bundle" not in artifacts  # the 640 MB one


def test_dev_keys_are_generated_once_private_and_stay_out_of_the_status(tmp_path: Path) -> None:
    access, secret = ensure_keys(tmp_path / "keys")
    assert ensure_keys(tmp_path / "keys") == (access, secret)
    assert stat.S_IMODE((tmp_path / "keys").stat().st_mode) == 0o700
    for name in ("access_key", "secret_key", "aws.env"):
        assert stat.S_IMODE((tmp_path / "keys" / name).stat().st_mode) == 0o600
    assert f"AWS_SECRET_ACCESS_KEY={secret}\n" in (tmp_path / "keys" / "aws.env").read_text()
    record = LocalS3(home=str(tmp_path), pid=2**22 + 7, port=19000)
    status = record.status()
    assert status["endpoint"] == "http://127.0.0.1:19000" and status["bucket"] == "kmirror"
    assert status["secret_key_file"] == str(tmp_path / "keys" / "secret_key")
    assert status["running"] is False
    text = json.dumps(status) + repr(record.client())
    assert secret not in text and access not in text


def test_requests_carry_a_sigv4_signature_and_never_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[object] = []

    class Response:
        status = 200

        def __enter__(self) -> Response:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def read(self) -> bytes:
            return (
                b"<ListBucketResult xmlns='http://s3.amazonaws.com/doc/2006-03-01/'><Key>a/b</Key></ListBucketResult>"
            )

    def fake_urlopen(request: object, timeout: float) -> Response:
        sent.append(request)
        return Response()

    monkeypatch.setattr(s3_requests.urllib.request, "urlopen", fake_urlopen)
    endpoint = s3_requests.S3Endpoint("http://127.0.0.1:9000", "AKID", "s3cr3t-value")
    assert s3_requests.list_keys(endpoint, "kmirror", "a/") == ["a/b"]
    request = sent[0]
    headers = {k.lower(): v for k, v in request.header_items()}  # type: ignore[attr-defined]
    assert request.full_url == "http://127.0.0.1:9000/kmirror?list-type=2&prefix=a%2F"  # type: ignore[attr-defined]
    auth = headers["authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKID/")
    assert "s3cr3t-value" not in auth and "s3cr3t-value" not in str(headers)
    # The signature is AWS's SigV4 over the canonical request: recomputed here from the same parts.
    amz_date = headers["x-amz-date"]
    day = amz_date[:8]
    datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
    empty = hashlib.sha256(b"").hexdigest()
    canonical = "\n".join(
        [
            "GET", "/kmirror", "list-type=2&prefix=a%2F",
            "host:127.0.0.1:9000", f"x-amz-content-sha256:{empty}", f"x-amz-date:{amz_date}", "",
            "host;x-amz-content-sha256;x-amz-date", empty,
        ]
    )  # fmt: skip
    scope = f"{day}/us-east-1/s3/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    key = b"AWS4s3cr3t-value"
    for part in (day, "us-east-1", "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    assert auth.endswith("Signature=" + hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest())


def _job(tmp_path: Path, remote: str | None, worker: str | None) -> StandaloneJob:
    driver = DriverStatus("driver-20261127-0001", True, "RUNNING", worker)
    return StandaloneJob("repl", tmp_path, "driver-20261127-0001", "d", False, "gone", None, None, driver, None, remote)


def test_a_driver_with_side_files_on_hdfs_has_its_log_on_its_worker_not_here(tmp_path: Path) -> None:
    job = _job(tmp_path, "hdfs://nn:8020/k/_kmirror.state/repl", "10.0.0.5:7078")
    where = job.log_location
    assert "driver.log" not in where and str(tmp_path) not in where
    assert "worker 10.0.0.5:7078" in where and "work/driver-20261127-0001/" in where


def test_a_driver_on_a_shared_folder_logs_to_its_driver_log(tmp_path: Path) -> None:
    assert _job(tmp_path, None, "10.0.0.5:7078").log_location == str(tmp_path / "driver.log")


def test_dev_status_json_names_the_local_s3_and_its_key_files_never_the_keys(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from reconciler.cli.main import main

    home = tmp_path / "s3"
    access, secret = ensure_keys(home / "keys")
    (home / "minio.json").write_text(json.dumps({"pid": 2**22 + 11, "port": 19555, "bucket": "kmirror"}))
    result = CliRunner().invoke(main, ["dev", "status", "--root", str(tmp_path), "--format", "json"])
    assert result.exit_code == 0, result.output
    s3 = json.loads(result.output)["s3"]
    assert s3["endpoint"] == "http://127.0.0.1:19555" and s3["bucket"] == "kmirror" and s3["running"] is False
    assert s3["env_file"] == str(home / "keys" / "aws.env")
    assert secret not in result.output and access not in result.output
