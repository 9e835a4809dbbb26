"""The job's checkpoint file manager (jvm/LocalCheckpointFileManager.java), driven the way Spark drives it: Spark
picks it from `spark.sql.streaming.checkpointFileManagerClass`; a file appears whole or not at all; a file that
must not be overwritten is refused with Hadoop's FileAlreadyExistsException (Spark's sign of a second writer) and
keeps its content; a cancelled write leaves nothing; checksum files Spark's default manager left are hidden from
listings and removed when their file is rewritten. And none of it starts a process.

Needs a JDK: the manager is compiled into the interceptor jar, as the job does on first use.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway
from py4j.protocol import Py4JJavaError

from reconciler.artifacts import interceptor_jar
from reconciler.replication.settings import CHECKPOINT_FILE_MANAGER, LOCAL_CHECKPOINT_FILE_MANAGER

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def jvm() -> Iterator[Any]:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    java = shutil.which("java")
    assert java is not None, "a JDK is needed"
    port, proc = launch_gateway(
        classpath=f"{interceptor_jar()}:{jars}/*",
        java_path=java,
        die_on_exit=True,
        return_proc=True,
        # No process can start in this JVM: Hadoop's shell commands (chmod, readlink) would fail the test.
        javaopts=["-Djdk.lang.Process.launchMechanism=NONE"],
    )
    gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port, auto_convert=True))
    try:
        yield gateway.jvm
    finally:
        gateway.shutdown()
        proc.terminate()
        proc.wait(timeout=30)


def manager(jvm: Any, root: Path) -> Any:
    conf = jvm.org.apache.hadoop.conf.Configuration()
    conf.set(CHECKPOINT_FILE_MANAGER, LOCAL_CHECKPOINT_FILE_MANAGER)
    checkpointing = jvm.org.apache.spark.sql.execution.streaming.checkpointing
    return checkpointing.CheckpointFileManager.create(jvm.org.apache.hadoop.fs.Path(str(root)), conf)


def write(jvm: Any, files: Any, path: Path, text: str, *, overwrite: bool) -> None:
    out = files.createAtomic(jvm.org.apache.hadoop.fs.Path(str(path)), overwrite)
    out.write(text.encode())
    out.close()


def test_spark_uses_it_and_files_appear_whole_once(jvm: Any, tmp_path: Path) -> None:
    files = manager(jvm, tmp_path / "cp")
    assert files.getClass().getName() == LOCAL_CHECKPOINT_FILE_MANAGER
    assert Path(files.createCheckpointDirectory().toUri().getPath()) == tmp_path / "cp"
    batch = tmp_path / "cp" / "offsets" / "0"

    out = files.createAtomic(jvm.org.apache.hadoop.fs.Path(str(batch)), False)
    out.write(b"v1\n{}")
    assert not batch.exists()  # nothing visible before close
    out.close()
    assert batch.read_bytes() == b"v1\n{}"

    with pytest.raises(Py4JJavaError) as refused:
        write(jvm, files, batch, "a second writer", overwrite=False)
    assert refused.value.java_exception.getClass().getName() == "org.apache.hadoop.fs.FileAlreadyExistsException"
    assert batch.read_bytes() == b"v1\n{}"

    write(jvm, files, batch, "rewritten", overwrite=True)
    assert batch.read_text() == "rewritten"
    assert sorted(p.name for p in batch.parent.iterdir()) == ["0"]  # no temporary or checksum file left

    stream = files.open(jvm.org.apache.hadoop.fs.Path(str(batch)))
    assert bytes(stream.readAllBytes()) == b"rewritten"
    stream.close()


def test_cancel_leaves_nothing_and_listings_hide_checksums(jvm: Any, tmp_path: Path) -> None:
    files = manager(jvm, tmp_path)
    commits = tmp_path / "commits"
    commits.mkdir()
    (commits / "0").write_text("from Spark's default manager")
    (commits / ".0.crc").write_bytes(b"stale")

    out = files.createAtomic(jvm.org.apache.hadoop.fs.Path(str(commits / "1")), False)
    out.write(b"half")
    out.cancel()
    assert sorted(p.name for p in commits.iterdir()) == [".0.crc", "0"]

    listed = files.list(jvm.org.apache.hadoop.fs.Path(str(commits)))
    assert [Path(s.getPath().toUri().getPath()).name for s in listed] == ["0"]

    write(jvm, files, commits / "0", "rewritten", overwrite=True)
    assert sorted(p.name for p in commits.iterdir()) == ["0"]  # the stale checksum went with the rewrite
    assert files.exists(jvm.org.apache.hadoop.fs.Path(str(commits / "0")))
    files.delete(jvm.org.apache.hadoop.fs.Path(str(commits)))
    assert not commits.exists()


def test_missing_files_fail_as_with_sparks_own_managers(jvm: Any, tmp_path: Path) -> None:
    """Spark reads Hadoop's FileNotFoundException (e.g. a batch's metadata file gone) into its own error."""
    files = manager(jvm, tmp_path)
    for call in (files.open, files.list):
        with pytest.raises(Py4JJavaError) as missing:
            call(jvm.org.apache.hadoop.fs.Path(str(tmp_path / "gone")))
        assert missing.value.java_exception.getClass().getName() == "java.io.FileNotFoundException"
    assert not files.exists(jvm.org.apache.hadoop.fs.Path(str(tmp_path / "gone")))
    files.delete(jvm.org.apache.hadoop.fs.Path(str(tmp_path / "gone")))  # nothing to delete is no error
