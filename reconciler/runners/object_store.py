"""A removed flow's checkpoint on object storage (`s3a:`), deleted from the control plane.

kmirror has no HTTP client for S3 (no SDK, no credential chain of its own), so it deletes such a checkpoint the way
the job reached it: Hadoop's FileSystem API with S3A's jars (`artifacts.hadoop_tool`, one short-lived JVM per
removed flow), given the job's Hadoop settings (`spark.hadoop.*` of `spark.conf`) on stdin and the Hadoop
configuration folder on its classpath. So its credentials come from where the job's did: S3A's chain (the
settings, the environment, the instance profile) or a credential provider named in the settings (a jceks file on
HDFS). References in the settings are resolved here, in memory, as a local job resolves them.

Must not: put a setting on a command line or a resolved value in an error message; delete anything but the
checkpoint it is given.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from reconciler.artifacts.hadoop_tool import hadoop_delete_command
from reconciler.jobcontract.layout import OBJECT_STORE_SCHEMES, scheme_of
from reconciler.runners.common import JobRunnerError, spark_value
from reconciler.spec.models import SparkSpec
from reconciler.spec.secrets import SecretRef

_TIMEOUT_S = 180.0


def forget_checkpoint(checkpoint: str | None, spark: SparkSpec, base_dir: Path, conf_dir: Path | None) -> bool:
    """Delete `checkpoint` when it is on object storage (recursively; absent is fine). Whether it was such a
    checkpoint; raises `JobRunnerError` (the flow stays recorded, the next apply tries again) when it could not."""
    if checkpoint is None or scheme_of(checkpoint) not in OBJECT_STORE_SCHEMES:
        return False
    settings: dict[str, str] = {}
    hidden: list[str] = []
    for key, value in spark.conf.items():
        if not key.startswith("spark.hadoop."):
            continue
        text = str(value.resolve(base_dir)) if isinstance(value, SecretRef) else spark_value(value)
        if isinstance(value, SecretRef):
            hidden.append(text)
        settings[key.removeprefix("spark.hadoop.")] = text
    try:
        cmd = hadoop_delete_command(checkpoint, conf_dir)
        result = subprocess.run(
            cmd, input="".join(f"{k}={v}\n" for k, v in settings.items()), capture_output=True, text=True,
            timeout=_TIMEOUT_S, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise JobRunnerError(f"deleting the checkpoint {checkpoint} took more than {_TIMEOUT_S:.0f}s") from None
    except Exception as exc:  # the tool could not be built or started (ArtifactError: what to install)
        raise JobRunnerError(f"could not delete the checkpoint {checkpoint}: {exc}") from None
    if result.returncode != 0:
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()][-5:]
        message = "\n".join(lines)
        for value in hidden:
            if value:
                message = message.replace(value, "***")
        raise JobRunnerError(
            f"could not delete the removed flow's checkpoint {checkpoint} (the flow stays recorded and the next apply "
            f"tries again; or delete it yourself): {message}"
        )
    return True
