"""The local driver's JVM options as `runners.local_submit` writes them into `spark.properties`."""

from __future__ import annotations

from pathlib import Path

from reconciler.runners.local_submit import DRIVER_HEAP_OPTIONS, write_driver_settings
from reconciler.spec.models import SparkSpec


def _java_options(path: Path) -> list[str]:
    lines = dict(line.split("=", 1) for line in path.read_text().splitlines())
    return lines["spark.driver.extraJavaOptions"].split()


def test_every_local_driver_gives_back_a_grown_heap(tmp_path: Path) -> None:
    options = _java_options(write_driver_settings(tmp_path, SparkSpec(checkpoint_root=str(tmp_path / "cp"))))
    assert options[: len(DRIVER_HEAP_OPTIONS)] == list(DRIVER_HEAP_OPTIONS)
    assert "-XX:G1PeriodicGCInterval=10000" in options and "-XX:MaxHeapFreeRatio=30" in options


def test_the_files_own_heap_flags_come_after_kmirrors_and_win(tmp_path: Path) -> None:
    conf = {"spark.driver.extraJavaOptions": "-XX:MaxHeapFreeRatio=70 -XX:G1PeriodicGCInterval=0"}
    spark = SparkSpec(checkpoint_root=str(tmp_path / "cp"), conf=conf)
    options = _java_options(write_driver_settings(tmp_path, spark))
    # the JVM takes the last occurrence of a flag
    assert options.index("-XX:MaxHeapFreeRatio=70") > options.index("-XX:MaxHeapFreeRatio=30")
    assert options.index("-XX:G1PeriodicGCInterval=0") > options.index("-XX:G1PeriodicGCInterval=10000")
    assert any(o.startswith("-Dlog4j2.configurationFile=") for o in options)
