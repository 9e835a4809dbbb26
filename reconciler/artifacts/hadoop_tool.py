"""Builds and locates kmirror's Hadoop delete tool: `jvm/tools/HadoopDelete.java`, a tiny program on Hadoop's
FileSystem API (pyspark's Hadoop client plus the filesystem's jars, `jars.filesystem_jars`) that deletes a removed
flow's checkpoint on a filesystem the control plane has no HTTP client for (`s3a:`). Compiled with `javac` once per
source version into the kmirror cache; `hadoop_delete_command` gives the `java` command line that runs it.

Must not: run anything but `javac`, write outside its cache folder, or see the job's Hadoop settings (they go to the
tool on its stdin, from the runner).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from reconciler.artifacts.jars import ArtifactError, filesystem_jars
from reconciler.artifacts.java_build import cached_jar, jdk_tool

SOURCE = "HadoopDelete.java"
MAIN_CLASS = "io.kmirror.tools.HadoopDelete"


def _source() -> bytes:
    return (resources.files("reconciler.artifacts") / "jvm" / "tools" / SOURCE).read_bytes()


def _spark_jars() -> Path:
    try:
        import pyspark
    except ImportError:
        raise ArtifactError(
            "deleting a checkpoint on S3 needs pyspark's Hadoop client: pip install 'kmirror[spark]'"
        ) from None
    return Path(pyspark.__file__).parent / "jars"


def hadoop_tool_jar() -> Path:
    """The tool's jar, compiled on first use (needs a JDK's `javac`)."""
    return cached_jar(
        "kmirror-hadoop-delete",
        {SOURCE: _source()},
        lambda: sorted(_spark_jars().glob("hadoop-client-api-*.jar")),
        what="kmirror's Hadoop delete tool",
        no_javac="deleting a checkpoint on S3 builds a small Java tool once with `javac`: install a JDK 17",
    )


def hadoop_delete_command(uri: str, conf_dir: Path | None) -> list[str]:
    """`java -cp ... HadoopDelete URI`: the tool with pyspark's Hadoop client, the jars `uri`'s filesystem needs and
    the Hadoop configuration folder `conf_dir` (core-site.xml, hdfs-site.xml: a credential provider on HDFS)."""
    java = jdk_tool("java")
    if java is None:
        raise ArtifactError("deleting a checkpoint on S3 needs Java 17 (`java` on PATH or in $JAVA_HOME/bin)")
    classpath = [str(hadoop_tool_jar()), f"{_spark_jars()}/*", *(str(p) for p in filesystem_jars(uri))]
    if conf_dir is not None:
        classpath.append(str(conf_dir))
    flags = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m"]  # short-lived: the quickest start
    return [java, *flags, "-cp", ":".join(classpath), MAIN_CLASS, uri]
