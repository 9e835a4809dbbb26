"""Starting a detached local `spark-submit` from the driver home: what a flow's own job (`local.py`) and an
application of many flows (`local_apps.py`) both do in their folder.

Must not: decide what runs (the runners do); put a resolved secret in a file or on the command line.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from reconciler.artifacts import driver_java_options
from reconciler.artifacts.driver_home import driver_home, spark_env
from reconciler.runners.common import log4j2_properties, spark_properties, write_private, write_properties
from reconciler.spec.models import SparkSpec

#: spark-submit's master when the file names none: the job sets `local[N]` itself when it starts, from the
#: source partitions it reads then (reconciler.spec.placement).
UNSIZED_LOCAL_MASTER = "local[*]"

#: The driver JVM gives back the heap a burst grew (a backlog copied, a restart catching up) once the burst is over.
#: G1 keeps what it committed until a concurrent cycle's remark finds more than `MaxHeapFreeRatio` free (JDK's
#: default 70 %), and a heap grown large starts no cycle: six flows in one application sat at a 934 MB heap after
#: a warm copy, with about 105 MB live (NMT and GC log, benchmarks/README.md "Many flows, one application").
#: A periodic cycle after 10 s without a GC (JEP 346) and 30 % free at most shrink it to about 1.4x what is live; a
#: busy job, which collects more often than that, only loses the free share above 30 %. Written before
#: `spark.driver.extraJavaOptions`, so a flag of the file's wins.
DRIVER_HEAP_OPTIONS = ("-XX:G1PeriodicGCInterval=10000", "-XX:MinHeapFreeRatio=10", "-XX:MaxHeapFreeRatio=30")


def write_driver_settings(folder: Path, spark: SparkSpec) -> Path:
    """The driver's `log4j2.properties` (WARN and up) and `spark.properties` in `folder` (the driver JVM's options:
    `DRIVER_HEAP_OPTIONS`, the file's, the log settings, the class archive); returns the latter."""
    write_private(folder / "log4j2.properties", log4j2_properties("console"))
    props = spark_properties(spark)
    log4j = f"-Dlog4j2.configurationFile=file:{folder / 'log4j2.properties'}"
    # Spark's classes mapped from an archive, when `kmirror dev fetch` made one
    props["spark.driver.extraJavaOptions"] = " ".join(
        p
        for p in (*DRIVER_HEAP_OPTIONS, props.get("spark.driver.extraJavaOptions", ""), log4j, *driver_java_options())
        if p
    )
    write_properties(folder / "spark.properties", props)
    return folder / "spark.properties"


def submit(
    folder: Path,
    spark: SparkSpec,
    name: str,
    jars: Sequence[Path],
    entry: Sequence[str],
    banner: str,
    python: str,
) -> subprocess.Popen[bytes]:
    """Write the driver's settings into `folder` and start `spark-submit ... <entry>` there, detached (its own
    process group), appending its output to `folder/driver.log` after `banner`."""
    properties = write_driver_settings(folder, spark)
    home = driver_home()
    cmd = [
        str(home / "bin" / "spark-submit"),
        "--master", spark.master or UNSIZED_LOCAL_MASTER,
        "--name", name,
        "--properties-file", str(properties),
        "--jars", ",".join(str(p) for p in jars),
        *entry,
    ]  # fmt: skip
    log = folder / "driver.log"
    with log.open("ab") as out:
        os.chmod(log, 0o600)
        out.write(f"\n===== kmirror: {banner} =====\n".encode())
        out.flush()
        return subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=folder, env=spark_env(home, python),
        )  # fmt: skip
