"""The driver JVM's Spark warm-up (jvm/SparkWarmup.java), which a job starts before its Python side imports
anything: each step must do the work the job's start would otherwise do on its critical path (the error
catalogue, the SQL grammar, the code compiler). Its failures are swallowed by design, so a broken step would only
make starts slower, silently: this checks, in a JVM of the job's jars and pyspark's, which classes it loaded.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pyspark
import pytest

from reconciler.artifacts import job_jars

pytestmark = [pytest.mark.integration]

PROGRAM = """
public class Warm {
    public static void main(String[] args) throws Exception {
        io.kmirror.replication.SparkWarmup.start();
        for (Thread thread : Thread.getAllStackTraces().keySet()) {
            if (thread.getName().equals("kmirror-spark-warmup")) {
                thread.join(60_000);
                if (thread.isAlive()) throw new IllegalStateException("the warm-up did not end within 60 s");
            }
        }
        System.out.println("warmed");
    }
}
"""

#: What each step leaves loaded once it has done its work (not merely begun it).
DONE = {
    "the error catalogue read": " com.fasterxml.jackson.module.scala.DefaultScalaModule ",
    "the projection parsed down to its cast": " org.apache.spark.sql.catalyst.parser.SqlBaseParser$CastContext ",
    "a class compiled and defined": " io.kmirror.replication.SparkWarmupGenerated ",
}


def test_the_warm_up_reads_the_error_catalogue_parses_and_compiles(tmp_path: Path) -> None:
    java = shutil.which("java")
    assert java is not None, "a JDK is needed"
    source, classes = tmp_path / "Warm.java", tmp_path / "classes.log"
    source.write_text(PROGRAM)
    classpath = [*map(str, job_jars()), str(Path(pyspark.__file__).parent / "jars" / "*")]
    out = subprocess.run(
        [java, f"-Xlog:class+load=info:file={classes}", "-cp", ":".join(classpath), str(source)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout.strip() == "warmed", out.stderr[-3000:]
    loaded = classes.read_text(errors="replace")
    missing = [step for step, cls in DONE.items() if cls not in loaded]
    assert not missing, f"steps that did not finish: {missing} (see {classes})"
