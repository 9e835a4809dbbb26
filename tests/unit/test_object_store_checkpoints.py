"""Deleting a removed flow's checkpoint on object storage: only s3a: checkpoints, the job's Hadoop settings on the
tool's stdin (references resolved in memory), never on its command line or in an error message."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from reconciler.runners import object_store
from reconciler.runners.common import JobRunnerError
from reconciler.spec.models import SparkSpec

pytestmark = pytest.mark.unit

SECRET = "s3cr3t-value-never-shown"


def spark() -> SparkSpec:
    return SparkSpec.model_validate(
        {
            "deploy": "local",
            "checkpoint_root": "s3a://b/k",
            "conf": {
                "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
                "spark.hadoop.fs.s3a.secret.key": "${env:KM_UNIT_S3_SECRET}",
                "spark.kmirror.triggerInterval": "1 second",
            },
        }
    )


def test_only_an_object_store_checkpoint_is_deleted_through_the_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(object_store.subprocess, "run", lambda *a, **k: calls.append((a, k)))
    assert object_store.forget_checkpoint(None, spark(), Path("."), None) is False
    assert object_store.forget_checkpoint("/tmp/cp", spark(), Path("."), None) is False
    assert object_store.forget_checkpoint("hdfs://nn/cp", spark(), Path("."), None) is False
    assert calls == []


def test_settings_go_on_stdin_and_a_failure_never_shows_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KM_UNIT_S3_SECRET", SECRET)
    monkeypatch.setattr(object_store, "hadoop_delete_command", lambda uri, conf: ["java", "Tool", uri])
    seen: dict[str, Any] = {}

    def run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        seen["cmd"], seen["input"] = cmd, kwargs["input"]
        return subprocess.CompletedProcess(cmd, seen.get("code", 0), "deleted\n", f"AccessDenied for {SECRET}\n")

    monkeypatch.setattr(object_store.subprocess, "run", run)
    assert object_store.forget_checkpoint("s3a://b/k/st/f/checkpoint", spark(), Path("."), None) is True
    assert seen["cmd"] == ["java", "Tool", "s3a://b/k/st/f/checkpoint"]
    assert f"fs.s3a.secret.key={SECRET}\n" in seen["input"]
    assert "fs.s3a.endpoint=http://127.0.0.1:9000\n" in seen["input"]
    assert "triggerInterval" not in seen["input"]  # only the Hadoop settings
    seen["code"] = 1
    with pytest.raises(JobRunnerError) as failed:
        object_store.forget_checkpoint("s3a://b/k/st/f/checkpoint", spark(), Path("."), None)
    assert SECRET not in str(failed.value) and "AccessDenied for ***" in str(failed.value)
    assert "the next apply tries again" in str(failed.value)
