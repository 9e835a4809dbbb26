"""The Spark home local job drivers start from: pyspark's own, minus MLlib, made once per pyspark install.

A folder in the cache of links into the installed pyspark: `bin` (spark-submit and its scripts) and `jars`, each
of pyspark's jars but MLlib's. Why not pyspark's folder itself:

- MLlib registers a `SparkSessionExtensionsProvider`, which Spark loads with every session. Its registration
  builds ML functions through Scala runtime reflection: 0.9-1.2 s of a job's start on a 2-core machine (a
  SparkSession up 0.2 s after its context instead of 1.0-1.4 s). A replication job uses no MLlib.
- It has no `python` folder. spark-submit then puts no `pyspark.zip` before the interpreter's own packages, so the
  driver imports the installed pyspark, compiled once into bytecode, instead of compiling the zip's sources on
  every start (0.5-0.8 s). The same pyspark: the jars here and the package are one install.
- With `SPARK_HOME` set, spark-submit does not start a Python interpreter to look for its home.

Its name carries the pyspark folder and its jars' sizes and times, so pyspark installed again is another home
(and another class archive, which records the classpath, see class_archive.py); `prune_homes` deletes the ones
whose pyspark is gone or changed.

Must not: copy a jar (links only), or write outside its cache folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from reconciler.artifacts.jars import cache_root

#: Jars left out of the drivers' classpath; see the module docstring.
LEFT_OUT = ("spark-mllib_",)
#: Changes when the layout changes, so homes made by an older kmirror are made again.
_LAYOUT_VERSION = "driver home 1"
_RECORD = "source.json"


def pyspark_folder() -> tuple[Path, str]:
    """The installed pyspark's folder and version (ModuleNotFoundError without pyspark)."""
    import pyspark

    return Path(pyspark.__file__).parent.resolve(), pyspark.__version__


def fingerprint(jars: Path) -> list[str]:
    """Each jar of the folder with its size and modification time (links followed): what a JVM checks before it
    maps a class archive recorded with them, and what tells one pyspark install from another at the same path."""
    out = []
    for jar in sorted(jars.glob("*.jar")):
        stat = jar.stat()
        out.append(f"{jar.name} {stat.st_size} {stat.st_mtime_ns}")
    return out


def _home_name(pyspark: Path, version: str) -> str:
    key = hashlib.sha256("\n".join([str(pyspark), *fingerprint(pyspark / "jars"), _LAYOUT_VERSION]).encode())
    return f"{version}-{key.hexdigest()[:16]}"


def homes_root() -> Path:
    return cache_root() / "spark-home"


def driver_home() -> Path:
    """This pyspark install's driver home, made first if missing (atomically: a rename into place)."""
    pyspark, version = pyspark_folder()
    home = homes_root() / _home_name(pyspark, version)
    if (home / _RECORD).exists():
        return home
    home.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".making-", dir=home.parent))
    try:
        (staging / "bin").symlink_to(pyspark / "bin", target_is_directory=True)
        (staging / "jars").mkdir()
        for jar in sorted((pyspark / "jars").glob("*.jar")):
            if not jar.name.startswith(LEFT_OUT):
                (staging / "jars" / jar.name).symlink_to(jar)
        (staging / _RECORD).write_text(json.dumps({"pyspark": str(pyspark), "version": version}) + "\n")
        try:
            staging.rename(home)
        except OSError:  # another process made it first: the same links
            if not (home / _RECORD).exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return home


def spark_env(home: Path, python: str) -> dict[str, str]:
    """The environment spark-submit of `home` runs with: this process's, with `SPARK_HOME` naming it and `python`
    as the driver's interpreter (it must have pyspark: the home has no pyspark.zip)."""
    return {**os.environ, "SPARK_HOME": str(home), "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}


def prune_homes(keep: Path) -> list[Path]:
    """Delete the homes beside `keep` whose pyspark is gone or was installed again (their name no longer matches
    their links); the ones deleted. A driver started from one keeps its open jars."""
    removed = []
    for home in sorted(keep.parent.iterdir()):
        if home == keep or not home.is_dir() or home.name.startswith("."):
            continue
        try:
            record = json.loads((home / _RECORD).read_text())
            pyspark = Path(record["pyspark"])
            live = _home_name(pyspark, str(record["version"])) == home.name
        except (OSError, ValueError, KeyError, TypeError):
            live = False
        if not live:
            shutil.rmtree(home, ignore_errors=True)
            removed.append(home)
    return removed
